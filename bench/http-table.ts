/**
 * Issue 17's table over HTTP (item 7): Host against a "floor" (bare Bun + Hono + Drizzle), both as
 * servers on 127.0.0.1, driven by wrk, with Host / floor in the same run.
 *
 *   npx bun bench/http-table.ts                          # 100k rows, 5 s per cell
 *   npx bun bench/http-table.ts --rows 1000000 --duration 10
 *
 * Options: --rows (BENCH_ROWS, 100000), --duration seconds per wrk cell (BENCH_DURATION, 5),
 * --connections (32), --threads (2), --batches bulk POSTs of 1,000 per side (3), --only cells to run,
 * comma-separated among get, list, post, list950, q, load (all by default; e.g. `--only post,load`),
 * --keep leaves the two database files in place (the path is printed) to serve them again by hand
 * (`npx bun bench/http-table.ts --serve host --db file:<dir>/host.db`).
 * `DATABASE_READ_POOL=0` in the environment runs the Host server without its read pool (decision 0057);
 * `BENCH_MEMLOG=1` makes the Host server print its RSS, JS heap and memory outside it every second.
 * The Host server runs with the engine settings `npm start` gives it (`HOST_ENGINE_ENV`);
 * `BENCH_ENGINE_DEFAULTS=1` runs it with the engine's defaults instead, and `BENCH_NO_IDLE_GC=1`
 * without the collection `src/server.ts` runs when requests pause (`src/idle-gc.ts`), and
 * `BENCH_LAZY_GRAPHQL=1` without GraphQL's modules loaded before serving (decision 0217). The Host
 * server runs from this script bundled into one file, as `npm start` runs it (decision 0062;
 * `BENCH_FROM_SOURCES=1`: from the sources); the floor from the sources, as it always did.
 *
 * Setup (this process): a libSQL file with the real app's schema (tests/helpers/app.ts makeTestApp)
 * and a 20-field custom object type (the one bench/custom-objects.ts uses), its rows put in by
 * direct SQL; a second libSQL file for the floor, with the same 20 columns in a plain table (no
 * per-field indexes, no full-text index; one unique index on `serial`, which the type declares unique)
 * and the same rows. Then two child processes of this script:
 * `--serve host` (createApp over the Host file, memory cache, Bun.serve) and `--serve floor` (Hono +
 * Drizzle over the floor file: get = one select; list = count + ORDER BY id LIMIT/OFFSET; create =
 * INSERT … RETURNING; bulk = one transaction of 100-row inserts; `?q=` = count + first page of a
 * LIKE over its text columns). Each cell runs wrk against one
 * server then the other (the order alternates by cell); a Lua script in a temp dir draws random ids,
 * offsets and unique POST bodies. Load = POSTs of 1,000 rows, one at a time, timed per server.
 * The q cells report wrk's median latency: `?q=` of a site code that 10% of the rows name in their
 * description (`SITE_CODE`), and of one serial (a rare term).
 * RSS of each server: /proc/<pid>/status VmRSS sampled every 100 ms; idle = after start, before any
 * request; peak = the highest sample while it served. CPU per request: each server's user + system
 * time (/proc/<pid>/stat, all its threads) over a cell, divided by the requests wrk counted; on a
 * shared machine it moves far less with other processes' load than throughput does, so the table
 * gives both. Every child is stopped at the end.
 */
import { createClient } from "@libsql/client";
import { count, eq, like, or } from "drizzle-orm";
import { drizzle } from "drizzle-orm/libsql";
import { Hono } from "hono";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { apiRow, benchTable, columnsOf, FIELDS, SITE_CODE, SPEEDS, TIERS } from "./twenty-fields";
import { HOST_ENGINE_ENV, num, serverScript, spawnServer } from "./child-server";

const { values: opt } = parseArgs({
  options: {
    serve: { type: "string" },
    db: { type: "string" },
    table: { type: "string" },
    rows: { type: "string" },
    duration: { type: "string" },
    connections: { type: "string" },
    threads: { type: "string" },
    batches: { type: "string" },
    only: { type: "string" },
    keep: { type: "boolean" },
  },
});
const log = (...a: unknown[]) => console.error(...a);

