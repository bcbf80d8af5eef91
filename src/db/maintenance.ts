/**
 * A connection of a local database file for maintenance writes (retention's DELETE batches,
 * issue 30 item 3). The main connection runs SQLite on the JavaScript thread, so a batch of
 * deletes with its index updates held every request and `/livez` for as long as it ran. Here the
 * statement runs through libSQL's asynchronous statements, which step SQLite on the driver's
 * native threads: the event loop goes on while a batch deletes, and waits for locks happen there
 * too. Opened on first use; one statement at a time; see docs/decisions/0101-prune-off-the-loop.md.
 */
import { LibsqlError, type InValue } from "@libsql/client";
import AsyncDatabase from "libsql/promise";
import { BACKSTOP_PAGES } from "./checkpointer";
import { cacheSizePragma, SERVICE_CACHE_KIB } from "./page-cache";

/** The parts of `libsql/promise` used here (its typings say `any`). */
interface NativeStatement {
  all(args: unknown[]): Promise<unknown[]>;
  get(args: unknown[]): unknown;
}
interface NativeDatabase {
  exec(sql: string): Promise<unknown>;
  prepare(sql: string): Promise<NativeStatement>;
  close(): void;
}

export class MaintenanceConnection {
  #db: Promise<NativeDatabase> | null = null;
  #changes: NativeStatement | null = null;
  #tail: Promise<unknown> = Promise.resolve();
  #closed = false;

  /** `committed` hears every statement that changed rows (the checkpointer's nudge). */
  constructor(
    private readonly path: string,
    private readonly busyTimeoutMs: number,
    private readonly committed?: () => void,
  ) {}

  /** Runs one write statement on the native thread; resolves with the rows it changed. */
  run(sql: string, args: InValue[]): Promise<number> {
    const next = this.#tail.then(() => this.#run(sql, args));
    this.#tail = next.catch(() => undefined);
    return next;
  }

  async #open(): Promise<NativeDatabase> {
    const db = new AsyncDatabase(this.path, {}) as unknown as NativeDatabase;
    // a lock another connection holds is waited for here, on the native thread
    await db.exec(`PRAGMA busy_timeout=${this.busyTimeoutMs}`);
    await db.exec(cacheSizePragma(SERVICE_CACHE_KIB));
    await db.exec("PRAGMA foreign_keys=ON");
    await db.exec(`PRAGMA wal_autocheckpoint=${BACKSTOP_PAGES}`);
    this.#changes = await db.prepare("SELECT changes() AS n");
    return db;
  }

  async #run(sql: string, args: InValue[]): Promise<number> {
    if (this.#closed) throw new LibsqlError("The client is closed", "CLIENT_CLOSED");
    // a failed open is tried again by the next statement
    this.#db ??= this.#open().catch((e) => {
      this.#db = null;
      throw e;
    });
    const db = await this.#db;
    // `all` steps the statement on a native thread, a statement without rows as well
    await (await db.prepare(sql)).all(args);
    // read at once on this connection, with nothing else run on it in between
    const changed = Number((this.#changes!.get([]) as { n: number }).n);
    if (changed > 0) this.committed?.();
    return changed;
  }

  /** Settles the running statement, then lets go of the connection. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#tail;
    if (this.#db) (await this.#db.catch(() => null))?.close();
    this.#db = null;
  }
}
