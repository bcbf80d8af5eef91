/**
 * Our own local client (`src/db/local-client.ts`, decision 0102), which replaced the process-wide
 * patch of `libsql`'s `Database.prototype` (0041/0086): it prepares each statement once per
 * connection, keeps column lists right across schema changes made by any of our connections, and
 * decides nothing by SQL text — a write the caller sends through `execute` that meets another
 * connection's lock is halted, so the connection's next transaction still commits.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Database from "libsql";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { LocalClient, SchemaGeneration } from "../../src/db/local-client";
import { openDatabase } from "../../src/db/local";
import { DatabaseBusyError, isBusyError } from "../../src/db/client";

type Proto = { prepare(sql: string): unknown; exec(sql: string): unknown };
const proto = (Database as unknown as { prototype: Proto }).prototype;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "host-local-client-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Statements prepared on any `libsql` connection while `fn` runs (a spy for this test only). */
async function preparedDuring(fn: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const original = proto.prepare;
  proto.prepare = function (this: unknown, text: string) {
    seen.push(text);
    return original.call(this, text);
  };
  try {
    await fn();
  } finally {
    proto.prepare = original;
  }
  return seen;
}

test("opening a local database patches no driver: libsql's Database.prototype stays as shipped", async () => {
  const prepare = proto.prepare;
  const exec = proto.exec;
  const db = await openDatabase(`file:${join(dir, "untouched.db")}`, undefined, { readPool: 1 });
  try {
    await db.orm.all(sql`SELECT 1`);
    expect(proto.prepare).toBe(prepare);
    expect(proto.exec).toBe(exec);
    // a connection we did not open prepares afresh every time, as the driver does
    const other = new Database(":memory:");
    expect(other.prepare("SELECT 1")).not.toBe(other.prepare("SELECT 1"));
    other.close();
  } finally {
    await db.close();
  }
});