const FLOOR_DDL = `CREATE TABLE IF NOT EXISTS bench_item (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL,
  last_updated TEXT NOT NULL, name TEXT, serial TEXT, code TEXT, description TEXT, quantity INTEGER, ports INTEGER,
  weight REAL, price REAL, enabled INTEGER, monitored INTEGER, installed TEXT, expires TEXT, last_seen TEXT,
  homepage TEXT, speed TEXT, tier TEXT, flavours TEXT, attrs TEXT, site_id INTEGER, tenant_id INTEGER)`;

const FLOOR_SEARCHED = [
  "name",
  "serial",
  "code",
  "description",
  "homepage",
  "speed",
  "tier",
  "flavours",
  "attrs",
] as const;

/** Tells the parent the port, then serves until SIGTERM. */
function announce(server: { port: number | undefined; stop(close?: boolean): unknown }) {
  console.log(`READY ${server.port}`);
  process.on("SIGTERM", () => {
    server.stop(true);
    process.exit(0);
  });
}

// ---- child: the Host server -----------------------------------------------------------------------------
if (opt.serve === "host") {
  const { createApp } = await import("../src/app");
  const { loadConfig } = await import("../src/config");
  const { openDatabase } = await import("../src/db/local");
  const { runMigrations } = await import("../src/migrations");
  const { createCache } = await import("../src/services/cache");
  // DATABASE_READ_POOL from the environment, to compare the read pool on and off (decision 0057)
  // DATABASE_CACHE_MB likewise, to compare page cache budgets (decision 0117)
  const fromEnv = Object.fromEntries(
    ["DATABASE_READ_POOL", "DATABASE_CACHE_MB"].flatMap((k) =>
      process.env[k] ? [[k, process.env[k]]] : [],
    ),
  );
  const config = loadConfig({ LOG_LEVEL: "silent", DATABASE_URL: opt.db!, ...fromEnv }, "bun");
  const db = await openDatabase(config.database.url, undefined, {
    readPool: config.database.readPool,
    cacheMb: config.database.cacheMb,
  });
  await runMigrations(db);
  const cache =
    config.cacheBackend === "database"
      ? createCache("database", { db })
      : createCache("memory", {});
  const app = await createApp({ config, db, cache });
  // as src/server.ts starts: GraphQL's modules evaluated before serving (decision 0217);
  // BENCH_LAZY_GRAPHQL=1 leaves them to a first query, as before
  if (!process.env.BENCH_LAZY_GRAPHQL)
    await (await import("../src/graphql/routes")).loadGraphqlEngine();
  // as src/server.ts serves it: with the idle collection (decision 0060); BENCH_NO_IDLE_GC=1 without
  const { idleCollector } = await import("../src/idle-gc");
  const fetch = process.env.BENCH_NO_IDLE_GC
    ? (req: Request) => app.fetch(req)
    : idleCollector((req: Request) => app.fetch(req)).fetch;
  announce(Bun.serve({ hostname: "127.0.0.1", port: 0, fetch }));
  if (process.env.BENCH_MEMLOG) {
    // where the resident memory is, once a second: the JS heap (size, capacity), memory outside it
    const { heapStats } = await import("bun:jsc");
    const mb = (n: number) => (n / 1048576).toFixed(0);
    setInterval(() => {
      const h = heapStats();
      console.error(
        `    host memory: RSS ${mb(process.memoryUsage().rss)} MB, JS heap ${mb(h.heapSize)} of ${mb(h.heapCapacity)} MB, extra ${mb(h.extraMemorySize)} MB, ${h.objectCount} objects`,
      );
    }, 1000);
  }
  await new Promise(() => {});
}

