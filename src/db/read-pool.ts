/**
 * The read pool of a local database file (decisions 0057, 0060): reads that run outside a
 * transaction go to a few extra read-only connections driven through libSQL's asynchronous
 * statements (`libsql/promise`), which step SQLite on the driver's own native threads. A slow
 * read no longer holds the event loop, and no read waits for the main connection, which an open
 * write transaction holds across awaits. Writes and everything inside a transaction stay on the
 * main connection. In WAL mode each read is a read transaction of its own and sees every commit
 * that finished before it was sent.
 *
 * The answers are built into the `ResultSet` the local client gives (array-like rows with a
 * property per column name, the first of duplicate names winning; integers per `intMode`,
 * ArrayBuffer and null values as the client gives them), and errors into a `LibsqlError` with the
 * same code fields, so Drizzle and the busy/constraint mapping cannot tell the difference.
 *
 * The first version ran each connection in a Bun `Worker`; a JavaScript thread under load held
 * 50–60 MB more resident memory per thread, which is why these are native (decision 0060).
 */
import {
  LibsqlError,
  type InArgs,
  type InStatement,
  type IntMode,
  type ResultSet,
  type Row,
} from "@libsql/client";
import AsyncDatabase from "libsql/promise";
import { settledWithin } from "./bounded-wait";
import type { RawRows } from "./client";
import { argsToSql, fromSql, rowMaker, SqlResultSet, toLibsqlError } from "./rows";
import type { SchemaGeneration } from "./local-client";
import { cacheSizePragma } from "./page-cache";

export interface ReadPoolOptions {
  /** The database's `file:` URL, as the main connection opened it. */
  url: string;
  size: number;
  intMode?: IntMode;
  /** How long a pooled read waits inside SQLite for a lock (on a native thread: no event loop waits). */
  busyTimeoutMs: number;
  /** The database's schema generation, moved by its writing connections (`local-client.ts`). */
  schema?: SchemaGeneration;
  /** Each connection's page cache, in KiB (its share of the file's budget, `page-cache.ts`). */
  cacheKib?: number;
}

/** The parts of `libsql/promise` used here (its typings say `any`). */
interface NativeStatement {
  raw(on?: boolean): NativeStatement;
  safeIntegers(on?: boolean): NativeStatement;
  columns(): Array<{ name: string; type: string | null }>;
  all(args: unknown): Promise<unknown[][]>;
  run(args: unknown): { changes: number; lastInsertRowid: number | bigint };
}
interface NativeDatabase {
  prepare(sql: string): Promise<NativeStatement>;
  exec(sql: string): Promise<unknown>;
  close(): void;
}

/** A prepared statement and what the client would read off it on every call (read once). */
interface Prepared {
  /** The statement to run for its values: materialized when it can be (see `materialized`). */
  stmt: NativeStatement;
  reader: boolean;
  columns: string[];
  columnTypes: string[];
  /** The schema generation `columns` were read under; -1 before the first run. */
  checked: number;
  /** The statement as sent, when `stmt` is its materialized form: kept, never collected early (see `#prepared`). */
  plain?: NativeStatement;
}

const MAX_STATEMENTS = 500;
/** The longest an answer is held back for the ones behind it (see `Slot.#hold`). */
const HOLD_MS = 1;

/** Whether a row holds a number beyond 2^53 with no fraction: an integer the driver may have rounded. */
function mayBeRounded(rows: unknown[][]): boolean {
  for (const values of rows)
    for (const v of values)
      if (typeof v === "number" && Number.isInteger(v) && !Number.isSafeInteger(v)) return true;
  return false;
}

/**
 * The statement with its whole result computed in its first step. The driver runs only that
 * first step on its own thread; every later row is stepped on the event loop, so a read whose
 * rows come slowly (a scan that finds a match now and then, a long export) would still hold the
 * loop. A `MATERIALIZED` common table expression is filled completely when first read, and the
 * outer `SELECT *` then only copies its rows out, in the order they went in (SQLite keeps a
 * subquery's ORDER BY when it is the outer query's only source and the outer query has none).
 * Only for column lists without repeats (a subquery renames repeated names), and null when the
 * wrapped form does not prepare (a trailing `;` or comment): then the statement runs as it is.
 */
async function materialized(db: NativeDatabase, sql: string): Promise<NativeStatement | null> {
  try {
    const stmt = await db.prepare(
      `WITH "__materialized" AS MATERIALIZED (\n${sql}\n) SELECT * FROM "__materialized"`,
    );
    return stmt.raw(true);
  } catch {
    return null;
  }
}

const closedError = () => new LibsqlError("The client is closed", "CLIENT_CLOSED");

