/**
 * Fixtures for the tasks suites: the real app over a real redis-server behind the Upstash
 * bridge, an in-process task worker with short timeouts, and a webhook receiver on loopback.
 */
import { servicesOf } from "../../src/app";
import { createUpstashRedis } from "../../src/services/redis";
import type { RedisClient } from "../../src/services/redis-types";
import type { TaskQueue } from "../../src/services/tasks/queue";
import { startWorker, type TaskWorker } from "../../src/services/tasks/worker";
import { makeTestApp, type TestApp } from "../helpers/app";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import { waitFor as waitUntil } from "../helpers/wait";

/** Short enough for tests, long enough that a live worker's heartbeat never misses. */
const TEST_TASKS = {
  visibilityTimeoutMs: 1_000,
  backoffBaseMs: 50,
  backoffMaxMs: 400,
  maxAttempts: 4,
  webhookTimeoutMs: 2_000,
};

export interface TasksEnv {
  t: TestApp;
  stack: RedisStack;
  redis: RedisClient;
  queue: TaskQueue;
  /** Starts the in-process worker (fast polling); stopped by `close()`. */
  startWorker(): TaskWorker;
  close(): Promise<void>;
}

/** Receivers run on loopback: deliveries there are refused unless allowed (decision 0067). */
export const LOOPBACK_ALLOWED = { WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8" };

export async function makeTasksEnv(
  env: Record<string, string> = {},
  tasks: Partial<typeof TEST_TASKS> & { webhookPerTarget?: number } = {},
): Promise<TasksEnv> {
  const stack = await startRedisStack();
  const redis = createUpstashRedis({ url: stack.bridge.url, token: stack.bridge.token });
  const t = await makeTestApp(
    { ...LOOPBACK_ALLOWED, ...env },
    { redis: { tasks: redis }, tasks: { ...TEST_TASKS, ...tasks } },
  );
  const queue = servicesOf(t.app).tasks!;
  const workers: TaskWorker[] = [];
  return {
    t,
    stack,
    redis,
    queue,
    startWorker() {
      const w = startWorker(queue, { idleMs: 20, maintainEveryMs: 50, concurrency: 2 });
      workers.push(w);
      return w;
    },
    async close() {
      await Promise.all(workers.map((w) => w.stop(5_000)));
      await t.close();
      await stack.stop();
    },
  };
}

export interface Delivery {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** A webhook receiver on 127.0.0.1; `respond` decides each answer (default 200). */
export function startReceiver(
  respond: (delivery: Delivery, n: number) => Response | Promise<Response> = () =>
    new Response("ok"),
) {
  const received: Delivery[] = [];
  let answer = respond;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const delivery: Delivery = {
        method: req.method,
        path: url.pathname + url.search,
        headers: Object.fromEntries(req.headers),
        body: await req.text(),
      };
      received.push(delivery);
      return answer(delivery, received.length);
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/hook`,
    received,
    respondWith(fn: typeof respond) {
      answer = fn;
    },
    stop: () => server.stop(true),
  };
}

/** Polls `check` until it returns a truthy value; fails after `timeoutMs` (a hang bound). */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T> | T,
  timeoutMs = 15_000,
  intervalMs = 20,
): Promise<T> {
  return (await waitUntil(check, { timeoutMs, intervalMs, message: what })) as T;
}

/** Hex HMAC-SHA512, computed independently of the app (node:crypto). */
export async function hmacSha512(secret: string, body: string): Promise<string> {
  const { createHmac } = await import("node:crypto");
  return createHmac("sha512", secret).update(body, "utf8").digest("hex");
}

/** A webhook and an event rule calling it, through the API. */
export async function hookAndRule(
  t: TestApp,
  opts: {
    url: string;
    name?: string;
    secret?: string;
    objectTypes?: string[];
    eventTypes?: string[];
    conditions?: unknown;
    webhook?: Record<string, unknown>;
  },
) {
  const name = opts.name ?? `hook-${crypto.randomUUID().slice(0, 8)}`;
  const hook = await t.json("POST", "/api/extras/webhooks/", {
    body: { name, payload_url: opts.url, secret: opts.secret ?? "", ...(opts.webhook ?? {}) },
  });
  if (hook.status !== 201) throw new Error(`webhook: ${hook.status} ${JSON.stringify(hook.body)}`);
  const rule = await t.json("POST", "/api/extras/event-rules/", {
    body: {
      name,
      object_types: opts.objectTypes ?? ["dcim.site"],
      event_types: opts.eventTypes ?? ["object_created", "object_updated", "object_deleted"],
      conditions: opts.conditions ?? null,
      action_type: "webhook",
      action_object_type: "extras.webhook",
      action_object_id: hook.body.id,
    },
  });
  if (rule.status !== 201)
    throw new Error(`event rule: ${rule.status} ${JSON.stringify(rule.body)}`);
  return { hook: hook.body, rule: rule.body };
}

/** Jobs of a name, through the API. */
export async function jobsNamed(t: TestApp, name: string): Promise<any[]> {
  const r = await t.json(
    "GET",
    `/api/core/jobs/?name=${encodeURIComponent(name)}&limit=1000&ordering=id`,
  );
  if (r.status !== 200) throw new Error(`jobs: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.results;
}

/**
 * Waits for the relay after the answer to hand job `jobId` to Redis, read on the database `file`
 * directly (so a round-trip count does not see it): marked relayed, or already in Redis (a
 * hand-over past its bound may still land, unmarked). A relay that missed its bound on a busy
 * machine leaves the row to the relay loop's pass, which this then runs.
 */
export async function handedToRedis(
  env: TasksEnv,
  file: { execute(q: { sql: string; args: number[] }): Promise<{ rows: any[] }> },
  jobId: number,
) {
  const marked = async () =>
    (await file.execute({ sql: "SELECT relayed FROM outbox WHERE job_id = ?", args: [jobId] }))
      .rows[0]?.relayed != null;
  const inRedis = async () => (await env.queue.depth()).ready > 0;
  const handed = await waitUntil(async () => (await marked()) || (await inRedis()), {
    timeoutMs: 5_000,
  }).catch(() => false);
  if (!handed) await env.queue.outbox.relayPending({ all: true });
  if (!(await inRedis())) throw new Error(`job ${jobId} was never handed to Redis`);
}