// ---- child: the floor server -----------------------------------------------------------------------------
if (opt.serve === "floor") {
  const client = createClient({ url: opt.db! });
  const orm = drizzle(client);
  const T = benchTable("bench_item");
  const app = new Hono();
  app.get("/co/:id", async (c) => {
    const [row] = await orm
      .select()
      .from(T)
      .where(eq(T.id, Number(c.req.param("id"))));
    return row ? c.json(row) : c.json({ detail: "Not found." }, 404);
  });
  app.get("/co", async (c) => {
    const limit = Math.min(1000, Number(c.req.query("limit") ?? 50) || 50);
    const offset = Number(c.req.query("offset") ?? 0) || 0;
    const q = c.req.query("q");
    // what a bare app does for a search: LIKE over the text columns
    const where = q
      ? or(...FLOOR_SEARCHED.map((col) => like(T[col], `%${q.replace(/[\\%_]/g, "")}%`)))
      : undefined;
    const [{ n }] = (await orm.select({ n: count() }).from(T).where(where)) as [{ n: number }];
    const results = await orm
      .select()
      .from(T)
      .where(where)
      .orderBy(T.id)
      .limit(limit)
      .offset(offset);
    return c.json({ count: n, results });
  });
  app.post("/co", async (c) => {
    const body = (await c.req.json()) as ReturnType<typeof apiRow> | ReturnType<typeof apiRow>[];
    const now = new Date().toISOString();
    if (Array.isArray(body)) {
      const ids: number[] = [];
      await orm.transaction(async (tx) => {
        for (let s = 0; s < body.length; s += 100) {
          const chunk = body
            .slice(s, s + 100)
            .map((r) => ({ ...columnsOf(r), created: now, last_updated: now }));
          ids.push(...(await tx.insert(T).values(chunk).returning({ id: T.id })).map((r) => r.id));
        }
      });
      return c.json(ids, 201);
    }
    const [row] = await orm
      .insert(T)
      .values({ ...columnsOf(body), created: now, last_updated: now })
      .returning();
    return c.json(row, 201);
  });
  announce(Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => app.fetch(req) }));
  await new Promise(() => {});
}

// ---- the driver -------------------------------------------------------------------------------------------
const ROWS = num(opt.rows ?? process.env.BENCH_ROWS, "--rows", 100_000, 5_000_000);
const DURATION = num(opt.duration ?? process.env.BENCH_DURATION, "--duration", 5, 120);
const CONNECTIONS = num(opt.connections, "--connections", 32, 512);
const THREADS = num(opt.threads, "--threads", 2, 16);
const BATCHES = num(opt.batches, "--batches", 3, 100);
const BULK = 1000;
const CELLS = ["get", "list", "post", "list950", "q", "load"];
const ONLY = new Set(
  (opt.only ?? CELLS.join(","))
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean),
);
for (const c of ONLY)
  if (!CELLS.includes(c))
    throw new Error(`bad value for --only: ${c} (one of ${CELLS.join(", ")})`);
const SITES = 100;
const TENANTS = 20;

const work = mkdtempSync(join(tmpdir(), "host-http-table-"));
const hostUrl = `file:${join(work, "host.db")}`;
const floorUrl = `file:${join(work, "floor.db")}`;
const children: Array<ReturnType<typeof Bun.spawn>> = [];
const fmtInt = (n: number) => Math.round(n).toLocaleString("en-US");
const tStart = performance.now();
const load0 = loadavg();

function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

async function startServer(kind: "host" | "floor", url: string) {
  const env = kind === "host" && !process.env.BENCH_ENGINE_DEFAULTS ? HOST_ENGINE_ENV : undefined;
  // the floor from the sources, as before: bundled, it would carry (and parse) the Host's code too
  const script = kind === "host" ? await serverScript(import.meta.path) : import.meta.path;
  const { pid, origin } = await spawnServer(
    [script, "--serve", kind, "--db", url],
    children,
    `${kind} server`,
    env,
  );
  return { kind, pid, origin };
}
type Server = Awaited<ReturnType<typeof startServer>>;

/**
 * CPU time a process has used (user + system, all its threads), in ms: on a machine other
 * processes share, CPU per request is the figure their load disturbs least (throughput falls
 * with the share of the cores a server gets; the work each request takes barely moves).
 */
function cpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    // utime and stime are fields 14 and 15 of the line (12 and 13 after the command), in ticks
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return Number.NaN;
  }
}
const CLOCK_TICKS = 100; // USER_HZ on Linux

/**
 * Samples a server's RSS every 100 ms while `fn` runs; returns fn's result, the highest sample
 * and the CPU time (ms) the server used meanwhile.
 */
