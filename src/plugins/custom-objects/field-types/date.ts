/** `date`: a calendar date `YYYY-MM-DD` in a TEXT column. */
import * as v from "valibot";
import { columnFilter, describe, jsonOf, parseWith, requestValue } from "./base";
import type { FieldTypeModule } from "./types";

const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
const MESSAGE = "Date has wrong format. Use one of these formats instead: YYYY-MM-DD.";

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
/** A real calendar day (proleptic Gregorian, as `Date` counts): month 1–12, the month's days, 29 February in leap years. */
export function isValidDate(s: string): boolean {
  if (!DATE_RE.test(s)) return false;
  const year = Number(s.slice(0, 4));
  const month = Number(s.slice(5, 7));
  const day = Number(s.slice(8, 10));
  if (month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= (month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!);
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
  encoder: () => (raw) =>
    typeof raw === "string" && isValidDate(raw) ? { value: raw } : parseWith(schema, raw),
  decode: (stored) => stored ?? null,
  fromOther: (_api, text) => (isValidDate(text) ? text : undefined),
  filters: columnFilter("date"),
  readSchema: (f) => ({ type: ["string", "null"], format: "date", ...describe(f) }),
  writeSchema: (f) => requestValue(f, { ...jsonOf(schema), format: "date" }),
};
