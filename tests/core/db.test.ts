import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import type { LibsqlDatabase as Database } from "../../src/db/libsql";
import { openDatabase } from "../../src/db/local";
import { runMigrations } from "../../src/migrations";
import { waitFor, within } from "../helpers/wait";

let dir: string;
let db: Database;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "host-db-"));
  db = await openDatabase(`file:${join(dir, "sub", "x.db")}`);
  await runMigrations(db);
});
afterAll(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("local libSQL database", () => {
  test("creates the directory, uses WAL; SQLite never waits for a lock on the event loop (busy_timeout 0)", async () => {
    expect((await db.client.execute("PRAGMA journal_mode")).rows[0]![0]).toBe("wal");
    // the bounded wait is asynchronous (serializeClient); see "a write meeting another connection's lock"
    expect(Number((await db.client.execute("PRAGMA busy_timeout")).rows[0]![0])).toBe(0);
  });

  test("every concurrent call runs with synchronous=NORMAL (one connection, PRAGMAs kept)", async () => {
    const results = await Promise.all(
      Array.from({ length: 25 }, () => db.client.execute("PRAGMA synchronous")),
    );
    expect(results.map((r) => Number(r.rows[0]![0]))).toEqual(Array(25).fill(1));
  });

  test("calls overlapping an open transaction wait instead of failing", async () => {
    let inside = false;
    let release!: () => void;
    const held = new Promise<void>((done) => (release = done));
    // The transaction stays open (its row written, not committed) until the readers are queued.
    const tx = db.orm.transaction(async (t) => {
      await t.run(
        "INSERT INTO groups (name, description, created, last_updated) VALUES ('g-tx', '', 'x', 'x')" as any,
      );
      inside = true;
      await held;
    });
    await waitFor(() => inside, { message: "the transaction wrote its row" });
    const readers = Array.from({ length: 5 }, () =>
      db.client.execute("SELECT count(*) AS n FROM groups WHERE name = 'g-tx'"),
    );
    release();
    await tx;
    // readers queued behind the transaction and see its committed row
    expect((await Promise.all(readers)).map((r) => Number(r.rows[0]!.n))).toEqual([1, 1, 1, 1, 1]);
  });

  test("a query that bypasses the open write transaction fails at once instead of waiting forever", async () => {
    const outcome = await within(
      db
        .transaction(async (tx) => {
          await tx.run(sql`SELECT 1`); // the transaction itself is fine
          await db.orm.run(sql`SELECT 1`); // the client is held by the transaction
          return "ran";
        })
        .catch((e: Error) => `${e.message} ${(e.cause as Error | undefined)?.message}`),
      3000,
    );
    expect(outcome).toContain("inside an open write transaction");
    // other callers (outside the scope) queue behind a transaction as before, and then run
    const tx = await db.client.transaction("write");
    const waiting = db.client.execute("SELECT 2 AS n");
    await tx.commit();
    expect((await waiting).rows[0]!.n).toBe(2);
  });

  test("a failed transaction leaves nothing behind, DDL included", async () => {
    await expect(
      db.orm.transaction(async (t) => {
        await t.run("CREATE TABLE scratch (id INTEGER PRIMARY KEY)" as any);
        await t.run(
          "INSERT INTO groups (name, description, created, last_updated) VALUES ('g-fail', '', 'x', 'x')" as any,
        );
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    expect(
      (await db.client.execute("SELECT count(*) AS n FROM groups WHERE name = 'g-fail'")).rows[0]!
        .n,
    ).toBe(0);
    expect(
      (await db.client.execute("SELECT count(*) AS n FROM sqlite_master WHERE name = 'scratch'"))
        .rows[0]!.n,
    ).toBe(0);
  });

  test("migrations are idempotent", async () => {
    await runMigrations(db);
    const tables = (
      await db.client.execute("SELECT name FROM sqlite_master WHERE type='table'")
    ).rows.map((r) => r.name);
    for (const name of ["users", "tokens", "sites", "custom_object_types", "jobs", "cache_entries"])
      expect(tables).toContain(name);
  });
});
