/**
 * The `Database` over a local libSQL file (WAL, synchronous=NORMAL, busy timeout) or :memory:,
 * on Bun; a remote URL opens `libsql.ts`'s remote implementation. What makes the file fast —
 * our own client over the connections we open (`local-client.ts`, decision 0102), one
 * serialised main connection (`serialize.ts`), group commit (`group-commit.ts`), the read
 * pool (`read-pool.ts`), the background connection for long writes (`background.ts`), the
 * checkpointer (`checkpointer.ts`) — lives here, behind the interface (decision 0070).
 */
import { createClient } from "@libsql/client";
import { AsyncLocalStorage } from "node:async_hooks";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { BackgroundConnection } from "./background";
import { MaintenanceConnection } from "./maintenance";
import { BatchGroup, GroupCommit } from "./group-commit";
import { libsqlDatabase, type LibsqlDatabase } from "./libsql";
import { DEFAULT_REMOTE_TIMEOUT_MS, fetchWithDeadline } from "./remote-link";
import { ReadPool } from "./read-pool";
import { Checkpointer } from "./checkpointer";
import { walChangeStamp } from "./change-stamp";
import { INSIDE_TRANSACTION, serializeClient } from "./serialize";
import { LocalClient, openFileClient, SchemaGeneration } from "./local-client";
import { batchWeight, type Queries, type Results } from "./client";
import type { Client, InArgs, InStatement, Transaction } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { yieldWhenDue } from "../turns";
import * as schema from "./schema";
import { FileHealth } from "./file-health";
import { DEFAULT_CACHE_MB, servingCacheKib } from "./page-cache";

/**
 * A `write` batch of at least this many statements is a long batch (decision 0185): on a file, it
 * runs on the long-write connection, whose statements give the event loop turns. A statement of
 * a bulk create costs ~0.5 ms there, so a batch under it holds the loop some 50 ms at most; a
 * statement that writes many rows from a bound document counts as the statements it replaces
 * (`weighStatement`, decision 0197).
 */
export const LONG_BATCH = 100;

/** How long a write waits for a lock another connection holds before a 503 `database_busy`. */
const BUSY_TIMEOUT_MS = 5000;

export interface LocalOptions {
  /** Overrides `BUSY_TIMEOUT_MS` (tests use a short one). */
  busyTimeoutMs?: number;
  /**
   * Connections answering reads outside transactions off the event loop (`read-pool.ts`,
   * decisions 0057, 0060); a file database only, `DATABASE_READ_POOL` in the config. 0 or unset:
   * every call on the main connection.
   */
  readPool?: number;
  /**
   * SQLite's page caches of a file's connections together, in MB (`page-cache.ts`, decision
   * 0117); `DATABASE_CACHE_MB` in the config. Unset: `DEFAULT_CACHE_MB`.
   */
  cacheMb?: number;
  /**
   * A remote database's round trips are given up after this long (`DATABASE_TIMEOUT_MS`,
   * decision 0202); default `DEFAULT_REMOTE_TIMEOUT_MS`.
   */
  remoteTimeoutMs?: number;
}

