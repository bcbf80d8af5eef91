/**
 * The watcher of a local database file (decision 0079): still the file opened (not deleted or
 * replaced), checkpoints succeeding, the last integrity check (`PRAGMA quick_check`, on a
 * connection of its own, off the event loop) passing. Made by `local.ts` only: the Worker never
 * loads this module (it needs `node:fs` and the native driver).
 */
import { statSync } from "node:fs";
import AsyncDatabase from "libsql/promise";
import { cacheSizePragma, SERVICE_CACHE_KIB } from "./page-cache";
import type { FileHealthReport } from "./client";

/** After the check at start, the integrity check runs daily: it reads every page of the file. */
const INTEGRITY_EVERY_MS = 24 * 3_600_000;
/** Problems `quick_check` lists at most (the first few say enough). */
const INTEGRITY_LINES = 5;

type Log = (level: "error" | "info", msg: string, fields: Record<string, unknown>) => void;

const identityOf = (path: string): { dev: number; ino: number } | null => {
  try {
    const s = statSync(path);
    return { dev: s.dev, ino: s.ino };
  } catch {
    return null;
  }
};
const messageOf = (e: unknown) =>
  String((e as Error)?.message ?? e)
    .split("\n")[0]!
    .slice(0, 300);

export class FileHealth implements FileHealthReport {
  readonly #opened: { dev: number; ino: number } | null;
  /** Why the last checkpoint failed; null while they succeed. */
  checkpointError: string | null = null;
  /** The last integrity check's verdict; null before the first one finished. */
  integrity: { ok: boolean; detail: string } | null = null;
  #log: Log = (level, msg, fields) =>
    console.error(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }));
  #timer: ReturnType<typeof setInterval> | null = null;
  #closed = false;

  constructor(readonly path: string) {
    this.#opened = identityOf(path);
  }

  /** Where fault lines go (the app's logger). */
  attach(log: Log): void {
    this.#log = log;
  }

  /** Null while the path still names the file opened; else what happened to it. */
  fileProblem(): string | null {
    const now = identityOf(this.path);
    if (!now)
      return "the database file was deleted since the server started: writes would go to an unlinked file and be lost at restart";
    if (this.#opened && (now.dev !== this.#opened.dev || now.ino !== this.#opened.ino))
      return "the database file was replaced since the server started: this server still writes to the old one";
    return null;
  }

  /** The checkpointer's outcome: a failure is logged when it starts, recovery once. */
  noteCheckpoint(error: unknown): void {
    if (error === null) {
      if (this.checkpointError !== null)
        this.#log("info", "database checkpoints succeed again", { path: this.path });
      this.checkpointError = null;
      return;
    }
    const cause = messageOf(error);
    if (this.checkpointError === null)
      this.#log("error", "database checkpoints fail; the WAL file grows until they succeed", {
        path: this.path,
        cause,
      });
    this.checkpointError = cause;
  }

  /** A request met a damaged file (SQLITE_CORRUPT): failing until an integrity check passes. */
  noteDamaged(cause: unknown): void {
    this.#verdict({ ok: false, detail: messageOf(cause) });
  }

  /** Runs `PRAGMA quick_check` on a connection of its own; never throws. */
  async checkIntegrity(): Promise<{ ok: boolean; detail: string }> {
    let db = null as {
      prepare(sql: string): Promise<any>;
      exec(sql: string): Promise<unknown>;
      close(): void;
    } | null;
    let verdict: { ok: boolean; detail: string };
    try {
      const conn = new AsyncDatabase(this.path, {}) as unknown as NonNullable<typeof db>;
      db = conn;
      // a scan of the whole file: a cache would only fill (the budget's service share)
      await conn.exec(cacheSizePragma(SERVICE_CACHE_KIB));
      const stmt = await conn.prepare(`PRAGMA quick_check(${INTEGRITY_LINES})`);
      const lines: string[] = [];
      for await (const row of await stmt.raw(true).iterate()) lines.push(String(row[0]));
      const ok = lines.length === 1 && lines[0] === "ok";
      verdict = { ok, detail: ok ? "ok" : lines.join("; ").slice(0, 500) };
    } catch (e) {
      verdict = { ok: false, detail: messageOf(e) };
    } finally {
      db?.close();
    }
    if (!this.#closed) this.#verdict(verdict);
    return verdict;
  }

  /** The integrity check now (in the background) and every `everyMs` after. */
  scheduleIntegrity(everyMs = INTEGRITY_EVERY_MS): void {
    if (this.#timer || this.#closed) return;
    void this.checkIntegrity();
    this.#timer = setInterval(() => void this.checkIntegrity(), everyMs);
    this.#timer.unref?.();
  }

  close(): void {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  #verdict(verdict: { ok: boolean; detail: string }) {
    const was = this.integrity;
    this.integrity = verdict;
    if (!verdict.ok && (was?.ok ?? true))
      this.#log("error", "the database file is damaged; restore it from a backup", {
        path: this.path,
        cause: verdict.detail,
      });
    else if (verdict.ok && was && !was.ok)
      this.#log("info", "the database integrity check passes again", { path: this.path });
  }
}
