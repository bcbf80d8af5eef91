/**
 * D1's per-statement limits (decision 0125) on miniflare's D1: a statement of more than 100
 * values runs with the excess written out as literals that mean what the bound values meant (text
 * with quotes, placeholders and comment marks in it stays text), what cannot fit is a 400 naming
 * the limit, balanced OR/AND trees pass D1's expression depth where a chain does not, and unions
 * grouped in fives pass D1's five terms of a compound SELECT where a flat one does not (0161), and
 * a list for `IN (…)` is one bound value however long (`inJsonList`).
 */
import { startMiniflare, type WatchedMiniflare } from "../helpers/workerd-watch";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { SQLiteSyncDialect } from "drizzle-orm/sqlite-core";
import type { ApiError } from "../../src/api-error";
import type { Database } from "../../src/db/client";
import { d1Database, type D1Binding } from "../../src/db/d1";
import {
  anyOf,
  D1_MAX_BOUND_VALUES,
  D1_MAX_COMPOUND_TERMS,
  fitStatement,
  inJsonList,
  placeholderOffsets,
  rowsPerStatement,
  StatementTooLargeError,
  statementTooLargeOf,
  union,
  unionAll,
} from "../../src/db/d1-limits";

let mf: WatchedMiniflare;
let db: Database;

beforeAll(async () => {
  mf = await startMiniflare("d1-limits", {
    modules: true,
    script: "export default { fetch() { return new Response('') } }",
    d1Databases: ["DB"],
  });
  db = d1Database(mf.watched((await mf.mf.getD1Database("DB")) as unknown as D1Binding));
  await db.execute({ sql: "CREATE TABLE kept (k INTEGER, v)", args: [] });
});
afterAll(async () => {
  await db?.close();
  await mf?.stop();
});

const TRICKY = [
  "it's",
  "'); DROP TABLE kept; --",
  "?",
  "a ? b",
  "/* ? */",
  "-- ?",
  '"quoted"',
  "[bracketed]",
  "",
  "naïve ☃ 𝄞",
  "back\\slash",
  "nul\0inside",
  "line\nbreak",
];

test("placeholders are found outside quoted text, quoted names and comments; numbered ones are left alone", () => {
  expect(placeholderOffsets(`SELECT '?', "?", [?], \`?\`, ? -- ?\n, /* ? */ ?`)).toEqual([27, 44]);
  expect(placeholderOffsets("SELECT 'it''s ?', ?")).toEqual([18]);
  expect(placeholderOffsets("SELECT ?1, ?")).toBeNull();
  expect(placeholderOffsets("SELECT :name")).toBeNull();
  expect(rowsPerStatement(6)).toBe(16);
  expect(rowsPerStatement(250)).toBe(1);
});

test("a statement of 300 values runs on D1: values past 100 written as literals mean what they meant bound", async () => {
  const values: unknown[] = [];
  for (let i = 0; values.length < 300; i++)
    values.push(
      TRICKY[i % TRICKY.length]!,
      i % 3 === 0 ? null : -i,
      i % 2 === 0,
      new Uint8Array([i % 256, 0, 39, 63]),
    );
  const rows = values.map((_, k) => `(${k}, ?)`).join(", ");
  await db.execute({ sql: `INSERT INTO kept (k, v) VALUES ${rows}`, args: values as never[] });
  const back = await db.execute({ sql: "SELECT k, v FROM kept ORDER BY k", args: [] });
  expect(back.rows).toHaveLength(300);
  back.rows.forEach((row, k) => {
    const want = values[k];
    const got = row.v;
    if (want instanceof Uint8Array)
      expect([...new Uint8Array(got as ArrayBuffer)]).toEqual([...want]);
    else if (typeof want === "boolean") expect(got).toBe(want ? 1 : 0);
    else expect(got).toBe(want as never);
  });
  // the table the injection attempt named is still there, with everything in it
  const n = await db.orm.all<{ n: number }>(sql`SELECT count(*) AS n FROM kept`);
  expect(n[0]!.n).toBe(300);
});

test("what cannot fit is a 400 naming the limit: more than 100 fractions, or more SQL than D1 takes", async () => {
  const fractions = Array.from({ length: 150 }, (_, i) => i + 0.5);
  const marks = fractions.map(() => "?").join(", ");
  const refused = await db
    .execute({ sql: `SELECT json_array(${marks}) AS a`, args: fractions })
    .catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(StatementTooLargeError);
  expect((refused as ApiError).status).toBe(400);
  const body = (refused as ApiError).body as { error?: string; detail?: string };
  expect(body.error).toBe("statement_too_large");
  expect(String(body.detail)).toContain(`${D1_MAX_BOUND_VALUES} bound values`);

  // 250 values of 1,000 characters: the 150 past the limit would be 150 KB of SQL
  const long = Array.from({ length: 250 }, () => "x".repeat(1000));
  const longMarks = long.map(() => "?").join(", ");
  expect(() => fitStatement(`SELECT json_array(${longMarks})`, long)).toThrow(
    /100000 bytes of SQL/,
  );
  // within the limit nothing changes
  expect(fitStatement("SELECT ?", ["a"])).toEqual({ sql: "SELECT ?", args: ["a"] });
});

