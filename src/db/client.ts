/**
 * The database handle the app works with: a libSQL client (serialised for local files) and
 * the Drizzle ORM over it. Runtime-specific opening lives in `local.ts` (Bun) and `web.ts`.
 */
import type {
  Client,
  InStatement,
  InArgs,
  InValue,
  ResultSet,
  Transaction,
  TransactionMode,
} from "@libsql/client";
import { sql } from "drizzle-orm";
import { drizzle, type LibSQLDatabase } from "drizzle-orm/libsql";
import { ApiError } from "../core/errors";
import * as schema from "./schema";
import type { RawRows } from "./read-pool";

export type Orm = LibSQLDatabase<typeof schema>;
/** Either the ORM or an open Drizzle transaction: everything that can run a query. */
export type Executor = Orm | Parameters<Parameters<Orm["transaction"]>[0]>[0];

export interface Database {
  client: Client;
  orm: Orm;
  /** `local` for file:/:memory:, `remote` for libsql:/http(s): (Turso, sqld, the Hrana tool). */
  kind: "local" | "remote";
  /**
   * Runs the work of an open write transaction. On the single local connection, a query sent
   * to the client instead of the transaction from inside `fn` would wait forever for the
   * connection the transaction holds; there it fails at once instead.
   */
  transactionScope?<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Runs `fn` with its write transactions on a second connection that gives the event loop a
   * turn every few milliseconds (local files only, `background.ts`): for long writes such as
   * schema applies, which would otherwise hold the event loop and the main connection from
   * BEGIN to COMMIT. Absent elsewhere; callers then run `fn` as it is (a remote database's
   * statements are network calls, which do not hold the event loop).
   */
  longWrite?<T>(fn: () => Promise<T>): Promise<T>;
  /** Whether the caller runs inside `longWrite` (its transactions go to the second connection). */
  inLongWrite?(): boolean;
  /**
   * Local files: runs `work` in a write transaction shared with other callers waiting at the same
   * time, in a savepoint of its own (`group-commit.ts`, decision 0053). Absent elsewhere.
   */
  groupCommit?<T>(work: (tx: Executor) => Promise<T>): Promise<T>;
  /**
   * Inside a long write: gives the event loop a turn when the write has held it for a few
   * milliseconds. For long stretches of JavaScript between statements; cheap otherwise.
   */
  pace?(): Promise<void>;
  /**
   * Local files in WAL mode: a stamp that changes whenever any connection or process commits
   * (`change-stamp.ts`), or null while there is none. Absent elsewhere.
   */
  changeStamp?(): string | null;
  /**
   * Local files with a read pool: a read outside any transaction, its rows as plain arrays of
   * values (`read-pool.ts`), for hot paths that read rows by position. Absent elsewhere.
   */
  readRows?(sql: string, args: InArgs): Promise<RawRows>;
  close(): Promise<void>;
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

export function wrapClient(client: Client, kind: Database["kind"]): Database {
  const orm = drizzle(client, { schema });
  return {
    client,
    orm,
    kind,
    async close() {
      client.close();
    },
  };
}

/** A FIFO async lock. */
class Lock {
  #tail: Promise<void> = Promise.resolve();
  acquire(): Promise<() => void> {
    let release!: () => void;
    const next = new Promise<void>((r) => (release = r));
    const ready = this.#tail.then(() => release);
    this.#tail = this.#tail.then(() => next);
    return ready;
  }
}

export interface SerializeOptions {
  insideTransaction?: () => boolean;
  /** A transaction to open instead of one on this connection (the background connection), or null. */
  elsewhere?: (mode?: TransactionMode) => Promise<Transaction> | null;
  /**
   * With the connection's own busy timeout at 0, how long a call retries SQLITE_BUSY (another
   * connection holds the write lock) before `DatabaseBusyError`. It waits between attempts
   * without holding the event loop or this client's lock. Unset: no retries.
   */
  busyTimeoutMs?: number;
  /** When another connection of this process holds the write lock: a promise of its release. */
  lockReleased?: () => Promise<void> | null;
  /**
   * Runs a read outside a transaction elsewhere (the read pool, decision 0057) instead of on
   * this connection: it neither waits for this client's lock nor holds the event loop.
   */
  read?: (stmt: InStatement | string, args?: InArgs) => Promise<ResultSet>;
  /** Called after each commit of this connection (the background checkpoints, `checkpointer.ts`). */
  committed?: () => void;
}

/** The `committed` hook, which must never turn a commit that happened into an error. */
function afterCommit(options: SerializeOptions) {
  try {
    options.committed?.();
  } catch {
    // a follow-up's failure is not the commit's
  }
}

/** Why a query sent around an open write transaction fails (it would wait for that transaction's connection). */
export const INSIDE_TRANSACTION =
  "a query went to the database client from inside an open write transaction, which holds the only connection; run it on the transaction (ctx.db)";

/** Statements that may take the write lock; reads, PRAGMAs and transaction control run as they are. */
const mayWrite = (sql: string) =>
  !/^\s*(select|with|pragma|explain|values|begin|commit|end|rollback|savepoint|release|vacuum|attach|detach)\b/i.test(
    sql,
  );

/**
 * A statement another connection can answer: a SELECT (or a WITH that writes nothing) that asks
 * nothing of this connection's own state (last_insert_rowid(), changes()). Anything else, and a
 * read the pool refuses as a write (its connections are query_only), runs here.
 */
export const isPoolableRead = (sql: string) => {
  const head = /^\s*(select|with)\b/i.exec(sql);
  if (!head || /\b(last_insert_rowid|changes|total_changes)\s*\(/i.test(sql)) return false;
  return head[1]!.toLowerCase() === "select" || !/\b(insert|update|delete|replace)\b/i.test(sql);
};

/** SQLITE_READONLY: the pool's query_only connection met a write. */
const isReadOnlyError = (e: unknown) =>
  (e as { rawCode?: unknown })?.rawCode !== undefined
    ? (Number((e as { rawCode: number }).rawCode) & 0xff) === 8
    : false;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Serialises every call on a single-connection local client. `@libsql/client` refuses calls
 * (TRANSACTION_ACTIVE) while its only connection is held by a transaction, and opening more
 * connections would lose the per-connection PRAGMAs; SQLite runs one writer at a time anyway,
 * so callers queue here instead. A transaction holds the lock until it settles.
 */
export function serializeClient(inner: Client, options: SerializeOptions = {}): Client {
  const lock = new Lock();
  const refuseInsideTransaction = () => {
    if (options.insideTransaction?.()) {
      throw new Error(INSIDE_TRANSACTION);
    }
  };
  /** Runs `attempt` (which takes the lock itself) again while the database is busy, within the bound. */
  const retryBusy = async <R>(attempt: () => Promise<R>): Promise<R> => {
    const bound = options.busyTimeoutMs;
    if (bound === undefined) return attempt();
    const deadline = performance.now() + bound;
    for (let delay = 1; ; delay = Math.min(delay * 2, 20)) {
      try {
        return await attempt();
      } catch (e) {
        if (!isBusyError(e) || e instanceof DatabaseBusyError) throw e;
        const left = deadline - performance.now();
        if (left <= 0) throw new DatabaseBusyError();
        const released = options.lockReleased?.();
        await (released ? Promise.race([released, sleep(left)]) : sleep(Math.min(delay, left)));
      }
    }
  };
  const guarded =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      refuseInsideTransaction();
      return retryBusy(async () => {
        const release = await lock.acquire();
        try {
          return await fn(...args);
        } finally {
          release();
        }
      });
    };
  const run = (stmt: InStatement | string, args?: InArgs) =>
    (args === undefined
      ? inner.execute(stmt as InStatement)
      : inner.execute(stmt as string, args)) as Promise<ResultSet>;
  const execute = guarded(async (stmt: InStatement | string, args?: InArgs) => {
    if (
      options.busyTimeoutMs === undefined ||
      !mayWrite(typeof stmt === "string" ? stmt : stmt.sql)
    )
      return run(stmt, args);
    // A write on its own runs in a transaction of its own: if another connection holds the
    // lock, SQLite refuses the BEGIN IMMEDIATE, which leaves nothing behind (see statement-cache.ts).
    const tx = await inner.transaction("write");
    try {
      const result = await (args === undefined
        ? tx.execute(stmt as InStatement)
        : tx.execute({ sql: stmt as string, args }));
      await tx.commit();
      afterCommit(options);
      return result;
    } finally {
      tx.close();
    }
  }) as Client["execute"];
  const read = options.read;
  const wrapper: Client = {
    execute: (read
      ? async (stmt: InStatement | string, args?: InArgs) => {
          if (!isPoolableRead(typeof stmt === "string" ? stmt : stmt.sql))
            return execute(stmt as string, args);
          refuseInsideTransaction();
          try {
            return await read(stmt, args);
          } catch (e) {
            if (isReadOnlyError(e)) return execute(stmt as string, args);
            throw e;
          }
        }
      : execute) as Client["execute"],
    batch: guarded((stmts: Array<InStatement | [string, InArgs?]>, mode?: TransactionMode) =>
      inner.batch(stmts, mode),
    ) as Client["batch"],
    migrate: guarded((stmts: InStatement[]) => inner.migrate(stmts)),
    executeMultiple: guarded((sql: string) => inner.executeMultiple(sql)),
    sync: guarded(() => inner.sync()),
    async transaction(mode?: TransactionMode): Promise<Transaction> {
      refuseInsideTransaction();
      const other = options.elsewhere?.(mode);
      if (other) return other;
      const { tx, release } = await retryBusy(async () => {
        const release = await lock.acquire();
        try {
          return { tx: await inner.transaction(mode), release };
        } catch (e) {
          release();
          throw e;
        }
      });
      let settled = false;
      const settle = () => {
        if (!settled) {
          settled = true;
          release();
        }
      };
      return {
        execute: ((stmt: InStatement) => tx.execute(stmt)) as Transaction["execute"],
        batch: (stmts: InStatement[]) => tx.batch(stmts),
        executeMultiple: (sql: string) => tx.executeMultiple(sql),
        async commit() {
          try {
            await tx.commit();
          } finally {
            settle();
          }
          afterCommit(options);
        },
        async rollback() {
          try {
            await tx.rollback();
          } finally {
            settle();
          }
        },
        close() {
          tx.close();
          settle();
        },
        get closed() {
          return tx.closed;
        },
      };
    },
    close: () => inner.close(),
    reconnect: () => inner.reconnect(),
    get closed() {
      return inner.closed;
    },
    get protocol() {
      return inner.protocol;
    },
  };
  return wrapper;
}

/**
 * A query prepared once on the ORM, ready to run on `db` — the ORM itself or an open Drizzle
 * transaction. Drizzle binds a prepared query to the session it was prepared on, and building
 * the SQL again for every call inside a transaction was about a quarter of a create's CPU time.
 * The copy differs only in the libSQL transaction it runs on. Returns null when `db` is another
 * database or the driver's shape is not the one this was written against (callers then build
 * the query as usual); `tests/core/prepared-in.test.ts` pins the behaviour.
 */
export function preparedIn<P extends object>(prepared: P, db: Executor): P | null {
  const session = (db as unknown as { session?: { client?: unknown; tx?: unknown } }).session;
  const own = prepared as unknown as { client?: unknown; tx?: unknown };
  if (!session || !("tx" in own) || session.client !== own.client) return null;
  if (!session.tx) return own.tx ? null : prepared;
  const copy = Object.assign(Object.create(Object.getPrototypeOf(prepared)) as P, prepared);
  (copy as unknown as { tx: unknown }).tx = session.tx;
  return copy;
}

/** A query prepared once per ORM and run on that ORM or inside any of its transactions. */
export class Reusable<P extends object> {
  readonly #byOrm = new WeakMap<object, P>();
  constructor(private readonly build: (db: Executor) => P) {}

