/**
 * Decision 0135: the type changes SQLite converts in the batch (`sqlConversion`) must store what
 * `retypeConverter` stores for every value. Each from-type's values are encoded as a write
 * encodes them, stored in a column of its SQL type in a real libSQL file, converted by the SQL
 * expression and by the converter, and compared value for value (type included).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { FIELD_TYPES, fieldType } from "../../src/plugins/custom-objects/field-types";
import type { FieldLike } from "../../src/plugins/custom-objects/field-types/types";
import {
  encodeScalar,
  isLossless,
  retypeConverter,
} from "../../src/plugins/custom-objects/objects/values";
import { typeChangeRefused } from "../../src/plugins/custom-objects/types/field-definition";
import { lossSql, sqlConversion } from "../../src/plugins/custom-objects/types/retype-sql";
import { makeTestApp, type TestApp } from "../helpers/app";

const TEXTS = [
  "abc",
  "12",
  "it's",
  "ünïcödé ✓",
  "a\nb",
  "  spaced  ",
  "1e5",
  "-0",
  "x".repeat(300),
  // read as integers, booleans and dates by JavaScript's rules (decision 0198)
  " 0042\t",
  "\u00a0\u2028-7\ufeff\u3000",
  "+5",
  "1.0",
  "١٢",
  "9007199254740991",
  "-9007199254740992",
  "00000000000000000009007199254740991",
  "99999999999999999999",
  "-",
  " TRUE ",
  "Yes",
  "nO\n",
  "1",
  "0",
  "truth",
  "2024-02-29",
  "2023-02-29",
  "2023-02-30",
  "0000-02-29",
  "2023-13-01",
  "2023-00-10",
  "2023-01-00",
  "2023-1-01",
  " 2023-01-01",
  "2023-01-01\n",
];
const SAMPLES: Record<string, unknown[]> = {
  text: TEXTS,
  longtext: TEXTS,
  select: ["a", "x y", "it's", " 12 ", "yes", "2024-02-29", "2023-02-29"],
  date: ["2026-01-31", "1999-12-01"],
  datetime: ["2026-01-31T12:34:56Z", "2026-01-31T12:34:56.789+02:00"],
  integer: [0, -5, 42, 1, 9_007_199_254_740_991, -9_007_199_254_740_991],
  boolean: [true, false],
  // whole and not, at 2⁵³ and past 1e21 (JavaScript's exponent), 0 and 1 as booleans
  decimal: [
    0,
    -0,
    1,
    -1,
    1.5,
    0.1,
    42,
    -7,
    2 ** 53 - 1,
    2 ** 53,
    -(2 ** 53 - 1),
    -(2 ** 53),
    1e20,
    1e21,
    1e300,
    -1e-7,
    1e-300,
    123456789.5,
  ],
};

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const field = (type: string): FieldLike => ({
  name: "v",
  type,
  isPolymorphic: false,
  validationRegex: "",
  validationMinimum: null,
  validationMaximum: null,
});

test("every change SQLite converts stores what the converter stores", async () => {
  const orm = servicesOf(t.app).db.orm;
  const pairs: string[] = [];
  for (const from of FIELD_TYPES)
    for (const to of FIELD_TYPES) {
      const expr = sqlConversion(from, to);
      if (!expr) continue;
      pairs.push(`${from}→${to}`);
      const samples = SAMPLES[from];
      expect(samples, `samples of ${from}`).toBeDefined();
      const table = `retype_${from}_${to}`;
      const [source, target] = [fieldType(from).sqlType, fieldType(to).sqlType];
      await orm.run(
        sql.raw(`CREATE TABLE ${table} (id INTEGER PRIMARY KEY, v ${source}, w ${target})`),
      );
      for (const [i, raw] of samples!.entries()) {
        const encoded = encodeScalar(field(from), raw, new Set(samples as string[]));
        expect("error" in encoded, `${from} ${JSON.stringify(raw)}`).toBe(false);
        await orm.run(
          sql`INSERT INTO ${sql.raw(table)} (id, v) VALUES (${i}, ${(encoded as { value: unknown }).value})`,
        );
      }
      await orm.run(
        sql`UPDATE ${sql.raw(table)} SET w = ${expr(sql.raw("v"))} WHERE v IS NOT NULL`,
      );
      const rows = await orm.all<{ v: unknown; w: unknown; kind: string }>(
        sql.raw(`SELECT v, w, typeof(w) AS kind FROM ${table} ORDER BY id`),
      );
      const convert = retypeConverter(from, to);
      for (const r of rows) {
        // a value the converter loses is NULL in SQL (counted as lost: `lostSql`)
        // (and -0, which an INTEGER column stores as 0)
        const converted = convert(r.v) ?? null;
        const want = converted === 0 ? 0 : converted;
        const kind =
          want === null
            ? "null"
            : typeof want === "number"
              ? target === "REAL"
                ? "real"
                : "integer"
              : "text";
        expect([from, to, r.v, r.w, r.kind]).toEqual([from, to, r.v, want, kind]);
      }
    }
  // the changes the batch converts by itself (a change dropped from the table fails here)
  expect(pairs.sort()).toEqual(
    [
      "boolean→longtext",
      "boolean→select",
      "boolean→text",
      "date→boolean",
      "date→integer",
      "date→longtext",
      "date→select",
      "date→text",
      "datetime→boolean",
      "datetime→date",
      "datetime→integer",
      "datetime→longtext",
      "datetime→select",
      "datetime→text",
      "integer→boolean",
      "integer→decimal",
      "integer→longtext",
      "integer→select",
      "integer→text",
      "longtext→boolean",
      "longtext→date",
      "longtext→integer",
      "longtext→select",
      "longtext→text",
      "select→boolean",
      "select→date",
      "select→integer",
      "select→longtext",
      "select→text",
      "text→boolean",
      "text→date",
      "text→integer",
      "text→longtext",
      "text→select",
    ].sort(),
  );
});

/** A column of `from`'s SQL type holding its samples as writes encode them; its name. */
async function samplesTable(
  orm: ReturnType<typeof servicesOf>["db"]["orm"],
  from: string,
  to: string,
) {
  const samples = SAMPLES[from];
  expect(samples, `samples of ${from}`).toBeDefined();
  const table = `loss_${from}_${to}`;
  await orm.run(
    sql.raw(`CREATE TABLE ${table} (id INTEGER PRIMARY KEY, v ${fieldType(from).sqlType})`),
  );
  for (const [i, raw] of samples!.entries()) {
    const encoded = encodeScalar(field(from), raw, new Set(samples as string[]));
    expect("error" in encoded, `${from} ${JSON.stringify(raw)}`).toBe(false);
    await orm.run(
      sql`INSERT INTO ${sql.raw(table)} (id, v) VALUES (${i}, ${(encoded as { value: unknown }).value})`,
    );
  }
  return table;
}

