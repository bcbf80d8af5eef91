/**
 * One tasks-Redis fault under a bounded write load, measured from outside: the real app over a
 * libSQL file, its task worker, a real redis-server behind the Upstash bridge, and a webhook
 * receiver on 127.0.0.1 counting deliveries by `Idempotency-Key`. Used by
 * tests/tasks/outbox-faults.test.ts and bench/outbox-faults.ts.
 */
import { servicesOf } from "../../src/app";
import { createUpstashRedis } from "../../src/services/redis";
import { startWorker } from "../../src/services/tasks/worker";
import { startRedisBridge } from "../../tools/redis-bridge";
import { makeTestApp } from "../helpers/app";
import { startRedisProcess } from "../helpers/redis-process";
import { waitFor } from "../helpers/wait";
import { hookAndRule, LOOPBACK_ALLOWED, startReceiver } from "./harness";

export type Fault = "none" | "freeze" | "stop" | "restart-empty";

export interface FaultRunOptions {
  /** Creates sent in all (each matches the event rule once). */
  writes?: number;
  /** Parallel writers; each waits `paceMs` between its writes. */
  lanes?: number;
  paceMs?: number;
  /** The fault starts after this many writes and lasts `faultMs`… */
  faultAfter?: number;
  faultMs?: number;
  /** …or, when set, until this many creates were answered during it (no clock: the tests). */
  faultWrites?: number;
  /** How long to wait for the deliveries after the load. */
  settleMs?: number;
  /** The receiver answers after this long (a slow receiver builds a backlog in Redis). */
  receiverDelayMs?: number;
}

export interface FaultRunResult {
  fault: Fault;
  /** Creates answered 201: committed changes that match the rule. */
  sent: number;
  /** Changes delivered at least once. */
  delivered: number;
  /** Extra deliveries (repeats, each with the key of its first delivery). */
  duplicated: number;
  /** Committed changes never delivered within `settleMs`. */
  lost: number;
  /** Keys that arrived for two different changes, or changes delivered under two keys: must be 0. */
  keyMismatches: number;
  /** Deliveries without an `Idempotency-Key`: must be 0. */
  unkeyed: number;
  /** Create latencies (ms) while the fault lasted, and outside it. */
  faultLatencies: number[];
  normalLatencies: number[];
  /** Non-201 answers. */
  refused: number;
  /** From the end of the fault to the last first delivery (ms). */
  recoveryMs: number;
  /** Messages in the tasks Redis (ready + processing) when the fault hit: what a restart-empty loses. */
  queuedAtFault: number;
}

/** Queue and worker timings short enough for a test run. */
const FAST_TASKS = {
  visibilityTimeoutMs: 1_000,
  backoffBaseMs: 50,
  backoffMaxMs: 400,
  maxAttempts: 8,
  webhookTimeoutMs: 2_000,
  sweepGraceMs: 500,
};

export function percentile(values: number[], p: number): number {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[
    Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  ]!;
}