  /** The prepared query for `db`; built afresh on `db` only when it cannot be reused there. */
  on(db: Executor, orm: Orm): P {
    let q = this.#byOrm.get(orm);
    if (!q) this.#byOrm.set(orm, (q = this.build(orm)));
    return preparedIn(q, db) ?? this.build(db);
  }
}

/**
 * Runs one statement with positional (`?`) arguments on `db` — the ORM or an open Drizzle
 * transaction — through the libSQL client or transaction under it, with no Drizzle SQL object in
 * between. For statements that bind thousands of values (bulk inserts, change records), where
 * building a `sql` template or filling named placeholders cost more than SQLite's own work. The
 * text is the caller's: its identifiers must already be validated and quoted, and `?` may appear
 * only as a placeholder. Relies on the driver field `preparedIn` relies on (`session.tx`, else
 * `session.client`); without it the statement goes through Drizzle as a template.
 */
export async function executePositional(
  db: Executor,
  text: string,
  args: InValue[],
): Promise<ResultSet> {
  const session = (
    db as unknown as {
      session?: { tx?: Pick<Transaction, "execute"> | null; client?: Pick<Client, "execute"> };
    }
  ).session;
  const target = session?.tx ?? session?.client;
  if (target && typeof target.execute === "function") return target.execute({ sql: text, args });
  const parts = text.split("?");
  if (parts.length !== args.length + 1)
    throw new Error(
      `executePositional: ${parts.length - 1} placeholders for ${args.length} arguments`,
    );
  return (await db.run(
    sql(Object.assign(parts, { raw: parts }) as unknown as TemplateStringsArray, ...args),
  )) as unknown as ResultSet;
}
