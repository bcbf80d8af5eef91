/**
 * The local file's single serialised connection (Bun): every call queues behind the one before,
 * write transactions hold the queue until they settle, and SQLITE_BUSY from another connection is
 * retried asynchronously within a bound. Reads go to the read pool only as their callers say
 * (`Database.reader`, `readRows`; `local.ts`); locking is decided by what the caller called
 * (`batch` and `transaction` take the write lock at BEGIN IMMEDIATE; `execute` runs in
 * autocommit), never by SQL text.
 * Only `local.ts` and `background.ts` use it: it is not part of the `Database` interface.
 */
import type {
  Client,
  InStatement,
  InArgs,
  ResultSet,
  Transaction,
  TransactionMode,
} from "@libsql/client";
import { settledWithin } from "./bounded-wait";
import { DatabaseBusyError, isBusyError } from "./client";

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
   * An open transaction elsewhere (the long-write connection's) that a batch's statements belong
   * to, or null: they run in it, which is committed by whoever opened it (a long batch, 0185).
   */
  batchIn?: () => Transaction | null;
  /**
   * With the connection's own busy timeout at 0, how long a call retries SQLITE_BUSY (another
   * connection holds the write lock) before `DatabaseBusyError`. It waits between attempts
   * without holding the event loop or this client's lock. Unset: no retries.
   */
  busyTimeoutMs?: number;
  /** When another connection of this process holds the write lock: a promise of its release. */
  lockReleased?: () => Promise<void> | null;
  /**
   * When the write lock's holder is one to wait for as a queue (this process's long batch,
   * decision 0186): a promise of its end. The time waited for it does not count against
   * `busyTimeoutMs`.
   */
  queueBehind?: () => Promise<void> | null;
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

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Runs `attempt` (which takes the lock itself) again while the database is busy, within the bound;
 * the time spent queued behind this process's long batch (`queueBehind`) does not count.
 */
export async function retryBusy<R>(
  options: SerializeOptions,
  attempt: () => Promise<R>,
): Promise<R> {
  const bound = options.busyTimeoutMs;
  if (bound === undefined) return attempt();
  let deadline = performance.now() + bound;
  for (let delay = 1; ; delay = Math.min(delay * 2, 20)) {
    try {
      return await attempt();
    } catch (e) {
      if (!isBusyError(e) || e instanceof DatabaseBusyError) throw e;
      const queued = options.queueBehind?.();
      if (queued) {
        const from = performance.now();
        await queued;
        deadline += performance.now() - from;
        continue;
      }
      const left = deadline - performance.now();
      if (left <= 0) throw new DatabaseBusyError();
      const released = options.lockReleased?.();
      await (released ? settledWithin(released, left) : sleep(Math.min(delay, left)));
    }
  }
}

/**
 * One statement outside any transaction (the caller holds the lock), run as it is: SQLite's
 * autocommit makes a write its own transaction. Nothing reads its SQL text: a write refused as
 * busy comes back as SQLITE_BUSY, the local client has halted it (`local-client.ts`), and
 * `retryBusy` runs it again. A statement that changed rows has committed them.
 */
async function executeOne(
  inner: Client,
  options: SerializeOptions,
  stmt: InStatement | string,
  args?: InArgs,
): Promise<ResultSet> {
  const result = await (args === undefined
    ? inner.execute(stmt as InStatement)
    : inner.execute(stmt as string, args));
  if (result.rowsAffected > 0) afterCommit(options);
  return result;
}

/** A transaction that gives the client's lock back (once) when it commits, rolls back or closes. */
function lockHeldTransaction(
  tx: Transaction,
  release: () => void,
  options: SerializeOptions,
): Transaction {
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
}

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
  const guarded =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      refuseInsideTransaction();
      return retryBusy(options, async () => {
        const release = await lock.acquire();
        try {
          return await fn(...args);
        } finally {
          release();
        }
      });
    };
  const batchHere = guarded(
    async (stmts: Array<InStatement | [string, InArgs?]>, mode?: TransactionMode) => {
      const results = await inner.batch(stmts, mode ?? "write");
      afterCommit(options);
      return results;
    },
  );
  const execute = guarded((stmt: InStatement | string, args?: InArgs) =>
    executeOne(inner, options, stmt, args),
  ) as Client["execute"];
  const wrapper: Client = {
    execute,
    // A batch is one write transaction (`Database.write`): BEGIN IMMEDIATE, so a lock held by
    // another connection is met before any statement runs and the retry starts clean.
    batch: (async (stmts: Array<InStatement | [string, InArgs?]>, mode?: TransactionMode) => {
      refuseInsideTransaction();
      const open = options.batchIn?.();
      if (!open) return batchHere(stmts, mode);
      return open.batch(stmts.map((s) => (Array.isArray(s) ? { sql: s[0], args: s[1] ?? [] } : s)));
    }) as Client["batch"],
    migrate: guarded((stmts: InStatement[]) => inner.migrate(stmts)),
    executeMultiple: guarded((sql: string) => inner.executeMultiple(sql)),
    sync: guarded(() => inner.sync()),
    async transaction(mode?: TransactionMode): Promise<Transaction> {
      refuseInsideTransaction();
      const other = options.elsewhere?.(mode);
      if (other) return other;
      const { tx, release } = await retryBusy(options, async () => {
        const release = await lock.acquire();
        try {
          return { tx: await inner.transaction(mode), release };
        } catch (e) {
          release();
          throw e;
        }
      });
      return lockHeldTransaction(tx, release, options);
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
