/**
 * A second connection to a local database file for long write transactions (schema applies,
 * and long `write` batches: decision 0185).
 * The local driver runs statements synchronously on the calling thread, and a transaction's
 * statements follow each other through promises that are already settled, so a long write
 * used to hold the event loop (and the only connection) from BEGIN to COMMIT. On this
 * connection each statement of a transaction first gives the event loop its turns when the work
 * under way has held it for a slice (`yieldWhenDue`, `turns.ts`), and the main connection, in WAL
 * mode, keeps answering reads from the last committed state meanwhile. One long write at a time
 * per process; see docs/decisions/0039-long-writes-off-the-hot-path.md.
 */
import {
  LibsqlBatchError,
  LibsqlError,
  type Client,
  type InArgs,
  type InStatement,
  type Transaction,
  type TransactionMode,
} from "@libsql/client";
import { DatabaseBusyError } from "./client";
import { openFileClient, type LocalClient, type SchemaGeneration } from "./local-client";
import { serializeClient } from "./serialize";
import { SERVICE_CACHE_KIB } from "./page-cache";
import { yieldWhenDue } from "../turns";

/**
 * A FIFO lock whose waiters give up after a deadline, unless `keepWaiting` says, when it comes,
 * that the holder is one worth waiting for (a long batch, decision 0186): then it starts again.
 */
class TimedLock {
  #held = false;
  #waiters: Array<() => void> = [];
  acquire(timeoutMs: number, keepWaiting: () => boolean): Promise<(() => void) | null> {
    if (!this.#held) {
      this.#held = true;
      return Promise.resolve(() => this.#release());
    }
    return new Promise((resolve) => {
      let timer: ReturnType<typeof setTimeout>;
      const grant = () => {
        clearTimeout(timer);
        resolve(() => this.#release());
      };
      const bound = () => {
        if (keepWaiting()) {
          timer = setTimeout(bound, timeoutMs);
          return;
        }
        this.#waiters = this.#waiters.filter((w) => w !== grant);
        resolve(null);
      };
      timer = setTimeout(bound, timeoutMs);
      this.#waiters.push(grant);
    });
  }
  #release() {
    const next = this.#waiters.shift();
    if (next) next();
    else this.#held = false;
  }
}

export class BackgroundConnection {
  #client: Client | null = null;
  #opening: Promise<Client> | null = null;
  #lock = new TimedLock();
  #released: Promise<void> | null = null;
  /** Whether the open long write is a long batch (`transaction(mode, "batch")`), under way. */
  #batchOpen = false;

  constructor(
    private readonly url: string,
    private readonly busyTimeoutMs: number,
    /** The database's schema generation, shared with its other connections. */
    private readonly schema: SchemaGeneration,
    /** After each commit of this connection (`SerializeOptions.committed`). */
    private readonly committed?: () => void,
    /** Its page cache, in KiB (its share of the file's budget, `page-cache.ts`). */
    private readonly cacheKib = SERVICE_CACHE_KIB,
  ) {}

  /** While a long write is open, resolves when it ends (the main connection's writes wait on it); else null. */
  released(): Promise<void> | null {
    return this.#released;
  }

  /**
   * While a long batch holds the write lock, resolves when it ends; else null. A long batch is a
   * request's one atomic write, bounded by the request's body, and each of its statements moves
   * it on: a write waits for it as for its turn in a queue, not for a lock held for who knows
   * how long (decision 0186). A schema apply is not one: writes meeting it wait the bound (0039).
   */
  batchEnded(): Promise<void> | null {
    return this.#batchOpen ? this.#released : null;
  }

  #open(): Promise<Client> {
    this.#opening ??= (async () => {
      const path = this.url.replace(/^file:(\/\/)?/, "").split("?")[0]!;
      let raw: LocalClient;
      try {
        raw = await openFileClient(path, this.schema, this.cacheKib, this.busyTimeoutMs);
      } catch (e) {
        this.#opening = null;
        throw e;
      }
      this.#client = serializeClient(raw, {
        busyTimeoutMs: this.busyTimeoutMs,
        committed: this.committed,
      });
      return this.#client;
    })();
    return this.#opening;
  }

  /**
   * A write transaction on this connection (`kind` "batch": a long batch's, `batchEnded`). Waits
   * at most the busy timeout for another long write of this process (however long for a long
   * batch), then as long again for the database's write lock; past either, `DatabaseBusyError`
   * (503, retryable).
   */
  async transaction(
    mode: TransactionMode = "write",
    kind: "batch" | "other" = "other",
  ): Promise<Transaction> {
    const release = await this.#lock.acquire(this.busyTimeoutMs, () => this.#batchOpen);
    if (!release) throw new DatabaseBusyError();
    let done!: () => void;
    this.#released = new Promise<void>((r) => (done = r));
    let settled = false;
    const settle = () => {
      if (settled) return;
      settled = true;
      this.#released = null;
      this.#batchOpen = false;
      done();
      release();
    };
    let tx: Transaction;
    try {
      tx = await (await this.#open()).transaction(mode);
    } catch (e) {
      settle();
      throw e;
    }
    // from here it holds the write lock, and moves on statement by statement
    this.#batchOpen = kind === "batch";
    /** Gives the event loop its turns once the work under way has held it for a slice. */
    const paced = async <T>(work: () => Promise<T>): Promise<T> => {
      await yieldWhenDue();
      return work();
    };
    const end = async (op: "commit" | "rollback") => {
      try {
        await (op === "commit" ? tx.commit() : tx.rollback());
      } finally {
        // Other connections' cached column lists follow by themselves: our client moves the
        // schema generation when this transaction changed the schema (`local-client.ts`).
        settle();
      }
    };
    return {
      execute: ((stmt: InStatement | string, args?: InArgs) =>
        paced(() =>
          typeof stmt === "string" ? tx.execute({ sql: stmt, args: args ?? [] }) : tx.execute(stmt),
        )) as Transaction["execute"],
      // one statement at a time, so a long batch still gives turns; a failure names its index
      // as the main connection's batch does (`local-client.ts`)
      async batch(stmts: InStatement[]) {
        const out = [];
        for (const [i, stmt] of stmts.entries()) {
          try {
            out.push(await paced(() => tx.execute(stmt)));
          } catch (e) {
            if (!(e instanceof LibsqlError) || e instanceof LibsqlBatchError) throw e;
            throw new LibsqlBatchError(e.message, i, e.code, e.extendedCode, e.rawCode, e);
          }
        }
        return out;
      },
      executeMultiple: (sql: string) => paced(() => tx.executeMultiple(sql)),
      commit: () => end("commit"),
      rollback: () => end("rollback"),
      close() {
        tx.close();
        settle();
      },
      get closed() {
        return tx.closed;
      },
    };
  }

  async close(): Promise<void> {
    this.#client?.close();
    this.#client = null;
    this.#opening = null;
  }
}
