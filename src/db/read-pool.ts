/**
 * The read pool of a local database file (decision 0057): reads that run outside a transaction
 * go to a few worker threads (`read-worker.ts`), each with its own read-only connection, so a
 * slow read no longer holds the event loop, and no read waits for the main connection, which an
 * open write transaction holds across awaits. Writes and everything inside a transaction stay on
 * the main connection. In WAL mode each read is a read transaction of its own and sees every
 * commit that finished before it was sent.
 *
 * The answers are built back into the `ResultSet` the local client gives (array-like rows with a
 * property per column name, the first of duplicate names winning; bigint, ArrayBuffer and null
 * values as they are), and errors into a `LibsqlError` with the same code fields, so Drizzle and
 * the busy/constraint mapping cannot tell the difference.
 */
import { rowMaker } from "./rows";
import { LibsqlError, type InArgs, type InStatement, type IntMode, type ResultSet, type Row } from "@libsql/client";
import { statementCacheGeneration } from "./statement-cache";

export interface ReadPoolOptions {
  /** The database's `file:` URL, as the main connection opened it. */
  url: string;
  size: number;
  intMode?: IntMode;
  /** How long a worker's read waits inside SQLite for a lock (it holds no event loop). */
  busyTimeoutMs: number;
}

/** An error as the worker sends it (`toWire` in read-worker.ts). */
interface WireError {
  name: string;
  message: string;
  libsql: boolean;
  code?: string;
  extendedCode?: string;
  rawCode?: number;
  cause?: WireError;
}

interface Answer {
  id: number;
  error?: WireError;
  columns: string[];
  columnTypes: string[];
  rows: unknown[][];
  rowsAffected: number;
  lastInsertRowid: bigint | undefined;
}

/** Bun's Worker (the DOM typings the project also loads lack `ref`/`unref`). */
type BunWorker = Worker & { ref(): void; unref(): void };

interface Pending {
  resolve(rs: ResultSet): void;
  reject(e: unknown): void;
}

/** The same error class and fields as the local client's (its `message` carries no second prefix). */
function fromWire(w: WireError): Error {
  const cause = w.cause ? fromWire(w.cause) : undefined;
  let err: Error & Record<string, unknown>;
  if (w.libsql) {
    err = new LibsqlError(w.message, w.code ?? "UNKNOWN", w.extendedCode, w.rawCode, cause) as unknown as Error & Record<string, unknown>;
  } else {
    const Ctor = w.name === "RangeError" ? RangeError : w.name === "TypeError" ? TypeError : Error;
    err = new Ctor(w.message, cause ? { cause } : undefined) as Error & Record<string, unknown>;
    err.name = w.name;
    for (const key of ["code", "extendedCode", "rawCode"] as const) if (w[key] !== undefined) err[key] = w[key];
  }
  err.message = w.message;
  return err;
}

const toJsonValue = (v: unknown) => (typeof v === "bigint" ? "" + v : v instanceof ArrayBuffer ? Buffer.from(v).toString("base64") : v);

/** `ResultSet` with the same fields and `toJSON` as the client's own. */
class PooledResultSet implements ResultSet {
  constructor(
    readonly columns: string[],
    readonly columnTypes: string[],
    readonly rows: Row[],
    readonly rowsAffected: number,
    readonly lastInsertRowid: bigint | undefined,
  ) {}
  toJSON() {
    return {
      columns: this.columns,
      columnTypes: this.columnTypes,
      rows: this.rows.map((row) => Array.prototype.map.call(row, toJsonValue)),
      rowsAffected: this.rowsAffected,
      lastInsertRowid: this.lastInsertRowid !== undefined ? "" + this.lastInsertRowid : null,
    };
  }
}

/** One worker thread and the reads it has not answered yet. */
class Slot {
  readonly pending = new Map<number, Pending>();
  readonly worker: BunWorker;
  /** Settles when the worker has opened its connection (rejects if it could not). */
  readonly ready: Promise<void>;
  dead = false;

  constructor(
    options: ReadPoolOptions,
    private readonly onDeath: (slot: Slot) => void,
  ) {
    this.worker = new Worker(new URL("./read-worker.ts", import.meta.url).href) as BunWorker;
    // An idle worker must not keep the process alive; one with a read under way does (see take()).
    this.worker.unref();
    let opened!: () => void;
    let failed!: (e: unknown) => void;
    this.ready = new Promise<void>((res, rej) => ((opened = res), (failed = rej)));
    this.ready.catch(() => undefined);
    this.worker.onmessage = (event: MessageEvent) => {
      const msg = event.data as Answer & { type?: string };
      if (Array.isArray(msg)) {
        for (const answer of msg as Answer[]) this.settle(answer);
        return;
      }
      if (msg.type === "ready") return opened();
      if (msg.type === "failed") {
        const e = fromWire(msg.error!);
        failed(e);
        return this.die(e);
      }
    };
    this.worker.onerror = (event: ErrorEvent) => this.die(new Error(`read pool worker failed: ${event.message}`));
    this.worker.addEventListener("close", () => this.die(new LibsqlError("The read pool's worker ended", "CLIENT_CLOSED")));
    this.worker.postMessage({ type: "open", url: options.url, intMode: options.intMode, busyTimeoutMs: options.busyTimeoutMs, generation: statementCacheGeneration() });
  }