/** One read-only connection; it runs one statement at a time, in the order they were sent. */
class Slot {
  /** Reads sent and not answered yet. */
  pending = 0;
  readonly ready: Promise<void>;
  #db: NativeDatabase | null = null;
  #tail: Promise<unknown> = Promise.resolve();
  #cache = new Map<string, Prepared>();
  #closed = false;

  constructor(private readonly options: ReadPoolOptions) {
    this.ready = this.#open();
    this.ready.catch(() => undefined);
  }

  async #open() {
    const path = this.options.url.replace(/^file:(\/\/)?/, "").split("?")[0]!;
    const db = new AsyncDatabase(path, {}) as unknown as NativeDatabase;
    try {
      await db.exec("PRAGMA query_only=1");
      await db.exec(`PRAGMA busy_timeout=${this.options.busyTimeoutMs}`);
      if (this.options.cacheKib) await db.exec(cacheSizePragma(this.options.cacheKib));
    } catch (e) {
      db.close();
      throw toLibsqlError(e);
    }
    if (this.#closed) db.close();
    else this.#db = db;
  }

  /** Queues a read behind this connection's earlier ones. */
  execute(sql: string, args: InArgs | undefined): Promise<ResultSet>;
  execute(sql: string, args: InArgs | undefined, raw: true): Promise<RawRows>;
  execute(sql: string, args: InArgs | undefined, raw = false): Promise<ResultSet | RawRows> {
    // an idle connection's read starts now, as far as choosing a connection goes (its statement
    // begins a microtask later: until then an earlier statement's start would say "long running")
    if (this.pending === 0) this.#startedAt = performance.now();
    this.pending++;
    const run = this.#tail.then(() => this.#run(sql, args, raw));
    this.#tail = run.catch(() => undefined);
    return new Promise<ResultSet | RawRows>((resolve, reject) => {
      run.then(
        (rs) => this.#hold(() => resolve(rs)),
        (e) => this.#hold(() => reject(e)),
      );
    }).finally(() => this.pending--);
  }

  #held: Array<() => void> = [];
  #heldSince = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;

  /**
   * Answers while more reads wait behind them are held back a moment (at most `HOLD_MS`) and
   * handed over together: requests whose reads come back together go on together, which lets
   * concurrent creates meet in one group commit (decision 0053) instead of each finding the
   * writer idle and committing alone.
   */
  #hold(settle: () => void) {
    this.#held.push(settle);
    if (this.#held.length === 1) this.#heldSince = performance.now();
    // reads sent and neither answered nor held: they run behind this one
    if (this.pending > this.#held.length && performance.now() - this.#heldSince < HOLD_MS) {
      this.#timer ??= setTimeout(this.#release, HOLD_MS);
      return;
    }
    this.#release();
  }