async function sampled<T>(s: Server, fn: () => Promise<T>): Promise<[T, number, number]> {
  let peak = rssMb(s.pid);
  const cpu0 = cpuMs(s.pid);
  const timer = setInterval(() => (peak = Math.max(peak, rssMb(s.pid))), 100);
  try {
    const result = await fn();
    return [result, Math.max(peak, rssMb(s.pid)), cpuMs(s.pid) - cpu0];
  } finally {
    clearInterval(timer);
  }
}

async function wrk(
  origin: string,
  lua: string,
): Promise<{ rps: number; requests: number; p50: string; p99: string; errors: string }> {
  const luaPath = join(work, `s${Math.random().toString(36).slice(2)}.lua`);
  writeFileSync(luaPath, lua);
  const proc = Bun.spawn(
    [
      "wrk",
      "-t",
      String(THREADS),
      "-c",
      String(CONNECTIONS),
      "-d",
      `${DURATION}s`,
      "--timeout",
      "5s",
      "--latency",
      "-s",
      luaPath,
      origin,
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  const kill = setTimeout(() => proc.kill(), (DURATION + 20) * 1000);
  const out = await new Response(proc.stdout).text();
  await proc.exited;
  clearTimeout(kill);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  if (!rps) throw new Error(`wrk failed: ${out}${await new Response(proc.stderr).text()}`);
  const requests = /(\d+) requests in/.exec(out);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  const sockErr = /Socket errors: (.*)/.exec(out);
  const p99 = /\s99%\s+(\S+)/.exec(out);
  const p50 = /\s50%\s+(\S+)/.exec(out);
  return {
    rps: Number(rps[1]),
    requests: Number(requests?.[1] ?? 0),
    p50: p50?.[1] ?? "?",
    p99: p99?.[1] ?? "?",
    errors: [non2xx ? `${non2xx[1]} non-2xx` : "", sockErr?.[1] ?? ""].filter(Boolean).join(", "),
  };
}

/** wrk's latency figure ("812.00us", "25.30ms", "1.20s") in milliseconds. */
function msOf(figure: string): number {
  const m = /^([\d.]+)(us|ms|s)$/.exec(figure);
  if (!m) return Number.NaN;
  return Number(m[1]) * (m[2] === "us" ? 0.001 : m[2] === "s" ? 1000 : 1);
}

/** A wrk Lua script: `path(n)` builds a GET path; with `post`, a POST of `body` with __U__ made unique. */
function luaScript(
  headers: Record<string, string>,
  pathExpr: string,
  post?: { path: string; body: string },
) {
  const hdr = Object.entries(headers)
    .map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`)
    .join("\n");
  const tag = Math.random().toString(36).slice(2, 8);
  return `${hdr}
local counter = 0
tid = 0
local threads_n = 0
function setup(thread) threads_n = threads_n + 1; thread:set("tid", threads_n) end
function init(args) math.randomseed(os.time() + (tid or 0) * 7919) end
request = function()
  counter = counter + 1
${
  post
    ? `  local u = "${tag}-" .. tostring(tid) .. "-" .. tostring(counter)
  local body = string.gsub(${JSON.stringify(post.body)}, "__U__", u)
  return wrk.format("POST", ${JSON.stringify(post.path)}, nil, body)`
    : `  return wrk.format("GET", ${pathExpr})`
}
end
`;
}

try {
  log(
    `bench/http-table: ${ROWS} rows, wrk -t${THREADS} -c${CONNECTIONS} -d${DURATION}s, load average ${load0.map((x) => x.toFixed(2)).join(" ")}`,
  );
  // ---- setup: the Host database (through the app for the schema) and the floor database ----------------
  let t0 = performance.now();
  const { makeTestApp } = await import("../tests/helpers/app");
  const { addField, choiceSet, CO, makeCot } = await import("../tests/custom-objects/fixtures");
  const t = await makeTestApp({ DATABASE_URL: hostUrl });
  let siteIds: number[];
  let tenantIds: number[];
  let token: string;
  let cotTable: string;
  try {
    await choiceSet(t, "speeds", SPEEDS);
    await choiceSet(t, "tiers", TIERS);
    const sites = await t.json("POST", "/api/dcim/sites/", {
      body: Array.from({ length: SITES }, (_, i) => ({ name: `Site ${i}`, slug: `site-${i}` })),
    });
    const tenants = await t.json("POST", "/api/tenancy/tenants/", {
      body: Array.from({ length: TENANTS }, (_, i) => ({
        name: `Tenant ${i}`,
        slug: `tenant-${i}`,
      })),
    });
    if (sites.status !== 201 || tenants.status !== 201)
      throw new Error("sites/tenants setup failed");
    siteIds = (sites.body as { id: number }[]).map((s) => s.id);
    tenantIds = (tenants.body as { id: number }[]).map((s) => s.id);
    const cot = await makeCot(t, "bench_item", "bench_item");
    for (const f of FIELDS) await addField(t, cot.id, f);
    cotTable = `co_${cot.id}`;
    token = t.admin;
    if (opt.keep) writeFileSync(join(work, "token"), token);
    const T = benchTable(cotTable);
    const now = new Date().toISOString();
    for (let start = 0; start < ROWS; start += 10_000) {
      await t.deps.db.orm.transaction(async (tx) => {
        for (let s = start; s < Math.min(ROWS, start + 10_000); s += 100) {
          const chunk = Array.from({ length: Math.min(100, ROWS - s) }, (_, k) => ({
            ...columnsOf(apiRow(s + k, "", siteIds, tenantIds)),
            created: now,
            last_updated: now,
          }));
          await tx.insert(T).values(chunk);
        }
      });
    }
    // The rows went in by SQL, pending in the full-text index (decision 0056): indexed here, so the
    // server does not start with a backlog to work through during the first cells.
    const { flushSearchIndexesNow } = await import("../src/plugins/custom-objects/search/flush");
    await flushSearchIndexesNow(t.app.services);
    await t.deps.db.client.execute("PRAGMA wal_checkpoint(TRUNCATE)");
  } finally {
    await t.deps.db.close();
  }
  log(
    `Host database: ${ROWS} rows in ${cotTable} (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );
  t0 = performance.now();
  {
    const client = createClient({ url: floorUrl });
    await client.execute("PRAGMA journal_mode=WAL");
    await client.execute(FLOOR_DDL);
    // The type declares `serial` unique, so a hand-written schema has that one index (SQLite counts
    // through its smallest index, so the floor's count(*) does not scan the wide rows).
    await client.execute(
      "CREATE UNIQUE INDEX IF NOT EXISTS bench_item_serial ON bench_item (serial)",
    );
    const orm = drizzle(client);
    const T = benchTable("bench_item");
    const now = new Date().toISOString();
    await orm.transaction(async (tx) => {
      for (let s = 0; s < ROWS; s += 100) {
        const chunk = Array.from({ length: Math.min(100, ROWS - s) }, (_, k) => ({
          ...columnsOf(apiRow(s + k, "", siteIds, tenantIds)),
          created: now,
          last_updated: now,
        }));
        await tx.insert(T).values(chunk);
      }
    });
    await client.execute("PRAGMA wal_checkpoint(TRUNCATE)");
    client.close();
  }
  log(`floor database: ${ROWS} rows (${((performance.now() - t0) / 1000).toFixed(1)} s)`);

  // ---- the servers ------------------------------------------------------------------------------------------
  const host = await startServer("host", hostUrl);
  const floor = await startServer("floor", floorUrl);
  await Bun.sleep(2000);
  const idle = { host: rssMb(host.pid), floor: rssMb(floor.pid) };
  const peak = { host: idle.host, floor: idle.floor };
  const auth = { authorization: `Token ${token}` };
  const paths = {
    host: {
      item: `${CO}/bench_item/`,
      headers: { ...auth, "content-type": "application/json" } as Record<string, string>,
    },
    floor: {
      item: `/co/`,
      headers: { "content-type": "application/json" } as Record<string, string>,
    },
  };
  // sanity: both serve row 1 with the same serial
  const h1 = (await (
    await fetch(`${host.origin}${CO}/bench_item/1/`, { headers: auth })
  ).json()) as { serial: string };
  const f1 = (await (await fetch(`${floor.origin}/co/1`)).json()) as { serial: string };
  if (h1.serial !== f1.serial)
    throw new Error(`Host and floor disagree on row 1: ${h1.serial} vs ${f1.serial}`);

  const template = JSON.stringify({
    ...apiRow(7, "", siteIds, tenantIds),
    name: "item-__U__",
    serial: "SN-__U__",
  });
  /** `cpu`: each server's CPU time per request (per 1,000 rows for the load), ms. */
  type Cell = {
    label: string;
    unit: string;
    host: number;
    floor: number;
    cpu: { host: number; floor: number };
    notes: string[];
  };
  const cells: Cell[] = [];
  const floorPath = (kind: "get" | "list", expr: string) =>
    kind === "get" ? `"/co/" .. ${expr}` : `"/co?limit=50&offset=" .. ${expr}`;
  const hostPath = (kind: "get" | "list", expr: string) =>
    kind === "get"
      ? `"${CO}/bench_item/" .. ${expr} .. "/"`
      : `"${CO}/bench_item/?limit=50&offset=" .. ${expr}`;
  const scenarios: Array<{
    id: string;
    label: string;
    kind: "get" | "list" | "post" | "q";
    expr: string;
  }> = [
    { id: "get", label: "GET by id, req/s", kind: "get", expr: `math.random(1, ${ROWS})` },
    {
      id: "list",
      label: "list 50 at a random offset, req/s",
      kind: "list",
      expr: `math.random(0, ${ROWS - 50})`,
    },
    { id: "post", label: "POST one object, req/s", kind: "post", expr: "" },
    {
      id: "list950",
      label: "list 50 at an offset ≤ 950, req/s",
      kind: "list",
      expr: `math.random(0, 950)`,
    },
    {
      id: "q",
      label: `?q= of a term in 10% of the rows (${SITE_CODE}), median ms`,
      kind: "q",
      expr: SITE_CODE,
    },
    { id: "q", label: "?q= of a rare term (one serial), median ms", kind: "q", expr: "SN-54321" },
  ];
  for (const [i, s] of scenarios.entries()) {
    if (!ONLY.has(s.id)) continue;
    const unit = s.kind === "q" ? "ms" : "req/s";
    const cell: Cell = {
      label: s.label,
      unit,
      host: 0,
      floor: 0,
      cpu: { host: 0, floor: 0 },
      notes: [],
    };
    for (const server of i % 2 === 0 ? [host, floor] : [floor, host]) {
      const k = server.kind as "host" | "floor";
      const lua =
        s.kind === "post"
          ? luaScript(paths[k].headers, "", {
              path: k === "host" ? paths.host.item : "/co",
              body: template,
            })
          : s.kind === "q"
            ? luaScript(
                k === "host" ? auth : {},
                JSON.stringify(
                  `${k === "host" ? paths.host.item : "/co"}?q=${encodeURIComponent(s.expr)}`,
                ),
              )
            : luaScript(
                k === "host" ? auth : {},
                (k === "host" ? hostPath : floorPath)(s.kind, s.expr),
              );
      const [r, pk, used] = await sampled(server, async () => {
        const result = await wrk(server.origin, lua);
        // wrk stops sending, not the server working: a slow cell (the floor's ?q= scans) leaves
        // requests in flight that would run into the next cell. One request more queues behind them.
        await fetch(`${server.origin}${k === "host" ? `${CO}/bench_item/1/` : "/co/1"}`, {
          headers: k === "host" ? auth : {},
          signal: AbortSignal.timeout(300_000),
        }).then((res) => res.arrayBuffer());
        return result;
      });
      peak[k] = Math.max(peak[k], pk);
      cell[k] = s.kind === "q" ? msOf(r.p50) : r.rps;
      cell.cpu[k] = used / Math.max(1, r.requests + 1);
      if (s.kind === "q") cell.notes.push(`${k} ${r.rps.toFixed(0)} req/s`);
      if (r.errors) cell.notes.push(`${k}: ${r.errors}`);
      log(
        `  ${s.label} — ${k}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50}, p99 ${r.p99}, CPU ${cell.cpu[k].toFixed(2)} ms/request, RSS peak ${pk.toFixed(0)} MB${r.errors ? ` (${r.errors})` : ""}`,
      );
    }
    cells.push(cell);
  }

  // ---- load: POSTs of 1,000 rows, one at a time, per server ----------------------------------------------------
  const load: Cell = {
    label: `load in batches of ${BULK.toLocaleString("en-US")} (${BATCHES} batches), rows/s`,
    unit: "rows/s",
    host: 0,
    floor: 0,
    cpu: { host: 0, floor: 0 },
    notes: [],
  };
  for (const server of ONLY.has("load") ? [floor, host] : []) {
    const k = server.kind as "host" | "floor";
    const url = k === "host" ? `${host.origin}${CO}/bench_item/` : `${floor.origin}/co`;
    const [ms, pk, used] = await sampled(server, async () => {
      let total = 0;
      for (let b = 0; b < BATCHES; b++) {
        const body = JSON.stringify(
          Array.from({ length: BULK }, (_, j) =>
            apiRow(ROWS + b * BULK + j, `bulk-${k}-`, siteIds, tenantIds),
          ),
        );
        const s0 = performance.now();
        const res = await fetch(url, {
          method: "POST",
          headers: paths[k].headers,
          body,
          signal: AbortSignal.timeout(120_000),
        });
        const text = await res.text();
        total += performance.now() - s0;
        if (res.status !== 201)
          throw new Error(`${k} bulk POST: ${res.status} ${text.slice(0, 300)}`);
      }
      return total;
    });
    peak[k] = Math.max(peak[k], pk);
    load[k] = (BATCHES * BULK) / (ms / 1000);
    load.cpu[k] = used / BATCHES;
    log(
      `  load — ${k}: ${load[k].toFixed(0)} rows/s, CPU ${load.cpu[k].toFixed(0)} ms per 1,000 rows, RSS peak ${pk.toFixed(0)} MB`,
    );
  }
  // after the POST cell, where the full table has it
  if (ONLY.has("load")) {
    const at = cells.findIndex((c) => c.label.startsWith("list 50 at an offset ≤"));
    cells.splice(at === -1 ? cells.length : at, 0, load);
  }

  // ---- report ---------------------------------------------------------------------------------------------------
  const load1 = loadavg();
  const cpu = cpus();
  console.log(
    `\n### bench/http-table — ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${ROWS.toLocaleString("en-US")} rows`,
  );
  console.log(
    `bun ${Bun.version}, ${cpu.length} × ${cpu[0]?.model ?? "?"}; wrk -t${THREADS} -c${CONNECTIONS} -d${DURATION}s per cell, Host and floor alternating; load average ${load0[0]!.toFixed(2)} before, ${load1[0]!.toFixed(2)} after; ${((performance.now() - tStart) / 1000).toFixed(0)} s in all\n`,
  );
  // CPU per request: floor ÷ Host, so that above 1 reads as "Host does the work in less", as the
  // throughput ratio does
  console.log(
    "| operation | Host | floor | Host / floor | CPU ms per request (load: per 1,000 rows), Host / floor | floor ÷ Host CPU |",
  );
  console.log("|---|---|---|---|---|---|");
  const fmt = (c: Cell, n: number) => (c.unit === "ms" ? n.toFixed(1) : fmtInt(n));
  const cpuFmt = (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(2));
  for (const c of cells)
    console.log(
      `| ${c.label} | ${fmt(c, c.host)} | ${fmt(c, c.floor)} | ${(c.host / c.floor).toFixed(2)}${c.notes.length ? ` (${c.notes.join("; ")})` : ""} | ${cpuFmt(c.cpu.host)} / ${cpuFmt(c.cpu.floor)} | ${(c.cpu.floor / c.cpu.host).toFixed(2)} |`,
    );
  console.log(
    `| RSS idle / peak, MB | ${idle.host.toFixed(0)} / ${peak.host.toFixed(0)} | ${idle.floor.toFixed(0)} / ${peak.floor.toFixed(0)} | | | |`,
  );
} finally {
  for (const c of children) {
    c.kill();
    await Promise.race([c.exited, Bun.sleep(5000)]);
    if (c.exitCode === null && c.signalCode === null) c.kill(9);
  }
  if (opt.keep)
    log(`kept the databases in ${work} (the Host's admin token is in ${join(work, "token")})`);
  else rmSync(work, { recursive: true, force: true });
}
