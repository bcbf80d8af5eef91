/** `boolean`: stored as 0/1; `"true"`/`"false"` are accepted. Never unique. */
import * as v from "valibot";
import { columnFilter, describe, jsonOf, parseWith, requestValue } from "./base";
import type { FieldTypeModule } from "./types";

const schema = v.pipe(
  v.boolean("Must be a valid boolean."),
  v.transform((b) => (b ? 1 : 0)),
);
const lenient = (raw: unknown) => (raw === "true" ? true : raw === "false" ? false : raw);

export const boolean: FieldTypeModule = {
  name: "boolean",
  storage: "column",
  sqlType: "INTEGER",
  indexed: false,
  canBeUnique: false,
  canBePrimary: true,
  orderable: true,
  searchable: false,
  takesDefault: true,
  takes: {},
  describeKind: "boolean",
  lossless: ["text", "longtext"],
  schema: () => schema,
  encode: (_f, raw) => parseWith(schema, lenient(raw)),
  decode: (stored) =>
    stored === null || stored === undefined
      ? null
      : stored === 1 || stored === 1n || stored === true,
  fromOther: (_api, text) => {
    const t = text.trim().toLowerCase();
    if (["true", "1", "yes"].includes(t)) return 1;
    if (["false", "0", "no"].includes(t)) return 0;
    return undefined;
  },
  filters: columnFilter("boolean"),
  readSchema: (f) => ({ type: ["boolean", "null"], ...describe(f) }),
  writeSchema: (f) => requestValue(f, jsonOf(schema)),
};
