/**
 * The driver internals `src/db/driver-internals.ts` relies on, pinned (issue 28 item 6): each
 * helper has a fallback, so a Drizzle or libSQL upgrade that moves a field would silently take the
 * slow path. These fail instead: the fields are where the helpers expect them.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Database } from "../../src/db/client";
import { renderSql, runDdlInGroups } from "../../src/db/driver-internals";
import { openDatabase } from "../../src/db/local";

let dir: string;
let db: Database;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "host-driver-internals-"));
  db = await openDatabase(`file:${join(dir, "a.db")}`);
});
afterAll(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

test("renderSql: Drizzle's dialect renders SQL text and parameters", () => {
  const q = renderSql(db.orm, sql`SELECT ${1} AS one WHERE ${"x"} = ${"x"}`);
  expect(q).toMatchObject({ sql: "SELECT ? AS one WHERE ? = ?", params: [1, "x", "x"] });
});

test("runDdlInGroups: inside a transaction, the libSQL transaction's executeMultiple runs DDL", async () => {
  const statements = Array.from({ length: 20 }, (_, i) =>
    sql.raw(`CREATE TABLE t${i} (id INTEGER)`),
  );
  const ran = await db.transaction((tx) => runDdlInGroups(tx, statements));
  expect(ran).toBe(true);
  const { rows } = await db.execute({
    sql: "SELECT count(*) AS n FROM sqlite_schema WHERE name LIKE 't%' AND type = 'table'",
    args: [],
  });
  expect(Number(rows[0]!.n)).toBe(20);
});

test("runDdlInGroups: outside a transaction or with bound values, nothing runs", async () => {
  expect(await runDdlInGroups(db.orm, [sql.raw("CREATE TABLE u1 (id INTEGER)")])).toBe(false);
  const bound = [sql`CREATE TABLE u2 (id INTEGER DEFAULT ${1})`];
  expect(await db.transaction((tx) => runDdlInGroups(tx, bound))).toBe(false);
  const { rows } = await db.execute({
    sql: "SELECT count(*) AS n FROM sqlite_schema WHERE name IN ('u1', 'u2')",
    args: [],
  });
  expect(Number(rows[0]!.n)).toBe(0);
});
