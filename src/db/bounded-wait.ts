/**
 * Waiting for something at most a while, without leaving the timer behind: a bound left running
 * after what it bounded settled held the process (a bench, a CLI, a test run) alive until it ran.
 */

/** Resolves when `promise` settles (its outcome ignored) or after `ms`, whichever comes first. */
export async function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<void>((r) => (timer = setTimeout(r, ms)));
  try {
    await Promise.race([promise.then(noop, noop), bound]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `promise`'s outcome, or `fallback` when it has not settled after `ms`; a rejection before then
 * is thrown. The bound's timer is cleared either way.
 */
export async function orAfter<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<F>((r) => (timer = setTimeout(() => r(fallback), ms)));
  try {
    return await Promise.race([promise, bound]);
  } finally {
    clearTimeout(timer);
  }
}

const noop = () => undefined;