  #release = () => {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const held = this.#held;
    this.#held = [];
    for (const settle of held) settle();
  };

  #startedAt = 0;
  /** How long the statement under way has run (ms); 0 when idle. */
  runningSince(now: number): number {
    return this.pending === 0 ? 0 : now - this.#startedAt;
  }

  async #run(
    sql: string,
    args: InArgs | undefined,
    asArrays: boolean,
  ): Promise<ResultSet | RawRows> {
    this.#startedAt = performance.now();
    await this.ready;
    const db = this.#db;
    if (!db || this.#closed) throw closedError();
    const intMode = this.options.intMode ?? "number";
    const bound = argsToSql(args, intMode);
    const p = await this.#prepared(db, sql);
    const generation = this.options.schema?.value ?? 0;
    try {
      if (!p.reader) {
        const info = p.stmt.run(bound);
        return new SqlResultSet([], [], [], info.changes, BigInt(info.lastInsertRowid));
      }
      let raw = await p.stmt.all(bound);
      // In the number mode integers come as numbers straight from the driver (a BigInt each,
      // converted back, was ~8 % of handing a page over). A number past 2^53 may be an integer
      // the driver rounded, or a real: the read runs again with exact integers, and `fromSql`
      // decides as the client does.
      if (intMode === "number" && mayBeRounded(raw)) {
        p.stmt.safeIntegers(true);
        try {
          raw = await p.stmt.all(bound);
        } finally {
          p.stmt.safeIntegers(false);
        }
      }
      if (p.checked !== generation) {
        // SQLite prepares a statement again when it meets a changed schema as it runs, so its
        // columns are read after a run the first time, and again after any schema change.
        const cols = p.stmt.columns();
        p.columns = cols.map((c) => c.name);
        p.columnTypes = cols.map((c) => c.type ?? "");
        p.checked = generation;
      }
      if (asArrays) {
        for (const values of raw) fromSql(values, intMode);
        return { columns: p.columns, rows: raw };
      }
      const make = rowMaker(p.columns);
      const rows = new Array<Row>(raw.length);
      for (let i = 0; i < raw.length; i++) rows[i] = make(fromSql(raw[i]!, intMode));
      return new SqlResultSet(p.columns, p.columnTypes, rows, 0, undefined);
    } catch (e) {
      throw toLibsqlError(e);
    }
  }

  /**
   * A cached statement. Its column list is memoised (reading it costs ~35 µs), and refreshed
   * after the first run following a schema change by any connection of the process (the
   * shared generation, see `#run`). The statements stay cached across schema changes: SQLite
   * prepares them again itself, so a cached read costs one round trip to the driver's thread
   * even while a long write changes the schema statement after statement.
   */
  async #prepared(db: NativeDatabase, sql: string): Promise<Prepared> {
    const hit = this.#cache.get(sql);
    if (hit) return hit;
    // One after the other: two operations in flight on one connection left the driver stepping
    // a later long statement in a way that held the other connections' reads until it ended
    // (measured: a point read on another connection waited 250-300 ms behind each new slow read).
    let stmt: NativeStatement;
    try {
      stmt = await db.prepare(sql);
    } catch (e) {
      throw toLibsqlError(e);
    }
    const plain = stmt;
    const wrapped = await materialized(db, sql);
    let reader = true;
    try {
      stmt.raw(true);
    } catch {
      reader = false; // raw() refuses a statement that returns no data
    }
    // Repeated names rule out the materialized form (a subquery renames them). This connection
    // may not have seen the newest schema yet; the run refreshes the columns (`checked`).
    const columns = reader ? stmt.columns().map((c) => c.name) : [];
    if (reader && columns.length && new Set(columns).size === columns.length && wrapped)
      stmt = wrapped;
    // exact integers (BigInt) unless the client's mode is numbers (see `#run`)
    stmt.safeIntegers((this.options.intMode ?? "number") !== "number");
    // A native statement collected by the GC is finalized on the event loop, and finalizing takes
    // its connection's lock: if that connection is running a long read at the time, the whole
    // event loop waits for it (measured: 250-300 ms, once per new slow statement, before the plain
    // form was kept). So the plain form lives as long as the cache entry.
    const p: Prepared = {
      stmt,
      reader,
      columns: [],
      columnTypes: [],
      checked: -1,
      plain: stmt === plain ? undefined : plain,
    };
    if (this.#cache.size >= MAX_STATEMENTS) this.#cache.delete(this.#cache.keys().next().value!);
    this.#cache.set(sql, p);
    return p;
  }

  /** Waits for the reads already sent (at most `ms`), then closes the connection. */
  async stop(ms: number) {
    this.#closed = true;
    await settledWithin(this.#tail, ms);
    this.#release();
    await this.ready.catch(() => undefined);
    this.#cache.clear();
    this.#db?.close();
    this.#db = null;
  }
}

export class ReadPool {
  #slots: Slot[];
  #closed = false;

  constructor(options: ReadPoolOptions) {
    this.#slots = Array.from({ length: options.size }, () => new Slot(options));
  }

  /** Resolves once every connection is open; rejects with the first failure. */
  async ready(): Promise<void> {
    await Promise.all(this.#slots.map((s) => s.ready));
  }

  /** Reads in flight per connection (for tests and benches). */
  get load(): number[] {
    return this.#slots.map((s) => s.pending);
  }

  /** Runs a read on the least busy connection. */
  execute(stmt: InStatement | string, args?: InArgs): Promise<ResultSet> {
    if (this.#closed) return Promise.reject(closedError());
    const sql = typeof stmt === "string" ? stmt : stmt.sql;
    const bound = typeof stmt === "string" ? args : stmt.args;
    return this.#take().execute(sql, bound);
  }

  /** The same read, its rows as plain arrays of values (no Row objects to build and read back). */
  executeRaw(sql: string, args: InArgs): Promise<RawRows> {
    if (this.#closed) return Promise.reject(closedError());
    return this.#take().execute(sql, args, true);
  }

  /** An idle connection (the first one first, so a lone caller keeps one warm cache), else the least busy. */
  #take(): Slot {
    let best = this.#slots[0]!;
    const now = performance.now();
    for (const s of this.#slots) {
      if (s.pending === 0) return s;
      // of equally busy connections, the one whose statement started last: one running for a
      // while is likely a long scan, and a read queued behind it waits for all of it
      if (
        s.pending < best.pending ||
        (s.pending === best.pending && s.runningSince(now) < best.runningSince(now))
      )
        best = s;
    }
    return best;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all(this.#slots.map((s) => s.stop(1000)));
  }
}
