/**
 * At-least-once delivery through tasks-Redis faults (issue 13): a bounded write load of site
 * creates, each matching one event rule, while the tasks Redis (a real redis-server behind the
 * Upstash bridge) is frozen, stopped and restarted, or restarted empty. Afterwards every
 * committed change has reached the receiver on 127.0.0.1; repeats carry the key of their first
 * delivery. See tests/tasks/fault-run.ts and bench/outbox-faults.ts for the figures.
 */
import { expect, test } from "bun:test";
import { percentile, runFault, type FaultRunResult } from "./fault-run";

// A receiver slower than the writers, so a backlog sits in Redis when the fault hits.
const LOAD = {
  writes: 200,
  lanes: 2,
  paceMs: 20,
  faultAfter: 60,
  faultMs: 1_500,
  settleMs: 40_000,
  receiverDelayMs: 60,
};

function expectAllDelivered(r: FaultRunResult) {
  expect(r.refused).toBe(0);
  expect(r.sent).toBe(LOAD.writes);
  expect(r.faultLatencies.length).toBeGreaterThan(10); // writes did land inside the fault
  expect({ lost: r.lost, delivered: r.delivered }).toEqual({ lost: 0, delivered: r.sent });
  expect(r.unkeyed).toBe(0);
  expect(r.keyMismatches).toBe(0);
}

test("tasks Redis frozen (SIGSTOP): every change delivered, and creates do not wait for Redis", async () => {
  const r = await runFault("freeze", LOAD);
  expectAllDelivered(r);
  // Before the outbox each create waited for the enqueue to time out (seconds). Now a request
  // never waits on Redis: latency while frozen stays within 2× of normal.
  const normal = percentile(r.normalLatencies, 50);
  expect(percentile(r.faultLatencies, 50)).toBeLessThanOrEqual(2 * normal + 5);
  expect(percentile(r.faultLatencies, 99)).toBeLessThan(250);
}, 90_000);

test("tasks Redis stopped and started again (append-only file): every change delivered", async () => {
  const r = await runFault("stop", LOAD);
  expect(r.queuedAtFault).toBeGreaterThan(0);
  expectAllDelivered(r);
}, 90_000);

test("tasks Redis restarted empty: the sweep re-queues what it lost, every change delivered", async () => {
  const r = await runFault("restart-empty", LOAD);
  expect(r.queuedAtFault).toBeGreaterThan(0); // there was something to lose
  expectAllDelivered(r);
}, 90_000);