test("every loss SQLite counts (a preview's one statement, decision 0207) is the converter's, value for value", async () => {
  const orm = servicesOf(t.app).db.orm;
  const inJavaScript: string[] = [];
  for (const from of FIELD_TYPES)
    for (const to of FIELD_TYPES) {
      if (from === to || typeChangeRefused(from, to) || isLossless(from, to)) continue;
      const lost = lossSql(from, to);
      if (!lost) {
        inJavaScript.push(`${from}→${to}`);
        continue;
      }
      const table = await samplesTable(orm, from, to);
      const rows = await orm.all<{ v: unknown; lost: number }>(
        sql`SELECT v, (${lost(sql.raw("v"))}) AS lost FROM ${sql.raw(table)} WHERE v IS NOT NULL ORDER BY id`,
      );
      expect(rows.length).toBe(SAMPLES[from]!.length);
      const convert = retypeConverter(from, to);
      for (const r of rows) {
        const converted = convert(r.v);
        const want = converted === undefined || converted === null;
        expect([from, to, r.v, Boolean(r.lost)]).toEqual([from, to, r.v, want]);
      }
    }
  // what only the converter tells: a preview counts it a bounded page at a time
  expect(inJavaScript.sort()).toEqual(
    [
      "date→datetime",
      "date→decimal",
      "datetime→decimal",
      "json→boolean",
      "json→date",
      "json→datetime",
      "json→decimal",
      "json→integer",
      "json→longtext",
      "json→multiselect",
      "json→select",
      "json→text",
      "longtext→datetime",
      "longtext→decimal",
      "multiselect→boolean",
      "multiselect→date",
      "multiselect→datetime",
      "multiselect→decimal",
      "multiselect→integer",
      "multiselect→json",
      "multiselect→longtext",
      "multiselect→select",
      "multiselect→text",
      "select→datetime",
      "select→decimal",
      "text→datetime",
      "text→decimal",
    ].sort(),
  );
});
