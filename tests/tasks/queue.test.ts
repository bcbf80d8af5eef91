/**
 * The job queue itself over a real redis-server, through the Upstash bridge and through Bun's
 * redis:// client: take/ack, retries with backoff, dead letters, duplicates, lost workers.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { jobs } from "../../src/db/schema";
import { createBunRedis } from "../../src/services/redis-bun";
import { createUpstashRedis } from "../../src/services/redis";
import type { RedisClient } from "../../src/services/redis-types";
import { DeferJob, PermanentJobError, TaskQueue } from "../../src/services/tasks/queue";
import { drainQueue, startWorker } from "../../src/services/tasks/worker";
import { createLogger } from "../../src/services/logger";
import { makeTestApp, type TestApp } from "../helpers/app";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import { waitFor } from "./harness";

let stack: RedisStack;
let t: TestApp;
beforeAll(async () => {
  stack = await startRedisStack();
  t = await makeTestApp();
});
afterAll(async () => {
  await t.close();
  await stack.stop();
});

const clients: Array<[string, () => RedisClient]> = [
  [
    "Upstash REST via the bridge",
    () => createUpstashRedis({ url: stack.bridge.url, token: stack.bridge.token }),
  ],
  ["Bun redis://", () => createBunRedis({ url: stack.redis.url })],
];

const jobRow = async (id: number) =>
  (await t.deps.db.orm.select().from(jobs).where(eq(jobs.id, id)))[0]!;

for (const [label, client] of clients) {
  describe(`queue over ${label}`, () => {
    let redis: RedisClient;
    let queue: TaskQueue;
    let n = 0;
    const fresh = (options: ConstructorParameters<typeof TaskQueue>[3] = {}) =>
      new TaskQueue(t.deps.db, redis, createLogger("silent"), {
        prefix: `q${++n}:${label.length}`,
        visibilityTimeoutMs: 500,
        backoffBaseMs: 20,
        backoffMaxMs: 100,
        ...options,
      });
    beforeAll(() => {
      redis = client();
    });
    afterAll(() => redis.close());

    test("enqueue → pending row + ready message; runOne → running → completed with the handler's data", async () => {
      queue = fresh();
      let seen: unknown = null;
      queue.register("echo", async (payload, job) => {
        seen = { payload, attempt: job.attempt };
        expect((await jobRow(job.id)).status).toBe("running");
        return { echoed: payload.value };
      });
      const { id } = await queue.enqueue("echo", { value: 7 }, { userId: 1 });
      expect((await jobRow(id)).status).toBe("pending");
      expect(await queue.depth()).toEqual({ ready: 1, processing: 0, dead: 0, delayed: 0 });
      expect(await queue.runOne()).toBe("ran");
      expect(seen).toEqual({ payload: { value: 7 }, attempt: 1 });
      const row = await jobRow(id);
      expect(row).toMatchObject({
        status: "completed",
        attempts: 1,
        data: { echoed: 7 },
        error: "",
        userId: 1,
      });
      expect(row.started).not.toBeNull();
      expect(row.completed).not.toBeNull();
      expect(await queue.depth()).toEqual({ ready: 0, processing: 0, dead: 0, delayed: 0 });
      expect(await queue.runOne()).toBe("idle");
    });

    test("unknown task names are refused at enqueue", async () => {
      await expect(fresh().enqueue("nope", {})).rejects.toThrow(/no task handler/);
    });

    test("FIFO order", async () => {
      queue = fresh();
      const order: number[] = [];
      queue.register("seq", async (p) => void order.push(p.i));
      for (let i = 0; i < 5; i++) await queue.enqueue("seq", { i });
      while ((await queue.runOne()) !== "idle");
      expect(order).toEqual([0, 1, 2, 3, 4]);
    });

    test("a failing job is retried with backoff and completes on the third attempt", async () => {
      queue = fresh();
      const attempts: Array<[number, number]> = [];
      queue.register("flaky", async (_p, job) => {
        attempts.push([job.attempt, Date.now()]);
        if (job.attempt < 3) throw new Error(`boom ${job.attempt}`);
        return "ok";
      });
      const { id } = await queue.enqueue("flaky", {});
      expect(await queue.runOne()).toBe("ran");
      expect(await jobRow(id)).toMatchObject({ status: "pending", attempts: 1, error: "boom 1" });
      expect(await queue.depth()).toMatchObject({ ready: 0, delayed: 1 });
      // Not due yet: nothing to run until the backoff has passed.
      expect(await queue.runOne()).toBe("idle");
      await waitFor("the third attempt", async () => {
        await queue.maintain();
        await queue.runOne();
        return (await jobRow(id)).status === "completed";
      });
      expect(await jobRow(id)).toMatchObject({ status: "completed", attempts: 3, data: "ok" });
      expect(attempts.map(([a]) => a)).toEqual([1, 2, 3]);
      // Exponential backoff: the second gap is at least twice the base delay, and bigger than the first base.
      expect(attempts[1]![1] - attempts[0]![1]).toBeGreaterThanOrEqual(20);
      expect(attempts[2]![1] - attempts[1]![1]).toBeGreaterThanOrEqual(40);
    });

    test("a deferred job comes back later at the same attempt, using none of its attempts", async () => {
      queue = fresh({ maxAttempts: 1 });
      let deferrals = 0;
      queue.register("shy", async (_p, job) => {
        if (deferrals++ < 3) throw new DeferJob(10);
        return { attempt: job.attempt };
      });
      const { id } = await queue.enqueue("shy", {});
      expect(await queue.runOne()).toBe("ran");
      expect(await jobRow(id)).toMatchObject({ status: "pending", attempts: 0, error: "" });
      await waitFor("the job to complete", async () => {
        await queue.maintain();
        await queue.runOne();
        return (await jobRow(id)).status === "completed";
      });
      expect(await jobRow(id)).toMatchObject({ attempts: 1, data: { attempt: 1 } });
    });

    test("jobs of the internal lane wait on their own list, taken only by its slots", async () => {
      queue = fresh();
      queue.register("own", async () => "done", "internal");
      const { id } = await queue.enqueue("own", {});
      expect(await queue.runOne()).toBe("idle");
      expect(await queue.runOne("internal")).toBe("ran");
      expect(await jobRow(id)).toMatchObject({ status: "completed", data: "done" });
    });

    test("after max attempts the job fails and its message is dead-lettered", async () => {
      queue = fresh({ maxAttempts: 2 });
      queue.register("doomed", async () => {
        throw new Error("always");
      });
      const { id } = await queue.enqueue("doomed", { x: 1 });
      await waitFor("the job to fail", async () => {
        await queue.maintain();
        await queue.runOne();
        return (await jobRow(id)).status === "failed";
      });
      expect(await jobRow(id)).toMatchObject({ status: "failed", attempts: 2, error: "always" });
      const dead = await queue.deadLetters();
      expect(dead).toEqual([
        expect.objectContaining({
          id,
          name: "doomed",
          attempt: 2,
          payload: { x: 1 },
          error: "always",
        }),
      ]);
      expect(await queue.depth()).toEqual({ ready: 0, processing: 0, dead: 1, delayed: 0 });
    });

    test("the dead-letter list keeps only the newest deadLetterLimit entries", async () => {
      queue = fresh({ maxAttempts: 1, deadLetterLimit: 2 });
      queue.register("doomed", async (payload) => {
        throw new Error(`failure ${payload.k}`);
      });
      for (let k = 1; k <= 4; k++) {
        const { id } = await queue.enqueue("doomed", { k });
        await queue.runOne();
        expect((await jobRow(id)).status).toBe("failed");
      }
      expect((await queue.deadLetters()).map((d) => d.error)).toEqual(["failure 4", "failure 3"]);
      expect((await queue.depth()).dead).toBe(2);
    });

    test("a PermanentJobError ends the job errored at once, with its data", async () => {
      queue = fresh();
      queue.register("refused", async () => {
        throw new PermanentJobError("bad input", { status_code: 400 });
      });
      const { id } = await queue.enqueue("refused", {});
      await queue.runOne();
      expect(await jobRow(id)).toMatchObject({
        status: "errored",
        attempts: 1,
        data: { status_code: 400 },
        error: "bad input",
      });
      expect(await queue.depth()).toEqual({ ready: 0, processing: 0, dead: 0, delayed: 0 });
    });

    test("a duplicated message runs the job once", async () => {
      queue = fresh();
      let runs = 0;
      queue.register("once", async () => void runs++);
      await queue.enqueue("once", {});
      const [raw] = await redis.lrange(queue.keys.ready, 0, 0);
      await redis.lpush(queue.keys.ready, raw!.replace(/"n":"[^"]+"/, '"n":"dup"'));
      expect(await queue.runOne()).toBe("ran");
      expect(await queue.runOne()).toBe("skipped");
      expect(runs).toBe(1);
      expect(await queue.depth()).toEqual({ ready: 0, processing: 0, dead: 0, delayed: 0 });
    });

    test("a job whose worker died is taken back after the visibility timeout and run again", async () => {
      queue = fresh();
      const attempts: number[] = [];
      queue.register("survivor", async (_p, job) => void attempts.push(job.attempt));
      const { id } = await queue.enqueue("survivor", {});
      // A worker takes the job, claims it, then dies before running it.
      const raw = await redis.lmove(queue.keys.ready, queue.keys.processing, "right", "left");
      await redis.zadd(queue.keys.inflight, Date.now() + 500, raw!);
      await t.deps.db.orm
        .update(jobs)
        .set({ status: "running", attempts: 1 })
        .where(eq(jobs.id, id));

      expect(await queue.maintain()).toEqual({ promoted: 0, reclaimed: 0 }); // lease still valid
      expect(await queue.runOne()).toBe("idle");
      // the lease's time passes on the clock `maintain` is given, not by waiting
      expect(await queue.maintain(Date.now() + 550)).toEqual({ promoted: 0, reclaimed: 1 });
      expect(await jobRow(id)).toMatchObject({ status: "pending", attempts: 1 });
      expect(await queue.runOne()).toBe("ran");
      expect(attempts).toEqual([2]);
      expect(await jobRow(id)).toMatchObject({ status: "completed", attempts: 2 });
      expect(await queue.depth()).toEqual({ ready: 0, processing: 0, dead: 0, delayed: 0 });
    });

    test("a processing entry without a lease (died between LMOVE and ZADD) gets one, then is reclaimed", async () => {
      queue = fresh();
      queue.register("orphan", async () => "done");
      const { id } = await queue.enqueue("orphan", {});
      await redis.lmove(queue.keys.ready, queue.keys.processing, "right", "left");
      await queue.maintain();
      expect((await redis.zrangebyscore(queue.keys.inflight, "-inf", "+inf")).length).toBe(1);
      expect((await queue.maintain(Date.now() + 550)).reclaimed).toBe(1);
      await queue.runOne();
      expect(await jobRow(id)).toMatchObject({ status: "completed", attempts: 1 });
    });

    test("a live worker's heartbeat keeps its lease past the visibility timeout", async () => {
      queue = fresh({ visibilityTimeoutMs: 300 });
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      queue.register("slow", async () => {
        await gate;
        return "slow done";
      });
      const { id } = await queue.enqueue("slow", {});
      const running = queue.runOne();
      await waitFor("the job to start", async () => (await jobRow(id)).status === "running");
      // the first lease ends at most `visibilityTimeoutMs` after now
      let deadline = Date.now() + 300;
      // the heartbeat (a real timer, every third of the visibility timeout) renews the lease
      // beyond that deadline, twice; past each deadline (the clock given to `maintain`) the job
      // is not taken back
      for (let i = 0; i < 2; i++) {
        const after = deadline;
        await waitFor(
          "the lease renewed",
          async () => (await redis.zrangebyscore(queue.keys.inflight, `(${after}`, "+inf")).length,
        );
        expect((await queue.maintain(after + 1)).reclaimed).toBe(0);
        deadline = Date.now() + 300;
      }
      release();
      await running;
      expect(await jobRow(id)).toMatchObject({
        status: "completed",
        attempts: 1,
        data: "slow done",
      });
    });

    test("drainQueue works until the queue is empty", async () => {
      queue = fresh();
      let done = 0;
      queue.register("many", async () => void done++);
      for (let i = 0; i < 12; i++) await queue.enqueue("many", { i });
      expect(await drainQueue(queue, { budgetMs: 5_000, concurrency: 3 })).toBe(12);
      expect(done).toBe(12);
      expect(await queue.depth()).toEqual({ ready: 0, processing: 0, dead: 0, delayed: 0 });
    });
  });
}

test("a worker facing an unreachable Redis logs the outage once and backs off", async () => {
  const lines: string[] = [];
  const logger = createLogger("info", (line) => lines.push(line));
  // a port that takes each connection and drops it at once, counting the tries
  let tries = 0;
  const refuser = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: { open: (s) => void (tries++, s.end()), data() {} },
  });
  const dead = createUpstashRedis(
    { url: `http://127.0.0.1:${refuser.port}`, token: "x" },
    { timeoutMs: 200 },
  );
  const queue = new TaskQueue(t.deps.db, dead, logger, { prefix: "unreachable" });
  const worker = startWorker(queue, { idleMs: 10, maintainEveryMs: 10, concurrency: 4 });
  // every loop (4 + 1 slots, housekeeping) failed, and some of them again after their pause
  await waitFor("repeated failures", () => tries >= 10);
  await worker.stop(2_000);
  refuser.stop(true);
  const warnings = lines.filter((l) => l.includes("task worker:"));
  expect(warnings.length).toBe(1);
  expect(warnings[0]).toContain("retrying with backoff");
});
