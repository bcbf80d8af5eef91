/**
 * A select list past D1's 100 result columns, folded (`foldWide`, decision 0192): on miniflare's
 * D1 and on a local libSQL file, every value reads back through the folds exactly as through
 * plain columns — integers to 2^53, REALs to the last bit (their columns are never folded), text
 * that looks like a number, a JSON text or `NULL`, NULLs, values of untyped columns, and SQL
 * expressions whose JSON subtype would nest them in a JSON array.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq, getTableColumns, sql, type SQL } from "drizzle-orm";
import {
  alias,
  customType,
  integer,
  real,
  sqliteTable,
  text,
  type SQLiteColumn,
} from "drizzle-orm/sqlite-core";
import type { Database } from "../../src/db/client";
import { d1Database, type D1Binding } from "../../src/db/d1";
import { openDatabase } from "../../src/db/local";
import { D1_MAX_COLUMNS, foldWide } from "../../src/db/wide-select";
import { startMiniflare, type WatchedMiniflare } from "../helpers/workerd-watch";

const INTEGERS = [0, -1, 42, 9_007_199_254_740_991, -9_007_199_254_740_991, null];
const REALS = [
  0.1,
  0.30000000000000004,
  1.2345678901234566e-7,
  5e-324,
  1.7976931348623157e308,
  -2.5,
  1e21,
  123456789.12345679,
  3,
  null,
];
const TEXTS = [
  "",
  "NULL",
  "'",
  "it''s",
  'a"b',
  "naïve ☃ 𝄞",
  "line\nbreak\ttab",
  "[1,2]",
  '{"a":1.0}',
  "12",
  "1e5",
  "\\u0000",
  null,
];
/** A column of no type keeps what it is given: integer, real or text. */
const ANY = [12, "12", 0.1, "0.1", null, -7, "x"];

/** 88 columns cycling through the four kinds, and the id: a table, and a narrow read, D1 takes. */
const KINDS = ["i", "r", "t", "a"] as const;
const NAMES = Array.from({ length: 88 }, (_, n) => `${KINDS[n % 4]}${n}`);
const untyped = customType<{ data: unknown }>({ dataType: () => "" });
const wide = sqliteTable(
  "wide",
  Object.fromEntries([
    ["id", integer("id").primaryKey()],
    ...NAMES.map((name) => [
      name,
      name[0] === "i"
        ? integer(name)
        : name[0] === "r"
          ? real(name)
          : name[0] === "t"
            ? text(name)
            : untyped(name),
    ]),
  ]) as Record<string, any>,
);
const VALUES = { i: INTEGERS, r: REALS, t: TEXTS, a: ANY } as const;
const writtenValue = (name: string, row: number): unknown => {
  const list = VALUES[name[0] as keyof typeof VALUES] as unknown[];
  return list[(row + Number(name.slice(1))) % list.length];
};
const ROWS = 13;

let mf: WatchedMiniflare;
let dir: string;
const backends: Array<[string, Database]> = [];

async function fill(db: Database) {
  const declared = NAMES.map(
    (n) =>
      `"${n}" ${n[0] === "i" ? "INTEGER" : n[0] === "r" ? "REAL" : n[0] === "t" ? "TEXT" : ""}`,
  );
  await db.execute({
    sql: `CREATE TABLE wide (id INTEGER PRIMARY KEY, ${declared.join(", ")})`,
    args: [],
  });
  for (let row = 1; row <= ROWS; row++)
    await db.execute({
      sql: `INSERT INTO wide VALUES (?, ${NAMES.map(() => "?").join(", ")})`,
      args: [row, ...NAMES.map((n) => writtenValue(n, row))] as any,
    });
}

