/**
 * Our own `@libsql/client`-compatible client over one `libsql` connection that we open (decision
 * 0102): what Drizzle's libSQL driver calls (execute, batch, migrate, transaction,
 * executeMultiple, close), with a prepared-statement cache of its own per connection. No
 * driver's prototype is patched and no SQL text is read to decide anything.
 */
import {
  LibsqlBatchError,
  LibsqlError,
  type Client,
  type InArgs,
  type InStatement,
  type ResultSet,
  type Transaction,
  type TransactionMode,
} from "@libsql/client";
import Database from "libsql";
import { isBusyError } from "./client";
import { haltBusyStatement, type NativeStatement } from "./driver-internals";
import { argsToSql, fromSql, rowMaker, SqlResultSet, toLibsqlError } from "./rows";
import { retryBusy } from "./serialize";
import { BACKSTOP_PAGES } from "./checkpointer";
import { cacheSizePragma } from "./page-cache";

/** The parts of a `libsql` connection used here. */
interface NativeDatabase {
  prepare(sql: string): NativeStatement;
  exec(sql: string): void;
  close(): void;
  readonly open: boolean;
  readonly inTransaction: boolean;
}

/** A cached statement and what the client would read off it on every call (read once). */
interface Cached {
  stmt: NativeStatement;
  /** Whether it returns rows (`raw()` refuses a statement that does not). */
  reader: boolean;
  columns: string[];
  columnTypes: string[];
  /** The schema generation `columns` were read under; -1 before the first run. */
  checked: number;
}

const MAX_STATEMENTS = 1000;

/**
 * The schema generation of one database's connections in this process (the main and background
 * connections, the read pool): moves whenever one of them sees SQLite's `schema_version` change
 * (after a transaction ends, a statement outside one that returns no rows, or a multi-statement
 * script), and again when a transaction that changed it ends. Cached column lists, here and in
 * the read pool (`read-pool.ts`), are read again after their next run once it moved. SQLite
 * itself prepares a statement again when it meets a new schema.
 */
export class SchemaGeneration {
  value = 0;
}

const BEGIN: Record<TransactionMode, string> = {
  write: "BEGIN IMMEDIATE",
  read: "BEGIN DEFERRED",
  deferred: "BEGIN DEFERRED",
};

/** One connection and its statements. */
class Connection {
  readonly #cache = new Map<string, Cached>();
  readonly #schemaVersion: NativeStatement;
  #schema: unknown;
  #changedInTransaction = false;

  constructor(
    readonly db: NativeDatabase,
    private readonly generation: SchemaGeneration,
  ) {
    this.#schemaVersion = db.prepare("PRAGMA schema_version").raw(true);
    this.#schema = this.#readSchema();
  }

  #readSchema(): unknown {
    return (this.#schemaVersion.all() as unknown[][])[0]?.[0];
  }