describe("one connection of our own", () => {
  let client: LocalClient;
  // the generation one database's connections share (`local.ts` makes one per database)
  const generation = new SchemaGeneration();
  beforeAll(() => {
    client = new LocalClient(join(dir, "own.db"), generation);
  });
  afterAll(() => client.close());

  test("prepares a statement once and runs it again from its cache", async () => {
    const seen = await preparedDuring(async () => {
      for (let i = 0; i < 3; i++) await client.execute({ sql: "SELECT ? + 1 AS n", args: [i] });
    });
    expect(seen.filter((s) => s === "SELECT ? + 1 AS n")).toHaveLength(1);
    const r = await client.execute({ sql: "SELECT ? + 1 AS n", args: [41] });
    expect(r.columns).toEqual(["n"]);
    expect(r.rows[0]!.n).toBe(42);
    expect(Array.from(r.rows[0]!)).toEqual([42]);
  });

  test("a schema change is seen by cached statements without reading SQL text", async () => {
    await client.execute("CREATE TABLE s (a TEXT)");
    await client.execute("INSERT INTO s VALUES ('x')");
    expect((await client.execute("SELECT * FROM s")).columns).toEqual(["a"]);
    // through a transaction, a script and a plain statement: each way a schema can change
    const tx = await client.transaction("write");
    await tx.execute("ALTER TABLE s ADD COLUMN b TEXT DEFAULT 'y'");
    await tx.commit();
    const after = await client.execute("SELECT * FROM s");
    expect(after.columns).toEqual(["a", "b"]);
    expect({ ...after.rows[0] }).toEqual({ a: "x", b: "y" });
    await client.executeMultiple("ALTER TABLE s RENAME COLUMN b TO c");
    expect((await client.execute("SELECT * FROM s")).columns).toEqual(["a", "c"]);
    await client.execute("ALTER TABLE s RENAME COLUMN a TO d");
    expect((await client.execute("SELECT * FROM s")).columns).toEqual(["d", "c"]);
  });

  test("another of our connections' schema change reaches this one's cached column lists", async () => {
    const other = new LocalClient(join(dir, "own.db"), generation);
    try {
      await client.execute("CREATE TABLE u (a TEXT)");
      await client.execute("INSERT INTO u VALUES ('x')");
      expect((await client.execute("SELECT * FROM u")).columns).toEqual(["a"]);
      const tx = await other.transaction("write");
      await tx.execute("ALTER TABLE u RENAME COLUMN a TO b");
      await tx.commit();
      expect((await client.execute("SELECT * FROM u")).columns).toEqual(["b"]);
    } finally {
      other.close();
    }
  });

  test("a batch is one transaction: a failure rolls back all and names its statement", async () => {
    await client.execute("CREATE TABLE b (v INTEGER NOT NULL)");
    const failed = await client
      .batch(["INSERT INTO b VALUES (1)", "INSERT INTO b VALUES (NULL)"], "write")
      .catch((e) => e);
    expect(failed.code).toBe("SQLITE_CONSTRAINT");
    expect(failed.statementIndex).toBe(1);
    expect((await client.execute("SELECT count(*) AS n FROM b")).rows[0]!.n).toBe(0);
    const ok = await client.batch(
      ["INSERT INTO b VALUES (1)", ["SELECT count(*) AS n FROM b", []]],
      "write",
    );
    expect(ok[1]!.rows[0]!.n).toBe(1);
  });

  test("values travel as @libsql/client gives them", async () => {
    const r = await client.execute({
      sql: "SELECT ? AS t, ? AS f, ? AS blob, 9007199254740991 AS big, NULL AS z",
      args: [true, false, new Uint8Array([1, 2]).buffer],
    });
    const row = r.rows[0]!;
    expect([row.t, row.f, row.big, row.z]).toEqual([1, 0, 9007199254740991, null]);
    expect(Array.from(new Uint8Array(row.blob as ArrayBuffer))).toEqual([1, 2]);
    const tooBig = await client.execute("SELECT 9007199254740993 AS n").catch((e) => e);
    expect(tooBig).toBeInstanceOf(RangeError);
    const w = await client.execute({ sql: "INSERT INTO b VALUES (?)", args: [7] });
    expect(w.rowsAffected).toBe(1);
    expect(typeof w.lastInsertRowid).toBe("bigint");
  });

  test("a transaction holds the connection: other calls are refused until it settles", async () => {
    const tx = await client.transaction("write");
    expect(await client.execute("SELECT 1").catch((e) => e.code)).toBe("TRANSACTION_ACTIVE");
    await tx.rollback();
    expect(tx.closed).toBe(true);
    expect((await client.execute("SELECT 1 AS one")).rows[0]!.one).toBe(1);
  });
});

test("a write refused as busy is halted: the connection's next transaction commits", async () => {
  const path = join(dir, "busy.db");
  const client = new LocalClient(path);
  const holder = new Database(path);
  try {
    await client.execute("PRAGMA journal_mode=WAL");
    await client.execute("PRAGMA busy_timeout=0");
    await client.execute("CREATE TABLE t (x INTEGER)");
    holder.exec("BEGIN IMMEDIATE");
    // a write whose text starts like a read: no SQL text decides how it runs
    const refused = await client
      .execute({ sql: "WITH v(x) AS (SELECT ?) INSERT INTO t SELECT x FROM v", args: [1] })
      .catch((e) => e);
    expect(isBusyError(refused)).toBe(true);
    holder.exec("COMMIT");
    const tx = await client.transaction("write");
    await tx.execute({ sql: "INSERT INTO t VALUES (?)", args: [2] });
    await tx.commit();
    // the refused write ran again from the cache, once
    await client.execute({
      sql: "WITH v(x) AS (SELECT ?) INSERT INTO t SELECT x FROM v",
      args: [3],
    });
    const rows = await client.execute("SELECT x FROM t ORDER BY x");
    expect(rows.rows.map((r) => r.x)).toEqual([2, 3]);
  } finally {
    holder.close();
    client.close();
  }
});

