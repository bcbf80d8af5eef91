/**
 * The transactional outbox (docs/decisions/0037-tasks-outbox.md): a delivery job is written with
 * the change it comes from, relayed to the tasks Redis after commit within a bound, retried
 * while Redis does not take it, re-queued by the sweep when Redis lost it, and every delivery
 * carries a stable `Idempotency-Key`. Real redis-server behind the Upstash bridge throughout.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { RedisClient as BunRedis } from "bun";
import { eq } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { jobs, outbox } from "../../src/db/schema";
import { createUpstashRedis } from "../../src/services/redis";
import type { RedisClient } from "../../src/services/redis-types";
import type { TaskQueue } from "../../src/services/tasks/queue";
import { startWorker, type TaskWorker } from "../../src/services/tasks/worker";
import { startRedisBridge, type RedisBridge } from "../../tools/redis-bridge";
import { makeTestApp, type TestApp } from "../helpers/app";
import { startRedisProcess, type RedisProcess } from "../helpers/redis-process";
import { TIMED_OUT, within } from "../helpers/wait";
import { hookAndRule, jobsNamed, LOOPBACK_ALLOWED, startReceiver, waitFor } from "./harness";

let redis: RedisProcess;
let bridge: RedisBridge;
let client: RedisClient;
let t: TestApp;
let queue: TaskQueue;
let worker: TaskWorker | null = null;
const cleanups: Array<() => unknown> = [];

beforeAll(async () => {
  redis = await startRedisProcess();
  const token = `outbox-${crypto.randomUUID()}`;
  bridge = await startRedisBridge({ redisUrl: redis.url, token });
  client = createUpstashRedis({ url: bridge.url, token }, { timeoutMs: 1_000 });
  t = await makeTestApp(
    { LOG_LEVEL: process.env.DEBUG_OUTBOX ? "debug" : "silent", ...LOOPBACK_ALLOWED },
    {
      redis: { tasks: client },
      tasks: {
        visibilityTimeoutMs: 1_000,
        backoffBaseMs: 50,
        backoffMaxMs: 400,
        maxAttempts: 4,
        sweepGraceMs: 300,
      },
    },
  );
  queue = servicesOf(t.app).tasks!;
});
afterEach(async () => {
  redis.thaw();
  await worker?.stop(5_000);
  worker = null;
  for (const fn of cleanups.splice(0).reverse()) await fn();
});
afterAll(async () => {
  await client.close();
  await t.close();
  await bridge.stop();
  await redis.close();
});

const work = () =>
  (worker = startWorker(queue, {
    idleMs: 20,
    maintainEveryMs: 50,
    relayEveryMs: 50,
    sweepEveryMs: 100,
    concurrency: 2,
  }));

async function subscribe(respond?: Parameters<typeof startReceiver>[0]) {
  const receiver = startReceiver(respond);
  const { hook, rule } = await hookAndRule(t, {
    url: receiver.url,
    eventTypes: ["object_created"],
  });
  cleanups.push(
    () => receiver.stop(),
    async () => {
      await t.req("DELETE", `/api/extras/event-rules/${rule.id}/`);
      await t.req("DELETE", `/api/extras/webhooks/${hook.id}/`);
    },
  );
  return { receiver, hook };
}

let n = 0;
async function createSite() {
  const i = ++n;
  const r = await t.json("POST", "/api/dcim/sites/", {
    body: { name: `Outbox ${i}`, slug: `outbox-${i}` },
  });
  expect(r.status).toBe(201);
  return { site: r.body };
}

const jobOf = async (hookId: number) =>
  (await jobsNamed(t, "webhook.deliver")).filter((j) => j.object_id === hookId);
const outboxOf = async (jobId: number) =>
  (await t.deps.db.orm.select().from(outbox).where(eq(outbox.jobId, jobId)))[0];
/** Waits until the job's row is relayed, running the relay loop's pass as a worker would. */
const relayed = (jobId: number) =>
  waitFor("the relay", async () => {
    await queue.outbox.relayPending({ all: true }).catch(() => 0);
    return (await outboxOf(jobId))!.relayed !== null;
  });
/** Other tests' jobs out of the way: the sweep looks at every live job. */
const settleOthers = () =>
  t.deps.db.orm.update(jobs).set({ status: "completed" }).where(eq(jobs.status, "pending"));

