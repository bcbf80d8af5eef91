/**
 * The database handle the app works with: a libSQL client (serialised for local files) and
 * the Drizzle ORM over it. Runtime-specific opening lives in `local.ts` (Bun) and `web.ts`.
 */
import type { Client, InStatement, InArgs, ResultSet, Transaction, TransactionMode } from "@libsql/client";
import { drizzle, type LibSQLDatabase } from "drizzle-orm/libsql";
import * as schema from "./schema";

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
  close(): Promise<void>;
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

/**
 * Serialises every call on a single-connection local client. `@libsql/client` refuses calls
 * (TRANSACTION_ACTIVE) while its only connection is held by a transaction, and opening more
 * connections would lose the per-connection PRAGMAs; SQLite runs one writer at a time anyway,
 * so callers queue here instead. A transaction holds the lock until it settles.
 */
export function serializeClient(inner: Client, options: { insideTransaction?: () => boolean } = {}): Client {
  const lock = new Lock();
  const refuseInsideTransaction = () => {
    if (options.insideTransaction?.()) {
      throw new Error("a query went to the database client from inside an open write transaction, which holds the only connection; run it on the transaction (ctx.db)");
    }
  };
  const guarded =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      refuseInsideTransaction();
      const release = await lock.acquire();
      try {
        return await fn(...args);
      } finally {
        release();
      }
    };
  const wrapper: Client = {
    execute: guarded((stmt: InStatement | string, args?: InArgs) =>
      (args === undefined ? inner.execute(stmt as InStatement) : inner.execute(stmt as string, args)) as Promise<ResultSet>,
    ) as Client["execute"],
    batch: guarded((stmts: Array<InStatement | [string, InArgs?]>, mode?: TransactionMode) => inner.batch(stmts, mode)) as Client["batch"],
    migrate: guarded((stmts: InStatement[]) => inner.migrate(stmts)),
    executeMultiple: guarded((sql: string) => inner.executeMultiple(sql)),
    sync: guarded(() => inner.sync()),
    async transaction(mode?: TransactionMode): Promise<Transaction> {
      refuseInsideTransaction();
      const release = await lock.acquire();
      let tx: Transaction;
      try {
        tx = await inner.transaction(mode);
      } catch (e) {
        release();
        throw e;
      }
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
