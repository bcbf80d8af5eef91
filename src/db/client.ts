/**
 * The `Database` interface: how domain code states its database work, whatever carries it.
 *
 * - `orm` builds queries (Drizzle). Awaiting a query built on it runs it on its own, outside any
 *   transaction: one round trip on a remote database. Reads that belong together go through
 *   `read([...])` instead: one round trip, one consistent snapshot.
 * - `reader` builds queries the same way, stating that they are reads: the caller's intent, not
 *   the SQL text, decides where they run (a local file answers them from its read pool; a write
 *   sent through it still runs, on the main connection). Elsewhere it is `orm`. Reads for
 *   `read([...])` are built on it.
 * - `write([...])` is one atomic write of many statements: one round trip and one transaction on
 *   the server (`batch()` on libSQL/Turso and D1). A failing statement rolls back all of them;
 *   races are caught inside the batch (a guard statement that fails when a condition on a row's
 *   `last_updated` matched nothing, uniqueness and foreign keys), never by holding a lock across
 *   round trips. This is the write path of handlers (decision 0070). On a local file a long one
 *   runs on the long-write connection, giving the event loop turns (0185).
 * - `transaction(work)` is an interactive write transaction: a statement per round trip on a
 *   remote database, holding its write lock across the network. What is not converted to `write`
 *   yet uses it; D1 has none and refuses it (`InteractiveTransactionUnsupported`).
 * - `needTransaction()` states, before any of it runs, that the work about to be done needs
 *   `transaction` (a staged write falling back to one): D1 refuses with the same typed error,
 *   thrown at once; elsewhere a no-op. Domain code maps that refusal to its own answer
 *   (`transactionOr`), never asking which backend it is on.
 * - `longWrite(work)` marks a long write (a schema apply): on a local file its transactions run on
 *   a second connection whose statements give the event loop its turns when due (`turns.ts`);
 *   elsewhere it just runs `work`.
 * - `maintain(statement)` runs one write of long maintenance (a retention batch): on a local file
 *   on a connection of its own whose statements step SQLite off the event loop; elsewhere it is
 *   `execute` (a remote statement holds no event loop).
 * - `changeStamp()` changes whenever anything commits, from any connection or process, where the
 *   implementation can tell that without a round trip (a local file); null elsewhere, and caches
 *   must then validate themselves another way.
 * - `kind` names the implementation for display only (the status page, the health check's
 *   `driver`); a choice of strategy is the implementation's, or `policy.ts`'s (decision 0157).
 * - `fileHealth` is what the implementation knows about the file under it (decision 0079): a
 *   local file's watcher; elsewhere `NO_FILE_HEALTH`, which knows of no problem.
 *
 * No member is optional and none is probed: an implementation without the need has a no-op.
 * Implementations: `local.ts` (a file or memory, Bun: group commit, read pool, background
 * connection, checkpointer — all invisible behind this interface), `libsql.ts` (libSQL/Turso
 * over HTTP, Bun and Workers), and D1 (`drizzle-orm/d1`, wired by the Worker). See
 * docs/architecture.md ("The database connections") and decisions 0070–0072.
 */
import type { InValue } from "@libsql/client";
import type { BatchItem, BatchResponse } from "drizzle-orm/batch";
import { sql } from "drizzle-orm";
import type { LibSQLDatabase } from "drizzle-orm/libsql";
import { ApiError } from "../api-error";
import type * as schema from "./schema";

export type Orm = LibSQLDatabase<typeof schema>;
/** Either the ORM or an open Drizzle transaction: everything that can run a query. */
export type Executor = Orm | Parameters<Parameters<Orm["transaction"]>[0]>[0];

/** Queries for one `read` or `write`: Drizzle queries built on `Database.orm` (at least one). */
export type Queries = readonly [BatchItem<"sqlite">, ...BatchItem<"sqlite">[]];
export type Results<T extends Queries> = BatchResponse<T>;

/**
 * What a statement of a write batch costs in ordinary statements (one of a bulk create's few
 * rows), where it writes far more rows: a set-based statement over a bound document (decisions
 * 0197, 0198). A local file sends a batch of that much work to its long writer, which gives the
 * event loop turns between statements (0185), as it would the many statements it replaces.
 */
