/**
 * Job queue throughput on the local stack (real redis-server, a libSQL file): enqueue, then
 * process with a no-op handler, through the Upstash REST bridge and through Bun's redis://
 * client. Baselines measured in the same run: the bare Redis list round trip a job needs
 * (LPUSH, LMOVE, LREM) over the same client, and the job row's three database writes alone.
 *
 * Usage: npx bun bench/tasks.ts [--jobs 2000] [--concurrency 8]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { and, eq } from "drizzle-orm";
import { openDatabase } from "../src/db/local";
import { jobs } from "../src/db/schema";
import { runMigrations } from "../src/migrations";
import { createLogger } from "../src/services/logger";
import { createBunRedis } from "../src/services/redis-bun";
import { createUpstashRedis } from "../src/services/redis";
import type { RedisClient } from "../src/services/redis-types";
import { TaskQueue } from "../src/services/tasks/queue";
import { drainQueue } from "../src/services/tasks/worker";
import { startLocalRedisStack } from "../tools/dev-stack";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "2000" },
    concurrency: { type: "string", default: "8" },
  },
});
const JOBS = Number(values.jobs);
const CONCURRENCY = Number(values.concurrency);

const stack = await startLocalRedisStack();
if (!stack) {
  console.error("bench/tasks: redis-server is not on PATH");
  process.exit(2);
}
const dir = mkdtempSync(join(tmpdir(), "host-bench-tasks-"));
const db = await openDatabase(`file:${join(dir, "bench.db")}`);
await runMigrations(db);
const logger = createLogger("silent");

const perSecond = (n: number, ms: number) => (n / (ms / 1000)).toFixed(0).padStart(8);

/** LPUSH + LMOVE + LREM per job, sequential: the floor any reliable list queue pays. */
async function baseline(redis: RedisClient, prefix: string): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < JOBS; i++) await redis.lpush(`${prefix}:ready`, String(i));
  for (let i = 0; i < JOBS; i++) {
    const m = await redis.lmove(`${prefix}:ready`, `${prefix}:processing`, "right", "left");
    await redis.lrem(`${prefix}:processing`, 1, m!);
  }
  return performance.now() - t0;
}

/** The database side of a job alone: insert pending, claim, complete (three writes). */
async function databaseOnly(): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < JOBS; i++) {
    const [row] = await db.orm
      .insert(jobs)
      .values({ name: "db-only", status: "pending" })
      .returning({ id: jobs.id });
    await db.orm
      .update(jobs)
      .set({ status: "running", attempts: 1 })
      .where(and(eq(jobs.id, row!.id), eq(jobs.status, "pending")));
    await db.orm.update(jobs).set({ status: "completed" }).where(eq(jobs.id, row!.id));
  }
  return performance.now() - t0;
}

async function measure(label: string, redis: RedisClient) {
  const prefix = `bench:${label.replace(/\W+/g, "-")}:${Date.now()}`;
  const base = await baseline(redis, `${prefix}:base`);

  const queue = new TaskQueue(db, redis, logger, { prefix });
  let ran = 0;
  queue.register("noop", async () => void ran++);
  const t0 = performance.now();
  for (let i = 0; i < JOBS; i++) await queue.enqueue("noop", { i });
  const enqueueMs = performance.now() - t0;
  const t1 = performance.now();
  const processed1 = await drainQueue(queue, { concurrency: 1, budgetMs: 600_000 });
  const process1Ms = performance.now() - t1;
  for (let i = 0; i < JOBS; i++) await queue.enqueue("noop", { i });
  const t2 = performance.now();
  const processedN = await drainQueue(queue, { concurrency: CONCURRENCY, budgetMs: 600_000 });
  const processNMs = performance.now() - t2;
  if (processed1 !== JOBS || processedN !== JOBS || ran !== 2 * JOBS)
    throw new Error(`${label}: ran ${ran}, expected ${2 * JOBS}`);
  return { base, enqueueMs, process1Ms, processNMs };
}

try {
  const bridge = createUpstashRedis({ url: stack.url, token: stack.token });
  const native = createBunRedis({ url: stack.redisUrl });
  const dbMs = await databaseOnly();
  const results = [
    ["Upstash REST via bridge", await measure("bridge", bridge)],
    ["Bun redis://", await measure("bun", native)],
  ] as const;
  console.log(
    `task queue bench: ${JOBS} jobs per phase, no-op handler, libSQL file (WAL), Bun ${Bun.version}, loopback`,
  );
  console.log(
    `jobs/s                          baseline*   enqueue  process c=1  process c=${CONCURRENCY}  enqueue+process c=${CONCURRENCY}`,
  );
  for (const [label, r] of results) {
    const endToEnd = perSecond(JOBS, r.enqueueMs + r.processNMs);
    console.log(
      `${label.padEnd(30)} ${perSecond(JOBS, r.base)}  ${perSecond(JOBS, r.enqueueMs)}     ${perSecond(JOBS, r.process1Ms)}     ${perSecond(JOBS, r.processNMs)}        ${endToEnd}`,
    );
  }
  const [[, b], [, n]] = results;
  console.log(`* baseline: bare LPUSH+LMOVE+LREM per job on the same client, no database`);
  console.log(
    `database bookkeeping alone (insert + claim + complete, sequential): ${perSecond(JOBS, dbMs).trim()} jobs/s`,
  );
  console.log(
    `ratio queue(enqueue+process c=1)/baseline time: bridge ${((b.enqueueMs + b.process1Ms) / b.base).toFixed(2)}x, bun ${((n.enqueueMs + n.process1Ms) / n.base).toFixed(2)}x`,
  );
  console.log(
    `ratio bridge/bun time: enqueue ${(b.enqueueMs / n.enqueueMs).toFixed(2)}x, process c=1 ${(b.process1Ms / n.process1Ms).toFixed(2)}x, process c=${CONCURRENCY} ${(b.processNMs / n.processNMs).toFixed(2)}x`,
  );
  await bridge.close();
  await native.close();
} finally {
  await db.close();
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
}
