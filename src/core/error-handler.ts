/**
 * How any error becomes an answer in the §4 shape (decision 0002): `ApiError`s as they are, the
 * database's busy, storage and constraint failures as their 4xx/5xx, anything else a 500 logged
 * with its stack's frames, naming no value. The app's `onError`.
 */
import { statementTooLargeOf } from "../db/d1-limits";
import { errorBody } from "../api-error";
import type { ErrorHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import { DatabaseBusyError, isBusyError } from "../db/client";
import { databaseFileGone } from "../db/health";
import { remoteFailureOf } from "../db/connection-errors";
import { DatabaseLinkError, linkFailureAnswer, type WriteOutcome } from "../db/remote-link";
import { storageFaultError, storageFaultOf, type StorageFault } from "../db/storage-faults";
import type { HonoEnv, Services } from "./context";
import { ApiError } from "./errors";
import { mapConstraintError } from "./rest/constraints";
import { slotKey } from "./slots";

/** When each storage fault was last logged (monotonic ms): one line a minute, not one per request. */
const FAULT_LOGGED = slotKey<Map<StorageFault, number>>("app.storage-fault-logged");

function noteStorageFault(services: Services, fault: StorageFault, err: unknown) {
  // The health check fails at once, until an integrity check passes again.
  if (fault === "damaged") services.db.fileHealth.noteDamaged(err);
  const logged = services.state.ensure(FAULT_LOGGED, () => new Map());
  const last = logged.get(fault);
  if (last !== undefined && performance.now() - last < 60_000) return;
  logged.set(fault, performance.now());
  const chain: string[] = [];
  for (
    let e = err as { message?: unknown; cause?: unknown } | undefined, i = 0;
    e && i < 4;
    e = e.cause as typeof e, i++
  )
    if (typeof e.message === "string") chain.push(e.message.split("\n")[0]!.slice(0, 200));
  services.logger.error("database storage fault", { fault, cause: chain.at(-1) ?? String(err) });
}

/**
 * A read that raced a schema change (a column renamed or a table dropped under it). SQLite
 * reports it only in the message (SQLITE_ERROR is shared with every other statement error).
 */
function schemaChangedUnder(err: unknown): boolean {
  const e = err as { message?: unknown; cause?: { message?: unknown } } | null;
  return /no such (column|table)/i.test(String(e?.message ?? "") + String(e?.cause?.message ?? ""));
}

/**
 * Where an unhandled error came from: its stack's frames after the message (which may quote
 * values, and is logged apart with its parameters cut); none when the message is not found there.
 */
function framesOf(err: unknown): string[] {
  const { stack, message } = (err ?? {}) as { stack?: unknown; message?: unknown };
  if (typeof stack !== "string" || typeof message !== "string") return [];
  const at = stack.indexOf(message);
  if (at < 0) return [];
  return stack
    .slice(at + message.length)
    .split("\n")
    .filter((line) => /^\s+at /.test(line))
    .slice(0, 12)
    .map((line) => line.trim());
}

function answer(c: Parameters<ErrorHandler<HonoEnv>>[1], err: ApiError) {
  for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
  return c.json(err.body as object, err.statusCode);
}

/** Methods whose requests write nothing a client asked for (a side write's fate is not theirs). */
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * A remote database's link failure as its 503 (decision 0202): a request that may have committed
 * a write says its outcome is unknown; a failure the database layer did not place (a query run
 * on the ORM itself) is unknown too when the request writes. Logged at most once a minute.
 */
function linkFailure(services: Services, err: unknown, method: string) {
  const failure = err instanceof DatabaseLinkError ? err.failure : remoteFailureOf(err);
  if (!failure) return null;
  const placed: WriteOutcome = err instanceof DatabaseLinkError ? err.outcome : "unknown";
  const outcome = SAFE_METHODS.has(method) ? "none" : placed;
  const logged = services.state.ensure(LINK_LOGGED, () => ({ at: -Infinity }));
  if (performance.now() - logged.at >= 60_000) {
    logged.at = performance.now();
    services.logger.error("database unavailable", { cause: failure.kind, reason: failure.reason });
  }
  return linkFailureAnswer(failure, outcome);
}

/** When a link failure was last logged (monotonic ms). */
const LINK_LOGGED = slotKey<{ at: number }>("app.database-link-logged");

/** The app's error handler, for `app.onError`. */
export function errorHandler(services: Services): ErrorHandler<HonoEnv> {
  const { db, logger } = services;
  return (err, c) => {
    if (err instanceof ApiError) return answer(c, err);
    // The remote database's link failed (timeout, reset, 5xx, not Hrana): 503, never a 500.
    const link = linkFailure(services, err, c.req.method);
    if (link) return answer(c, link);
    // A write that met a long write's lock, wrapped by Drizzle on the way: the same 503.
    if (isBusyError(err)) return answer(c, new DatabaseBusyError());
    // A read that raced a schema change (a column renamed under it): retryable, not a 500.
    if (schemaChangedUnder(err)) {
      return c.json(
        errorBody("schema_changed", "The object type changed while this request ran; retry it."),
        409,
      );
    }
    // Disk full, I/O error, read-only or damaged file: the operator's to fix; 507/503 with
    // Retry-After, logged at most once a minute per fault (decision 0079).
    const fault = storageFaultOf(err);
    if (fault) {
      noteStorageFault(services, fault, err);
      // A fault of a file deleted or replaced under the server says so (restart, not retry).
      return answer(c, db.fileHealth.fileProblem() ? databaseFileGone() : storageFaultError(fault));
    }
    // a statement past a database's size limits (D1's 100 values, expression depth): 400 (0125)
    const tooLarge = statementTooLargeOf(err);
    if (tooLarge) return answer(c, tooLarge);
    const mapped = mapConstraintError(err, null);
    if (mapped) return c.json(mapped.body as object, mapped.statusCode);
    if (err instanceof HTTPException) {
      return c.json({ detail: err.message || "Request failed." }, err.status);
    }
    // Drizzle's "Failed query" messages list the bound values, which may hold secrets.
    const message = String((err as Error)?.message ?? err).replace(
      /\nparams: [\s\S]*$/,
      "\nparams: (not logged)",
    );
    const cause = (err as { cause?: { message?: unknown } })?.cause?.message;
    logger.error("unhandled error", {
      requestId: c.get("requestId"),
      path: c.req.path,
      error: message,
      ...(cause ? { cause: String(cause) } : {}),
      frames: framesOf(err),
    });
    return c.json(
      errorBody("internal_error", "Internal server error.", { request_id: c.get("requestId") }),
      500,
    );
  };
}
