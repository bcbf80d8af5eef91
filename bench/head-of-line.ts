/**
 * Issue 17 item 6, head-of-line blocking: how long a GET by id takes over HTTP while a slow
 * request (a `?q=` search no index can answer, over a million rows) runs, with the read pool
 * (`DATABASE_READ_POOL=2`, decision 0057) and without it (`0`), in the same run.
 *
 *   npx bun bench/head-of-line.ts                          # 1,000,000 rows, 10 s per phase
 *   npx bun bench/head-of-line.ts --rows 200000 --duration 3
 *
 * Options: --rows (BENCH_ROWS, 1000000), --duration seconds per phase (BENCH_DURATION, 10),
 * --pools comma list of DATABASE_READ_POOL values to compare (default "2,0", run in that order,
 * then once more in reverse with --repeat), --slow the slow request's query (default
 * `q={pair}&limit=50`: a search term shorter than a trigram, which the full-text index cannot
 * answer; `{pair}` is a new pair of letters each time, so no request is answered from a cache).
 *
 * Setup (this process): a libSQL file with the real app's schema (tests/helpers/app.ts
 * makeTestApp) and the 20-field custom object type of bench/twenty-fields.ts, its rows put in by
 * direct SQL. Then, per pool setting, a child process of this script serves the Host app on that
 * file (`--serve`, memory cache, Bun.serve on 127.0.0.1), and two phases run against it:
 * - idle: one client GETs a random object by id, one request at a time, for --duration;
 * - slow: the same client, while another runs the slow request back to back (it scans every
 *   row, for the count and for the page). Only GETs sent while a slow request was in flight count.
 * Reported: p50 / p99 / max of the GET, the number of GETs, and the slow request's median time.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { apiRow, benchTable, columnsOf, FIELDS, SPEEDS, TIERS } from "./twenty-fields";
import { num, serverScript, spawnServer } from "./child-server";

const { values: opt } = parseArgs({
  options: {
    serve: { type: "string" },
    db: { type: "string" },
    pool: { type: "string" },
    rows: { type: "string" },
    duration: { type: "string" },
    pools: { type: "string" },
    repeat: { type: "boolean" },
    slow: { type: "string" },
  },
});
const log = (...a: unknown[]) => console.error(...a);

// ---- child: the Host server -------------------------------------------------------------------------------
if (opt.serve) {
  const { createApp } = await import("../src/app");
  const { loadConfig } = await import("../src/config");
  const { openDatabase } = await import("../src/db/local");
  const { createCache } = await import("../src/services/cache");
  const config = loadConfig(
    { LOG_LEVEL: "silent", DATABASE_URL: opt.db!, DATABASE_READ_POOL: opt.pool ?? "2" },
    "bun",
  );
  const db = await openDatabase(config.database.url, undefined, {
    readPool: config.database.readPool,
  });
  const app = await createApp({ config, db, cache: createCache("memory", {}) });
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => app.fetch(req) });
  console.log(`READY ${server.port}`);
  process.on("SIGTERM", async () => {
    server.stop(true);
    await db.close();
    process.exit(0);
  });
  await new Promise(() => {});
}

// ---- the driver --------------------------------------------------------------------------------------------
const ROWS = num(opt.rows ?? process.env.BENCH_ROWS, "--rows", 1_000_000, 10_000_000);
const DURATION = num(opt.duration ?? process.env.BENCH_DURATION, "--duration", 10, 300);
const POOLS = (opt.pools ?? "2,0").split(",").map((p) => {
  if (!/^\d+$/.test(p.trim()) || Number(p) > 16) throw new Error(`bad value for --pools: ${p}`);
  return String(Number(p));
});
/**
 * Two letters are shorter than a trigram: the search cannot use the full-text index and scans
 * every row. `{pair}` becomes a pair of letters not used before in the run: a list's count is
 * kept while the database does not change, so repeating one query would be answered from there.
 */
const SLOW_QUERY = opt.slow ?? "q={pair}&limit=50";
const PAIRS = Array.from({ length: 26 * 26 }, (_, i) =>
  String.fromCharCode(97 + Math.floor(i / 26), 97 + (i % 26)),
).sort(() => Math.random() - 0.5);
const slowQuery = () => SLOW_QUERY.replace("{pair}", () => PAIRS.pop() ?? "zz");
const ORDER = opt.repeat ? [...POOLS, ...[...POOLS].reverse()] : POOLS;

const work = mkdtempSync(join(tmpdir(), "host-head-of-line-"));
const dbUrl = `file:${join(work, "host.db")}`;
const children: Array<ReturnType<typeof Bun.spawn>> = [];

