/**
 * Latency of the health endpoint (JSON, all four checks) on the local stack — real redis-server
 * behind the Upstash bridge, a libSQL file — next to a bare Hono route doing `SELECT 1` over the
 * same database, both served by Bun.serve and measured in the same run.
 *
 * Then a probe storm: `--probes` (1000) probes over loopback HTTP, first all at once, then from
 * `--clients` (100) clients probing back to back, against the same app with `cache_seconds` 0
 * and 5. It prints how many times each check ran (the runner counts them) and the latency.
 * Every load is bounded in count and by `--deadline-ms` (60000).
 *
 * Usage: npx bun bench/healthcheck.ts [--requests 500] [--warmup 50] [--probes 1000] [--clients 100]
 */
import { Hono } from "hono";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createApp, type App } from "../src/app";
import { healthRunnerOf } from "../src/plugins/healthcheck";
import { loadConfig } from "../src/config";
import { openDatabase } from "../src/db/local";
import { runMigrations } from "../src/migrations";
import { createCache } from "../src/services/cache";
import { createResilientCache } from "../src/services/cache/resilient";
import { createLogger } from "../src/services/logger";
import { createRedisClients } from "../src/services/redis-factory";
import { startLocalRedisStack } from "../tools/dev-stack";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "500" },
    warmup: { type: "string", default: "50" },
    probes: { type: "string", default: "1000" },
    clients: { type: "string", default: "100" },
    "deadline-ms": { type: "string", default: "60000" },
    "probe-client": { type: "string" },
    concurrency: { type: "string", default: "1" },
  },
});
const REQUESTS = Number(values.requests);
const WARMUP = Number(values.warmup);
const PROBES = Math.min(10_000, Number(values.probes));
const CLIENTS = Math.max(1, Math.min(PROBES, Number(values.clients)));
const DEADLINE_MS = Number(values["deadline-ms"]);
const HEALTH_PATH = "/plugins/host_healthcheck_plugin/healthcheck/";

function quantile(sorted: number[], q: number): number {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

async function measure(
  url: string,
  init: RequestInit,
  expectBody: (text: string, status: number) => void,
): Promise<{ median: number; p95: number; mean: number }> {
  for (let i = 0; i < WARMUP; i++)
    expectBody(...(await fetch(url, init).then(async (r) => [await r.text(), r.status] as const)));
  const samples: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const t0 = performance.now();
    const res = await fetch(url, init);
    const text = await res.text();
    samples.push(performance.now() - t0);
    expectBody(text, res.status);
  }
  samples.sort((a, b) => a - b);
  return {
    median: quantile(samples, 0.5),
    p95: quantile(samples, 0.95),
    mean: samples.reduce((a, b) => a + b, 0) / samples.length,
  };
}

interface Storm {
  answered: number;
  runs: number;
  median: number;
  p95: number;
  max: number;
  wallMs: number;
}

/**
 * The load side, run as a child process (`--probe-client URL --concurrency N`): the server's own
 * outgoing fetches (the Upstash client) must not queue behind a thousand probe fetches in one
 * process. Prints one JSON line: answered, sorted latencies' summary, wall time.
 */
async function probeClient(url: string, concurrency: number): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  const samples: number[] = [];
  const statuses = new Map<string, number>();
  let sent = 0;
  const started = performance.now();
  const client = async () => {
    while (sent < PROBES && Date.now() < deadline) {
      sent++;
      const t0 = performance.now();
      try {
        const res = await fetch(url, {
          headers: { accept: "application/json" },
          signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())),
        });
        const body = (await res.json()) as { status: string };
        const key = `${res.status} ${body.status}`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
      } catch (e) {
        statuses.set(String((e as Error).name), (statuses.get(String((e as Error).name)) ?? 0) + 1);
      }
      samples.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
  samples.sort((a, b) => a - b);
  const wallMs = performance.now() - started;
  console.log(
    JSON.stringify({
      answered: samples.length,
      statuses: Object.fromEntries(statuses),
      median: quantile(samples, 0.5),
      p95: quantile(samples, 0.95),
      max: samples.at(-1),
      wallMs,
    }),
  );
}

if (values["probe-client"]) {
  await probeClient(values["probe-client"], Number(values.concurrency));
  process.exit(0);
}

interface Storm {
  answered: number;
  statuses: Record<string, number>;
  runs: number;
  median: number;
  p95: number;
  max: number;
  wallMs: number;
}

