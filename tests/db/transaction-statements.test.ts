/**
 * Every statement shape awaited on an interactive transaction's executor runs in that transaction
 * on a local file (decision 0201): a set over a bound JSON list (`INSERT … SELECT … FROM
 * json_each(?)`), a `WITH … INSERT`, and statements Drizzle sends via `run`, `all` and `values`,
 * in a lone transaction, in group commit's savepoints and on the long-write connection; each is
 * seen inside and after commit, none where the transaction rolled back. The rows 0197's author
 * found missing were of statements built and not awaited: such a query never runs.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import type { Executor } from "../../src/db/client";
import { openDatabase } from "../../src/db/local";

let dir: string;
let db: Awaited<ReturnType<typeof openDatabase>>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "host-tx-statements-"));
  db = await openDatabase(`file:${join(dir, "tx.db")}`, undefined, { readPool: 2 });
  await db.execute({
    sql: `CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, tag TEXT NOT NULL, n INTEGER)`,
    args: [],
  });
});

afterAll(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

const list = (n: number) => JSON.stringify(Array.from({ length: n }, (_, k) => k));
const countIn = async (ex: Executor, tag: string) =>
  Number((await ex.all<{ c: number }>(sql`SELECT count(*) AS c FROM t WHERE tag = ${tag}`))[0]!.c);
const countAfter = async (tag: string) =>
  Number((await db.readRows(`SELECT count(*) FROM t WHERE tag = ?`, [tag])).rows[0]![0]);

/** Each shape's statement, awaited on `tx`, and the rows it writes under `tag`. */
const shapes: Array<[string, number, (tx: Executor, tag: string) => Promise<unknown>]> = [
  [
    "run: INSERT … SELECT FROM json_each(?)",
    300,
    (tx, tag) =>
      tx.run(
        sql`INSERT INTO t (tag, n) SELECT ${tag}, d.value FROM json_each(${list(300)}) AS d ORDER BY d.key`,
      ),
  ],
  [
    "all: INSERT … SELECT FROM json_each(?) RETURNING",
    120,
    (tx, tag) =>
      tx.all(
        sql`INSERT INTO t (tag, n) SELECT ${tag}, d.value FROM json_each(${list(120)}) AS d RETURNING id`,
      ),
  ],
  [
    "values: INSERT … SELECT FROM json_each(?) RETURNING",
    40,
    (tx, tag) =>
      tx.values(
        sql`INSERT INTO t (tag, n) SELECT ${tag}, d.value FROM json_each(${list(40)}) AS d RETURNING id`,
      ),
  ],
  [
    "run: WITH … INSERT",
    50,
    (tx, tag) =>
      tx.run(
        sql`WITH s AS (SELECT value FROM json_each(${list(50)})) INSERT INTO t (tag, n) SELECT ${tag}, value FROM s`,
      ),
  ],
  [
    "all: WITH … INSERT … RETURNING",
    7,
    (tx, tag) =>
      tx.all(
        sql`WITH s AS (SELECT value FROM json_each(${list(7)})) INSERT INTO t (tag, n) SELECT ${tag}, value FROM s RETURNING id`,
      ),
  ],
];

/** Runs every shape in `tx`, checking each inside; the expected rows per tag. */
async function everyShape(tx: Executor, prefix: string): Promise<Map<string, number>> {
  const expected = new Map<string, number>();
  for (const [name, rows, run] of shapes) {
    const tag = `${prefix}:${name}`;
    await run(tx, tag);
    expect({ name, inside: await countIn(tx, tag) }).toEqual({ name, inside: rows });
    expected.set(tag, rows);
  }
  return expected;
}

async function expectCommitted(expected: Map<string, number>, rolledBack = false) {
  for (const [tag, rows] of expected)
    expect({ tag, after: await countAfter(tag) }).toEqual({ tag, after: rolledBack ? 0 : rows });
}

describe("statements awaited on a transaction run in it", () => {
  test("a lone transaction", async () => {
    await expectCommitted(await db.transaction((tx) => everyShape(tx, "lone")));
  });

  test("concurrent transactions (group commit's savepoints), one of them failing", async () => {
    const outcomes = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) =>
        db.transaction(async (tx) => {
          const expected = await everyShape(tx, `group${i}`);
          if (i === 3) throw Object.assign(new Error("rolled back"), { expected });
          return expected;
        }),
      ),
    );
    for (const [i, o] of outcomes.entries()) {
      if (i === 3) {
        expect(o.status).toBe("rejected");
        const { expected } = (o as PromiseRejectedResult).reason as {
          expected: Map<string, number>;
        };
        await expectCommitted(expected, true);
      } else await expectCommitted((o as PromiseFulfilledResult<Map<string, number>>).value);
    }
  });

  test("a long write's transaction (the long-write connection)", async () => {
    const expected = await db.longWrite(() => db.transaction((tx) => everyShape(tx, "long")));
    await expectCommitted(expected);
  });
});

test("a statement built on a transaction and not awaited never runs: its rows are nowhere", async () => {
  const tag = "built-not-awaited";
  await db.transaction(async (tx) => {
    // what was lost: a Drizzle query is a thenable, run only when awaited (or `then` is called)
    const built = tx.run(
      sql`INSERT INTO t (tag, n) SELECT ${tag}, value FROM json_each(${list(5)})`,
    );
    expect(await countIn(tx, tag)).toBe(0);
    return built === null;
  });
  expect(await countAfter(tag)).toBe(0);
});
