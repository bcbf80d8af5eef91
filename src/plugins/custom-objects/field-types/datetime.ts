/** `datetime`: ISO 8601, stored normalised to UTC (`toISOString`) in a TEXT column. */
import { or, sql } from "drizzle-orm";
import * as v from "valibot";
import { instantSql, likeContains, toInstant } from "../../../core/rest/query";
import { columnFilter, describe, jsonOf, parseWith, requestValue } from "./base";
import type { FieldTypeModule } from "./types";

const DATETIME_RE = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?$/i;
const MESSAGE =
  "Datetime has wrong format. Use ISO 8601 (YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z]).";

function normalize(s: string): string | null {
  if (!DATETIME_RE.test(s.trim())) return null;
  return toInstant(s);
}

// normalised once: the check and the transform share one parse
const schema = v.pipe(
  v.string(MESSAGE),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const out = normalize(dataset.value);
    if (out === null) {
      addIssue({ message: MESSAGE });
      return NEVER;
    }
    return out;
  }),
);

export const datetime: FieldTypeModule = {
  name: "datetime",
  storage: "column",
  sqlType: "TEXT",
  indexed: false,
  canBeUnique: true,
  canBePrimary: true,
  orderable: true,
  searchable: true,
  takesDefault: true,
  takes: {},
  describeKind: "datetime",
  lossless: ["text", "longtext"],
  schema: () => schema,
  encode: (_f, raw) => parseWith(schema, raw),
  encoder: () => (raw) => {
    const at = typeof raw === "string" ? normalize(raw) : null;
    return at === null ? parseWith(schema, raw) : { value: at };
  },
  decode: (stored) => stored ?? null,
  fromOther: (_api, text) => normalize(text) ?? undefined,
  filters: columnFilter("datetime"),
  // `q` matches part of the stored text ("2025-06-01") or, when it is a date/time, the instant.
  search: (column) => ({
    match: (q) => {
      const like = likeContains(column, q);
      const at = toInstant(q);
      return at ? or(like, sql`${instantSql(column)} = ${at}`) : like;
    },
  }),
  readSchema: (f) => ({ type: ["string", "null"], format: "date-time", ...describe(f) }),
  writeSchema: (f) => requestValue(f, { ...jsonOf(schema), format: "date-time" }),
};