test("the delivery job and its outbox row commit with the change; a rolled-back write leaves neither", async () => {
  const { hook } = await subscribe();
  const before = (await t.deps.db.orm.select().from(outbox)).length;
  const bad = await t.json("POST", "/api/dcim/sites/", {
    body: [
      { name: "Rolled ok", slug: "rolled-ok" },
      { name: "Rolled bad", slug: "rolled bad" },
    ],
  });
  expect(bad.status).toBe(400);
  expect((await t.deps.db.orm.select().from(outbox)).length).toBe(before);
  expect(await jobOf(hook.id)).toEqual([]);

  await createSite();
  const [job] = await jobOf(hook.id);
  expect(job).toMatchObject({ status: { value: "pending" }, attempts: 0 });
  const row = await outboxOf(job.id);
  expect(row).toMatchObject({ name: "webhook.deliver", maxAttempts: 4, tries: 0 });
  expect(row!.key).toMatch(/^[0-9a-f-]{36}$/);
  // Relayed right after the commit (no worker runs): the message is on the ready list.
  await waitFor("the relay", async () => (await outboxOf(job.id))!.relayed !== null);
  expect(
    (await client.lrange(queue.keys.ready, 0, -1))
      .map((m) => JSON.parse(m))
      .filter((m) => m.id === job.id),
  ).toEqual([expect.objectContaining({ id: job.id, attempt: 1, key: row!.key })]);
  await client.del(queue.keys.ready);
});

test("tasks Redis frozen at commit: the create does not wait, the job stays pending, and is delivered once Redis is back", async () => {
  const { receiver, hook } = await subscribe();
  await createSite(); // warm
  await waitFor("the warm-up job relayed", async () =>
    (await t.deps.db.orm.select().from(outbox)).every((r) => r.relayed !== null),
  );
  await client.del(queue.keys.ready);

  redis.freeze();
  // No request waits on Redis: all five creates are answered while it is still frozen (their
  // latency against the normal case is measured in bench/outbox-faults.ts).
  for (let i = 0; i < 5; i++) await createSite();
  // Redis cannot take a message while frozen, so nothing can have been marked relayed.
  const pending = (await jobOf(hook.id)).slice(-5);
  expect(pending.map((j) => j.status.value)).toEqual(Array(5).fill("pending"));
  for (const j of pending) expect((await outboxOf(j.id))!.relayed).toBeNull();

  work(); // its relay loop tries while Redis is frozen, and counts the failed try on the rows…
  await waitFor("a failed relay try on every pending row", async () => {
    for (const j of pending) if ((await outboxOf(j.id))!.tries < 1) return false;
    return true;
  });
  expect(receiver.received.length).toBe(0);
  for (const j of pending) expect((await outboxOf(j.id))!.relayed).toBeNull();
  redis.thaw(); // …and hands the rows over once it answers
  await waitFor("five deliveries", () => receiver.received.length >= 5, 20_000);
  await waitFor(
    "the jobs to complete",
    async () => (await jobOf(hook.id)).slice(-5).every((j) => j.status.value === "completed"),
    20_000,
  );
  const keys = new Set(receiver.received.map((d) => d.headers["idempotency-key"]));
  expect(keys.size).toBe(receiver.received.length); // no repeats here; and every delivery is keyed
  for (const j of pending) expect(keys.has((await outboxOf(j.id))!.key)).toBe(true);
}, 40_000);

test("the sweep re-queues a relayed job that Redis lost (FLUSHALL), and it is delivered once", async () => {
  const { receiver, hook } = await subscribe();
  await settleOthers();
  await createSite();
  const [job] = await jobOf(hook.id);
  await relayed(job.id);
  const raw = new BunRedis(redis.url);
  await raw.send("FLUSHALL", []);
  raw.close();
  expect(await client.llen(queue.keys.ready)).toBe(0);

  expect(await queue.outbox.sweepLost(Date.now())).toEqual({ requeued: 0, failed: 0 }); // within the grace: left alone
  expect(await queue.outbox.sweepLost(Date.now() + 1_000)).toEqual({ requeued: 1, failed: 0 });
  expect(await queue.outbox.sweepLost(Date.now() + 1_000)).toEqual({ requeued: 0, failed: 0 }); // now on the list again
  work();
  await waitFor("the delivery", () => receiver.received.length >= 1);
  await waitFor(
    "the job to complete",
    async () => (await jobOf(hook.id))[0]!.status.value === "completed",
  );
  expect(receiver.received.length).toBe(1);
  expect(receiver.received[0]!.headers["idempotency-key"]).toBe((await outboxOf(job.id))!.key);
});

test("a running job whose worker died and whose Redis lost it goes back to pending and runs again, same key", async () => {
  const { receiver, hook } = await subscribe();
  await settleOthers();
  await createSite();
  const [job] = await jobOf(hook.id);
  await relayed(job.id);
  // A worker claimed it long ago and died; then Redis lost everything.
  await t.deps.db.orm
    .update(jobs)
    .set({ status: "running", attempts: 1, started: new Date(Date.now() - 60_000).toISOString() })
    .where(eq(jobs.id, job.id));
  await client.del(queue.keys.ready);
  expect(await queue.outbox.sweepLost(Date.now() + 1_000)).toEqual({ requeued: 1, failed: 0 });
  expect((await t.deps.db.orm.select().from(jobs).where(eq(jobs.id, job.id)))[0]).toMatchObject({
    status: "pending",
    attempts: 1,
  });
  work();
  await waitFor(
    "the job to complete",
    async () => (await jobOf(hook.id))[0]!.status.value === "completed",
  );
  expect((await jobOf(hook.id))[0]).toMatchObject({ attempts: 2 });
  expect(receiver.received.map((d) => d.headers["idempotency-key"])).toEqual([
    (await outboxOf(job.id))!.key,
  ]);
});

