/**
 * Faults of the storage under the database (issue 30, decision 0079): disk full, I/O errors, a
 * read-only or damaged file. They are the operator's to fix, not a bug: the API answers 507 (full)
 * or 503 with a code naming the fault and `Retry-After`, never 500, and writes come back by
 * themselves once the fault is gone.
 */
import { ApiError, type ErrorCode } from "../api-error";

export type StorageFault = "full" | "io" | "read_only" | "damaged";

/** SQLite's primary result codes (the low byte of an extended code). */
const BY_CODE: Record<number, StorageFault> = {
  13: "full", // SQLITE_FULL
  10: "io", // SQLITE_IOERR
  8: "read_only", // SQLITE_READONLY
  11: "damaged", // SQLITE_CORRUPT
  26: "damaged", // SQLITE_NOTADB
};
const BY_NAME: Array<[RegExp, StorageFault]> = [
  [/^SQLITE_FULL/, "full"],
  [/^SQLITE_IOERR/, "io"],
  [/^SQLITE_READONLY/, "read_only"],
  [/^SQLITE_(CORRUPT|NOTADB)/, "damaged"],
];
const BY_MESSAGE: Array<[RegExp, StorageFault]> = [
  [/database or disk is full/i, "full"],
  [/disk I\/O error/i, "io"],
  [/attempt to write a readonly database/i, "read_only"],
  [/database disk image is malformed|file is not a database/i, "damaged"],
];

interface DriverError {
  code?: unknown;
  extendedCode?: unknown;
  rawCode?: unknown;
  message?: unknown;
  cause?: unknown;
}

/** The storage fault behind `error` (through Drizzle's and the client's wrapping), or null. */
export function storageFaultOf(error: unknown): StorageFault | null {
  let e = error as DriverError | undefined;
  for (let depth = 0; e && typeof e === "object" && depth < 8; depth++) {
    if (typeof e.rawCode === "number" && BY_CODE[e.rawCode & 0xff])
      return BY_CODE[e.rawCode & 0xff]!;
    for (const code of [e.extendedCode, e.code])
      if (typeof code === "string") {
        const hit = BY_NAME.find(([re]) => re.test(code));
        if (hit) return hit[1];
      }
    const message = typeof e.message === "string" ? e.message : "";
    const hit = BY_MESSAGE.find(([re]) => re.test(message));
    if (hit) return hit[1];
    e = e.cause as DriverError | undefined;
  }
  return null;
}

const ANSWERS: Record<
  StorageFault,
  { status: 503 | 507; error: ErrorCode; detail: string; retry: number }
> = {
  full: {
    status: 507,
    error: "database_full",
    detail:
      "The database's disk is full; nothing of this request was written. Retry once space is freed.",
    retry: 30,
  },
  io: {
    status: 503,
    error: "database_io_error",
    detail:
      "The disk failed to read or write the database; nothing of this request was written. Retry shortly.",
    retry: 5,
  },
  read_only: {
    status: 503,
    error: "database_read_only",
    detail: "The database file cannot be written (read-only); nothing of this request was written.",
    retry: 30,
  },
  damaged: {
    status: 503,
    error: "database_damaged",
    detail: "The database file is damaged; the operator must restore it from a backup.",
    retry: 60,
  },
};

/** The answer to a request that met `fault`. */
export function storageFaultError(fault: StorageFault): ApiError {
  const a = ANSWERS[fault];
  return new ApiError(
    a.status,
    { detail: a.detail, error: a.error },
    { "Retry-After": String(a.retry) },
  );
}
