/**
 * The libSQL statement cache (decision 0041, kept by 0086): the one patch of a driver's prototype,
 * confined to `src/db/statement-cache.ts`. These fail when the internal it relies on changes —
 * `@libsql/client` no longer preparing through `libsql`'s `Database.prototype.prepare`, or
 * transaction control no longer going through `exec` — so an upgrade cannot silently drop the
 * cache (half the get-by-id throughput, measured in 0041) or its busy-safe transaction control.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createClient, type Client } from "@libsql/client";
import Database from "libsql";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { installStatementCache } from "../../src/db/statement-cache";

type Proto = { prepare(sql: string): unknown; exec(sql: string): unknown };
const proto = (Database as unknown as { prototype: Proto }).prototype;

let dir: string;
let client: Client;
beforeAll(() => {
  installStatementCache();
  dir = mkdtempSync(join(tmpdir(), "host-statement-cache-"));
  client = createClient({ url: `file:${join(dir, "a.db")}` });
});
afterAll(() => {
  client.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Calls of `proto[name]` while `fn` runs, by SQL text. */
async function callsOf(name: "prepare" | "exec", fn: () => Promise<unknown>) {
  const seen: string[] = [];
  const original = proto[name];
  proto[name] = function (this: unknown, sql: string) {
    seen.push(sql);
    return original.call(this, sql);
  };
  try {
    await fn();
  } finally {
    proto[name] = original;
  }
  return seen;
}

test("one connection prepares a statement once and hands the same one back", () => {
  const db = new Database(":memory:");
  try {
    expect(db.prepare("SELECT 1 AS one")).toBe(db.prepare("SELECT 1 AS one"));
    expect(db.prepare("SELECT 2 AS two")).not.toBe(db.prepare("SELECT 1 AS one"));
  } finally {
    db.close();
  }
});

test("@libsql/client prepares its statements through libsql's Database.prototype.prepare", async () => {
  const seen = await callsOf("prepare", () => client.execute("SELECT 41 + 1 AS n"));
  expect(seen).toContain("SELECT 41 + 1 AS n");
});

test("its transaction control is prepared here and run through exec (a statement refused as busy is never left in progress)", async () => {
  const seen = await callsOf("prepare", async () => {
    const tx = await client.transaction("write");
    await tx.execute("SELECT 1");
    await tx.commit();
  });
  expect(seen.some((s) => /^\s*begin/i.test(s))).toBe(true);
  expect(seen.some((s) => /^\s*commit/i.test(s))).toBe(true);
  const db = new Database(":memory:");
  try {
    // not a native statement: an object whose run() calls exec, which finalizes whatever happens
    const begin = db.prepare("BEGIN IMMEDIATE") as object;
    expect(Object.getPrototypeOf(begin)).toBe(Object.prototype);
    expect(Object.getPrototypeOf(db.prepare("SELECT 1"))).not.toBe(Object.prototype);
  } finally {
    db.close();
  }
});

test("a schema change clears the cache: the statement is prepared again and sees the new column", async () => {
  await client.execute("CREATE TABLE s (a TEXT)");
  await client.execute("INSERT INTO s VALUES ('x')");
  expect((await client.execute("SELECT * FROM s")).columns).toEqual(["a"]);
  await client.execute("ALTER TABLE s ADD COLUMN b TEXT DEFAULT 'y'");
  const after = await client.execute("SELECT * FROM s");
  expect(after.columns).toEqual(["a", "b"]);
  expect({ ...after.rows[0] }).toEqual({ a: "x", b: "y" });
});