test("an OR of 500 terms as a balanced tree passes D1's expression depth; a chain of them does not", async () => {
  const terms = Array.from({ length: 500 }, (_, i) => sql.raw(`k = ${i}`));
  const balanced = await db.orm.all<{ n: number }>(
    sql`SELECT count(*) AS n FROM kept WHERE ${anyOf(terms)}`,
  );
  expect(balanced[0]!.n).toBe(300);
  const chain = Array.from({ length: 500 }, (_, i) => `k = ${i}`).join(" OR ");
  const deep = await db
    .readRows(`SELECT count(*) AS n FROM kept WHERE ${chain}`, [])
    .catch((e: unknown) => e);
  expect(String(deep)).toMatch(/too large|depth/i);
  // and such a refusal from the database itself answers 400 naming the limit, not 500
  expect(statementTooLargeOf(deep)?.status).toBe(400);
  expect(JSON.stringify(statementTooLargeOf(deep)?.body)).toContain("nested more than 100 deep");
  expect(statementTooLargeOf(new Error("UNIQUE constraint failed"))).toBeNull();
});

test("D1 takes at most five terms in a compound SELECT, of every operator, in a subquery or a CTE too; a multi-row VALUES is exempt", async () => {
  expect(D1_MAX_COMPOUND_TERMS).toBe(5);
  const terms = (n: number, op: string) =>
    Array.from({ length: n }, (_, i) => `SELECT ${i} AS v`).join(` ${op} `);
  const run = (text: string) =>
    db.readRows(text, []).then(
      () => "ok",
      (e: unknown) => String(e),
    );
  for (const op of ["UNION ALL", "UNION", "INTERSECT", "EXCEPT"]) {
    expect(await run(terms(D1_MAX_COMPOUND_TERMS, op))).toBe("ok");
    expect(await run(terms(D1_MAX_COMPOUND_TERMS + 1, op))).toMatch(
      /too many terms in compound SELECT/,
    );
  }
  const six = terms(D1_MAX_COMPOUND_TERMS + 1, "UNION ALL");
  expect(await run(`SELECT count(*) FROM (${six})`)).toMatch(/too many terms/);
  expect(await run(`WITH c AS (${six}) SELECT * FROM c`)).toMatch(/too many terms/);
  expect(await run(`SELECT 1 WHERE 1 IN (${six})`)).toMatch(/too many terms/);
  const values = Array.from({ length: 200 }, (_, i) => `(${i})`).join(", ");
  expect(await run(`SELECT * FROM (VALUES ${values})`)).toBe("ok");
  // such a refusal answers 400 naming the limit, not 500
  const refused = await db.readRows(six, []).catch((e: unknown) => e);
  expect(JSON.stringify(statementTooLargeOf(refused)?.body)).toContain("compound SELECT");
});

test("unionAll and union of up to 1,000 terms pass on D1 with the flat union's rows, in its order", async () => {
  for (const n of [1, 5, 6, 26, 126, 1000]) {
    const terms = Array.from({ length: n }, (_, i) => sql.raw(`SELECT ${i} AS v, ${i % 7} AS m`));
    const all = await db.orm.all<{ v: number }>(unionAll(terms));
    expect(all.map((r) => r.v)).toEqual(Array.from({ length: n }, (_, i) => i));
    const distinct = await db.orm.all<{ m: number }>(
      sql`SELECT m FROM (${union(terms.map((_, i) => sql.raw(`SELECT ${i % 7} AS m`)))}) ORDER BY m`,
    );
    expect(distinct.map((r) => r.m)).toEqual(Array.from({ length: Math.min(n, 7) }, (_, i) => i));
  }
});

test("inJsonList: a list of up to 1,000 values is one bound value, one statement text, and matches exactly its members on D1", async () => {
  const dialect = new SQLiteSyncDialect();
  const texts = new Set<string>();
  for (const n of [0, 1, 150, 1000]) {
    const ids = Array.from({ length: n }, (_, i) => i * 2);
    const where = inJsonList(sql`k`, ids);
    const query = dialect.sqlToQuery(where);
    expect(query.params).toEqual([JSON.stringify(ids)]);
    texts.add(query.sql);
    const rows = await db.orm.all<{ k: number }>(
      sql`WITH RECURSIVE n(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM n WHERE k < 2500) SELECT k FROM n WHERE ${where} ORDER BY k`,
    );
    expect(rows.map((r) => r.k)).toEqual(ids);
  }
  texts.add(dialect.sqlToQuery(inJsonList(sql`k`, sql.placeholder("ids"))).sql);
  expect([...texts]).toEqual(["k IN (SELECT value FROM json_each(?))"]);
  // values keep their JSON types: text matches text, a number does not match its digits, and a
  // null in the list matches nothing
  const typed = await db.orm.all<{ v: unknown }>(
    sql`SELECT v FROM (SELECT 'a' AS v UNION ALL SELECT '7' UNION ALL SELECT 8 UNION ALL SELECT NULL) WHERE ${inJsonList(sql`v`, ["a", 7, "8", null])}`,
  );
  expect(typed.map((r) => r.v)).toEqual(["a"]);
});
