/**
 * The one error type of the API (decision 0002), at the bottom of the layers so that every layer,
 * the database's included, can say how its failures answer: a status, a §4 body and headers.
 * `ErrorCode` lists every machine `error` code a body may carry, so clients can rely on them.
 */
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";

export type ErrorCode =
  | "body_unreadable"
  | "cascade_too_large"
  | "circular_dependency"
  | "client_closed_request"
  | "constraint_violation"
  | "database_busy"
  | "database_damaged"
  | "database_file_gone"
  | "database_full"
  | "database_io_error"
  | "database_read_only"
  | "database_unavailable"
  | "dependency_conflict"
  | "destructive_changes"
  | "internal_error"
  | "invalid_credentials"
  | "invalid_request"
  | "invalid_schema"
  | "invalid_token"
  | "json_too_deep"
  | "method_not_allowed"
  | "not_authenticated"
  | "not_available_on_this_database"
  | "not_found"
  | "not_implemented"
  | "not_revertable"
  | "parse_error"
  | "payload_too_large"
  | "permission_denied"
  | "plan_mismatch"
  | "precondition_failed"
  | "protected"
  | "rate_limited"
  | "response_too_large"
  | "restore_conflict"
  | "retry"
  | "retype_too_large"
  | "revert_conflict"
  | "schema_changed"
  | "stale_plan"
  | "startup_failed"
  | "statement_too_large"
  | "too_many_columns"
  | "too_many_event_rules"
  | "too_many_objects"
  | "too_many_values"
  | "too_many_webhooks"
  | "too_many_custom_object_types"
  | "tasks_unavailable"
  | "unresolvable_reference"
  | "unsupported_media_type"
  | "write_conflict"
  | "write_outcome_unknown";

/** A §4 body: `detail` and a machine `error` code, plus fields of the error's own. */
export type ErrorBody = { detail?: string; error?: ErrorCode } & Record<string, unknown>;

export class ApiError extends HTTPException {
  constructor(
    readonly statusCode: ContentfulStatusCode,
    readonly body: ErrorBody | unknown[],
    readonly headers: Record<string, string> = {},
  ) {
    const detail =
      !Array.isArray(body) && typeof body.detail === "string" ? body.detail : "request failed";
    super(statusCode, { message: detail });
  }
  /** @example throw ApiError.detail(409, "Unable to delete", "protected") */
  static detail(
    status: ContentfulStatusCode,
    detail: string,
    error?: ErrorCode,
    extra: Record<string, unknown> = {},
  ) {
    return new ApiError(status, { detail, ...(error ? { error } : {}), ...extra });
  }
}

/**
 * A §4 body for an answer built without throwing (a `notFound` handler, a 500), typed so its
 * code is one of `ErrorCode`.
 * @example c.json(errorBody("not_found", "Not found."), 404)
 */
export function errorBody(
  error: ErrorCode,
  detail: string,
  extra: Record<string, unknown> = {},
): ErrorBody {
  return { detail, error, ...extra };
}