  /** Moves the generation when the schema this connection sees changed (see `generation`). */
  noteSchema(): void {
    const now = this.#readSchema();
    if (now === this.#schema) return;
    this.#schema = now;
    this.generation.value++;
    if (this.db.inTransaction) this.#changedInTransaction = true;
  }

  /** After COMMIT or ROLLBACK: other connections now see (or no longer see) its schema change. */
  settled(): void {
    this.noteSchema();
    if (this.#changedInTransaction) {
      this.#changedInTransaction = false;
      this.generation.value++;
    }
  }

  #prepared(sql: string): Cached {
    const hit = this.#cache.get(sql);
    if (hit) return hit;
    let stmt: NativeStatement;
    try {
      stmt = this.db.prepare(sql);
    } catch (e) {
      throw toLibsqlError(e);
    }
    stmt.safeIntegers(true);
    let reader = true;
    try {
      stmt.raw(true);
    } catch {
      reader = false;
    }
    const entry: Cached = { stmt, reader, columns: [], columnTypes: [], checked: -1 };
    if (this.#cache.size >= MAX_STATEMENTS) this.#cache.delete(this.#cache.keys().next().value!);
    this.#cache.set(sql, entry);
    return entry;
  }

  /** Runs one statement; a statement refused as busy is halted, never left in progress. */
  run(sql: string, args: InArgs | undefined): ResultSet {
    const entry = this.#prepared(sql);
    const bound = argsToSql(args, "number");
    const gen = this.generation.value;
    try {
      if (!entry.reader) {
        const info = entry.stmt.run(bound);
        if (!this.db.inTransaction) this.noteSchema();
        return new SqlResultSet([], [], [], info.changes, BigInt(info.lastInsertRowid));
      }
      const raw = entry.stmt.all(bound) as unknown[][];
      // Read after a run: SQLite has prepared the statement again by then if the schema moved.
      if (entry.checked !== gen || (raw.length > 0 && raw[0]!.length !== entry.columns.length)) {
        const columns = entry.stmt.columns();
        entry.columns = columns.map((c) => c.name);
        entry.columnTypes = columns.map((c) => c.type ?? "");
        entry.checked = gen;
      }
      const make = rowMaker(entry.columns);
      const rows = new Array(raw.length);
      for (let i = 0; i < raw.length; i++) rows[i] = make(fromSql(raw[i]!, "number"));
      return new SqlResultSet(entry.columns, entry.columnTypes, rows, 0, undefined);
    } catch (e) {
      if (isBusyError(e)) haltBusyStatement(this.db, entry.stmt, bound);
      throw toLibsqlError(e);
    }
  }

  /**
   * Runs `sql` through SQLite's own runner, which finalizes its statement whatever happens: our
   * transaction control goes here, so a BEGIN IMMEDIATE refused as busy leaves nothing behind.
   */
  exec(sql: string): void {
    try {
      this.db.exec(sql);
    } catch (e) {
      throw toLibsqlError(e);
    }
  }

  /** A caller's script of statements (DDL in groups, migrations): it may change the schema. */
  script(sql: string): void {
    try {
      this.exec(sql);
    } finally {
      if (this.db.open) this.noteSchema();
    }
  }

  /** Closes the connection; its statements are finalized as they are collected. */
  close(): void {
    this.rollbackQuietly();
    this.#cache.clear();
    if (this.db.open) this.db.close();
  }

  /** Rolls back whatever is open, quietly (the connection may be closed already). */
  rollbackQuietly(): void {
    try {
      if (this.db.open && this.db.inTransaction) this.db.exec("ROLLBACK");
    } catch {
      // nothing more to undo
    }
  }

  /** Runs `stmts` in order inside the open transaction; a failure names its index. */
  runAll(stmts: Array<InStatement | [string, InArgs?]>): ResultSet[] {
    const results: ResultSet[] = [];
    for (let i = 0; i < stmts.length; i++) {
      const { sql, args } = normalize(stmts[i]!);
      try {
        if (!this.db.inTransaction)
          throw new LibsqlError("The transaction has been rolled back", "TRANSACTION_CLOSED");
        results.push(this.run(sql, args));
      } catch (e) {
        if (!(e instanceof LibsqlError) || e instanceof LibsqlBatchError) throw e;
        throw new LibsqlBatchError(e.message, i, e.code, e.extendedCode, e.rawCode, e);
      }
    }
    return results;
  }
}

const normalize = (stmt: InStatement | [string, InArgs?] | string, args?: InArgs) =>
  typeof stmt === "string"
    ? { sql: stmt, args }
    : Array.isArray(stmt)
      ? { sql: stmt[0], args: stmt[1] }
      : { sql: stmt.sql, args: stmt.args };

/** An open transaction: it owns the connection until it commits, rolls back or closes. */
class LocalTransaction implements Transaction {
  #conn: Connection | null;
  constructor(
    conn: Connection,
    private readonly done: () => void,
  ) {
    this.#conn = conn;
  }

  #live(): Connection {
    if (this.closed) throw new LibsqlError("The transaction is closed", "TRANSACTION_CLOSED");
    return this.#conn!;
  }

  #settle(conn: Connection) {
    if (this.#conn !== conn) return;
    this.#conn = null;
    conn.rollbackQuietly();
    conn.settled();
    this.done();
  }

  async execute(stmt: InStatement | string, args?: InArgs): Promise<ResultSet> {
    const { sql, args: values } = normalize(stmt, args);
    return this.#live().run(sql, values);
  }

  async batch(stmts: InStatement[]): Promise<ResultSet[]> {
    return this.#live().runAll(stmts);
  }

  async executeMultiple(sql: string): Promise<void> {
    this.#live().script(sql);
  }

  async commit(): Promise<void> {
    const conn = this.#conn;
    try {
      this.#live().exec("COMMIT");
    } finally {
      // settled whatever happened (a statement's failure may have rolled it back already)
      if (conn) this.#settle(conn);
    }
  }

