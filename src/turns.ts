/**
 * Gives the event loop its turns back from long stretches of work that never wait on I/O (a
 * local file's statements are synchronous and their promises already settled): `yieldWhenDue()`.
 * A leaf module, so that the long-write connection (`db/background.ts`) and domain loops share
 * one clock of the stretch under way.
 */

/** Longest stretch of work that holds the event loop between two turns it gives back. */
export const SLICE_MS = 8;

/**
 * Turns of the event loop (each one poll for I/O, due timers) before the work goes on: a request
 * may need a few (the health check's Redis calls go through the in-process bridge). A turn costs a
 * few µs when nothing waits; `setTimeout(0)` would cost a millisecond on Bun.
 */
const TURNS = 3;

/** Runs `fn` at the event loop's next turn (workerd without nodejs_compat has no `setImmediate`). */
const atNextTurn: (fn: () => void) => void =
  typeof setImmediate === "function" ? (fn) => setImmediate(fn) : (fn) => setTimeout(fn, 0);

/**
 * One turn of the event loop. On Bun a zero sleep (a timer) polls for I/O where `setImmediate`
 * chains may run before it: requests waiting on their sockets are answered more often.
 */
const aTurn: () => Promise<void> =
  typeof Bun !== "undefined"
    ? () => Bun.sleep(0)
    : () => new Promise<void>((resolve) => atNextTurn(resolve));

interface Clock {
  now(): number;
}

/**
 * The stretch under way: one per process, as the event loop is (module level on purpose). It
 * begins at the first check after the loop's last turn; a marker run at the loop's next turn
 * ends it, so time spent waiting on I/O never counts as held.
 */
const stretch = { clock: performance as Clock, startedAt: 0, open: false };

/**
 * Gives the event loop `TURNS` turns if the work under way has held it for `SLICE_MS` since its
 * last turn; else resolves at once. For loops of pure JavaScript (and the long-write connection's
 * statements) that must not stall other requests. On workerd the clock does not move while
 * JavaScript runs, so this never yields there (a remote statement gives the loop its turns).
 */
export async function yieldWhenDue(): Promise<void> {
  if (!stretch.open) {
    stretch.open = true;
    stretch.startedAt = stretch.clock.now();
    atNextTurn(() => {
      stretch.open = false;
    });
    return;
  }
  if (stretch.clock.now() - stretch.startedAt < SLICE_MS) return;
  for (let i = 0; i < TURNS; i++) await aTurn();
  // the marker ends the stretch at the first turn; this ends it should a sleep not run immediates
  stretch.open = false;
}

/** For tests: the clock the stretch is measured on (`performance` unless given). */
export function useTurnClock(clock: Clock | null): void {
  stretch.clock = clock ?? performance;
  stretch.open = false;
}
