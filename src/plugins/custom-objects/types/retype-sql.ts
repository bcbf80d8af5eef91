/**
 * Field type changes as SQL (decisions 0135, 0199, 0207): the changes SQLite converts exactly as
 * `retypeConverter` does, and how many values a change loses, counted in one statement wherever
 * SQLite can tell the converter's loss exactly (a schema preview's and an apply's count).
 */
import { sql, type SQL } from "drizzle-orm";
import { ident, tableName } from "../ddl";
import type { FieldRow } from "../objects/values";

const asText = (col: SQL) => sql`CAST(${col} AS TEXT)`;
/**
 * What JavaScript's `trim` removes (ECMAScript's white space and line terminators), as SQLite's
 * `trim(x, chars)` takes it: SQLite's own `trim(x)` removes spaces only.
 */
const JS_SPACE = sql.raw(
  `char(${[9, 10, 11, 12, 13, 32, 160, 5760, ...Array.from({ length: 11 }, (_, k) => 8192 + k), 8232, 8233, 8239, 8287, 12288, 65279].join(", ")})`,
);
const trimmed = (col: SQL) => sql`trim(CAST(${col} AS TEXT), ${JS_SPACE})`;
/** `boolean`'s reading of text: "true", "1", "yes" and their negations, trimmed, any case. */
const asBoolean = (col: SQL) =>
  sql`CASE lower(${trimmed(col)}) WHEN 'true' THEN 1 WHEN '1' THEN 1 WHEN 'yes' THEN 1 WHEN 'false' THEN 0 WHEN '0' THEN 0 WHEN 'no' THEN 0 END`;
/**
 * `integer`'s reading of text: trimmed, an optional minus and ASCII digits only, within ±(2⁵³−1)
 * (at most 16 digits past leading zeros, so the CAST cannot saturate first). The trimmed text is
 * computed once a row, in subqueries SQLite may not flatten (an OFFSET): written out each time it
 * is used, a long padded value was trimmed six times (8× slower, measured).
 */
const asInteger = (col: SQL) =>
  sql`(SELECT CASE WHEN retype_d <> '' AND retype_d NOT GLOB '*[^0-9]*' AND length(ltrim(retype_d, '0')) <= 16 AND abs(CAST(retype_t AS INTEGER)) <= 9007199254740991 THEN CAST(retype_t AS INTEGER) END FROM (SELECT retype_t, CASE WHEN substr(retype_t, 1, 1) = '-' THEN substr(retype_t, 2) ELSE retype_t END AS retype_d FROM (SELECT ${trimmed(col)} AS retype_t LIMIT 1 OFFSET 0) LIMIT 1 OFFSET 0))`;
/** `date`'s reading of text: exactly YYYY-MM-DD of a day the calendar has. */
const asDate = (col: SQL) =>
  sql`CASE WHEN ${col} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]' AND date(${col}) IS ${col} THEN ${col} END`;
const booleanText = (col: SQL) => sql`CASE WHEN ${col} = 1 THEN 'true' ELSE 'false' END`;
const textual = { boolean: asBoolean, integer: asInteger, select: asText };
/**
 * Changes SQLite makes exactly as `retypeConverter` does, lossless or not (a value the converter
 * loses is NULL here, and counted so: `lostSql`): text-like values kept, read as booleans,
 * integers or dates; integers written out or read as booleans; booleans as "true"/"false".
 * `tests/custom-objects/retype-sql.test.ts` holds each to the converter (decisions 0135, 0198).
 */
const SQL_CONVERSIONS: Record<string, Record<string, (col: SQL) => SQL>> = {
  text: { longtext: asText, date: asDate, ...textual },
  longtext: { text: asText, date: asDate, ...textual },
  select: { text: asText, longtext: asText, date: asDate, boolean: asBoolean, integer: asInteger },
  date: { text: asText, longtext: asText, ...textual },
  datetime: { text: asText, longtext: asText, date: asDate, ...textual },
  integer: {
    text: asText,
    longtext: asText,
    select: asText,
    decimal: (col) => sql`CAST(${col} AS REAL)`,
    boolean: (col) => sql`CASE ${col} WHEN 1 THEN 1 WHEN 0 THEN 0 END`,
  },
  boolean: { text: booleanText, longtext: booleanText, select: booleanText },
};

/** The changes SQLite converts, in words: "text to longtext, date, …; integer to …". */
export const IN_DATABASE = Object.entries(SQL_CONVERSIONS)
  .map(([from, to]) => `${from} to ${Object.keys(to).join(", ")}`)
  .join("; ");

/** The SQL form of a change from `from` to `to`, when SQLite converts it exactly. */
export const sqlConversion = (from: string, to: string) => SQL_CONVERSIONS[from]?.[to];

/** A loss no stored value suffers, or every one: the converter's answer whatever the value. */
const keeps = () => sql`0`;
const loses = () => sql`1`;
/** What a number or a boolean becomes: its text never reads as a date or a date and time. */
const fromNumber = { date: loses, datetime: loses, json: keeps, multiselect: keeps };
/** Text-like values: JSON and lists of them keep every one. */
const fromText = { json: keeps, multiselect: keeps };
/**
 * Changes still converted in JavaScript (their values are not SQLite's to write) whose loss SQLite
 * tells exactly, for values as writes store them, as a condition on a non-null stored value: a
 * decimal keeps its number as an integer when whole and safe (JavaScript writes 1e21 with an
 * exponent, past 2⁵³ it is not safe), as a boolean when 0 or 1 ("1", "0"); `true`/`false` are no
 * numbers; JSON and lists take anything. `tests/custom-objects/retype-sql.test.ts` holds each to
 * the converter.
 */
const LOSS_ONLY: Record<string, Record<string, (col: SQL) => SQL>> = {
  text: fromText,
  longtext: fromText,
  select: { json: keeps },
  date: fromText,
  datetime: fromText,
  integer: fromNumber,
  boolean: { integer: loses, decimal: loses, ...fromNumber },
  decimal: {
    integer: (col) =>
      sql`NOT (${col} = CAST(${col} AS INTEGER) AND abs(${col}) <= 9007199254740991)`,
    boolean: (col) => sql`${col} NOT IN (0, 1)`,
    select: keeps,
    ...fromNumber,
  },
};

/**
 * Whether a change loses a (non-null) stored value, as one SQL condition, when SQLite can tell it
 * exactly: a change it converts loses what it makes NULL; others by `LOSS_ONLY`. Undefined: only
 * the converter tells (to decimal or datetime from text, anything from json or multiselect).
 */
export function lossSql(from: string, to: string): ((col: SQL) => SQL) | undefined {
  const expr = sqlConversion(from, to);
  return expr ? (col) => sql`${expr(col)} IS NULL` : LOSS_ONLY[from]?.[to];
}

/**
 * How many of the field's values a change to `type` loses, as a scalar subquery, or undefined
 * when only the converter tells (`lossSql`). Lossless changes are the caller's (no count).
 */
export function lostCountSql(cotId: number, field: FieldRow, type: string): SQL | undefined {
  const lost = lossSql(field.type, type);
  if (!lost) return undefined;
  const column = ident(field.name);
  return sql`(SELECT count(*) FROM ${ident(tableName(cotId))} WHERE ${column} IS NOT NULL AND ${lost(column)})`;
}
