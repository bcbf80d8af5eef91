/**
 * Do schema applies stall the server? (issue 13, item 4.) The app is served by Bun.serve on
 * 127.0.0.1 over a libSQL file, with a real redis-server behind the Upstash bridge for
 * `?background=true` and the in-process task worker. A load thread (its own event loop) sends
 * GETs on a fixed schedule — a host object by id, a custom-object list, the health endpoint
 * and /api/status/ — and measures each from its scheduled time, so a stall counts for every
 * request it delays (no coordinated omission). Phases, same run:
 *   1. idle baseline;
 *   2. a large apply (`--types` × `--fields`, default 15 × 100 = 1,500 fields), the POST waiting;
 *   3. the same size with `?background=true` (202, then the job runs in this process);
 *   4. the apply time of `--ratio-types` × `--ratio-fields` (100 × 20) against the equivalent raw
 *      CREATE TABLE / CREATE INDEX statements in one transaction, each on a fresh migrated
 *      database (`--ratio-runs` times; medians);
 *   5. another connection holding the write lock: how long a write takes to be refused (503
 *      `database_busy`) against its busy bound (`--busy-ms`), the main thread's timer lateness
 *      meanwhile, and a GET's time under the lock (tests/schema/long-write.test.ts asserts only
 *      the order of these events; the times are here).
 * Every load is bounded by `--rate` × time and by `--max-ms` per phase.
 *
 * Usage: npx bun bench/schema-stall.ts [--types 15] [--fields 100] [--rate 200] [--idle-ms 3000]
 */
import Database from "libsql";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const KINDS = [
  "text",
  "integer",
  "decimal",
  "boolean",
  "date",
  "datetime",
  "url",
  "json",
  "longtext",
  "text",
];

// ---- the load thread ---------------------------------------------------------------------------

type LoadStart = {
  op: "start";
  label: string;
  base: string;
  token: string;
  paths: string[];
  rate: number;
  maxMs: number;
};
type LoadResult = {
  label: string;
  byPath: Record<string, number[]>;
  errors: Record<string, number>;
  lagMs: number;
};

if (!Bun.isMainThread) {
  const self = globalThis as unknown as Worker;
  let stop = false;
  self.onmessage = async (e: MessageEvent<LoadStart | { op: "stop" }>) => {
    const msg = e.data;
    if (msg.op === "stop") {
      stop = true;
      return;
    }
    stop = false;
    const byPath: Record<string, number[]> = Object.fromEntries(msg.paths.map((p) => [p, []]));
    const errors: Record<string, number> = {};
    const headers = { authorization: `Token ${msg.token}` };
    const interval = 1000 / msg.rate;
    const t0 = performance.now();
    const inflight = new Set<Promise<void>>();
    let lag = 0;
    for (let i = 0; !stop && performance.now() - t0 < msg.maxMs; i++) {
      const scheduled = t0 + i * interval;
      const wait = scheduled - performance.now();
      if (wait > 0) await Bun.sleep(wait);
      else lag = Math.max(lag, -wait);
      const path = msg.paths[i % msg.paths.length]!;
      const p: Promise<void> = fetch(msg.base + path, { headers })
        .then(async (res) => {
          await res.arrayBuffer();
          if (res.status !== 200)
            errors[`${path} ${res.status}`] = (errors[`${path} ${res.status}`] ?? 0) + 1;
          // from the scheduled time: a request held up by a stall counts the whole delay
          byPath[path]!.push(performance.now() - scheduled);
        })
        .catch(
          (err) =>
            void (errors[`${path} ${String(err?.message ?? err)}`] =
              (errors[`${path} ${String(err?.message ?? err)}`] ?? 0) + 1),
        )
        .finally(() => inflight.delete(p));
      inflight.add(p);
    }
    await Promise.all(inflight);
    self.postMessage({ label: msg.label, byPath, errors, lagMs: lag } satisfies LoadResult);
  };
} else {
  await main();
}

// ---- the main thread ---------------------------------------------------------------------------

function pct(xs: number[], p: number) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

function bigDocument(prefix: string, types: number, fields: number) {
  return {
    schema_version: "1",
    types: Array.from({ length: types }, (_, t) => ({
      name: `${prefix}_${t}`,
      slug: `${prefix}_${t}`,
      fields: Array.from({ length: fields }, (_, f) => ({
        id: f + 1,
        name: `field_${f}`,
        type: KINDS[f % KINDS.length]!,
        primary: f === 0,
      })),
    })),
  };
}

