/**
 * The `Database` interface (decisions 0070, 0071) on its three implementations — a local file, a
 * remote libSQL server over HTTP (the Hrana tool behind a counting proxy) and Cloudflare D1
 * (miniflare) — with the same expectations: `read` of several queries and `write` of several
 * statements are one round trip each (counted on the remote one); a failing statement rolls back
 * the whole write; a lost race is caught inside the write by the guard, never by a lock held
 * across round trips; D1 refuses interactive transactions.
 */
import { startMiniflare, type WatchedMiniflare } from "../helpers/workerd-watch";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  guardChanged,
  InteractiveTransactionUnsupported,
  isWriteConflict,
  offersTransaction,
  transactionOr,
  type Database,
} from "../../src/db/client";
import { d1Database, type D1Binding } from "../../src/db/d1";
import { newRowId } from "../../src/core/rest/write-batch";
import { openDatabase } from "../../src/db/local";
import { runMigrations } from "../../src/migrations";
import type { CountingProxy } from "../helpers/counting-proxy";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";

let dir: string;
let remote: RemoteDb | undefined;
let proxy: CountingProxy;
let mf: WatchedMiniflare;
const dbs: Record<string, Database> = {};

/** The guard's migration, statement by statement (D1 here is migrated by hand). */
const guardStatements = () =>
  readFileSync(join(import.meta.dir, "../../migrations/0007_write_guard.sql"), "utf8")
    .split("--> statement-breakpoint")
    .map((s) => s.replace(/^--.*$/gm, "").trim())
    .filter(Boolean);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "host-db-interface-"));
  remote = await startRemoteDb("db-interface");
  proxy = remote.proxy;
  dbs.local = await openDatabase(`file:${join(dir, "local.db")}`);
  dbs.remote = await openDatabase(remote.url);
  for (const db of [dbs.local, dbs.remote]) await runMigrations(db);
  mf = await startMiniflare("database-interface", {
    modules: true,
    script: "export default { fetch() { return new Response('') } }",
    d1Databases: ["DB"],
  });
  const binding = mf.watched((await mf.mf.getD1Database("DB")) as unknown as D1Binding);
  dbs.d1 = d1Database(binding);
  for (const s of guardStatements()) await dbs.d1.execute({ sql: s, args: [] });
  for (const db of Object.values(dbs))
    await db.execute({
      sql: "CREATE TABLE probe (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, last_updated TEXT NOT NULL)",
      args: [],
    });
});
afterAll(async () => {
  for (const db of Object.values(dbs)) await db.close();
  await mf?.stop();
  await remote?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Round trips `fn` takes on the remote database (0 elsewhere: nothing to count there). */
async function counted<T>(kind: string, fn: () => Promise<T>): Promise<[T, number]> {
  proxy.reset();
  const out = await fn();
  return [out, kind === "remote" ? proxy.count : 0];
}

const names = async (db: Database) =>
  (await db.execute({ sql: "SELECT name FROM probe ORDER BY id", args: [] })).rows.map(
    (r) => r.name,
  );

for (const kind of ["local", "remote", "d1"]) {
  describe(kind, () => {
    test("fileHealth is a member, never probed: a file's watcher, a neutral one elsewhere", () => {
      const health = dbs[kind]!.fileHealth;
      expect(health.fileProblem()).toBeNull();
      expect(health.checkpointError).toBeNull();
      health.noteDamaged(new Error("SQLITE_CORRUPT: a test's damage"));
      // only a local file records damage (until an integrity check passes again)
      expect(health.integrity?.ok ?? null).toBe(kind === "local" ? false : null);
    });

    test("write: many statements, one round trip, all or nothing", async () => {
      const db = dbs[kind]!;
      const [, trips] = await counted(kind, () =>
        db.write([
          db.orm.run(sql`INSERT INTO probe (name, last_updated) VALUES ('a', 'v1')`),
          db.orm.run(
            sql`INSERT INTO probe (name, last_updated) SELECT 'b-' || id, 'v1' FROM probe WHERE id = last_insert_rowid()`,
          ),
        ]),
      );
      if (kind === "remote") expect(trips).toBe(1);
      expect(await names(db)).toEqual(["a", "b-1"]);
      // the second statement breaks a uniqueness rule: the first is rolled back with it
      const failed = await db
        .write([
          db.orm.run(sql`INSERT INTO probe (name, last_updated) VALUES ('c', 'v1')`),
          db.orm.run(sql`INSERT INTO probe (name, last_updated) VALUES ('a', 'v1')`),
        ])
        .catch((e) => e);
      expect(String(failed?.message ?? failed)).toMatch(/UNIQUE/i);
      expect(await names(db)).toEqual(["a", "b-1"]);
    });

    test("read: several queries, one round trip", async () => {
      const db = dbs[kind]!;
      const [[count, rows], trips] = await counted(kind, () =>
        db.read([
          db.orm.all<{ n: number }>(sql`SELECT count(*) AS n FROM probe`),
          db.orm.all<{ name: string }>(sql`SELECT name FROM probe WHERE name = ${"a"}`),
        ]),
      );
      if (kind === "remote") expect(trips).toBe(1);
      expect(Number(count[0]!.n)).toBe(2);
      expect(rows.map((r) => r.name)).toEqual(["a"]);
    });

    test("a lost race fails inside the write batch (the guard), nothing is overwritten", async () => {
      const db = dbs[kind]!;
      // both writers read version v1, then each sends its conditioned update and the guard
      const update = (name: string) =>
        db.write([
          db.orm.run(
            sql`UPDATE probe SET name = ${name}, last_updated = ${`v-${name}`} WHERE id = 1 AND last_updated = 'v1'`,
          ),
          guardChanged(db.orm),
          db.orm.run(sql`INSERT INTO probe (name, last_updated) VALUES (${`log-${name}`}, 'v1')`),
        ]);
      const [first, trips] = await counted(kind, () => update("first"));
      expect(first).toBeDefined();
      if (kind === "remote") expect(trips).toBe(1);
      const second = await update("second").catch((e) => e);
      expect(isWriteConflict(second)).toBe(true);
      // the winner's row and its log entry; nothing of the loser
      expect(await names(db)).toEqual(["first", "b-1", "log-first"]);
    });

    test("a new row's id named in a later statement of the batch is an integer, as text too", async () => {
      const db = dbs[kind]!;
      const [, , [named]] = await db.write([
        db.orm.run(sql`INSERT INTO probe (name, last_updated) VALUES (${`new-${kind}`}, 'v1')`),
        db.orm.run(sql`INSERT INTO probe (name, last_updated) VALUES (${`new2-${kind}`}, 'v1')`),
        db.orm.all<{ first: string; second: string }>(
          sql`SELECT CAST(${newRowId("probe", 0, 2)} AS TEXT) AS first, CAST(${newRowId("probe", 1, 2)} AS TEXT) AS second`,
        ),
      ]);
      const ids = (
        await db.execute({
          sql: "SELECT id FROM probe WHERE name LIKE 'new%' ORDER BY id",
          args: [],
        })
      ).rows.map((r) => String(r.id));
      expect([named!.first, named!.second]).toEqual(ids);
    });

    test("transaction: interactive where the backend has it, refused on D1", async () => {
      const db = dbs[kind]!;
      const outcome = await db
        .transaction(async (tx) => {
          await tx.run(sql`INSERT INTO probe (name, last_updated) VALUES ('tx', 'v1')`);
          return "committed";
        })
        .catch((e) => e);
      if (kind === "d1") {
        expect(outcome).toBeInstanceOf(InteractiveTransactionUnsupported);
        // a request that still needs one answers 501 with a reason, not a bare 500
        expect(outcome.statusCode).toBe(501);
        expect(outcome.body.error).toBe("not_available_on_this_database");
      } else expect(outcome).toBe("committed");
    });

    test("needTransaction: refused on D1 at once, the refusal mapped by the caller; a no-op elsewhere", async () => {
      const db = dbs[kind]!;
      const refusal = new Error("mapped");
      if (kind === "d1") {
        expect(() => db.needTransaction()).toThrow(InteractiveTransactionUnsupported);
        expect(offersTransaction(db)).toBe(false);
        expect(() => transactionOr(db, () => refusal)).toThrow(refusal);
      } else {
        expect(db.needTransaction()).toBeUndefined();
        expect(offersTransaction(db)).toBe(true);
        expect(transactionOr(db, () => refusal)).toBe("transaction");
      }
      // any other failure is the caller's to see as it is
      const broken = {
        needTransaction: () => {
          throw new TypeError("broken");
        },
      };
      expect(() => offersTransaction(broken)).toThrow(TypeError);
    });
  });
}
