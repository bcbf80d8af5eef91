/**
 * Another client asking `/livez` while a long request runs: how tests see that the request gives
 * the event loop its turns, without a clock (decisions 0184–0186).
 */
import { SLICE_MS, useTurnClock } from "../../src/turns";
import type { TestApp } from "./app";

/** A turn of the event loop (I/O, timers): what a request from another client waits for. */
export const aTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Each reading of the injected clock finds the work a slice older, so a loop that checks
 * `yieldWhenDue` gives turns at every other check. Undo with `useTurnClock(null)`.
 */
export function turnsAtEveryOtherCheck() {
  let now = 0;
  useTurnClock({ now: () => (now += SLICE_MS) });
}

/**
 * Asks `/livez` again and again, each request waiting for a turn of the event loop first, calling
 * `answered` for each 200 until stopped; answers how to stop it (which waits for the last ask).
 * The liveness probe touches nothing else: it waits for nothing but the loop's turns.
 */
export function askLivez(t: TestApp, answered: () => void): () => Promise<void> {
  let done = false;
  const asking = (async () => {
    while (!done) {
      await aTurn();
      if (done) break;
      const r = await t.req("GET", "/livez", { token: null });
      await r.arrayBuffer();
      if (r.status === 200 && !done) answered();
    }
  })();
  return async () => {
    done = true;
    await asking;
  };
}

/** Counts the event loop's turns: a callback that arms itself again at each turn, until stopped. */
export function turnCounter() {
  let turns = 0;
  let on = true;
  const tick = () => {
    turns++;
    if (on) setImmediate(tick);
  };
  setImmediate(tick);
  return {
    get turns() {
      return turns;
    },
    stop() {
      on = false;
    },
  };
}
