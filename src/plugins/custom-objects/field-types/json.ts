/** `json`: any JSON value, stored as its text. Not indexed, unique, sortable or searched. */
import * as v from "valibot";
import { jsonFilter } from "../../../core/rest/query";
import { MAX_JSON_CHARS } from "../../../core/limits";
import type { FieldTypeModule } from "./types";

const schema = v.unknown();

function parse(stored: unknown): unknown {
  try {
    return JSON.parse(String(stored));
  } catch {
    return null;
  }
}

export const json: FieldTypeModule = {
  name: "json",
  storage: "column",
  sqlType: "TEXT",
  indexed: false,
  canBeUnique: false,
  canBePrimary: true,
  orderable: false,
  searchable: true,
  takesDefault: true,
  takes: {},
  describeKind: "json",
  lossless: [],
  schema: () => schema,
  encode: (_f, raw) => {
    const text = JSON.stringify(raw);
    return text.length > MAX_JSON_CHARS
      ? { error: `Ensure this JSON value has no more than ${MAX_JSON_CHARS} characters.` }
      : { value: text };
  },
  decode: (stored) => (stored === null || stored === undefined ? null : parse(stored)),
  fromOther: (api) => JSON.stringify(api),
  // Part of the JSON text, as upstream's `icontains` (decision 0046).
  filters: (f, ctx) => ({ [f.name]: jsonFilter(ctx.column) }),
  readSchema: (f) => (f.description ? { description: f.description } : {}),
  // Any value, null included: only what the field row says about it.
  writeSchema: (f) => ({
    ...(f.description ? { description: f.description } : {}),
    ...(f.default !== null && f.default !== undefined ? { default: f.default } : {}),
  }),
};
