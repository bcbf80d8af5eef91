/**
 * A stamp that changes whenever any connection, in this process or another, commits to a local
 * libSQL file in WAL mode: the WAL-index header at the start of `<file>-shm`. SQLite documents
 * that header (walformat.html, "The WAL-Index Header"): its `iChange` counter goes up with every
 * transaction, and `mxFrame` and the salts change with every commit and checkpoint. The header is
 * stored twice; a writer updates the copies one after the other, so two equal copies are a
 * settled header and unequal ones mean "changing right now" (no stamp).
 *
 * It costs one small read of a page-cached file (about 2 µs here, less with the file kept open), needs no connection (so it
 * never waits for one a write transaction holds), and sees other processes' commits. Used by
 * caches of derived facts that must be dropped on any change (`core/rest/page-anchors.ts`).
 */
import { closeSync, openSync, readSync } from "node:fs";

const HEADER = 48;

/**
 * The first `bytes` of a WAL-index (`<path>-shm`), read with one pread into a buffer reused
 * between reads; null while there is none (not in WAL mode, no connection has it open). The file
 * stays open between reads: SQLite keeps it while any connection of this process is open.
 */
export function walIndexReader(
  path: string,
  bytes: number,
): (() => Buffer | null) & { close(): void } {
  const shm = `${path}-shm`;
  const buf = Buffer.alloc(bytes);
  let fd: number | null = null;
  const close = () => {
    try {
      if (fd !== null) closeSync(fd);
    } catch {
      // already gone
    }
    fd = null;
  };
  const read = () => {
    try {
      fd ??= openSync(shm, "r");
      return readSync(fd, buf, 0, bytes, 0) < bytes ? null : buf;
    } catch {
      close();
      return null;
    }
  };
  return Object.assign(read, { close });
}

/** The stamp reader for a database URL, or null where there is no WAL index to read (memory, remote). */
export function walChangeStamp(url: string): ((() => string | null) & { close(): void }) | null {
  if (!url.startsWith("file:")) return null;
  const path = url.replace(/^file:(\/\/)?/, "").split("?")[0]!;
  if (!path || path === ":memory:") return null;
  const index = walIndexReader(path, HEADER * 2);
  const read = () => {
    const buf = index();
    if (!buf?.subarray(0, HEADER).equals(buf.subarray(HEADER))) return null;
    return buf.toString("base64", 0, HEADER);
  };
  /** Lets go of the file (with the database). */
  return Object.assign(read, { close: index.close });
}
