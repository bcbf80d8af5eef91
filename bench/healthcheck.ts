/**
 * Latency of the health endpoint (JSON, all four checks) on the local stack — real redis-server
 * behind the Upstash bridge, a libSQL file — next to a bare Hono route doing `SELECT 1` over the
 * same database, both served by Bun.serve and measured in the same run.
 *
 * Usage: npx bun bench/healthcheck.ts [--requests 500] [--warmup 50]
 */
import { Hono } from "hono";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createApp } from "../src/app";
import { loadConfig } from "../src/config";
import { openDatabase } from "../src/db/local";
import { runMigrations } from "../src/db/migrate";
import { createCache } from "../src/services/cache";
import { createResilientCache } from "../src/services/cache/resilient";
import { createLogger } from "../src/services/logger";
import { createRedisClients } from "../src/services/redis-factory";
import { startLocalRedisStack } from "../tools/dev-stack";

const { values } = parseArgs({ options: { requests: { type: "string", default: "500" }, warmup: { type: "string", default: "50" } } });
const REQUESTS = Number(values.requests);
const WARMUP = Number(values.warmup);

function quantile(sorted: number[], q: number): number {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

async function measure(url: string, init: RequestInit, expectBody: (text: string, status: number) => void): Promise<{ median: number; p95: number; mean: number }> {
  for (let i = 0; i < WARMUP; i++) expectBody(...(await fetch(url, init).then(async (r) => [await r.text(), r.status] as const)));
  const samples: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const t0 = performance.now();
    const res = await fetch(url, init);
    const text = await res.text();
    samples.push(performance.now() - t0);
    expectBody(text, res.status);
  }
  samples.sort((a, b) => a - b);
  return { median: quantile(samples, 0.5), p95: quantile(samples, 0.95), mean: samples.reduce((a, b) => a + b, 0) / samples.length };
}

const stack = await startLocalRedisStack();
if (!stack) {
  console.error("bench/healthcheck: redis-server is not on PATH");
  process.exit(2);
}
const dir = mkdtempSync(join(tmpdir(), "host-bench-health-"));
try {
  const config = loadConfig(
    {
      DATABASE_URL: `file:${join(dir, "bench.db")}`,
      REDIS_CACHING_URL: stack.url,
      REDIS_CACHING_TOKEN: stack.token,
      REDIS_TASKS_URL: stack.url,
      REDIS_TASKS_TOKEN: stack.token,
      LOG_LEVEL: "silent",
    },
    "bun",
  );
  const logger = createLogger("silent");
  const db = await openDatabase(config.database.url);
  await runMigrations(db);
  const redis = await createRedisClients(config);
  const cache = createResilientCache(createCache(config.cacheBackend, { db, redis: redis.caching }), { logger });
  const app = await createApp({ config, db, cache, redis, logger });
  const baseline = new Hono().get("/select1", async (c) => {
    const rs = await db.client.execute("SELECT 1");
    return c.json({ ok: rs.rows[0]?.[0] === 1 });
  });

  const appServer = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
  const baseServer = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: baseline.fetch });
  try {
    const health = await measure(`http://127.0.0.1:${appServer.port}/plugins/host_healthcheck_plugin/healthcheck/`, { headers: { accept: "application/json" } }, (text, status) => {
      if (status !== 200 || JSON.parse(text).status !== "working") throw new Error(`health endpoint not working: ${status} ${text}`);
    });
    const base = await measure(`http://127.0.0.1:${baseServer.port}/select1`, {}, (text, status) => {
      if (status !== 200 || !JSON.parse(text).ok) throw new Error(`baseline failed: ${status} ${text}`);
    });
    const fmt = (n: number) => n.toFixed(3).padStart(8);
    console.log(`health endpoint bench: ${REQUESTS} sequential requests each (after ${WARMUP} warm-up), Bun ${Bun.version}, loopback HTTP`);
    console.log(`                                        median ms      p95 ms     mean ms`);
    console.log(`baseline: bare Hono route, SELECT 1     ${fmt(base.median)}    ${fmt(base.p95)}    ${fmt(base.mean)}`);
    console.log(`health (JSON, 4 checks, redis+bridge)   ${fmt(health.median)}    ${fmt(health.p95)}    ${fmt(health.mean)}`);
    console.log(`ratio health/baseline                   ${(health.median / base.median).toFixed(2).padStart(8)}x   ${(health.p95 / base.p95).toFixed(2).padStart(8)}x`);
  } finally {
    await appServer.stop(true);
    await baseServer.stop(true);
    await Promise.allSettled([redis.caching?.close(), redis.tasks?.close()]);
    await db.close();
  }
} finally {
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
}
