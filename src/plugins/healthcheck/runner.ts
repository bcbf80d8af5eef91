/**
 * Runs the selected checks concurrently, each under the timeout, and turns their outcome into a
 * report. Every status string passes through the redactor here, and only here. A runner shares
 * each check's run in flight between callers (and keeps its result for `cache_seconds`).
 */
import type { Services } from "../../core/context";
import type { Redactor } from "../../services/redact";
import {
  type BaseHealthCheckBackend,
  HealthCheckException,
  ServiceUnavailable,
  ThresholdWarning,
  type Observation,
} from "./backends";
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
  /** When the check finished (epoch ms), for the age of a shared result. */
  finishedAt: number;
  /** Figures the check measured (string values redacted). */
  observations: Observation[];
}

/** The outcome of one run. */
export interface HealthReport {
  results: CheckResult[];
  /** Every check passed. */
  allPassed: boolean;
  /** A critical check failed (the endpoint answers 500). */
  criticalFailure: boolean;
  /** Age of the oldest result in the report (ms); about 0 unless results came from the cache. */
  ageMs: number;
}

export interface RunOptions {
  timeoutMs: number;
  warningsAsErrors: boolean;
  redact: Redactor;
  /** Clock in epoch ms for durations, ages and the cache (tests pass one they move by hand). */
  now: () => number;
}

const TIMED_OUT = Symbol("timed out");

async function runOne(
  selected: SelectedCheck,
  services: Services,
  options: RunOptions,
): Promise<CheckResult> {
  const started = options.now();
  const time = new Date(started).toISOString();
  let check: BaseHealthCheckBackend | null = null;
  let errors: HealthCheckException[];
  let causes: unknown[] = [];
  let observations: Observation[] = [];
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
    errors =
      outcome === TIMED_OUT
        ? [new ServiceUnavailable(`timeout after ${options.timeoutMs} ms`)]
        : [...instance.errors];
    causes = outcome === TIMED_OUT ? [] : [...instance.causes];
    observations =
      outcome === TIMED_OUT
        ? []
        : instance.observations.map((o) =>
            typeof o.value === "string" ? { ...o, value: options.redact(o.value) } : o,
          );
  } catch (e) {
    // The constructor itself failed.
    const failure = new HealthCheckException(e instanceof Error ? e.message || e.name : String(e));
    errors = [failure];
  }
  const durationMs = options.now() - started;
  // Slow but within the timeout: a warning that never fails the endpoint.
  if (errors.length === 0 && selected.warnMs !== undefined && durationMs > selected.warnMs) {
    errors = [
      new ThresholdWarning(`took ${Math.round(durationMs)} ms (warn_ms ${selected.warnMs})`),
    ];
  }
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
  const status =
    errors.length === 0 ? "working" : options.redact(errors.map((e) => e.toString()).join("; "));
  const warningOnly = errors.length > 0 && errors.every((e) => e.kind === "warning");
  // Threshold warnings (slow, backlog) never fail the endpoint; other warnings per the setting.
  const advisoryOnly = errors.every((e) => e instanceof ThresholdWarning);
  const passed =
    errors.length === 0 || (warningOnly && (advisoryOnly || !options.warningsAsErrors));
  if (errors.length > 0) {
    services.logger.warn("health check failed", {
      check: identifier,
      critical,
      status,
      ...(causes.length
        ? {
            cause: options.redact(
              causes.map((c) => (c instanceof Error ? c.message : String(c))).join("; "),
            ),
          }
        : {}),
    });
  }
  return {
    path: selected.path,
    identifier,
    critical,
    status,
    passed,
    warningOnly,
    durationMs,
    time,
    finishedAt: options.now(),
    observations,
  };
}

/** Turns results into a report. */
function reportOf(results: CheckResult[], now: number): HealthReport {
  return {
    ageMs: results.length ? Math.max(0, now - Math.min(...results.map((r) => r.finishedAt))) : 0,
    results,
    allPassed: results.every((r) => r.status === "working"),
    criticalFailure: results.some((r) => !r.passed && r.critical),
  };
}

interface Slot {
  result: Promise<CheckResult>;
  /** Set once the run settled. */
  finishedAt: number | null;
}

/**
 * Runs checks for many callers: a check already running is joined, not started again, and
 * (with `cacheMs` > 0) a result younger than `cacheMs` is handed out as is. Each check has its
 * own slot, so a group and the full page share work too.
 */
export class CheckRunner {
  readonly #slots = new Map<string, Slot>();
  /** Check runs started, by dotted path (for tests and the benchmark). */
  readonly runs = new Map<string, number>();
  /** Results asked for, by dotted path: runs started, runs joined and cached results (for tests). */
  readonly asked = new Map<string, number>();

  constructor(
    private readonly services: Services,
    private readonly options: RunOptions & { cacheMs: number },
  ) {}

  /** The report over `checks`; its results may come from a run in flight or the cache. */
  async run(checks: SelectedCheck[]): Promise<HealthReport> {
    const results = await Promise.all(checks.map((c) => this.#result(c)));
    return reportOf(results, this.options.now());
  }

  #result(selected: SelectedCheck): Promise<CheckResult> {
    this.asked.set(selected.path, (this.asked.get(selected.path) ?? 0) + 1);
    const slot = this.#slots.get(selected.path);
    const now = this.options.now();
    if (slot && (slot.finishedAt === null || now - slot.finishedAt < this.options.cacheMs))
      return slot.result;
    this.runs.set(selected.path, (this.runs.get(selected.path) ?? 0) + 1);
    const fresh: Slot = { result: runOne(selected, this.services, this.options), finishedAt: null };
    void fresh.result.then((r) => {
      fresh.finishedAt = r.finishedAt;
      // Nothing to keep without a cache: the next caller runs the check again.
      if (this.options.cacheMs <= 0 && this.#slots.get(selected.path) === fresh)
        this.#slots.delete(selected.path);
    });
    this.#slots.set(selected.path, fresh);
    return fresh.result;
  }
}
