/**
 * One background loop's view of an outage (decision 0204): how long to wait before the next try
 * (capped exponential backoff with full jitter) and when to say so in the log (the first failure,
 * then at most once a minute, and the recovery), on a clock tests can move by hand.
 */
import type { Logger } from "./logger";

/** At most one "still failing" line per loop this often. */
const OUTAGE_LOG_EVERY_MS = 60_000;

export interface OutageOptions {
  /** The loop's name, first in every line it logs. */
  name: string;
  logger: Logger;
  /** The first pause after a failure; doubles per failure. */
  baseMs: number;
  /** The longest pause. */
  maxMs: number;
  /** Monotonic milliseconds (tests pass a clock they move). */
  now?: () => number;
  /** A number in [0, 1) (tests pass a fixed one). */
  random?: () => number;
}

const errorText = (e: unknown) => String((e as Error)?.message ?? e).slice(0, 200);

export class Outage {
  #failures = 0;
  #loggedAt = Number.NEGATIVE_INFINITY;
  #since = 0;
  readonly #now: () => number;
  readonly #random: () => number;

  constructor(private readonly options: OutageOptions) {
    this.#now = options.now ?? (() => performance.now());
    this.#random = options.random ?? Math.random;
  }

  /** Failures since the last success. */
  get failures(): number {
    return this.#failures;
  }

  /**
   * Records a failure (`what` failed, when the loop does several things); returns how long to wait before trying again: a random pause between half
   * the capped exponential step and the step itself, so loops of many processes spread out.
   */
  failed(e: unknown, what = ""): number {
    const now = this.#now();
    if (this.#failures++ === 0) this.#since = now;
    if (now - this.#loggedAt >= OUTAGE_LOG_EVERY_MS) {
      this.#loggedAt = now;
      const first = this.#failures === 1;
      this.options.logger.warn(
        `${this.options.name}: ${what ? `${what} ` : ""}${first ? "failed" : "still failing"}; retrying with backoff`,
        {
          error: errorText(e),
          failures: this.#failures,
          ...(first ? {} : { outage_ms: Math.round(now - this.#since) }),
        },
      );
    }
    const step = Math.min(
      this.options.maxMs,
      this.options.baseMs * 2 ** Math.min(this.#failures - 1, 30),
    );
    return Math.round(step / 2 + (step / 2) * this.#random());
  }

  /** Records a success: logs the recovery when there was an outage. */
  succeeded(): void {
    if (!this.#failures) return;
    this.options.logger.info(`${this.options.name}: working again`, {
      failures: this.#failures,
      outage_ms: Math.round(this.#now() - this.#since),
    });
    this.#failures = 0;
    this.#loggedAt = Number.NEGATIVE_INFINITY;
  }
}
