/**
 * At-least-once delivery through tasks-Redis faults (issue 13): a bounded write load of site
 * creates, each matching one event rule, while the tasks Redis (a real redis-server behind the
 * Upstash bridge) is frozen, stopped and restarted, or restarted empty. Afterwards every
 * committed change has reached the receiver on 127.0.0.1; repeats carry the key of their first
 * delivery. See tests/tasks/fault-run.ts and bench/outbox-faults.ts for the figures.
 *
 * The three runs go side by side (`test.concurrent`): each has its own redis-server, bridge,
 * app, worker and receiver, and most of a run is waiting (paced writers, a slow receiver).
 */
import { expect, test } from "bun:test";
import { runFault, type FaultRunResult } from "./fault-run";

// A receiver slower than the writers, so a backlog sits in Redis when the fault hits.
const LOAD = {
  writes: 200,
  lanes: 2,
  paceMs: 20,
  faultAfter: 60,
  // the fault lasts until this many creates were answered during it (a count, not a time)
  faultWrites: 20,
  settleMs: 40_000,
  receiverDelayMs: 60,
};

function expectAllDelivered(r: FaultRunResult) {
  expect(r.refused).toBe(0);
  expect(r.sent).toBe(LOAD.writes);
  expect(r.faultLatencies.length).toBeGreaterThanOrEqual(LOAD.faultWrites); // writes landed inside the fault
  expect({ lost: r.lost, delivered: r.delivered }).toEqual({ lost: 0, delivered: r.sent });
  expect(r.unkeyed).toBe(0);
  expect(r.keyMismatches).toBe(0);
}

test.concurrent("tasks Redis frozen (SIGSTOP): every change delivered, and creates do not wait for Redis", async () => {
  const r = await runFault("freeze", LOAD);
  // Before the outbox each create waited for the enqueue to time out (seconds); now they are
  // answered while Redis stays frozen (their latency against normal: bench/outbox-faults.ts).
  expectAllDelivered(r);
}, 90_000);

test.concurrent("tasks Redis stopped and started again (append-only file): every change delivered", async () => {
  const r = await runFault("stop", LOAD);
  expect(r.queuedAtFault).toBeGreaterThan(0);
  expectAllDelivered(r);
}, 90_000);

test.concurrent("tasks Redis restarted empty: the sweep re-queues what it lost, every change delivered", async () => {
  const r = await runFault("restart-empty", LOAD);
  expect(r.queuedAtFault).toBeGreaterThan(0); // there was something to lose
  expectAllDelivered(r);
}, 90_000);