const weights = new WeakMap<object, number>();

/** `item`, weighed as `weight` ordinary statements (`batchWeight`). */
export function weighStatement<T extends object>(item: T, weight: number): T {
  weights.set(item, Math.max(1, Math.ceil(weight)));
  return item;
}

/** The statements of `queries`, each weighed (`weighStatement`; one when not weighed). */
export function batchWeight(queries: readonly object[]): number {
  let total = 0;
  for (const q of queries) total += weights.get(q) ?? 1;
  return total;
}

/** One SQL statement with positional (`?`) arguments; its identifiers validated and quoted. */
interface Statement {
  sql: string;
  args: InValue[];
}

/** A statement's answer, the same on every implementation. */
interface StatementResult {
  /** Rows as objects keyed by column name (the first of duplicate names wins). */
  rows: Array<Record<string, unknown>>;
  /** Rows a write statement changed. */
  rowsAffected: number;
}

/** A read's answer as plain arrays, in column order: for hot paths reading rows by position. */
export interface RawRows {
  columns: string[];
  rows: unknown[][];
}

type HealthLog = (level: "error" | "info", msg: string, fields: Record<string, unknown>) => void;

/** The faults of the storage under a database that it notices off the request path (0079). */
export interface FileHealthReport {
  /** Null while the file opened is still the one at its path; else what happened to it. */
  fileProblem(): string | null;
  /** Why the last checkpoint failed; null while they succeed (or there are none). */
  readonly checkpointError: string | null;
  /** The last integrity check's verdict; null before the first one (or where none runs). */
  readonly integrity: { ok: boolean; detail: string } | null;
  /** A request met a damaged file: failing until an integrity check passes. */
  noteDamaged(cause: unknown): void;
  /** Where fault lines go (the app's logger). */
  attach(log: HealthLog): void;
  /** The integrity check now, in the background, and daily after. */
  scheduleIntegrity(): void;
}

/** The `fileHealth` of a database with no file of its own to watch (remote, D1, memory). */
export const NO_FILE_HEALTH: FileHealthReport = Object.freeze({
  fileProblem: () => null,
  checkpointError: null,
  integrity: null,
  noteDamaged: () => {},
  attach: () => {},
  scheduleIntegrity: () => {},
});

export interface Database {
  /**
   * `local`: a file or :memory: (Bun); `remote`: libSQL/Turso over HTTP; `d1`: Cloudflare D1.
   * For display: domain code outside `src/db` never branches on it (tests/repo/backend-blind).
   */
  readonly kind: "local" | "remote" | "d1";
  /** Builds queries; awaiting one runs it alone, outside any transaction. */
  readonly orm: Orm;
  /** Builds reads (see above): where the implementation has read connections, they answer them. */
  readonly reader: Orm;
  /** Runs reads in one round trip, one snapshot. Results in order, mapped as Drizzle maps them. */
  read<T extends Queries>(queries: T): Promise<Results<T>>;
  /** Runs statements as one atomic write in one round trip; any failure rolls back all. */
  write<T extends Queries>(queries: T): Promise<Results<T>>;
  /** One statement outside any transaction (a write commits by itself). */
  execute(statement: Statement): Promise<StatementResult>;
  /** A read outside any transaction, rows as arrays (a local file's read pool serves it). */
  readRows(sql: string, args: InValue[]): Promise<RawRows>;
  /** An interactive write transaction (see above: the path `write` replaces; not on D1). */
  transaction<T>(work: (tx: Executor) => Promise<T>): Promise<T>;
  /** States that work about to run needs `transaction`: throws its refusal now where there is none. */
  needTransaction(): void;
  /** Runs `work` as a long write (see above); elsewhere than a local file, runs it as it is. */
  longWrite<T>(work: () => Promise<T>): Promise<T>;
  /** One maintenance write (see above), outside any transaction; resolves with the rows changed. */
  maintain(statement: Statement): Promise<number>;
  /** A stamp that changes with every commit by anyone, or null where none is known for free. */
  changeStamp(): string | null;
  /** The storage's own faults (a local file's watcher; `NO_FILE_HEALTH` elsewhere). */
  readonly fileHealth: FileHealthReport;
  close(): Promise<void>;
}

