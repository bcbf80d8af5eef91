/** `date`: a calendar date `YYYY-MM-DD` in a TEXT column. */
import * as v from "valibot";
import { columnFilter, describe, jsonOf, parseWith, requestValue } from "./base";
import type { FieldTypeModule } from "./types";

const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
const MESSAGE = "Date has wrong format. Use one of these formats instead: YYYY-MM-DD.";

export function isValidDate(s: string): boolean {
  if (!DATE_RE.test(s)) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s;
}

const schema = v.pipe(v.string(MESSAGE), v.check(isValidDate, MESSAGE));

export const date: FieldTypeModule = {
  name: "date",
  storage: "column",
  sqlType: "TEXT",
  indexed: false,
  canBeUnique: true,
  canBePrimary: true,
  orderable: true,
  searchable: true,
  takesDefault: true,
  takes: {},
  describeKind: "date",
  lossless: ["text", "longtext"],
  schema: () => schema,
  encode: (_f, raw) => parseWith(schema, raw),
  decode: (stored) => stored ?? null,
  fromOther: (_api, text) => (isValidDate(text) ? text : undefined),
  filters: columnFilter("date"),
  readSchema: (f) => ({ type: ["string", "null"], format: "date", ...describe(f) }),
  writeSchema: (f) => requestValue(f, { ...jsonOf(schema), format: "date" }),
};