  /**
   * Queues a read; the reads of one turn go in one message (a message costs tens of µs each
   * way, and answers that come back together let their requests go on together).
   */
  send(id: number, sql: string, args: InArgs | undefined, pending: Pending) {
    if (this.pending.size === 0) this.worker.ref();
    this.pending.set(id, pending);
    this.#outbox.push({ id, sql, args });
    if (this.#outbox.length === 1) queueMicrotask(this.#flush);
  }

  #outbox: Array<{ id: number; sql: string; args: InArgs | undefined }> = [];
  #flush = () => {
    const batch = this.#outbox;
    this.#outbox = [];
    if (!this.dead && batch.length) this.worker.postMessage(batch);
  };

  settle(msg: Answer) {
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (this.pending.size === 0) this.worker.unref();
    if (msg.error) return p.reject(fromWire(msg.error));
    const columns = msg.columns;
    const rows = new Array<Row>(msg.rows.length);
    const make = rowMaker(columns);
    for (let i = 0; i < rows.length; i++) rows[i] = make(msg.rows[i]!);
    p.resolve(new PooledResultSet(columns, msg.columnTypes, rows, msg.rowsAffected, msg.lastInsertRowid));
  }

  /** The worker is gone or unusable: its reads fail, and the pool replaces it on next use. */
  die(e: unknown) {
    if (this.dead) return;
    this.dead = true;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
    this.worker.terminate();
    this.onDeath(this);
  }

  /** Asks the worker to close its connection and end; terminates it if it has not within `ms`. */
  async stop(ms: number) {
    this.dead = true;
    for (const p of this.pending.values()) p.reject(new LibsqlError("The client is closed", "CLIENT_CLOSED"));
    this.pending.clear();
    const ended = new Promise<void>((r) => this.worker.addEventListener("close", () => r(), { once: true }));
    this.worker.postMessage({ type: "close" });
    await Promise.race([ended, Bun.sleep(ms)]);
    this.worker.terminate();
  }
}

export class ReadPool {
  #slots: Array<Slot | null>;
  #nextId = 1;
  #closed = false;

  constructor(private readonly options: ReadPoolOptions) {
    this.#slots = Array.from({ length: options.size }, () => null);
    for (let i = 0; i < options.size; i++) this.#slots[i] = this.#spawn(i);
  }

  #spawn(i: number): Slot {
    return new Slot(this.options, (slot) => {
      if (this.#slots[i] === slot) this.#slots[i] = null;
    });
  }

  /** Resolves once every worker has its connection open; rejects with the first failure. */
  async ready(): Promise<void> {
    await Promise.all(this.#slots.map((s) => s?.ready));
  }

  /** Reads in flight per worker (for tests and benches). */
  get load(): number[] {
    return this.#slots.map((s) => s?.pending.size ?? 0);
  }

  /** Runs a read on the least busy worker. */
  execute(stmt: InStatement | string, args?: InArgs): Promise<ResultSet> {
    if (this.#closed) return Promise.reject(new LibsqlError("The client is closed", "CLIENT_CLOSED"));
    const sql = typeof stmt === "string" ? stmt : stmt.sql;
    const bound = typeof stmt === "string" ? args : stmt.args;
    const slot = this.#take();
    const id = this.#nextId++;
    return new Promise<ResultSet>((resolve, reject) => slot.send(id, sql, bound, { resolve, reject }));
  }

  /** An idle worker (the first one first, so a lone caller keeps one warm cache), else the least busy. */
  #take(): Slot {
    let best: Slot | null = null;
    let empty = -1;
    for (let i = 0; i < this.#slots.length; i++) {
      const s = this.#slots[i];
      if (!s) {
        if (empty < 0) empty = i;
      } else if (s.pending.size === 0) {
        return s;
      } else if (!best || s.pending.size < best.pending.size) {
        best = s;
      }
    }
    if (empty >= 0) return (this.#slots[empty] = this.#spawn(empty));
    return best!;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const slots = this.#slots.filter((s): s is Slot => s !== null);
    this.#slots = this.#slots.map(() => null);
    await Promise.all(slots.map((s) => s.stop(1000)));
  }
}
