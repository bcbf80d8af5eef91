/**
 * WAL checkpoints off the event loop. SQLite copies the WAL back into the database file when a
 * commit leaves more than `wal_autocheckpoint` pages in it, inside that COMMIT; the local driver
 * runs COMMIT on the event loop, so every few megabytes written one request held the whole server
 * while pages were copied (65 ms measured after a 1,000-object bulk create). Here the connections
 * that write checkpoint only as a backstop (`BACKSTOP_PAGES`), and a connection of their own runs
 * PASSIVE checkpoints on the driver's native threads once `THRESHOLD_PAGES` are waiting: a
 * PASSIVE checkpoint takes no lock a reader or writer waits for. See
 * docs/decisions/0061-background-checkpoints.md.
 */
import AsyncDatabase from "libsql/promise";
import { endianness } from "node:os";
import { walIndexReader } from "./change-stamp";
import { cacheSizePragma, SERVICE_CACHE_KIB } from "./page-cache";

/** Pages waiting in the WAL after which a checkpoint starts (SQLite's own default for autocheckpoint). */
export const THRESHOLD_PAGES = 1000;
/**
 * Fewer pages wait after a burst of writes, or behind a checkpoint that ran while writes went on:
 * they are copied back this long after the last commit or checkpoint. SQLite starts the WAL over
 * only once every frame is copied back, so without this the WAL would grow to the backstop.
 */
const TRAILING_MS = 200;
/** The writing connections' `wal_autocheckpoint`: in case this connection cannot keep up or fails. */
export const BACKSTOP_PAGES = 8 * THRESHOLD_PAGES;

/**
 * From the WAL-index (`<file>-shm`, walformat.html): `mxFrame`, the last valid frame, at byte 16
 * of the header, and `nBackfill`, the frames already copied back, at byte 96 (after the header's
 * two copies). Both are in the machine's byte order.
 */
const MX_FRAME = 16;
const N_BACKFILL = 96;
const LITTLE_ENDIAN = endianness() === "LE";

interface NativeDatabase {
  exec(sql: string): Promise<unknown>;
  close(): void;
}

export class Checkpointer {
  #db: Promise<NativeDatabase> | null = null;
  #running: Promise<void> | null = null;
  #closed = false;
  #trailing: ReturnType<typeof setTimeout> | null = null;
  readonly #index: ReturnType<typeof walIndexReader>;
  readonly #path: string;
  /** Checkpoints run, and the last one's failure (the writers' backstop then takes over). */
  runs = 0;
  lastError: unknown = null;

  /** `onResult` hears each checkpoint's outcome (null: it succeeded), for the health check. */
  constructor(
    path: string,
    private readonly onResult?: (error: unknown) => void,
  ) {
    this.#path = path;
    this.#index = walIndexReader(path, N_BACKFILL + 4);
  }

  /** Frames in the WAL not yet copied back, from the WAL-index; null when it cannot be read. */
  waitingPages(): number | null {
    const buf = this.#index();
    if (!buf) return null;
    const read = (at: number) => (LITTLE_ENDIAN ? buf.readUInt32LE(at) : buf.readUInt32BE(at));
    return Math.max(0, read(MX_FRAME) - read(N_BACKFILL));
  }

  /**
   * After a commit: starts a checkpoint when enough pages wait and none is running, else makes
   * sure the pages that wait are copied back shortly. Cheap otherwise (one small read). Never
   * throws: the commit it follows has happened.
   */
  nudge(): void {
    if (this.#closed || this.#running) return;
    const waiting = this.waitingPages();
    if (waiting === null || waiting === 0) return;
    if (waiting >= THRESHOLD_PAGES) this.#start();
    else this.#later();
  }

  #start() {
    if (this.#trailing) clearTimeout(this.#trailing);
    this.#trailing = null;
    this.#running = this.#run().finally(() => {
      this.#running = null;
      // what was written meanwhile, or what readers kept from being copied
      if (!this.#closed && (this.waitingPages() ?? 0) > 0) this.#later();
    });
  }

  #later() {
    if (this.#trailing || this.#closed) return;
    this.#trailing = setTimeout(() => {
      this.#trailing = null;
      if (!this.#closed && !this.#running && (this.waitingPages() ?? 0) > 0) this.#start();
    }, TRAILING_MS);
    this.#trailing.unref?.();
  }

  async #run() {
    try {
      this.#db ??= (async () => {
        const db = new AsyncDatabase(this.#path, {}) as unknown as NativeDatabase;
        // never waits on the event loop's behalf: a PASSIVE checkpoint skips what is locked
        await db.exec("PRAGMA busy_timeout=0");
        await db.exec(cacheSizePragma(SERVICE_CACHE_KIB));
        return db;
      })();
      const db = await this.#db;
      if (this.#closed) return;
      await db.exec("PRAGMA wal_checkpoint(PASSIVE)");
      this.runs++;
      this.lastError = null;
      this.onResult?.(null);
    } catch (e) {
      this.lastError = e;
      this.onResult?.(e);
    }
  }

  /** Settles the running checkpoint, if any, then lets go of the connection and the file. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#trailing) clearTimeout(this.#trailing);
    this.#trailing = null;
    await this.#running;
    if (this.#db) (await this.#db.catch(() => null))?.close();
    this.#db = null;
    this.#index.close();
  }
}