  async rollback(): Promise<void> {
    if (this.#conn) this.#settle(this.#conn);
  }

  close(): void {
    if (this.#conn) this.#settle(this.#conn);
  }

  get closed(): boolean {
    const conn = this.#conn;
    return conn === null || !conn.db.open || !conn.db.inTransaction;
  }
}

/**
 * The client over one connection. Callers queue on it (`serialize.ts` does): while a
 * transaction holds the connection, other calls are refused with TRANSACTION_ACTIVE, as the
 * upstream client refuses them on its single connection.
 */
export class LocalClient implements Client {
  closed = false;
  readonly protocol = "file";
  /** Null once closed: the connection's statements go with it, so the file is let go of. */
  #conn: Connection | null;
  #transactionOpen = false;

  /** `generation` is shared by the connections of one database (`local.ts`). */
  constructor(path: string, generation = new SchemaGeneration()) {
    let db: NativeDatabase;
    try {
      db = new Database(path) as unknown as NativeDatabase;
    } catch (e) {
      throw toLibsqlError(e);
    }
    try {
      // reads the schema version: a file that is no database fails here, at once
      this.#conn = new Connection(db, generation);
    } catch (e) {
      db.close();
      throw toLibsqlError(e);
    }
  }

  #ready(): Connection {
    if (this.closed || !this.#conn) throw new LibsqlError("The client is closed", "CLIENT_CLOSED");
    if (this.#transactionOpen)
      throw new LibsqlError(
        "This client's single connection is held by an open transaction.",
        "TRANSACTION_ACTIVE",
      );
    return this.#conn;
  }

  async execute(stmt: InStatement | string, args?: InArgs): Promise<ResultSet> {
    const { sql, args: values } = normalize(stmt, args);
    return this.#ready().run(sql, values);
  }

  async batch(
    stmts: Array<InStatement | [string, InArgs?]>,
    mode: TransactionMode = "deferred",
  ): Promise<ResultSet[]> {
    const conn = this.#ready();
    conn.exec(BEGIN[mode]);
    try {
      const results = conn.runAll(stmts);
      conn.exec("COMMIT");
      return results;
    } finally {
      conn.rollbackQuietly();
      conn.settled();
    }
  }

  /** Drizzle's migrator: the statements in one transaction with foreign keys off. */
  async migrate(stmts: InStatement[]): Promise<ResultSet[]> {
    const conn = this.#ready();
    conn.exec("PRAGMA foreign_keys=off");
    try {
      return await this.batch(stmts, "deferred");
    } finally {
      conn.exec("PRAGMA foreign_keys=on");
    }
  }

  async transaction(mode: TransactionMode = "write"): Promise<Transaction> {
    const conn = this.#ready();
    conn.exec(BEGIN[mode]);
    this.#transactionOpen = true;
    return new LocalTransaction(conn, () => {
      this.#transactionOpen = false;
    });
  }

  async executeMultiple(sql: string): Promise<void> {
    this.#ready().script(sql);
  }

  async sync(): Promise<never> {
    throw new LibsqlError("A local file has no remote to sync with.", "SYNC_NOT_SUPPORTED");
  }

  /** One connection for the client's life: nothing to reconnect. */
  reconnect(): void {}

  close(): void {
    this.closed = true;
    const conn = this.#conn;
    this.#conn = null;
    conn?.close();
  }
}

/**
 * A file connection as every connection of ours is set up (the main one and the long-write one):
 * WAL, synchronous=NORMAL, SQLite's own checkpoints only as a backstop (they run on a connection
 * of their own, off the event loop: `checkpointer.ts`), foreign keys on, and busy timeout 0: the
 * driver is synchronous and SQLite's own busy wait would hold the event loop, so a busy statement
 * fails at once and `serialize.ts` retries it asynchronously within the bound.
 *
 * Opening reads the schema, and another process holding the file's lock (a server still letting
 * go of it as the next one starts, a tool's write) refuses that with SQLITE_BUSY at once. The
 * open is tried again, waiting between attempts without holding the event loop, for at most
 * `busyTimeoutMs`; then it fails with `DatabaseBusyError`.
 */
export function openFileClient(
  path: string,
  generation: SchemaGeneration,
  cacheKib: number,
  busyTimeoutMs: number,
): Promise<LocalClient> {
  return retryBusy({ busyTimeoutMs }, async () => {
    const client = new LocalClient(path, generation);
    try {
      await client.execute(cacheSizePragma(cacheKib));
      await client.execute("PRAGMA journal_mode=WAL");
      await client.execute("PRAGMA synchronous=NORMAL");
      await client.execute(`PRAGMA wal_autocheckpoint=${BACKSTOP_PAGES}`);
      await client.execute("PRAGMA busy_timeout=0");
      await client.execute("PRAGMA foreign_keys=ON");
    } catch (e) {
      client.close();
      throw e;
    }
    return client;
  });
}