/** `PROBES` probes, `concurrency` at a time, from a child process; counts the check runs. */
async function storm(app: App, concurrency: number): Promise<Storm> {
  const runner = healthRunnerOf(app);
  const before = [...runner.runs.values()].reduce((a, b) => a + b, 0);
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
  try {
    const child = Bun.spawn(
      [
        process.execPath,
        import.meta.path,
        "--probe-client",
        `http://127.0.0.1:${server.port}${HEALTH_PATH}`,
        "--concurrency",
        String(concurrency),
        "--probes",
        String(PROBES),
        "--deadline-ms",
        String(DEADLINE_MS),
      ],
      { stdout: "pipe", stderr: "inherit" },
    );
    const killer = setTimeout(() => child.kill("SIGKILL"), DEADLINE_MS + 10_000);
    const out = await new Response(child.stdout).text();
    clearTimeout(killer);
    await child.exited;
    const result = JSON.parse(out.trim().split("\n").at(-1)!) as Omit<Storm, "runs">;
    const runs = [...runner.runs.values()].reduce((a, b) => a + b, 0) - before;
    return { ...result, runs };
  } finally {
    await server.stop(true);
  }
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
  const cache = createResilientCache(
    createCache(config.cacheBackend, { db, redis: redis.caching }),
    { logger },
  );
  const app = await createApp({ config, db, cache, redis, logger });
  const baseline = new Hono().get("/select1", async (c) => {
    const rs = await db.client.execute("SELECT 1");
    return c.json({ ok: rs.rows[0]?.[0] === 1 });
  });

  const appServer = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
  const baseServer = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: baseline.fetch });
  try {
    const health = await measure(
      `http://127.0.0.1:${appServer.port}/plugins/host_healthcheck_plugin/healthcheck/`,
      { headers: { accept: "application/json" } },
      (text, status) => {
        if (status !== 200 || JSON.parse(text).status !== "working")
          throw new Error(`health endpoint not working: ${status} ${text}`);
      },
    );
    const base = await measure(
      `http://127.0.0.1:${baseServer.port}/select1`,
      {},
      (text, status) => {
        if (status !== 200 || !JSON.parse(text).ok)
          throw new Error(`baseline failed: ${status} ${text}`);
      },
    );
    const fmt = (n: number) => n.toFixed(3).padStart(8);
    console.log(
      `health endpoint bench: ${REQUESTS} sequential requests each (after ${WARMUP} warm-up), Bun ${Bun.version}, loopback HTTP`,
    );
    console.log(`                                        median ms      p95 ms     mean ms`);
    console.log(
      `baseline: bare Hono route, SELECT 1     ${fmt(base.median)}    ${fmt(base.p95)}    ${fmt(base.mean)}`,
    );
    console.log(
      `health (JSON, 4 checks, redis+bridge)   ${fmt(health.median)}    ${fmt(health.p95)}    ${fmt(health.mean)}`,
    );
    console.log(
      `ratio health/baseline                   ${(health.median / base.median).toFixed(2).padStart(8)}x   ${(health.p95 / base.p95).toFixed(2).padStart(8)}x`,
    );

    // The storm: the same stack, one app per cache setting (each its own runner and counts).
    console.log(
      `\nprobe storm: ${PROBES} probes over loopback HTTP; check runs = checks started (4 checks per full run)`,
    );
    console.log(
      `                                           answered  check runs   median ms     p95 ms     max ms    wall ms  answers`,
    );
    for (const cacheSeconds of [0, 5]) {
      const stormApp = await createApp({
        config: {
          ...config,
          pluginsConfig: { host_healthcheck_plugin: { cache_seconds: cacheSeconds } },
        },
        db,
        cache,
        redis,
        logger,
      });
      for (const [label, concurrency] of [
        [`all ${PROBES} at once`, PROBES],
        [`${CLIENTS} clients back to back`, CLIENTS],
      ] as const) {
        const r = await storm(stormApp, concurrency);
        const row = `cache_seconds=${cacheSeconds}, ${label}`.padEnd(44);
        console.log(
          `${row}${String(r.answered).padStart(6)}  ${String(r.runs).padStart(10)}  ${fmt(r.median)}   ${fmt(r.p95)}   ${fmt(r.max)}   ${r.wallMs.toFixed(0).padStart(8)}  ${JSON.stringify(r.statuses)}`,
        );
      }
    }
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
