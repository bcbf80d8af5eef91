/**
 * Waiting in tests without a clock: poll a condition until it holds, or bound a promise that may
 * hang. Every time limit here is a failure bound (how long before a stuck test gives up), never
 * an assertion of speed; speed is measured in `bench/`.
 */

export interface WaitOptions {
  /** Give up (and fail) after this long. Generous on purpose: a busy machine is slow, not wrong. */
  timeoutMs?: number;
  /** Pause between two polls. */
  intervalMs?: number;
  /** Names what was awaited in the failure (a function is called only on failure). */
  message?: string | (() => string);
}

const pause = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

type Truthy<T> = Exclude<T, false | null | undefined | 0 | "">;

/**
 * Polls `condition` until it returns a truthy value, and returns that value. A condition that
 * throws is retried (the thing awaited may not exist yet); its last error is in the failure.
 * @example await waitFor(async () => (await cache.get(k)) === null, { message: "key expired" });
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  options: WaitOptions = {},
): Promise<Truthy<T>> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 20;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value as Truthy<T>;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() >= deadline) break;
    await pause(intervalMs);
  }
  const what = typeof options.message === "function" ? options.message() : options.message;
  const cause = lastError === undefined ? "" : ` (last error: ${String(lastError)})`;
  throw new Error(`waitFor: ${what ?? "condition"} did not hold within ${timeoutMs} ms${cause}`);
}

/** What {@link within} returns when the promise did not settle in time. */
export const TIMED_OUT: unique symbol = Symbol("timed out");

/**
 * The promise's value, or {@link TIMED_OUT} when it has not settled within `ms` (a bound on a
 * hung process or request, not a speed assertion). The timer is cleared either way.
 * @example expect(await within(proc.exited, 15_000)).toBe(0);
 */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<typeof TIMED_OUT>((done) => {
    timer = setTimeout(() => done(TIMED_OUT), ms);
  });
  try {
    return await Promise.race([promise, bound]);
  } finally {
    clearTimeout(timer);
  }
}

/** A clock a test moves by hand, for code that takes a `now()` option. */
export interface ManualClock {
  now: () => number;
  advance(ms: number): void;
}

/** A {@link ManualClock} starting at `start` (epoch ms by default, so dates look real). */
export function manualClock(start = Date.now()): ManualClock {
  let t = start;
  return {
    now: () => t,
    advance(ms) {
      t += ms;
    },
  };
}

/** A {@link ManualClock} that also keeps timers, run when {@link ManualTimers.advance} passes them. */
export interface ManualTimers extends ManualClock {
  /** Calls `fn` once the clock has moved `ms` on; returns how to cancel it. */
  setTimer(fn: () => void, ms: number): () => void;
  /** Timers that have run so far. */
  readonly fired: number;
  /** Timers armed and not yet run nor cancelled. */
  readonly pending: number;
}

/** Timers on a clock the test moves: `advance(ms)` runs every timer due by then, in order. */
export function manualTimers(start = 0): ManualTimers {
  let t = start;
  let fired = 0;
  const due = new Set<{ at: number; fn: () => void }>();
  return {
    now: () => t,
    setTimer(fn, ms) {
      const timer = { at: t + ms, fn };
      due.add(timer);
      return () => due.delete(timer);
    },
    advance(ms) {
      const until = t + ms;
      for (;;) {
        const next = [...due].filter((d) => d.at <= until).sort((a, b) => a.at - b.at)[0];
        if (!next) break;
        due.delete(next);
        t = next.at;
        fired++;
        next.fn();
      }
      t = until;
    },
    get fired() {
      return fired;
    },
    get pending() {
      return due.size;
    },
  };
}