async function main() {
  const { values } = parseArgs({
    options: {
      types: { type: "string", default: "15" },
      fields: { type: "string", default: "100" },
      rate: { type: "string", default: "200" },
      "idle-ms": { type: "string", default: "3000" },
      "max-ms": { type: "string", default: "120000" },
      "ratio-types": { type: "string", default: "100" },
      "ratio-fields": { type: "string", default: "20" },
      "ratio-runs": { type: "string", default: "3" },
      "skip-stall": { type: "boolean", default: false },
      "busy-ms": { type: "string", default: "300" },
    },
  });
  const TYPES = Number(values.types);
  const FIELDS = Number(values.fields);
  const RATE = Number(values.rate);
  const IDLE_MS = Number(values["idle-ms"]);
  const MAX_MS = Number(values["max-ms"]);

  const { createApp, servicesOf } = await import("../src/app");
  const { loadConfig } = await import("../src/config");
  const { openDatabase } = await import("../src/db/local");
  const { runMigrations } = await import("../src/migrations");
  const { createUser, issueToken } = await import("../src/core/auth/provisioning");
  const { createCache } = await import("../src/services/cache");
  const { createRedisClients } = await import("../src/services/redis-factory");
  const { startWorker } = await import("../src/services/tasks/worker");
  const { startLocalRedisStack } = await import("../tools/dev-stack");

  const dirs: string[] = [];
  const freshApp = async (env: Record<string, string> = {}) => {
    const dir = mkdtempSync(join(tmpdir(), "host-bench-stall-"));
    dirs.push(dir);
    const config = loadConfig(
      { DATABASE_URL: `file:${join(dir, "bench.db")}`, LOG_LEVEL: "silent", ...env },
      "bun",
    );
    const db = await openDatabase(config.database.url);
    await runMigrations(db);
    const redis = await createRedisClients(config);
    const app = await createApp({ config, db, cache: createCache("memory"), redis });
    await createUser(db.orm, { username: "bench", isSuperuser: true });
    const { key } = await issueToken(db.orm, { username: "bench" });
    return { dir, db, app, key, services: servicesOf(app) };
  };

  if (!values["skip-stall"]) {
    const stack = await startLocalRedisStack();
    if (!stack) console.log("redis-server is not on PATH: the ?background=true phase is skipped");
    const env: Record<string, string> = stack
      ? {
          REDIS_TASKS_URL: stack.url,
          REDIS_TASKS_TOKEN: stack.token,
          REDIS_CACHING_URL: stack.url,
          REDIS_CACHING_TOKEN: stack.token,
        }
      : {};
    const { db, app, key, services } = await freshApp(env);
    const worker = services.tasks ? startWorker(services.tasks, { idleMs: 20 }) : null;
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
    const base = `http://127.0.0.1:${server.port}`;
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(base + path, {
        method,
        headers: { authorization: `Token ${key}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    };

    // fixtures: a site, and a custom object type with 200 rows
    const site = await call("POST", "/api/dcim/sites/", {
      name: "Probe site",
      slug: "probe-site",
      status: "active",
    });
    if (site.status !== 201) throw new Error(`site: ${JSON.stringify(site.body)}`);
    const probeDoc = {
      schema_version: "1",
      types: [
        {
          name: "probe",
          slug: "probe",
          fields: [
            { id: 1, name: "label", type: "text", primary: true },
            { id: 2, name: "size", type: "integer" },
          ],
        },
      ],
    };
    if (
      (await call("POST", "/api/plugins/custom-objects/schema/apply/", { schema: probeDoc }))
        .status !== 200
    )
      throw new Error("probe apply");
    const rows = await call(
      "POST",
      "/api/plugins/custom-objects/probe/",
      Array.from({ length: 200 }, (_, i) => ({ label: `row ${i}`, size: i })),
    );
    if (rows.status !== 201) throw new Error(`rows: ${JSON.stringify(rows.body)}`);
    const paths = [
      `/api/dcim/sites/${site.body.id}/`,
      "/api/plugins/custom-objects/probe/?limit=20",
      "/plugins/host_healthcheck_plugin/healthcheck/?format=json",
      "/api/status/",
    ];

    const load = new Worker(new URL(import.meta.url).href);
    let resolveResult: (r: LoadResult) => void = () => undefined;
    load.onmessage = (e: MessageEvent<LoadResult>) => resolveResult(e.data);
    const startLoad = (label: string) => {
      const done = new Promise<LoadResult>((r) => (resolveResult = r));
      load.postMessage({
        op: "start",
        label,
        base,
        token: key,
        paths,
        rate: RATE,
        maxMs: MAX_MS,
      } satisfies LoadStart);
      return { stop: () => (load.postMessage({ op: "stop" }), done) };
    };
    /** The main thread's own timer lateness while `fn` runs (a stalled loop shows here too). */
    const loopLag = () => {
      let worst = 0;
      let last = performance.now();
      const timer = setInterval(() => {
        const now = performance.now();
        worst = Math.max(worst, now - last - 10);
        last = now;
      }, 10);
      return () => (clearInterval(timer), worst);
    };

    const report: string[] = [];
    const row = (phase: string, r: LoadResult, extra: string) => {
      const all = Object.values(r.byPath).flat();
      const perPath = Object.entries(r.byPath).map(
        ([p, xs]) =>
          `${p
            .split("?")[0]!
            .replace(/\/\d+\/$/, "/{id}/")
            .replace(
              "/plugins/host_healthcheck_plugin",
              "",
            )} p50 ${pct(xs, 50).toFixed(1)} / p99 ${pct(xs, 99).toFixed(1)}`,
      );
      const errs = Object.entries(r.errors);
      report.push(
        `| ${phase} | ${all.length} | ${pct(all, 50).toFixed(1)} | ${pct(all, 99).toFixed(1)} | ${Math.max(...all).toFixed(1)} | ${extra} | ${errs.length ? errs.map(([k, n]) => `${k}: ${n}`).join("; ") : "none"} |`,
      );
      console.log(`${phase}: ${perPath.join("; ")}`);
    };

    // warm-up, then the idle baseline
    await startLoad("warmup").stop();
    {
      const l = startLoad("idle");
      const lag = loopLag();
      await Bun.sleep(IDLE_MS);
      const worst = lag();
      row("idle", await l.stop(), `loop lag max ${worst.toFixed(1)} ms`);
    }
    // foreground apply: the POST waits
    {
      const doc = bigDocument("fg", TYPES, FIELDS);
      const l = startLoad("foreground");
      const lag = loopLag();
      await Bun.sleep(200);
      const t0 = performance.now();
      const r = await call("POST", "/api/plugins/custom-objects/schema/apply/", { schema: doc });
      const applyMs = performance.now() - t0;
      const worst = lag();
      if (r.status !== 200)
        throw new Error(`apply ${r.status}: ${JSON.stringify(r.body).slice(0, 300)}`);
      row(
        `apply ${TYPES}×${FIELDS}, POST waits`,
        await l.stop(),
        `apply ${applyMs.toFixed(0)} ms; loop lag max ${worst.toFixed(1)} ms`,
      );
    }
    // background apply: 202, then the job
    if (services.tasks) {
      const doc = bigDocument("bg", TYPES, FIELDS);
      const l = startLoad("background");
      const lag = loopLag();
      await Bun.sleep(200);
      const t0 = performance.now();
      const r = await call("POST", "/api/plugins/custom-objects/schema/apply/?background=true", {
        schema: doc,
      });
      if (r.status !== 202) throw new Error(`background apply ${r.status}`);
      const acceptedMs = performance.now() - t0;
      let job: any = null;
      while (performance.now() - t0 < MAX_MS) {
        job = (await call("GET", `/api/core/jobs/${r.body.job.id}/`)).body;
        if (["completed", "errored", "failed"].includes(job?.status?.value)) break;
        await Bun.sleep(50);
      }
      const doneMs = performance.now() - t0;
      const worst = lag();
      if (job?.status?.value !== "completed")
        throw new Error(`background job: ${JSON.stringify(job).slice(0, 300)}`);
      row(
        `apply ${TYPES}×${FIELDS}, ?background=true`,
        await l.stop(),
        `202 in ${acceptedMs.toFixed(0)} ms, job done at ${doneMs.toFixed(0)} ms; loop lag max ${worst.toFixed(1)} ms`,
      );
    }
    load.terminate();
    console.log(`\nGETs at ${RATE}/s on a fixed schedule (latency from the scheduled time, ms):\n`);
    console.log("| phase | GETs | p50 | p99 | max | apply | non-200 |");
    console.log("|:--|--:|--:|--:|--:|:--|:--|");
    for (const line of report) console.log(line);
    worker && (await worker.stop(5000));
    server.stop(true);
    await db.close();
    await stack?.stop();
  }

  // ---- apply time against raw DDL ------------------------------------------------------------
  const RT = Number(values["ratio-types"]);
  const RF = Number(values["ratio-fields"]);
  const runs = Number(values["ratio-runs"]);
  const applyTimes: number[] = [];
  const rawTimes: number[] = [];
  for (let run = 0; run < runs; run++) {
    {
      const { db, app, key } = await freshApp();
      const t0 = performance.now();
      const res = await app.request("http://bench/api/plugins/custom-objects/schema/apply/", {
        method: "POST",
        headers: { authorization: `Token ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ schema: bigDocument("ratio", RT, RF) }),
      });
      applyTimes.push(performance.now() - t0);
      if (res.status !== 200)
        throw new Error(`ratio apply ${res.status}: ${(await res.text()).slice(0, 300)}`);
      await db.close();
    }
    {
      // the same tables and indexes as hand-written statements, on a fresh migrated database
      const { db, dir } = await freshApp();
      await db.close();
      const raw = new Database(join(dir, "bench.db"));
      raw.exec("PRAGMA journal_mode=WAL");
      raw.exec("PRAGMA synchronous=NORMAL");
      const t0 = performance.now();
      raw.exec("BEGIN IMMEDIATE");
      for (let t = 0; t < RT; t++) {
        const cols = Array.from(
          { length: RF },
          (_, f) =>
            `, "field_${f}" ${["integer", "boolean"].includes(KINDS[f % KINDS.length]!) ? "INTEGER" : KINDS[f % KINDS.length] === "decimal" ? "REAL" : "TEXT"}`,
        ).join("");
        raw
          .prepare(
            `CREATE TABLE "raw_${t}" (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, last_updated TEXT NOT NULL${cols})`,
          )
          .run();
        raw.prepare(`CREATE INDEX "raw_${t}_id_idx" ON "raw_${t}" (id)`).run();
        for (let f = 0; f < RF; f++) {
          if (["json", "longtext"].includes(KINDS[f % KINDS.length]!)) continue;
          raw.prepare(`CREATE INDEX "raw_${t}_f${f}_idx" ON "raw_${t}" ("field_${f}")`).run();
        }
      }
      raw.exec("COMMIT");
      rawTimes.push(performance.now() - t0);
      raw.close();
    }
  }
  const median = (xs: number[]) => pct(xs, 50);
  console.log(
    `\napply ${RT} types × ${RF} fields to a fresh database: ${applyTimes.map((x) => x.toFixed(0)).join(", ")} ms (median ${median(applyTimes).toFixed(0)}); ` +
      `raw DDL: ${rawTimes.map((x) => x.toFixed(0)).join(", ")} ms (median ${median(rawTimes).toFixed(0)}); ratio ${(median(applyTimes) / median(rawTimes)).toFixed(2)}×`,
  );
  // ---- a write meeting another connection's write lock ------------------------------------------
  {
    const { db, dir } = await freshApp();
    const busyMs = Number(values["busy-ms"]);
    const config = loadConfig(
      { DATABASE_URL: `file:${join(dir, "bench.db")}`, LOG_LEVEL: "silent" },
      "bun",
    );
    const held = await openDatabase(config.database.url, undefined, { busyTimeoutMs: busyMs });
    const app = await createApp({ config, db: held, cache: createCache("memory") });
    const { key } = await issueToken(held.orm, { username: "bench" });
    console.log(await lockHeld(app, key, join(dir, "bench.db"), busyMs));
    await held.close();
    await db.close();
  }
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}