export async function runFault(
  fault: Fault,
  options: FaultRunOptions = {},
): Promise<FaultRunResult> {
  const writes = options.writes ?? 150;
  const lanes = options.lanes ?? 2;
  const paceMs = options.paceMs ?? 20;
  const faultAfter = options.faultAfter ?? Math.floor(writes / 4);
  const faultMs = options.faultMs ?? 1_500;
  const settleMs = options.settleMs ?? 30_000;

  const redis = await startRedisProcess();
  const token = `fault-${crypto.randomUUID()}`;
  const bridge = await startRedisBridge({ redisUrl: redis.url, token });
  const client = createUpstashRedis({ url: bridge.url, token }, { timeoutMs: 1_000 });
  const t = await makeTestApp(LOOPBACK_ALLOWED, { redis: { tasks: client }, tasks: FAST_TASKS });
  const queue = servicesOf(t.app).tasks!;
  const worker = startWorker(queue, {
    idleMs: 20,
    maintainEveryMs: 100,
    relayEveryMs: 50,
    sweepEveryMs: 250,
    concurrency: 4,
  });
  const receiverDelayMs = options.receiverDelayMs ?? 0;
  const receiver = startReceiver(async () => {
    if (receiverDelayMs) await Bun.sleep(receiverDelayMs);
    return new Response("ok");
  });
  try {
    await hookAndRule(t, { url: receiver.url, eventTypes: ["object_created"] });

    const sites = new Set<number>();
    const faultLatencies: number[] = [];
    const normalLatencies: number[] = [];
    let refused = 0;
    let started = 0;
    let faultState: "before" | "during" | "after" = "before";
    let faultDone: Promise<void> = Promise.resolve();
    let faultEndedAt = 0;

    // how long the fault lasts: a count of creates answered during it, or (the bench) a time
    const faultWrites = options.faultWrites;
    const lasts = () =>
      faultWrites === undefined
        ? Bun.sleep(faultMs)
        : waitFor(() => faultLatencies.length >= faultWrites || started >= writes, {
            timeoutMs: 60_000,
            message: `${faultWrites} creates during the fault`,
          });
    let queuedAtFault = 0;
    const inject = async () => {
      queuedAtFault =
        (await client.llen(queue.keys.ready)) + (await client.llen(queue.keys.processing));
      faultState = "during";
      if (fault === "freeze") redis.freeze();
      else if (fault === "stop") await redis.stop();
      else if (fault === "restart-empty") await redis.kill();
      await lasts();
      if (fault === "freeze") redis.thaw();
      else if (fault === "stop") await redis.start();
      else if (fault === "restart-empty") await redis.start({ empty: true });
      faultEndedAt = Date.now();
      faultState = "after";
    };

    const deadline = Date.now() + 120_000; // the load loop is bounded in count and in time
    const lane = async () => {
      while (started < writes && Date.now() < deadline) {
        const n = ++started;
        if (n === faultAfter + 1 && faultState === "before") faultDone = inject();
        const during = faultState === "during";
        const t0 = performance.now();
        const r = await t.req("POST", "/api/dcim/sites/", {
          body: { name: `Fault ${n}`, slug: `fault-${n}` },
        });
        const ms = performance.now() - t0;
        if (r.status === 201) sites.add(((await r.json()) as { id: number }).id);
        else refused++;
        (during && faultState === "during" ? faultLatencies : normalLatencies).push(ms);
        await Bun.sleep(paceMs);
      }
    };
    await Promise.all(Array.from({ length: lanes }, lane));
    await faultDone;

    const firstDelivery = new Map<number, number>();
    const deliveredSites = () => {
      for (const d of receiver.received) {
        const id = JSON.parse(d.body).data.id as number;
        if (!firstDelivery.has(id)) firstDelivery.set(id, Date.now());
      }
      return [...sites].every((id) => firstDelivery.has(id));
    };
    // what is not delivered within `settleMs` counts as lost (reported, not thrown)
    await waitFor(deliveredSites, { timeoutMs: settleMs, intervalMs: 50 }).catch(() => false);
    // late repeats (expired leases) still count as duplicates: wait until the queue holds
    // nothing that could be delivered again
    await waitFor(
      async () => {
        const d = await queue.depth();
        return d.ready + d.processing + d.delayed === 0;
      },
      { timeoutMs: settleMs, message: "the tasks queue to empty" },
    ).catch(() => false);
    deliveredSites();

    const keyToSite = new Map<string, Set<number>>();
    const siteToKey = new Map<number, Set<string>>();
    let unkeyed = 0;
    for (const d of receiver.received) {
      const key = d.headers["idempotency-key"];
      const id = JSON.parse(d.body).data.id as number;
      if (!key) {
        unkeyed++;
        continue;
      }
      keyToSite.set(key, (keyToSite.get(key) ?? new Set()).add(id));
      siteToKey.set(id, (siteToKey.get(id) ?? new Set()).add(key));
    }
    const keyMismatches =
      [...keyToSite.values()].filter((s) => s.size > 1).length +
      [...siteToKey.values()].filter((k) => k.size > 1).length;
    const delivered = [...sites].filter((id) => firstDelivery.has(id)).length;
    const lastFirst = Math.max(0, ...[...firstDelivery.values()]);
    return {
      fault,
      sent: sites.size,
      delivered,
      duplicated: receiver.received.length - keyToSite.size - unkeyed,
      lost: sites.size - delivered,
      keyMismatches,
      unkeyed,
      faultLatencies,
      normalLatencies,
      refused,
      recoveryMs: faultEndedAt ? Math.max(0, lastFirst - faultEndedAt) : 0,
      queuedAtFault,
    };
  } finally {
    await worker.stop(5_000);
    receiver.stop();
    await client.close();
    await t.close();
    await bridge.stop();
    await redis.close();
  }
}