export async function openDatabase(
  url: string,
  authToken?: string,
  options: LocalOptions = {},
): Promise<LibsqlDatabase> {
  if (!url.startsWith("file:") && url !== ":memory:") {
    const timeoutMs = options.remoteTimeoutMs ?? DEFAULT_REMOTE_TIMEOUT_MS;
    return libsqlDatabase(
      createClient({ url, authToken, fetch: fetchWithDeadline(timeoutMs) }),
      "remote",
    );
  }
  const busyTimeoutMs = options.busyTimeoutMs ?? BUSY_TIMEOUT_MS;
  const path = url.replace(/^file:(\/\/)?/, "").split("?")[0]!;
  const inMemory = url === ":memory:" || path === ":memory:";
  if (!inMemory) mkdirSync(dirname(path) || ".", { recursive: true });
  // One connection of our own (decision 0102), so its PRAGMAs (`openFileClient`) hold for every
  // statement. Cached column lists of all this database's connections follow one schema generation.
  const generation = new SchemaGeneration();
  const poolSize = !inMemory ? (options.readPool ?? 0) : 0;
  const cacheKib = servingCacheKib(options.cacheMb ?? DEFAULT_CACHE_MB, poolSize);
  const raw = inMemory
    ? await inMemoryClient(generation, busyTimeoutMs)
    : await openFileClient(path, generation, cacheKib, busyTimeoutMs);
  // Marks the work of a write transaction, so a query that bypasses it fails instead of hanging.
  const scope = new AsyncLocalStorage<boolean>();
  // Marks long writes, whose transactions go to the background connection (decision 0039).
  const long = new AsyncLocalStorage<boolean>();
  // The open transaction of a long batch (`LONG_BATCH`, on the background connection, 0185).
  const longBatch = new AsyncLocalStorage<Transaction>();
  const health = inMemory ? null : new FileHealth(path);
  const checkpointer = inMemory ? null : new Checkpointer(path, (e) => health?.noteCheckpoint(e));
  const committed = checkpointer ? () => checkpointer.nudge() : undefined;
  const background = inMemory
    ? null
    : new BackgroundConnection(url, busyTimeoutMs, generation, committed, cacheKib);
  // An in-memory database exists on its own connection only: it cannot be shared with threads.
  const pool =
    poolSize > 0
      ? new ReadPool({ url, size: poolSize, busyTimeoutMs, schema: generation, cacheKib })
      : null;
  try {
    await pool?.ready();
  } catch (e) {
    await pool?.close();
    raw.close();
    throw e;
  }
  const client = serializeClient(raw, {
    insideTransaction: () => scope.getStore() === true,
    elsewhere: background
      ? (mode) => (long.getStore() === true ? background.transaction(mode) : null)
      : undefined,
    batchIn: () => longBatch.getStore() ?? null,
    busyTimeoutMs: inMemory ? undefined : busyTimeoutMs,
    lockReleased: background ? () => background.released() : undefined,
    queueBehind: background ? () => background.batchEnded() : undefined,
    committed,
  });
  const db = libsqlDatabase(client, "local");
  if (pool)
    db.reader = drizzle(
      readerClient(client, pool, () => scope.getStore() === true),
      { schema },
    );
  const remoteReadRows = db.readRows;
  db.readRows = (sql, args) => {
    // as the client does: inside a write transaction a read must go through it
    if (scope.getStore() === true) return Promise.reject(new Error(INSIDE_TRANSACTION));
    return pool ? pool.executeRaw(sql, args) : remoteReadRows(sql, args);
  };
  // Reads cost no round trip here: each runs as it is (those built on `reader` on the pool, side
  // by side).
  db.read = <T extends Queries>(queries: T) => Promise.all(queries) as Promise<Results<T>>;
  if (health) db.fileHealth = health;
  const stamp = walChangeStamp(url);
  db.changeStamp = () => stamp?.() ?? null;
  const group = new GroupCommit({
    orm: db.orm,
    scope: (fn) => scope.run(true, fn),
    inLongWrite: () => long.getStore() === true,
  });
  db.transaction = (work) => group.run(work);
  // concurrent write batches share one BEGIN … COMMIT, as concurrent transactions do
  const batches = new BatchGroup((queries) => db.orm.batch(queries as never) as Promise<unknown[]>);
  // A long batch goes alone: it joins no group (whose halving on a failure would write it again).
  db.write = <T extends Queries>(queries: T) =>
    (background && batchWeight(queries) >= LONG_BATCH
      ? writeLong(db, background, longBatch, queries)
      : batches.run([...queries])) as unknown as Promise<Results<T>>;
  if (background) db.longWrite = (fn) => long.run(true, fn);
  const maintenance = inMemory ? null : new MaintenanceConnection(path, busyTimeoutMs, committed);
  if (maintenance) db.maintain = ({ sql, args }) => maintenance.run(sql, args);
  db.close = async () => {
    stamp?.close();
    health?.close();
    await Promise.all([
      background?.close(),
      maintenance?.close(),
      pool?.close(),
      checkpointer?.close(),
    ]);
    client.close();
  };
  return db;
}

/** Queries of a long batch that Drizzle builds at a time (it builds a batch's SQL in one go). */
export const BUILD_CHUNK = 25;

/**
 * A long batch (decision 0185): one write transaction on the long-write connection, whose
 * statements give the event loop turns when due; Drizzle builds the queries' SQL and maps their
 * results a chunk at a time, with turns between chunks (1,700 queries take it ~250 ms at once).
 * Atomic as a batch is: any failure rolls all of it back.
 */
async function writeLong(
  db: LibsqlDatabase,
  background: BackgroundConnection,
  open: AsyncLocalStorage<Transaction>,
  queries: Queries,
): Promise<unknown[]> {
  const tx = await background.transaction("write", "batch");
  try {
    const results: unknown[] = [];
    for (let at = 0; at < queries.length; at += BUILD_CHUNK) {
      await yieldWhenDue();
      const chunk = queries.slice(at, at + BUILD_CHUNK) as unknown as Queries;
      results.push(...(await open.run(tx, () => db.orm.batch(chunk))));
    }
    await tx.commit();
    return results;
  } catch (e) {
    await tx.rollback().catch(() => {}); // the failure is the answer; it is settled either way
    throw e;
  }
}

/** SQLITE_READONLY: a read connection (query_only) met a write. */
const isReadOnlyError = (e: unknown) =>
  (e as { rawCode?: unknown })?.rawCode !== undefined
    ? (Number((e as { rawCode: number }).rawCode) & 0xff) === 8
    : false;

/**
 * The client under `Database.reader` on a local file: what is sent through it was stated as a
 * read, so it runs on the read pool (decision 0057), off the main connection's queue and the
 * event loop. A write sent this way (the pool's connections are query_only) runs on the main
 * connection instead; batches and transactions are the main connection's. Inside a write
 * transaction's work a read must go through the transaction (it would not see its rows).
 */
function readerClient(main: Client, pool: ReadPool, insideTransaction: () => boolean): Client {
  const execute = async (stmt: InStatement | string, args?: InArgs) => {
    if (insideTransaction()) throw new Error(INSIDE_TRANSACTION);
    try {
      return await pool.execute(stmt, args);
    } catch (e) {
      if (!isReadOnlyError(e)) throw e;
      return typeof stmt === "string" ? main.execute(stmt, args) : main.execute(stmt);
    }
  };
  return new Proxy(main, {
    get: (target, key, receiver) =>
      key === "execute" ? execute : Reflect.get(target, key, receiver),
  });
}

/**
 * An in-memory database: it lives in its page cache (no size is set on it) and on this one
 * connection, which no other connection can hold a lock against, so SQLite's own busy wait is
 * harmless.
 */
async function inMemoryClient(generation: SchemaGeneration, busyTimeoutMs: number) {
  const raw = new LocalClient(":memory:", generation);
  await raw.execute(`PRAGMA busy_timeout=${busyTimeoutMs}`);
  await raw.execute("PRAGMA foreign_keys=ON");
  return raw;
}
