/**
 * The tasks check reads the job queue: depth, the oldest pending job's age and the last worker
 * heartbeat, as health+json observed values; past the `queue` thresholds (or with no worker
 * seen) it warns (HTTP 200), or fails with `on_problem: fail`. Real redis-server behind the
 * Upstash bridge, the real queue and the real worker loop.
 */
import { afterAll, beforeAll, describe, expect, test, afterEach } from "bun:test";
import { servicesOf } from "../../src/app";
import { createUpstashRedis } from "../../src/services/redis";
import type { RedisClient } from "../../src/services/redis-types";
import { heartbeatKey } from "../../src/services/tasks/heartbeat";
import type { TaskQueue } from "../../src/services/tasks/queue";
import { startWorker } from "../../src/services/tasks/worker";
import { makeTestApp, type TestApp } from "../helpers/app";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import { waitFor } from "../helpers/wait";
import { HEALTH, healthConfig, healthJson } from "./helpers";
import { startupError, resetFixtures } from "./fixtures";

afterEach(resetFixtures);

let stack: RedisStack;
let redis: RedisClient;
const open: TestApp[] = [];
beforeAll(async () => {
  stack = await startRedisStack();
  redis = createUpstashRedis({ url: stack.bridge.url, token: stack.bridge.token });
});
afterAll(async () => {
  await Promise.all(open.map((t) => t.close()));
  await stack?.stop();
});

const TASKS_CHECK = "host_healthcheck_plugin.backends.redis.HostRedisTasksHealthCheck";
let n = 0;

/** An app whose health page runs the tasks check only, on its own queue keys, with a no-op job. */
async function queueApp(
  queue: Record<string, unknown> = {},
): Promise<{ t: TestApp; q: TaskQueue }> {
  const env = {
    REDIS_TASKS_URL: stack.bridge.url,
    REDIS_TASKS_TOKEN: stack.bridge.token,
    PLUGINS_CONFIG: healthConfig({ checks: [TASKS_CHECK], queue }),
  };
  const t = await makeTestApp(env, {
    redis: { tasks: redis },
    tasks: { prefix: `health-q${++n}`, visibilityTimeoutMs: 1_000, backoffBaseMs: 50 },
  });
  open.push(t);
  const q = servicesOf(t.app).tasks!;
  q.register("test.noop", async () => ({ ok: true }));
  return { t, q };
}

async function observed(
  t: TestApp,
): Promise<{ status: number; body: any; values: Record<string, unknown> }> {
  const res = await t.req("GET", `${HEALTH}?format=health%2Bjson`, { token: null });
  const body = await res.json();
  const entries = body.checks.HostRedisTasksHealthCheck as Array<{
    measurementName?: string;
    observedValue: unknown;
  }>;
  const values = Object.fromEntries(
    entries.filter((e) => e.measurementName).map((e) => [e.measurementName, e.observedValue]),
  );
  return { status: res.status, body, values };
}

