/**
 * Requests per second for `GET /api/dcim/sites/<id>/` through the Worker in workerd (Miniflare,
 * Hrana server as the remote libSQL) against the Bun server (`bun src/server.ts`) in the same
 * run, plus the Worker bundle size. Loopback only; every loop is bounded by time and count.
 *
 *   npx bun bench/worker.ts [--seconds 5] [--concurrency 16]
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { openDatabase } from "../src/db/local";
import { runMigrations } from "../src/migrations";
import { createUser, issueToken } from "../src/core/auth/provisioning";
import {
  buildWorkerBundle,
  freePort,
  ROOT,
  startRemoteDatabase,
  startWorker,
} from "../tests/helpers/worker";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    seconds: { type: "string", default: "5" },
    concurrency: { type: "string", default: "16" },
  },
});
const SECONDS = Math.min(60, Math.max(1, Number(values.seconds)));
const CONCURRENCY = Math.min(256, Math.max(1, Number(values.concurrency)));
const WARMUP_MS = 1_000;
const MAX_REQUESTS = 1_000_000;
const START_TIMEOUT_MS = 30_000;

interface Result {
  label: string;
  requests: number;
  errors: number;
  rps: number;
  p50: number;
  p99: number;
}

/** Drives `url` with `CONCURRENCY` loops for `SECONDS` (after a warm-up); counts only 200s as successes. */
async function load(label: string, url: string, token: string): Promise<Result> {
  const headers = { authorization: `Token ${token}` };
  const check = await fetch(url, { headers });
  if (check.status !== 200)
    throw new Error(`${label}: GET ${url} answered ${check.status}: ${await check.text()}`);
  await check.arrayBuffer();

  const run = async (ms: number, record: boolean) => {
    const latencies: number[] = [];
    let errors = 0;
    let sent = 0;
    const until = performance.now() + ms;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (performance.now() < until && sent < MAX_REQUESTS) {
          sent++;
          const t0 = performance.now();
          try {
            const res = await fetch(url, { headers });
            await res.arrayBuffer();
            if (res.status !== 200) errors++;
            else if (record) latencies.push(performance.now() - t0);
          } catch {
            errors++;
          }
        }
      }),
    );
    return { latencies, errors };
  };
  await run(WARMUP_MS, false);
  const started = performance.now();
  const { latencies, errors } = await run(SECONDS * 1000, true);
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return {
    label,
    requests: latencies.length,
    errors,
    rps: latencies.length / elapsed,
    p50: at(0.5),
    p99: at(0.99),
  };
}

async function waitForHttp(url: string, proc: ChildProcess): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`server exited with ${proc.exitCode}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
      await res.arrayBuffer();
      return;
    } catch {
      await Bun.sleep(100);
    }
  }
  throw new Error(`${url} did not answer within ${START_TIMEOUT_MS} ms`);
}

/** `bun src/server.ts` on a free loopback port; returns its base URL and a stopper. */
async function startBunServer(
  env: Record<string, string>,
): Promise<{ base: string; stop(): Promise<void> }> {
  const port = await freePort();
  const proc = spawn(process.execPath, [join(ROOT, "src", "server.ts")], {
    cwd: ROOT,
    env: { ...process.env, HOST: "127.0.0.1", PORT: String(port), LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGTERM");
    if (
      (await Promise.race([exited.then(() => true), Bun.sleep(5_000).then(() => false)])) === false
    )
      proc.kill("SIGKILL");
  };
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${base}/api/status/`, proc);
  } catch (e) {
    await stop();
    throw e;
  }
  return { base, stop };
}

async function createSite(base: string, token: string): Promise<number> {
  const res = await fetch(`${base}/api/dcim/sites/`, {
    method: "POST",
    headers: { authorization: `Token ${token}`, "content-type": "application/json" },
    body: JSON.stringify({
      name: "Bench site",
      slug: `bench-${crypto.randomUUID().slice(0, 8)}`,
      description: "benchmark",
      facility: "DC-1",
    }),
  });
  const body = (await res.json()) as { id?: number };
  if (res.status !== 201 || !body.id)
    throw new Error(`create site at ${base}: ${res.status} ${JSON.stringify(body)}`);
  return body.id;
}

const stops: Array<() => Promise<unknown>> = [];
const dir = mkdtempSync(join(tmpdir(), "host-bench-worker-"));

async function main() {
  const bundle = await buildWorkerBundle();
  const code = readFileSync(bundle.scriptPath);
  console.log(
    `worker bundle (wrangler deploy --dry-run, minify = true): ${(code.byteLength / 1024).toFixed(1)} KiB, gzip ${(gzipSync(code).byteLength / 1024).toFixed(1)} KiB`,
  );
  console.log(
    `load: GET /api/dcim/sites/<id>/ (token auth), ${CONCURRENCY} concurrent loops, ${SECONDS} s each after ${WARMUP_MS} ms warm-up\n`,
  );

  // Baseline: the Bun server on a local libSQL file (what `npm start` runs).
  const fileUrl = `file:${join(dir, "bun.db")}`;
  const local = await openDatabase(fileUrl);
  await runMigrations(local);
  await createUser(local.orm, { username: "bench", isSuperuser: true });
  const bunToken = (await issueToken(local.orm, { username: "bench" })).key;
  await local.close();
  const bunFile = await startBunServer({ DATABASE_URL: fileUrl, CACHE_BACKEND: "memory" });
  stops.push(bunFile.stop);

  // The remote database both runtimes share for the like-for-like comparison.
  const remote = await startRemoteDatabase();
  stops.push(remote.stop);
  const remoteToken = await remote.superuserToken("bench");
  const bunRemote = await startBunServer({ DATABASE_URL: remote.url, CACHE_BACKEND: "memory" });
  stops.push(bunRemote.stop);
  const worker = await startWorker({ bindings: { DATABASE_URL: remote.url, CACHE_BACKEND: "kv" } });
  stops.push(worker.stop);
  const workerBase = worker.url.origin;

  const results: Result[] = [];
  const fileSite = await createSite(bunFile.base, bunToken);
  results.push(
    await load(
      "bun, libSQL file (baseline)",
      `${bunFile.base}/api/dcim/sites/${fileSite}/`,
      bunToken,
    ),
  );
  const remoteSite = await createSite(bunRemote.base, remoteToken);
  results.push(
    await load(
      "bun, Hrana over HTTP",
      `${bunRemote.base}/api/dcim/sites/${remoteSite}/`,
      remoteToken,
    ),
  );
  results.push(
    await load(
      "workerd (Miniflare), Hrana over HTTP, KV",
      `${workerBase}/api/dcim/sites/${remoteSite}/`,
      remoteToken,
    ),
  );
  // No database, cache or auth: what each runtime costs on its own.
  results.push(await load("bun, GET /livez", `${bunFile.base}/livez`, bunToken));
  results.push(await load("workerd (Miniflare), GET /livez", `${workerBase}/livez`, remoteToken));

  const base = results[0]!.rps;
  console.log(
    "target".padEnd(44),
    "req/s".padStart(9),
    "p50 ms".padStart(8),
    "p99 ms".padStart(8),
    "errors".padStart(7),
    "vs baseline".padStart(12),
  );
  for (const r of results) {
    console.log(
      r.label.padEnd(44),
      r.rps.toFixed(0).padStart(9),
      r.p50.toFixed(2).padStart(8),
      r.p99.toFixed(2).padStart(8),
      String(r.errors).padStart(7),
      `${(r.rps / base).toFixed(2)}x`.padStart(12),
    );
  }
}

try {
  await main();
} finally {
  for (const stop of stops.reverse()) await stop().catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
