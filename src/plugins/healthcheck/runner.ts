/**
 * Runs the selected checks concurrently, each under the timeout, and turns their outcome into a
 * report. Every status string passes through the redactor here, and only here.
 */
import type { Services } from "../../core/context";
import type { Redactor } from "../../services/redact";
import { BaseHealthCheckBackend, HealthCheckException, ServiceUnavailable } from "./backends";
import type { SelectedCheck } from "./settings";

/** The outcome of one check. */
export interface CheckResult {
  path: string;
  identifier: string;
  critical: boolean;
  /** `"working"` or `"<kind>: <message>"` (`"; "`-joined), redacted. */
  status: string;
  passed: boolean;
  /** Failed with warnings only. */
  warningOnly: boolean;
  durationMs: number;
  /** When the check started (ISO 8601). */
  time: string;
}

/** The outcome of one run. */
export interface HealthReport {
  results: CheckResult[];
  /** Every check passed. */
  allPassed: boolean;
  /** A critical check failed (the endpoint answers 500). */
  criticalFailure: boolean;
}

export interface RunOptions {
  timeoutMs: number;
  warningsAsErrors: boolean;
  redact: Redactor;
}

const TIMED_OUT = Symbol("timed out");

async function runOne(selected: SelectedCheck, services: Services, options: RunOptions): Promise<CheckResult> {
  const time = new Date().toISOString();
  const started = performance.now();
  let check: BaseHealthCheckBackend | null = null;
  let errors: HealthCheckException[];
  let causes: unknown[] = [];
  try {
    const instance = new selected.check(services);
    check = instance;
    const running = (async () => {
      try {
        await instance.checkStatus();
      } catch (e) {
        instance.addError(e);
      }
    })();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
      timer = setTimeout(() => resolve(TIMED_OUT), options.timeoutMs);
    });
    const outcome = await Promise.race([running, timeout]);
    clearTimeout(timer);
    // A timed-out check may still finish later; its instance is dropped with whatever it reports.
    errors = outcome === TIMED_OUT ? [new ServiceUnavailable(`timeout after ${options.timeoutMs} ms`)] : [...instance.errors];
    causes = outcome === TIMED_OUT ? [] : [...instance.causes];
  } catch (e) {
    // The constructor itself failed.
    const failure = new HealthCheckException(e instanceof Error ? e.message || e.name : String(e));
    errors = [failure];
  }
  const durationMs = performance.now() - started;
  let identifier = selected.path;
  let critical = true;
  if (check) {
    critical = check.criticalService !== false;
    try {
      identifier = check.identifier();
    } catch {
      // keep the dotted path
    }
  }
  const status = errors.length === 0 ? "working" : options.redact(errors.map((e) => e.toString()).join("; "));
  const warningOnly = errors.length > 0 && errors.every((e) => e.kind === "warning");
  const passed = errors.length === 0 || (warningOnly && !options.warningsAsErrors);
  if (errors.length > 0) {
    services.logger.warn("health check failed", {
      check: identifier,
      critical,
      status,
      ...(causes.length ? { cause: options.redact(causes.map((c) => (c instanceof Error ? c.message : String(c))).join("; ")) } : {}),
    });
  }
  return { path: selected.path, identifier, critical, status, passed, warningOnly, durationMs, time };
}

/**
 * Runs every check at once; the run takes at most about `timeoutMs`, whatever the checks do.
 * @example const report = await runChecks(settings.checks, services, { timeoutMs: 3000, warningsAsErrors: true, redact });
 */
export async function runChecks(checks: SelectedCheck[], services: Services, options: RunOptions): Promise<HealthReport> {
  const results = await Promise.all(checks.map((c) => runOne(c, services, options)));
  return {
    results,
    allPassed: results.every((r) => r.status === "working"),
    criticalFailure: results.some((r) => !r.passed && r.critical),
  };
}