test("Database.execute of a write refused as busy leaves the connection whole: the next write batch commits", async () => {
  const file = join(dir, "busy-db.db");
  const db = await openDatabase(`file:${file}`, undefined, { busyTimeoutMs: 30 });
  const holder = new Database(file);
  try {
    await db.execute({ sql: "CREATE TABLE t (x INTEGER)", args: [] });
    holder.exec("BEGIN IMMEDIATE");
    const refused = await db
      .execute({ sql: "WITH v(x) AS (SELECT ?) INSERT INTO t SELECT x FROM v", args: [1] })
      .catch((e) => e);
    expect(isBusyError(refused)).toBe(true);
    holder.exec("COMMIT");
    await db.write([
      db.orm.run(sql`INSERT INTO t VALUES (2)`),
      db.orm.run(sql`INSERT INTO t VALUES (3)`),
    ]);
    const r = await db.execute({ sql: "SELECT count(*) AS n FROM t", args: [] });
    expect(r.rows[0]!.n).toBe(2);
  } finally {
    holder.close();
    await db.close();
  }
});

/**
 * Another process holding the file's lock: it takes an exclusive lock on `path` (a rollback-journal
 * file, where that keeps readers out) and prints "held"; closing its stdin lets it commit and exit.
 * Locks of one process's own connections do not keep each other out, so a child holds it.
 */
async function lockInAnotherProcess(path: string) {
  const script = `
    const Database = require("libsql");
    const db = new Database(${JSON.stringify(path)});
    db.exec("CREATE TABLE IF NOT EXISTS held (x INTEGER)");
    db.exec("BEGIN EXCLUSIVE");
    db.exec("INSERT INTO held VALUES (1)");
    console.log("held");
    for await (const _ of Bun.stdin.stream()) {}
    db.exec("COMMIT");
  `;
  const child = Bun.spawn([process.execPath, "-e", script], {
    cwd: join(import.meta.dir, "../.."),
    stdin: "pipe",
    stdout: "pipe",
    stderr: "inherit",
  });
  const reader = child.stdout.getReader();
  let said = "";
  while (!said.includes("held")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the lock holder exited before holding the lock");
    said += new TextDecoder().decode(value);
  }
  return {
    async release() {
      child.stdin.end();
      await child.exited;
    },
  };
}

test("opening a file another process holds locked waits for the lock, then opens", async () => {
  const path = join(dir, "held-at-open.db");
  const holder = await lockInAnotherProcess(path);
  // the first attempt is made before openDatabase returns: it meets the lock
  const opening = openDatabase(`file:${path}`, undefined, { busyTimeoutMs: 60_000 });
  let settled = false;
  void opening.then(
    () => (settled = true),
    () => (settled = true),
  );
  await Promise.resolve();
  expect(settled).toBe(false);
  await holder.release();
  const db = await opening;
  try {
    expect(await db.orm.all(sql`SELECT x FROM held`)).toEqual([{ x: 1 }]);
  } finally {
    await db.close();
  }
});

test("a lock held past the bound fails the open with database_busy, not a hang", async () => {
  const path = join(dir, "held-past-bound.db");
  const holder = await lockInAnotherProcess(path);
  try {
    const refused = await openDatabase(`file:${path}`, undefined, { busyTimeoutMs: 30 }).catch(
      (e) => e,
    );
    expect(refused).toBeInstanceOf(DatabaseBusyError);
    expect(refused.status).toBe(503);
  } finally {
    await holder.release();
  }
  // the file is whole once the holder has gone
  const db = await openDatabase(`file:${path}`, undefined, { busyTimeoutMs: 30 });
  try {
    expect(await db.orm.all(sql`SELECT x FROM held`)).toEqual([{ x: 1 }]);
  } finally {
    await db.close();
  }
});