/**
 * Another connection holds the write lock (BEGIN IMMEDIATE) while this app takes five writes and
 * five GETs: the writes' time to their 503 against the bound, the timer lateness meanwhile.
 */
async function lockHeld(
  app: { fetch: (r: Request) => Response | Promise<Response> },
  key: string,
  file: string,
  busyMs: number,
): Promise<string> {
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
  const base = `http://127.0.0.1:${server.port}`;
  const headers = { authorization: `Token ${key}`, "content-type": "application/json" };
  const timed = async (init: RequestInit & { path: string }) => {
    const t0 = performance.now();
    const res = await fetch(base + init.path, { ...init, headers });
    await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - t0 };
  };
  const other = new Database(file);
  other.exec("BEGIN IMMEDIATE");
  let worst = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last - 5);
    last = now;
  }, 5);
  const writes: number[] = [];
  const reads: number[] = [];
  try {
    for (let i = 0; i < 5; i++) {
      const body = JSON.stringify({ name: `Held ${i}`, slug: `held-${i}`, status: "active" });
      const w = await timed({ path: "/api/dcim/sites/", method: "POST", body });
      if (w.status !== 503) throw new Error(`a write under the lock answered ${w.status}`);
      writes.push(w.ms);
      reads.push((await timed({ path: "/api/status/", method: "GET" })).ms);
    }
  } finally {
    clearInterval(timer);
    other.exec("ROLLBACK");
    other.close();
    server.stop(true);
  }
  return (
    `\nwrite lock held by another connection (busy bound ${busyMs} ms): write refused (503) after ` +
    `p50 ${pct(writes, 50).toFixed(0)} / max ${Math.max(...writes).toFixed(0)} ms; ` +
    `timer lateness max ${worst.toFixed(1)} ms; GET meanwhile p50 ${pct(reads, 50).toFixed(1)} ms`
  );
}
