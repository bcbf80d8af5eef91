/**
 * The Upstash REST link misbehaving (not the Redis process: tests/tasks/outbox-faults and
 * tests/faults/optional-cache stop and freeze that): a fault-injecting proxy between the real
 * `@upstash/redis` client and the REST bridge over a real redis-server answers 5xx, garbage,
 * resets mid-answer or hangs, for both the cache and the tasks Redis at once. Reads and writes
 * are served from the database meanwhile, the health page names the failing Redis checks
 * without echoing what the endpoint sent, every event of a write made during the fault is
 * delivered once the link is back, and the checks recover by themselves.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startFaultProxy, type FaultKind, type FaultProxy } from "../helpers/fault-proxy";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import { TIMED_OUT, waitFor, within } from "../helpers/wait";
import { HEALTH, healthJson, makeHealthApp, type HealthApp } from "../healthcheck/helpers";
import { hookAndRule, LOOPBACK_ALLOWED, startReceiver } from "../tasks/harness";
import { servicesOf } from "../../src/app";
import { startWorker } from "../../src/services/tasks/worker";

// A failure bound on one answer (a hung request), never asserted as a time.
const HUNG = 30_000;
// What the proxy's `malformed` answer holds: it must never reach the health page.
const GARBAGE = '{"baton": null';

let stack: RedisStack;
let proxy: FaultProxy;
let t: HealthApp;
let receiver: ReturnType<typeof startReceiver>;

beforeAll(async () => {
  stack = await startRedisStack();
  proxy = await startFaultProxy(stack.bridge.url);
  t = await makeHealthApp({
    ...LOOPBACK_ALLOWED,
    REDIS_CACHING_URL: proxy.url,
    REDIS_CACHING_TOKEN: stack.bridge.token,
    REDIS_TASKS_URL: proxy.url,
    REDIS_TASKS_TOKEN: stack.bridge.token,
    CACHE_BACKEND: "redis",
    PLUGINS_CONFIG: JSON.stringify({ host_healthcheck_plugin: { timeout_ms: 10_000 } }),
  });
  receiver = startReceiver();
  await hookAndRule(t, { url: receiver.url, eventTypes: ["object_created"] });
});
afterAll(async () => {
  proxy.clear();
  receiver.stop();
  await t.close();
  await proxy.stop();
  await stack.stop();
});

async function answered<T>(what: string, pending: Promise<T>): Promise<T> {
  const r = await within(pending, HUNG);
  if (r === TIMED_OUT) throw new Error(`${what}: no answer within ${HUNG} ms (hung)`);
  return r;
}

const REDIS_CHECKS = ["CacheBackend", "HostRedisCacheHealthCheck", "HostRedisTasksHealthCheck"];

describe("the Upstash REST link failing", () => {
  for (const kind of ["status", "malformed", "reset-mid", "hang"] as FaultKind[]) {
    test(`${kind}: requests served, the health page names the Redis checks, events delivered after`, async () => {
      const slug = `redis-${kind}`;
      proxy.inject({ kind });
      const list = await answered("GET", t.json("GET", "/api/dcim/sites/"));
      expect(list.status).toBe(200);
      const made = await answered(
        "POST",
        t.json("POST", "/api/dcim/sites/", { body: { name: slug, slug } }),
      );
      expect(made.status).toBe(201);
      const page = await answered("health", healthJson(t, { path: HEALTH }));
      proxy.clear();
      expect(page.body.checks.Database).toBe("working");
      for (const id of REDIS_CHECKS) expect(page.body.checks[id]).toMatch(/^unavailable: /);
      expect(JSON.stringify(page.body)).not.toContain(stack.bridge.token);
      // each Redis check's line names the failure, never echoing what the endpoint sent
      for (const id of REDIS_CHECKS) {
        const line = String(page.body.checks[id]);
        expect(line).not.toContain(GARBAGE);
        expect(line.length).toBeLessThan(300);
      }

      // The link back: the event of the create made during the fault is delivered.
      const worker = startWorker(servicesOf(t.app).tasks!, {
        idleMs: 20,
        maintainEveryMs: 50,
        relayEveryMs: 50,
      });
      try {
        await waitFor(() => receiver.received.some((d) => JSON.parse(d.body).data?.slug === slug), {
          timeoutMs: 20_000,
          message: `the delivery of ${slug}`,
        });
      } finally {
        await worker.stop(5_000);
      }
      // and the checks recover by themselves (the resilient cache retries after its pause)
      await waitFor(
        async () => {
          const r = await healthJson(t, { path: HEALTH });
          return REDIS_CHECKS.every((id) => r.body.checks[id] === "working");
        },
        { message: "the Redis checks working again" },
      );
    });
  }
});