/** Whether `ex` runs outside any transaction: the database's `orm` or `reader`, not an open transaction. */
export function outsideTransaction(db: Pick<Database, "orm" | "reader">, ex: Executor): boolean {
  return ex === db.orm || ex === db.reader;
}

/**
 * D1 (and any backend without interactive transactions) refuses `Database.transaction`. A
 * request whose write still needs one (decision 0071 lists them) answers 501 saying so, not 500.
 */
export class InteractiveTransactionUnsupported extends ApiError {
  constructor(kind: string) {
    super(501, {
      detail: `This write needs an interactive transaction, which ${kind} does not have; it is not available on this database yet.`,
      error: "not_available_on_this_database",
    });
  }
}

/**
 * Falls back to a transaction: `"transaction"`, the answer a staged write gives when its work
 * needs one. Where the database has none (`needTransaction` refuses, before anything runs),
 * throws `refusal()` instead: the answer that names why (a 409 such as `cascade_too_large`).
 */
export function transactionOr(db: Pick<Database, "needTransaction">, refusal: () => Error) {
  if (!offersTransaction(db)) throw refusal();
  return "transaction" as const;
}

/**
 * Whether work that needs a transaction may take one: false where `needTransaction` refuses
 * (D1), so the caller keeps the path that needs none. Any other failure is thrown as it is.
 */
export function offersTransaction(db: Pick<Database, "needTransaction">): boolean {
  try {
    db.needTransaction();
    return true;
  } catch (e) {
    if (e instanceof InteractiveTransactionUnsupported) return false;
    throw e;
  }
}

/**
 * Another connection holds the database's write lock (a long write such as a schema apply)
 * and did not release it within the busy timeout. Retryable: 503 with `Retry-After`.
 */
export class DatabaseBusyError extends ApiError {
  constructor() {
    super(
      503,
      {
        detail: "The database is busy with a long write (such as a schema apply); retry shortly.",
        error: "database_busy",
      },
      { "Retry-After": "1" },
    );
  }
}

/** SQLITE_BUSY (another connection holds the lock), possibly wrapped by Drizzle. */
export function isBusyError(e: unknown): boolean {
  for (
    let err = e as
        | { code?: unknown; extendedCode?: unknown; rawCode?: unknown; cause?: unknown }
        | undefined,
      depth = 0;
    err && depth < 3;
    err = err.cause as typeof err, depth++
  ) {
    if (err instanceof DatabaseBusyError) return true;
    if (
      err.code === "SQLITE_BUSY" ||
      (typeof err.extendedCode === "string" && err.extendedCode.startsWith("SQLITE_BUSY"))
    )
      return true;
    if (typeof err.rawCode === "number" && (err.rawCode & 0xff) === 5) return true;
  }
  return false;
}

/** The message the write guard raises (`migrations/0007_write_guard.sql`, decision 0071). */
const WRITE_CONFLICT = "host_write_conflict";

/**
 * A statement for a `write` batch that fails it — the whole batch rolls back — unless the
 * statement before it changed at least one row: after `UPDATE … WHERE id = ? AND last_updated = ?`
 * it turns a lost race into a `WriteConflictError` inside the one atomic round trip.
 */
export function guardChanged(orm: Orm) {
  return orm.run(sql`INSERT INTO write_guard (ok) VALUES (changes() > 0)`);
}

/** A write batch's guard failed: the row changed (or vanished) since it was read. 409. */
export class WriteConflictError extends ApiError {
  constructor() {
    super(409, {
      detail: "The object was changed by another request since it was read; read it and retry.",
      error: "write_conflict",
    });
  }
}

/** Whether `e` (possibly wrapped by Drizzle or the driver) is the write guard's failure. */
export function isWriteConflict(e: unknown): boolean {
  for (
    let err = e as { message?: unknown; cause?: unknown } | undefined, depth = 0;
    err && depth < 4;
    err = err.cause as typeof err, depth++
  ) {
    if (err instanceof WriteConflictError) return true;
    if (typeof err.message === "string" && err.message.includes(WRITE_CONFLICT)) return true;
  }
  return false;
}
