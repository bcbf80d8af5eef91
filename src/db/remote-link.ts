/**
 * A remote database's link failing (a timeout, a reset, a 5xx, an answer that is not Hrana):
 * every HTTP round trip has a deadline, and a failed one is a `DatabaseLinkError` that says
 * whether a write may have committed, so the answer is a 503 that never calls a committed
 * write a failure (decision 0202).
 */
import { ApiError } from "../api-error";
import { type DatabaseFailure, remoteFailureOf } from "./connection-errors";

/** A remote round trip answers within this long unless `DATABASE_TIMEOUT_MS` says otherwise. */
export const DEFAULT_REMOTE_TIMEOUT_MS = 15_000;
/** Seconds a client is asked to wait before trying again. */
const RETRY_AFTER_S = "5";

/**
 * Whether the failed call may have committed something: `none` when what failed was a read (or a
 * transaction's statement before its COMMIT), `unknown` when a write batch, an autocommit
 * statement or a COMMIT was sent and its answer did not come back.
 */
export type WriteOutcome = "none" | "unknown";

/** A remote database's link failed during a call; `failure.reason` names why (no URL, no secret). */
export class DatabaseLinkError extends Error {
  constructor(
    readonly failure: DatabaseFailure,
    readonly outcome: WriteOutcome,
    options?: { cause?: unknown },
  ) {
    super(`the database is unavailable: ${failure.reason}`, options);
    this.name = "DatabaseLinkError";
  }
}

/**
 * The answer to a request that met a link failure. A write whose outcome is unknown says so
 * (503 `write_outcome_unknown`): it may have committed, so the client should look before it
 * sends it again. Anything else is 503 `database_unavailable`. Both carry `Retry-After`.
 */
export function linkFailureAnswer(failure: DatabaseFailure, outcome: WriteOutcome): ApiError {
  const headers = { "Retry-After": RETRY_AFTER_S };
  const reason = publicReason(failure);
  if (outcome === "unknown") {
    return new ApiError(
      503,
      {
        detail: `The database did not confirm the write (${reason}): it may or may not have been committed. Read the object or the change log before sending it again.`,
        error: "write_outcome_unknown",
      },
      headers,
    );
  }
  return new ApiError(
    503,
    {
      detail: `The database is unavailable: ${reason}. Retry shortly.`,
      error: "database_unavailable",
    },
    headers,
  );
}

/** Failures whose reason is a fixed text: they describe the fault, not the deployment. */
const FIXED_REASONS: ReadonlySet<DatabaseFailure["kind"]> = new Set([
  "timeout",
  "server_error",
  "bad_answer",
]);

/**
 * What an answer (anyone's, anonymous callers' too) says of a link failure: a fixed reason as it
 * is; one that may describe the deployment (a refused credential, a TLS message naming the host,
 * a socket error) only as "unreachable", its detail left to the log (once a minute).
 */
function publicReason(failure: DatabaseFailure): string {
  return FIXED_REASONS.has(failure.kind)
    ? failure.reason
    : "unreachable (the server's log says why)";
}

/** `error` as a link failure of `outcome` when it is one, else `error` as it is. */
export function asLinkError(error: unknown, outcome: WriteOutcome): unknown {
  if (error instanceof DatabaseLinkError) return error;
  const failure = remoteFailureOf(error);
  return failure ? new DatabaseLinkError(failure, outcome, { cause: error }) : error;
}

/**
 * A `fetch` for the libSQL client whose every round trip (the answer's body included) is aborted
 * after `timeoutMs`: a server that never answers costs a bounded wait, never a hung request.
 */
export function fetchWithDeadline(timeoutMs: number): (request: Request) => Promise<Response> {
  return (request) => fetch(request, { signal: AbortSignal.timeout(timeoutMs) });
}