describe("queue figures", () => {
  test("an idle queue with no worker yet is working; the figures are observed values", async () => {
    const { t } = await queueApp();
    const r = await healthJson(t);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: "working", checks: { HostRedisTasksHealthCheck: "working" } });
    const o = await observed(t);
    expect(o.values).toEqual({
      queue_depth: 0,
      running_jobs: 0,
      pending_jobs: 0,
      oldest_pending_age: null,
      worker_heartbeat_age: null,
    });
    const units = Object.fromEntries(
      o.body.checks.HostRedisTasksHealthCheck.slice(1).map((e: any) => [
        e.measurementName,
        e.observedUnit,
      ]),
    );
    expect(units).toEqual({
      queue_depth: "jobs",
      running_jobs: "jobs",
      pending_jobs: "jobs",
      oldest_pending_age: "s",
      worker_heartbeat_age: "s",
    });
  });

  test("jobs waiting with no worker: warning (HTTP 200, degraded); a worker's heartbeat clears it", async () => {
    const { t, q } = await queueApp();
    for (let i = 0; i < 3; i++) await q.enqueue("test.noop", { i });
    const r = await healthJson(t);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      status: "degraded",
      checks: {
        HostRedisTasksHealthCheck: "warning: no task worker has been seen and 3 jobs wait",
      },
    });
    const o = await observed(t);
    expect(o.body.status).toBe("warn");
    expect(o.values.queue_depth).toBe(3);
    expect(o.values.pending_jobs).toBe(3);
    expect(o.values.oldest_pending_age).toBeGreaterThanOrEqual(0);

    const worker = startWorker(q, { idleMs: 20, maintainEveryMs: 50, concurrency: 2 });
    try {
      await waitFor(async () => (await q.stats()).pending === 0, { message: "the worker drained" });
    } finally {
      await worker.stop(2_000);
    }
    const after = await observed(t);
    expect(after.status).toBe(200);
    expect(after.body.status).toBe("pass");
    expect(after.values).toMatchObject({
      queue_depth: 0,
      pending_jobs: 0,
      oldest_pending_age: null,
      worker_runtime: "bun",
    });
    expect(after.values.worker_heartbeat_age).toBeGreaterThanOrEqual(0); // seen; "pass": not stale
  });

  test("over max_depth, or the oldest job over max_pending_age_seconds: warning", async () => {
    const { t, q } = await queueApp({ max_depth: 2, max_pending_age_seconds: 60 });
    await redis.set(heartbeatKey(q), JSON.stringify({ at: Date.now(), runtime: "bun" }));
    for (let i = 0; i < 3; i++) await q.enqueue("test.noop", { i });
    await t.deps.db.client.execute({
      sql: "UPDATE jobs SET created = ? WHERE status = 'pending'",
      args: [new Date(Date.now() - 120_000).toISOString()],
    });
    const r = await healthJson(t);
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("degraded");
    expect(r.body.checks.HostRedisTasksHealthCheck).toBe(
      "warning: 3 jobs waiting (max_depth 2); warning: the oldest pending job has waited 120 s (max_pending_age_seconds 60)",
    );
    expect((await observed(t)).values.oldest_pending_age).toBeGreaterThanOrEqual(120);
  });

  test("a worker that stopped beating: warning, or a failure (500) with on_problem: fail", async () => {
    for (const [queue, status, text] of [
      [
        { worker_stale_seconds: 30 },
        200,
        "warning: no task worker seen for 60 s (worker_stale_seconds 30)",
      ],
      [
        { worker_stale_seconds: 30, on_problem: "fail" },
        500,
        "unavailable: no task worker seen for 60 s (worker_stale_seconds 30)",
      ],
    ] as const) {
      const { t, q } = await queueApp(queue);
      await redis.set(
        heartbeatKey(q),
        JSON.stringify({ at: Date.now() - 60_000, runtime: "workerd" }),
      );
      const r = await healthJson(t);
      expect(r.status).toBe(status);
      expect(r.body.checks.HostRedisTasksHealthCheck).toBe(text);
      expect((await observed(t)).values).toMatchObject({ worker_runtime: "workerd" });
      expect((await t.req("GET", "/readyz", { token: null })).status).toBe(
        status === 500 ? 503 : 200,
      );
    }
  });

  test("bad queue settings stop start-up with one line", async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ max_depth: 0 }, /host_healthcheck_plugin\.queue\.max_depth: must be at least 1$/],
      [
        { max_depth: 2.5 },
        /host_healthcheck_plugin\.queue\.max_depth: must be a whole number of jobs$/,
      ],
      [
        { worker_stale_seconds: 5 },
        /host_healthcheck_plugin\.queue\.worker_stale_seconds: must be at least 10$/,
      ],
      [
        { on_problem: "panic" },
        /host_healthcheck_plugin\.queue\.on_problem: must be warning or fail$/,
      ],
      [
        { max_jobs: 5 },
        /host_healthcheck_plugin\.queue: unknown key "max_jobs" \(known: max_depth, max_pending_age_seconds, worker_stale_seconds, on_problem\)$/,
      ],
      ["lots", /host_healthcheck_plugin\.queue: must be an object/],
    ];
    for (const [queue, pattern] of cases) expect(await startupError({ queue })).toMatch(pattern);
  });
});