beforeAll(async () => {
  mf = await startMiniflare("wide-select", {
    modules: true,
    script: "export default { fetch() { return new Response('') } }",
    d1Databases: ["DB"],
  });
  const d1 = d1Database(mf.watched((await mf.mf.getD1Database("DB")) as unknown as D1Binding));
  dir = mkdtempSync(join(tmpdir(), "host-wide-select-"));
  const local = await openDatabase(`file:${join(dir, "wide.db")}`);
  backends.push(["D1", d1], ["local", local]);
  for (const [, db] of backends) await fill(db);
});
afterAll(async () => {
  for (const [, db] of backends) await db.close();
  await mf?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Expressions of every kind, some with a JSON subtype (which `json_array` would nest). */
const expressions = (t: typeof wide): Record<string, SQL> => ({
  eJson: sql`json_array(${(t as any).i0}, 'x', 0.5)`,
  eJsonText: sql`json('"s"')`,
  eObject: sql`json_object('r', ${(t as any).r1}, 't', ${(t as any).t2})`,
  eInteger: sql`length(${(t as any).t2}) * 1000000007`,
  eText: sql`'NULL'`,
  eNull: sql`NULL`,
  eSub: sql`(SELECT json_group_array(id) FROM wide)`,
});

test("a select list of more than 100 columns is refused by D1 unfolded, and read through the folds as through plain columns", async () => {
  const b = alias(wide, "b");
  const plain = getTableColumns(wide) as Record<string, SQLiteColumn>;
  const columns: Record<string, SQLiteColumn | SQL> = { ...plain, ...expressions(wide) };
  for (const [key, column] of Object.entries(getTableColumns(b))) columns[`b_${key}`] = column;
  const count = Object.keys(columns).length;
  expect(count).toBeGreaterThan(D1_MAX_COLUMNS + 80);
  const fold = foldWide(columns);
  expect(fold.folded).toBe(true);
  expect(Object.keys(fold.columns).length).toBeLessThanOrEqual(D1_MAX_COLUMNS);
  const [, d1] = backends[0]!;
  const [wideId, bId] = [plain.id!, getTableColumns(b).id as SQLiteColumn];
  const sameRow = eq(bId, wideId);
  // unfolded, D1 refuses it: the folds are what make it pass
  const unfolded = async () =>
    await d1.orm.select(columns).from(wide).innerJoin(b, sameRow).limit(1);
  const refused = await unfolded().then(
    () => null,
    (e: { cause?: { message?: string } }) => e.cause?.message,
  );
  expect(refused).toMatch(/too many columns in result set/);
  for (const [name, db] of backends) {
    const narrow = (await db.orm
      .select({ ...plain, ...expressions(wide) })
      .from(wide)
      .orderBy(wideId)) as Record<string, unknown>[];
    const folded = (
      (await db.orm
        .select(fold.columns)
        .from(wide)
        .innerJoin(b, sameRow)
        .orderBy(wideId)) as Record<string, unknown>[]
    ).map(fold.unfold);
    expect(narrow).toHaveLength(ROWS);
    expect(folded).toHaveLength(ROWS);
    for (let i = 0; i < ROWS; i++) {
      const [n, w] = [narrow[i]!, folded[i]!];
      expect(Object.keys(w).sort(), name).toEqual(Object.keys(columns).sort());
      for (const key of Object.keys(plain)) {
        expect(w[`b_${key}`], `${name} row ${i + 1} b_${key}`).toEqual(n[key]);
        expect(w[key], `${name} row ${i + 1} ${key}`).toEqual(n[key]);
      }
      for (const key of Object.keys(expressions(wide)))
        expect(w[key], `${name} row ${i + 1} ${key}`).toEqual(n[key]);
    }
    // the values are those written (a REAL to its last bit, a text that reads like a number)
    for (let row = 1; row <= ROWS; row++)
      for (const key of NAMES)
        expect(folded[row - 1]![`b_${key}`], `${name} ${key}`).toEqual(writtenValue(key, row));
  }
});

test("a select list within D1's columns is left as it is", () => {
  const columns = getTableColumns(wide);
  const fold = foldWide(columns);
  expect(fold.folded).toBe(false);
  expect(fold.columns).toBe(columns);
});