test("a retried delivery repeats its Idempotency-Key", async () => {
  const { receiver, hook } = await subscribe(
    (_d, i) => new Response(i === 1 ? "busy" : "ok", { status: i === 1 ? 503 : 200 }),
  );
  work();
  await createSite();
  await waitFor("the second attempt", () => receiver.received.length >= 2);
  await waitFor(
    "the job to complete",
    async () => (await jobOf(hook.id))[0]?.status.value === "completed",
  );
  const [first, second] = receiver.received;
  expect(first!.headers["idempotency-key"]).toBeTruthy();
  expect(second!.headers["idempotency-key"]).toBe(first!.headers["idempotency-key"]!);
  expect(second!.body).toBe(first!.body);
});

test("enqueue outside a transaction answers while Redis is frozen; the job is relayed later", async () => {
  queue.register("outbox.echo", async (payload) => payload);
  redis.freeze();
  // Answered while Redis is still frozen: the relay gave up at its bound (how long that takes
  // is measured in bench/outbox-faults.ts); `within` only bounds a hang.
  const enqueued = await within(queue.enqueue("outbox.echo", { hello: "world" }), 10_000);
  if (enqueued === TIMED_OUT) throw new Error("enqueue waited for the frozen Redis");
  const { id } = enqueued;
  expect((await t.deps.db.orm.select().from(jobs).where(eq(jobs.id, id)))[0]).toMatchObject({
    status: "pending",
  });
  redis.thaw();
  work();
  await waitFor(
    "the job to complete",
    async () =>
      (await t.deps.db.orm.select().from(jobs).where(eq(jobs.id, id)))[0]!.status === "completed",
    15_000,
  );
  expect((await t.deps.db.orm.select().from(jobs).where(eq(jobs.id, id)))[0]!.data).toEqual({
    hello: "world",
  });
}, 30_000);

test("a bulk create of custom objects queues one delivery per new object, each naming that object's change record", async () => {
  const receiver = startReceiver();
  cleanups.push(() => receiver.stop());
  const cot = await t.json("POST", "/api/plugins/custom-objects/custom-object-types/", {
    body: { name: "relayed", slug: "relayed" },
  });
  expect(cot.status).toBe(201);
  const field = await t.json("POST", "/api/plugins/custom-objects/custom-object-type-fields/", {
    body: { custom_object_type: cot.body.id, name: "name", type: "text", primary: true },
  });
  expect(field.status).toBe(201);
  const { hook, rule } = await hookAndRule(t, {
    url: receiver.url,
    objectTypes: ["custom_objects.relayed"],
    eventTypes: ["object_created"],
  });
  cleanups.push(
    () => t.req("DELETE", `/api/extras/event-rules/${rule.id}/`),
    () => t.req("DELETE", `/api/extras/webhooks/${hook.id}/`),
  );
  // 310 objects: the change records go in as two statements (250 and 60 rows)
  const r = await t.json("POST", "/api/plugins/custom-objects/relayed/", {
    body: Array.from({ length: 310 }, (_, i) => ({ name: `relayed-${i}` })),
  });
  expect(r.status).toBe(201);
  const ids = (r.body as Array<{ id: number }>).map((o) => o.id);
  const changes = new Map(
    (
      (
        await t.deps.db.client.execute({
          sql: "SELECT id, changed_object_id, action FROM object_changes WHERE request_id = ?",
          args: [r.res.headers.get("x-request-id")!],
        })
      ).rows as unknown as Array<{ id: number; changed_object_id: number; action: string }>
    ).map((c) => [Number(c.id), c]),
  );
  expect(changes.size).toBe(310);
  const delivered = (await t.deps.db.orm.select().from(outbox))
    .filter((o) => (o.payload as { webhook?: number }).webhook === hook.id)
    .map((o) => (o.payload as { change: number }).change);
  expect(delivered.length).toBe(310);
  // each delivery names a change record of this request, each object's exactly once
  expect(delivered.map((c) => changes.get(c)?.action)).toEqual(Array(310).fill("create"));
  expect(
    delivered.map((c) => Number(changes.get(c)!.changed_object_id)).sort((a, b) => a - b),
  ).toEqual([...ids].sort((a, b) => a - b));
});