async function setup(): Promise<{ token: string; path: string }> {
  const { makeTestApp } = await import("../tests/helpers/app");
  const { addField, choiceSet, CO, makeCot } = await import("../tests/custom-objects/fixtures");
  const t = await makeTestApp({ DATABASE_URL: dbUrl, DATABASE_READ_POOL: "0" });
  try {
    await choiceSet(t, "speeds", SPEEDS);
    await choiceSet(t, "tiers", TIERS);
    const sites = await t.json("POST", "/api/dcim/sites/", {
      body: Array.from({ length: 20 }, (_, i) => ({ name: `Site ${i}`, slug: `site-${i}` })),
    });
    const tenants = await t.json("POST", "/api/tenancy/tenants/", {
      body: Array.from({ length: 5 }, (_, i) => ({ name: `Tenant ${i}`, slug: `tenant-${i}` })),
    });
    if (sites.status !== 201 || tenants.status !== 201)
      throw new Error("sites/tenants setup failed");
    const siteIds = (sites.body as { id: number }[]).map((s) => s.id);
    const tenantIds = (tenants.body as { id: number }[]).map((s) => s.id);
    const cot = await makeCot(t, "bench_item", "bench_item");
    for (const f of FIELDS) await addField(t, cot.id, f);
    const T = benchTable(`co_${cot.id}`);
    const now = new Date().toISOString();
    for (let start = 0; start < ROWS; start += 20_000) {
      await t.deps.db.orm.transaction(async (tx) => {
        for (let s = start; s < Math.min(ROWS, start + 20_000); s += 100) {
          const chunk = Array.from({ length: Math.min(100, ROWS - s) }, (_, k) => ({
            ...columnsOf(apiRow(s + k, "", siteIds, tenantIds)),
            created: now,
            last_updated: now,
          }));
          await tx.insert(T).values(chunk);
        }
      });
    }
    // The rows went in by SQL, pending in the full-text index (decision 0056): indexed here, or
    // the server would spend the phases indexing a million rows in the background.
    const { flushSearchIndexesNow } = await import("../src/plugins/custom-objects/search/flush");
    await flushSearchIndexesNow(t.app.services);
    await t.deps.db.client.execute("PRAGMA wal_checkpoint(TRUNCATE)");
    return { token: t.admin, path: `${CO}/bench_item/` };
  } finally {
    await t.deps.db.close();
  }
}

async function startServer(pool: string) {
  return spawnServer(
    [await serverScript(import.meta.path), "--serve", "1", "--db", dbUrl, "--pool", pool],
    children,
  );
}

const pct = (xs: number[], p: number) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const ms = (x: number) => (Number.isNaN(x) ? "–" : x < 10 ? x.toFixed(2) : x.toFixed(0));

interface Phase {
  gets: number[];
  slow: number[];
}

/** GETs by id, one at a time, for `seconds`; with `slowPath`, slow requests run back to back beside them. */
async function phase(
  origin: string,
  headers: Record<string, string>,
  path: string,
  seconds: number,
  slowPath?: () => string,
): Promise<Phase> {
  const out: Phase = { gets: [], slow: [] };
  const end = performance.now() + seconds * 1000;
  let inFlight = false;
  const slowLoop = (async () => {
    while (slowPath && performance.now() < end) {
      const t0 = performance.now();
      inFlight = true;
      const r = await fetch(origin + slowPath(), { headers });
      await r.arrayBuffer();
      inFlight = false;
      if (r.status !== 200) throw new Error(`slow request: ${r.status}`);
      out.slow.push(performance.now() - t0);
    }
  })();
  // let the first slow request start before timing
  if (slowPath) await Bun.sleep(20);
  while (performance.now() < end) {
    const id = 1 + Math.floor(Math.random() * ROWS);
    const during = inFlight;
    const t0 = performance.now();
    const r = await fetch(`${origin}${path}${id}/`, { headers });
    await r.arrayBuffer();
    const took = performance.now() - t0;
    if (r.status !== 200) throw new Error(`GET ${id}: ${r.status}`);
    if (!slowPath || (during && inFlight)) out.gets.push(took);
    await Bun.sleep(5);
  }
  await slowLoop;
  return out;
}

try {
  log(
    `bench/head-of-line: ${ROWS.toLocaleString("en-US")} rows, ${DURATION} s per phase, pools ${ORDER.join(" → ")}, ${cpus().length} CPUs, load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}`,
  );
  let t0 = performance.now();
  const { token, path } = await setup();
  log(`setup: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const headers = { authorization: `Token ${token}` };
  const slowPath = () => `${path}?${slowQuery()}`;
  const rows: string[] = [];
  for (const pool of ORDER) {
    const server = await startServer(pool);
    try {
      // warm: the token's last_used write, statement caches, the first slow request's pages
      await phase(server.origin, headers, path, 1);
      t0 = performance.now();
      await (await fetch(server.origin + slowPath(), { headers })).arrayBuffer();
      log(`pool ${pool}: one slow request alone ${(performance.now() - t0).toFixed(0)} ms`);
      const idle = await phase(server.origin, headers, path, DURATION);
      const busy = await phase(server.origin, headers, path, DURATION, slowPath);
      for (const [label, p] of [
        ["idle", idle],
        ["during slow", busy],
      ] as const) {
        const line = `| ${pool} | ${label} | ${p.gets.length} | ${ms(pct(p.gets, 50))} | ${ms(pct(p.gets, 99))} | ${ms(Math.max(...p.gets))} | ${p.slow.length ? `${p.slow.length} × ${ms(pct(p.slow, 50))}` : "–"} |`;
        rows.push(line);
        log(line);
      }
    } finally {
      server.child.kill("SIGTERM");
      const code = await Promise.race([server.child.exited, Bun.sleep(10_000).then(() => "hung")]);
      if (code === "hung") {
        log(`pool ${pool}: the server did not exit within 10 s of SIGTERM`);
        server.child.kill("SIGKILL");
      }
    }
  }
  console.log(
    `\nGET by id over HTTP, one at a time (ms); ${ROWS.toLocaleString("en-US")} rows; slow = list?${SLOW_QUERY}\n`,
  );
  console.log(
    "| DATABASE_READ_POOL | phase | GETs | p50 | p99 | max | slow requests × median ms |",
  );
  console.log("|--:|:--|--:|--:|--:|--:|--:|");
  for (const line of rows) console.log(line);
  console.log(
    `\nload average after: ${loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}`,
  );
} finally {
  for (const c of children) c.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
}
// the setup's app leaves timers behind; the servers are gone
process.exit(0);
