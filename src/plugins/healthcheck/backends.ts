/**
 * The custom-check contract: extend `BaseHealthCheckBackend`, implement `checkStatus()`, and
 * report failures with `addError(new ServiceUnavailable("…"), cause?)` or by throwing.
 */
import type { Services } from "../../core/context";

/** What kind of failure a check reported; the status string reads `"<kind>: <message>"`. */
export type HealthCheckErrorKind =
  | "unavailable"
  | "unexpected result"
  | "warning"
  | "unknown error";

/** A failure of a check. Thrown or passed to `addError`; any other error reads as `unknown error`. */
export class HealthCheckException extends Error {
  readonly kind: HealthCheckErrorKind = "unknown error";

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }

  override toString(): string {
    return `${this.kind}: ${this.message}`;
  }
}

/** The service cannot be reached or refused to serve (down, timed out, bad credentials). */
export class ServiceUnavailable extends HealthCheckException {
  override readonly kind = "unavailable";
}

/** The service answered, but not what a healthy one answers. */
export class ServiceReturnedUnexpectedResult extends HealthCheckException {
  override readonly kind = "unexpected result";
}

/** Worth a look, not an outage. Still counts as a failure unless `warnings_as_errors` is false. */
export class ServiceWarning extends HealthCheckException {
  override readonly kind = "warning";
}

/**
 * A figure past its warning threshold (a slow check, a queue backlog): shown as `warning`, and
 * never fails the endpoint (HTTP 200, overall `degraded`), whatever `warnings_as_errors` says.
 */
export class ThresholdWarning extends ServiceWarning {}

/** A figure a check measured: in health+json an observed value, in OpenMetrics a gauge. */
export interface Observation {
  /** `[a-z][a-z0-9_]*`, e.g. `queue_depth`; also the metric name's tail. */
  name: string;
  /** A number, a short string (e.g. the database driver) or null (not known, e.g. never seen). */
  value: number | string | null;
  /** `ms`, `s` or a count's unit (`jobs`); none for strings. */
  unit?: string;
}

const OBSERVATION_NAME = /^[a-z][a-z0-9_]*$/;

/**
 * Base class of every health check. The runner builds one instance per run, so state does not
 * leak between runs.
 * @example
 * class QueueDepth extends BaseHealthCheckBackend {
 *   override criticalService = false;
 *   async checkStatus() {
 *     const depth = await this.services.redis.tasks!.llen("queue");
 *     if (depth > 1000) this.addError(new ServiceWarning(`${depth} jobs waiting`));
 *   }
 * }
 */
export abstract class BaseHealthCheckBackend {
  /** When true (the default), a failure of this check makes the endpoint answer 500. */
  criticalService = true;
  /** Failures reported so far in this run. */
  readonly errors: HealthCheckException[] = [];
  /** Underlying causes passed to `addError`, for the log (never shown on the page). */
  readonly causes: unknown[] = [];
  /** Figures measured in this run (`observe`). */
  readonly observations: Observation[] = [];

  constructor(protected readonly services: Services) {}

  /** Runs the check; report problems with `addError` or by throwing. */
  abstract checkStatus(): Promise<void>;

  /**
   * Whether the operator set up what this check watches. `/readyz` counts only configured checks
   * (a Redis the operator runs without on purpose does not keep it failing); the health page
   * runs every check it lists, configured or not.
   */
  configured(): boolean {
    return true;
  }

  /** The key of this check in the `checks` output; the class name unless overridden. */
  identifier(): string {
    return this.constructor.name;
  }

  /**
   * Records a failure. A string becomes an `unknown error` with that message; any error that is
   * not a `HealthCheckException` becomes an `unknown error` carrying its message.
   */
  addError(error: unknown, cause?: unknown): void {
    let failure: HealthCheckException;
    if (error instanceof HealthCheckException) failure = error;
    else if (typeof error === "string") failure = new HealthCheckException(error);
    else
      failure = new HealthCheckException(
        error instanceof Error ? error.message || error.name : String(error),
        { cause: error },
      );
    this.errors.push(failure);
    if (cause !== undefined) this.causes.push(cause);
  }

  /**
   * Records a measured figure (shown in health+json and OpenMetrics, never in the plain JSON).
   * @example this.observe("queue_depth", 12, "jobs");
   */
  observe(name: string, value: number | string | null, unit?: string): void {
    if (!OBSERVATION_NAME.test(name) || name === "info")
      throw new Error(
        `observation names are [a-z][a-z0-9_]* (not "info"), not ${JSON.stringify(name)}`,
      );
    this.observations.push(unit === undefined ? { name, value } : { name, value, unit });
  }

  /** `"working"`, or each failure as `"<kind>: <message>"` joined with `"; "`. */
  prettyStatus(): string {
    return this.errors.length === 0 ? "working" : this.errors.map((e) => e.toString()).join("; ");
  }
}

/** The message of any thrown value, for use in a check's own error messages. */
export function messageOf(e: unknown): string {
  if (e instanceof Error) return e.message || e.name;
  return String(e);
}
