/**
 * Custom objects: throughput and latency of the instance API and linked-objects/, next to a bare
 * Hono + Drizzle baseline doing the same queries against the same database in the same run.
 *
 *   npx bun bench/custom-objects.ts                      # full scale (100k rows; 50 COTs × 20k rows)
 *   BENCH_SCALE=0.05 npx bun bench/custom-objects.ts     # quick run (row counts × 0.05)
 *
 * Options (env in brackets): --scale (BENCH_SCALE, default 1), --rows (BENCH_ROWS, 100000 × scale),
 * --linked-cots (BENCH_LINKED_COTS, 50), --linked-rows (BENCH_LINKED_ROWS, 20000 × scale),
 * --requests (BENCH_REQUESTS, 600 per scenario and side), --linked-requests (200), --load sql|http
 * (how the rows go in: default sql = direct SQL plus 5 bulk POSTs of 1000 through the app, measured;
 * http = every row by bulk POSTs, ~10 min at full scale), --skip-http (in-process only),
 * --only part2|part3. Experiment: BENCH_CACHE_MB=256 sets PRAGMA cache_size on the app's connection
 * (the app leaves SQLite's 2 MB default).
 *
 * Part 1 sets up a file database in a temp dir, the real app (tests/helpers/app.ts: createApp over a
 * fresh migrated libSQL file, memory cache, a superuser token) and a 20-field COT (text, longtext,
 * integer, decimal, boolean, date, datetime, url, select, multiselect, json, object → dcim.site and
 * → tenancy.tenant). Its rows go in by direct SQL (Drizzle inserts into `co_<id>`, one transaction),
 * except the last 5000, which are bulk-POSTed through the app (1000 per request) and timed.
 * Part 2 measures get by id, list (limit=50, random offsets), create (single POST) and linked-objects
 * in-process (app.fetch) and over real HTTP (Bun.serve on 127.0.0.1), against a bare Hono app whose
 * handlers run the equivalent Drizzle queries over the same `Database` (same single serialised
 * connection): get = one select by id; list = count + `ORDER BY id LIMIT/OFFSET` (and a second variant
 * that pages ids through the id index first, as the app does); create = insert + select back;
 * linked-objects = the same indexed queries as the app (fields query, one count per linking field, a
 * page of rows). Requests are sequential (one in flight), so req/s = requests / wall time. App and
 * baseline alternate in rounds. SQL statements per request are counted by wrapping the client.
 * Part 3 adds N COTs of M rows, each with an object field → dcim.site (~20 rows per COT → the target
 * site), and measures linked-objects/ for that site.
 */
import { and, count, eq, inArray, sql } from "drizzle-orm";
import { Hono } from "hono";
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { customObjectTypeFields, objectTypes } from "../src/db/schema";
import { makeTestApp, type TestApp } from "../tests/helpers/app";
import { addField, choiceSet, CO, makeCot } from "../tests/custom-objects/fixtures";
import { apiRow, benchTable, columnsOf, FIELDS, SPEEDS, TIERS } from "./twenty-fields";

// ---- options --------------------------------------------------------------------------------------
const { values: opt } = parseArgs({
  options: {
    scale: { type: "string" },
    rows: { type: "string" },
    "linked-cots": { type: "string" },
    "linked-rows": { type: "string" },
    requests: { type: "string" },
    "linked-requests": { type: "string" },
    load: { type: "string" },
    "skip-http": { type: "boolean", default: false },
    only: { type: "string" },
  },
});
const num = (flag: string | undefined, env: string, fallback: number) => {
  const raw = flag ?? process.env[env];
  const n = raw === undefined || raw === "" ? fallback : Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`bad value for ${env}: ${raw}`);
  return n;
};
const SCALE = num(opt.scale, "BENCH_SCALE", 1);
const ROWS = Math.max(1000, Math.round(num(opt.rows, "BENCH_ROWS", 100_000 * SCALE)));
const LINKED_COTS = Math.max(2, Math.round(num(opt["linked-cots"], "BENCH_LINKED_COTS", 50)));
const LINKED_ROWS = Math.max(
  1000,
  Math.round(num(opt["linked-rows"], "BENCH_LINKED_ROWS", 20_000 * SCALE)),
);
const REQUESTS = Math.round(num(opt.requests, "BENCH_REQUESTS", 600));
const LINKED_REQUESTS = Math.round(num(opt["linked-requests"], "BENCH_LINKED_REQUESTS", 200));
const LOAD = (opt.load ?? process.env.BENCH_LOAD ?? "sql") as "http" | "sql";
const HTTP = !opt["skip-http"] && process.env.BENCH_SKIP_HTTP !== "1";
const ONLY = opt.only ?? process.env.BENCH_ONLY ?? "";
/** Experiment only: a bigger SQLite page cache on the app's one connection (the app leaves the default). */
const CACHE_MB = process.env.BENCH_CACHE_MB ? Number(process.env.BENCH_CACHE_MB) : null;
const ROUNDS = 6;
const WARMUP = 100;
const SITES = 100;
const TENANTS = 20;
const BULK = 1000;
const HTTP_SAMPLE_ROWS = 5000;

// ---- small helpers ----------------------------------------------------------------------------------
function mulberry32(seed: number) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rnd = mulberry32(42);
const randInt = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
const fmt = (ms: number) => (ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : ms.toFixed(0));
const log = (...a: unknown[]) => console.error(...a);
const secs = (t0: number) => `${((performance.now() - t0) / 1000).toFixed(1)} s`;

type Handler = (req: Request) => Response | Promise<Response>;
interface Stats {
  n: number;
  median: number;
  p95: number;
  mean: number;
  rps: number;
}
function stats(samples: number[], wallMs: number): Stats {
  const s = [...samples].sort((a, b) => a - b);
  return {
    n: s.length,
    median: quantile(s, 0.5),
    p95: quantile(s, 0.95),
    mean: s.reduce((a, b) => a + b, 0) / s.length,
    rps: (s.length / wallMs) * 1000,
  };
}

/** One request through a handler (in-process) or over HTTP; the body is read fully. */
async function once(h: Handler, req: Request, expect: number): Promise<string> {
  const res = await h(req);
  const text = await res.text();
  if (res.status !== expect)
    throw new Error(`${req.method} ${req.url}: ${res.status} ${text.slice(0, 300)}`);
  return text;
}

interface Side {
  name: string;
  handler: Handler;
  /** Builds request i (i is shared by both sides, so they see the same ids/offsets). */
  make: (i: number) => Request;
  expect: number;
}

/** Runs both sides for `n` requests each, in alternating rounds after a warm-up. */
async function compare(a: Side, b: Side, n: number): Promise<[Stats, Stats]> {
  for (const side of [a, b])
    for (let i = 0; i < WARMUP; i++) await once(side.handler, side.make(n + i), side.expect);
  const samples: [number[], number[]] = [[], []];
  const wall = [0, 0];
  const per = Math.ceil(n / ROUNDS);
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? [0, 1] : [1, 0];
    for (const k of order) {
      const side = k === 0 ? a : b;
      const t0 = performance.now();
      for (let i = r * per; i < Math.min(n, (r + 1) * per); i++) {
        const s0 = performance.now();
        await once(side.handler, side.make(i), side.expect);
        samples[k]!.push(performance.now() - s0);
      }
      wall[k]! += performance.now() - t0;
    }
  }
  return [stats(samples[0], wall[0]!), stats(samples[1], wall[1]!)];
}

/**
 * Counts SQL statements sent to the libSQL client (execute, batch items, BEGIN/statements/COMMIT of
 * transactions) while `fn` runs, by wrapping the client's methods; used outside the timed loops.
 */
async function countStatements(
  client: import("@libsql/client").Client,
  fn: () => Promise<unknown>,
): Promise<number> {
  let n = 0;
  const c = client as any;
  const orig = { execute: c.execute, batch: c.batch, transaction: c.transaction };
  c.execute = (...a: unknown[]) => (n++, orig.execute.apply(client, a));
  c.batch = (stmts: unknown[], mode?: unknown) => (
    (n += stmts.length), orig.batch.call(client, stmts, mode)
  );
  c.transaction = async (mode?: unknown) => {
    const tx = await orig.transaction.call(client, mode);
    n += 2; // BEGIN … COMMIT/ROLLBACK
    const exec = tx.execute;
    tx.execute = (...a: unknown[]) => (n++, exec.apply(tx, a));
    return tx;
  };
  try {
    await fn();
  } finally {
    Object.assign(c, orig);
  }
  return n;
}

// ---- the baseline app ---------------------------------------------------------------------------------
/** Bare Hono + Drizzle over the same Database: no auth, no registry, no serialisation beyond c.json. */
function baselineApp(t: TestApp, cotId: number, siteTypeId: number) {
  const orm = t.deps.db.orm;
  const T = benchTable(`co_${cotId}`);
  const app = new Hono();
  const pageOf = (c: { req: { query(k: string): string | undefined } }) => ({
    limit: Math.min(1000, Number(c.req.query("limit") ?? 50) || 50),
    offset: Number(c.req.query("offset") ?? 0) || 0,
  });
  app.get("/co/:id", async (c) => {
    const [row] = await orm
      .select()
      .from(T)
      .where(eq(T.id, Number(c.req.param("id"))));
    return row ? c.json(row) : c.json({ detail: "Not found." }, 404);
  });
  app.get("/co", async (c) => {
    const { limit, offset } = pageOf(c);
    const [{ n }] = (await orm.select({ n: count() }).from(T)) as [{ n: number }];
    const results = await orm.select().from(T).orderBy(T.id).limit(limit).offset(offset);
    return c.json({ count: n, results });
  });
  // The same page the way the app reads it (§2): ids through the narrow id index, then the rows.
  app.get("/co-idx", async (c) => {
    const { limit, offset } = pageOf(c);
    const [{ n }] = (await orm.select({ n: count() }).from(T)) as [{ n: number }];
    const ids = (
      await orm.select({ id: T.id }).from(T).orderBy(T.id).limit(limit).offset(offset)
    ).map((r) => r.id);
    const rows = ids.length ? await orm.select().from(T).where(inArray(T.id, ids)) : [];
    const byId = new Map(rows.map((r) => [r.id, r]));
    return c.json({ count: n, results: ids.map((id) => byId.get(id)) });
  });
  app.post("/co", async (c) => {
    const body = (await c.req.json()) as ReturnType<typeof apiRow>;
    const now = new Date().toISOString();
    const [{ id }] = (await orm
      .insert(T)
      .values({ ...columnsOf(body), created: now, last_updated: now })
      .returning({ id: T.id })) as [{ id: number }];
    const [row] = await orm.select().from(T).where(eq(T.id, id));
    return c.json(row, 201);
  });
  // linked-objects: the same indexed queries — fields pointing at the type, the object's existence,
  // one count per linking field, then a page of ids and rows per field until the page is full.
  app.get("/linked", async (c) => {
    const objectId = Number(c.req.query("object_id"));
    const { limit, offset } = pageOf(c);
    const site = await t.deps.db.orm.all(sql`SELECT id, name FROM sites WHERE id = ${objectId}`);
    if (!site.length) return c.json({ detail: "Not found." }, 404);
    const fields = await orm
      .select({
        id: customObjectTypeFields.id,
        cot: customObjectTypeFields.customObjectTypeId,
        name: customObjectTypeFields.name,
      })
      .from(customObjectTypeFields)
      .where(
        and(
          eq(customObjectTypeFields.type, "object"),
          eq(customObjectTypeFields.relatedObjectTypeId, siteTypeId),
        ),
      )
      .orderBy(customObjectTypeFields.customObjectTypeId, customObjectTypeFields.id);
    const sources: { table: string; col: string; name: string; cot: number; n: number }[] = [];
    for (const f of fields) {
      const table = sql.identifier(`co_${f.cot}`);
      const col = sql.identifier(`${f.name}_id`);
      const [r] = (await orm.all(
        sql`SELECT count(*) AS n FROM ${table} WHERE ${col} = ${objectId}`,
      )) as { n: number }[];
      if (r!.n)
        sources.push({
          table: `co_${f.cot}`,
          col: `${f.name}_id`,
          name: f.name,
          cot: f.cot,
          n: r!.n,
        });
    }
    const total = sources.reduce((a, s) => a + s.n, 0);
    const results: unknown[] = [];
    let skip = offset;
    let want = limit;
    for (const s of sources) {
      if (want <= 0) break;
      if (skip >= s.n) {
        skip -= s.n;
        continue;
      }
      const rows = await orm.all(
        sql`SELECT * FROM ${sql.identifier(s.table)} WHERE ${sql.identifier(s.col)} = ${objectId} ORDER BY id LIMIT ${want} OFFSET ${skip}`,
      );
      skip = 0;
      for (const object of rows)
        results.push({ custom_object_type: s.cot, field_name: s.name, object });
      want -= rows.length;
    }
    return c.json({ count: total, results });
  });
  return app;
}

// ---- reporting -------------------------------------------------------------------------------------------
interface Line {
  part: string;
  scenario: string;
  transport: string;
  app: Stats;
  base: Stats;
  target?: number;
  /** SQL statements per request: app, baseline. */
  stmts?: [number, number];
  /** Target on the app's median latency (ms). */
  targetMs?: number;
}
const lines: Line[] = [];
function printTable(rows: Line[]) {
  const head = [
    "scenario",
    "via",
    "app med ms",
    "app p95",
    "app req/s",
    "base med ms",
    "base p95",
    "base req/s",
    "app/base req/s",
    "app/base by median",
    "SQL stmts app/base",
    "target",
  ];
  const body = rows.map((l) => {
    const ratio = l.app.rps / l.base.rps;
    const target =
      l.target !== undefined
        ? `req/s ≥${Math.round(l.target * 100)}% of base: ${ratio >= l.target ? "ok" : "MISS"}`
        : l.targetMs !== undefined
          ? `median <${l.targetMs} ms: ${l.app.median < l.targetMs ? "ok" : "MISS"}`
          : "";
    const stmts = l.stmts ? `${l.stmts[0]} / ${l.stmts[1]}` : "";
    return [
      l.scenario,
      l.transport,
      fmt(l.app.median),
      fmt(l.app.p95),
      l.app.rps.toFixed(0),
      fmt(l.base.median),
      fmt(l.base.p95),
      l.base.rps.toFixed(0),
      `${(ratio * 100).toFixed(0)}%`,
      `${((l.base.median / l.app.median) * 100).toFixed(0)}%`,
      stmts,
      target,
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    "| " +
    r.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(" | ") +
    " |";
  const out = [
    line(head),
    "|" +
      widths.map((w, i) => (i < 2 ? ":" : "-") + "-".repeat(w) + (i < 2 ? "-" : ":")).join("|") +
      "|",
    ...body.map(line),
  ];
  console.log(out.join("\n"));
}

// ---- main -------------------------------------------------------------------------------------------------
const tStart = performance.now();
log(
  `bench/custom-objects: scale ${SCALE}, ${ROWS} rows, ${LINKED_COTS} COTs × ${LINKED_ROWS} rows, ${REQUESTS} requests per side, load=${LOAD}, http=${HTTP}`,
);
const t = await makeTestApp();
const db = t.deps.db;
const auth = { authorization: `Token ${t.admin}` };
const BASE_URL = "http://host.test";
const appHandler: Handler = (req) => t.app.fetch(req);
if (CACHE_MB) await db.client.execute(`PRAGMA cache_size=-${Math.round(CACHE_MB * 1024)}`);
const pragmas = await Promise.all(
  ["cache_size", "mmap_size", "journal_mode", "synchronous"].map(
    async (p) => `${p}=${Object.values((await db.client.execute(`PRAGMA ${p}`)).rows[0] ?? {})[0]}`,
  ),
);

try {
  // ---- part 1: setup ------------------------------------------------------------------------------------
  let t0 = performance.now();
  await choiceSet(t, "speeds", SPEEDS);
  await choiceSet(t, "tiers", TIERS);
  const sites = await t.json("POST", "/api/dcim/sites/", {
    body: Array.from({ length: SITES }, (_, i) => ({ name: `Site ${i}`, slug: `site-${i}` })),
  });
  const tenants = await t.json("POST", "/api/tenancy/tenants/", {
    body: Array.from({ length: TENANTS }, (_, i) => ({ name: `Tenant ${i}`, slug: `tenant-${i}` })),
  });
  if (sites.status !== 201 || tenants.status !== 201)
    throw new Error(
      `sites/tenants: ${JSON.stringify(sites.body).slice(0, 200)} ${JSON.stringify(tenants.body).slice(0, 200)}`,
    );
  const siteIds = (sites.body as { id: number }[]).map((s) => s.id);
  const tenantIds = (tenants.body as { id: number }[]).map((s) => s.id);
  const cot = await makeCot(t, "bench_item", "bench_item");
  for (const f of FIELDS) await addField(t, cot.id, f);
  const [siteOt] = await db.orm
    .select()
    .from(objectTypes)
    .where(and(eq(objectTypes.appLabel, "dcim"), eq(objectTypes.model, "site")));
  const siteTypeId = siteOt!.id;
  log(
    `setup: choice sets, ${SITES} sites, ${TENANTS} tenants, COT co_${cot.id} with ${FIELDS.length} fields (${secs(t0)})`,
  );

  // Rows go in through SQL (one transaction), except a sample of bulk POSTs through the app at the
  // end (with --load http: all of them), so bulk-create throughput is measured on the full table.
  const httpRows = LOAD === "http" ? ROWS : Math.min(HTTP_SAMPLE_ROWS, Math.floor(ROWS / 2));
  const sqlRows = ROWS - httpRows;
  t0 = performance.now();
  const T = benchTable(`co_${cot.id}`);
  const now = new Date().toISOString();
  await db.orm.transaction(async (tx) => {
    for (let start = 0; start < sqlRows; start += 100) {
      const chunk = Array.from({ length: Math.min(100, sqlRows - start) }, (_, k) => ({
        ...columnsOf(apiRow(start + k, "", siteIds, tenantIds)),
        created: now,
        last_updated: now,
      }));
      await tx.insert(T).values(chunk);
    }
  });
  const sqlSecs = (performance.now() - t0) / 1000;
  t0 = performance.now();
  let bulkStmts = 0;
  for (let start = sqlRows; start < ROWS; start += BULK) {
    const body = Array.from({ length: Math.min(BULK, ROWS - start) }, (_, k) =>
      apiRow(start + k, "", siteIds, tenantIds),
    );
    const post = async () => {
      const res = await t.req("POST", `${CO}/bench_item/`, { body });
      if (res.status !== 201)
        throw new Error(`bulk load at ${start}: ${res.status} ${(await res.text()).slice(0, 300)}`);
      await res.arrayBuffer();
    };
    // the first bulk request also counts its SQL statements (timed all the same)
    if (start === sqlRows) bulkStmts = (await countStatements(db.client, post)) / body.length;
    else await post();
    if (((start - sqlRows) / BULK) % 10 === 9)
      log(`  bulk-posted ${start + BULK - sqlRows} rows (${secs(t0)})`);
  }
  const httpSecs = (performance.now() - t0) / 1000;
  const [{ n: loaded }] = (await db.orm.all(
    sql`SELECT count(*) AS n FROM ${sql.identifier(`co_${cot.id}`)}`,
  )) as [{ n: number }];
  const setupFacts: string[] = [
    `co_${cot.id}: ${loaded} rows — ${sqlRows} by direct SQL (Drizzle inserts of 100 rows, one transaction: ${sqlSecs.toFixed(1)} s, ${(sqlRows / sqlSecs).toFixed(0)} rows/s), ${httpRows} by HTTP bulk POSTs of ${BULK} through the app in-process (${httpSecs.toFixed(1)} s, **${(httpRows / httpSecs).toFixed(0)} rows/s**, ${bulkStmts.toFixed(1)} SQL statements per row)`,
  ];
  log(setupFacts[0]);
  // Start every measurement from a checkpointed WAL, as a long-running database would be.
  await db.client.execute("PRAGMA wal_checkpoint(TRUNCATE)");

  const base = baselineApp(t, cot.id, siteTypeId);
  const baseHandler: Handler = (req) => base.fetch(req);
  const maxId = loaded;
  const ids = Array.from({ length: REQUESTS + WARMUP }, () => randInt(1, maxId));
  const offsets = Array.from({ length: REQUESTS + WARMUP }, () => randInt(0, maxId - 50));
  // a site with ~ROWS/SITES linking rows
  const busySite = siteIds[7]!;
  const createBody = (side: string, i: number) =>
    JSON.stringify(apiRow(i, `${side}-`, siteIds, tenantIds));
  let createRun = 0;

  /** Part 2 scenarios, for one transport. */
  async function part2(
    transport: string,
    appH: Handler,
    appOrigin: string,
    baseH: Handler,
    baseOrigin: string,
  ) {
    const run = ++createRun;
    const get = (origin: string, path: string, headers: Record<string, string> = {}) =>
      new Request(origin + path, { headers });
    const scenarios: {
      name: string;
      a: (i: number) => Request;
      b: (i: number) => Request;
      expect: number;
      target?: number;
      n?: number;
    }[] = [
      {
        name: "get by id",
        a: (i) => get(appOrigin, `${CO}/bench_item/${ids[i % ids.length]}/`, auth),
        b: (i) => get(baseOrigin, `/co/${ids[i % ids.length]}`),
        expect: 200,
        target: 0.5,
      },
      {
        name: "list limit=50, random offset (base: plain OFFSET)",
        a: (i) =>
          get(appOrigin, `${CO}/bench_item/?limit=50&offset=${offsets[i % offsets.length]}`, auth),
        b: (i) => get(baseOrigin, `/co?limit=50&offset=${offsets[i % offsets.length]}`),
        expect: 200,
      },
      {
        name: "list, base pages ids via the id index",
        a: (i) =>
          get(appOrigin, `${CO}/bench_item/?limit=50&offset=${offsets[i % offsets.length]}`, auth),
        b: (i) => get(baseOrigin, `/co-idx?limit=50&offset=${offsets[i % offsets.length]}`),
        expect: 200,
      },
      {
        name: "create (single POST)",
        a: (i) =>
          new Request(`${appOrigin}${CO}/bench_item/`, {
            method: "POST",
            headers: { ...auth, "content-type": "application/json" },
            body: createBody(`a${run}`, i),
          }),
        b: (i) =>
          new Request(`${baseOrigin}/co`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: createBody(`b${run}`, i),
          }),
        expect: 201,
        target: 0.5,
      },
      {
        name: `linked-objects (1 COT, ${Math.round(ROWS / SITES)} links)`,
        a: () =>
          get(appOrigin, `${CO}/linked-objects/?object_type=dcim.site&object_id=${busySite}`, auth),
        b: () => get(baseOrigin, `/linked?object_id=${busySite}`),
        expect: 200,
        n: Math.min(REQUESTS, 300),
      },
    ];
    for (const s of scenarios) {
      const t1 = performance.now();
      const stmts: [number, number] | undefined =
        transport === "in-process"
          ? [
              await countStatements(db.client, () =>
                once(appH, s.a((s.n ?? REQUESTS) + WARMUP), s.expect),
              ),
              await countStatements(db.client, () =>
                once(baseH, s.b((s.n ?? REQUESTS) + WARMUP), s.expect),
              ),
            ]
          : undefined;
      const [a, b] = await compare(
        { name: "app", handler: appH, make: s.a, expect: s.expect },
        { name: "base", handler: baseH, make: s.b, expect: s.expect },
        s.n ?? REQUESTS,
      );
      lines.push({
        part: "2",
        scenario: s.name,
        transport,
        app: a,
        base: b,
        target: s.target,
        stmts,
      });
      log(
        `  ${transport} ${s.name}: app ${fmt(a.median)} ms (${a.rps.toFixed(0)}/s), base ${fmt(b.median)} ms (${b.rps.toFixed(0)}/s) (${secs(t1)})`,
      );
    }
  }

  if (ONLY !== "part3") {
    // sanity: both sides answer the same row
    const one = JSON.parse(
      await once(appHandler, new Request(`${BASE_URL}${CO}/bench_item/1/`, { headers: auth }), 200),
    );
    const two = JSON.parse(await once(baseHandler, new Request(`${BASE_URL}/co/1`), 200));
    if (one.serial !== two.serial || one.site?.id !== two.site_id)
      throw new Error("app and baseline disagree on row 1");
    const linked = JSON.parse(
      await once(
        appHandler,
        new Request(
          `${BASE_URL}${CO}/linked-objects/?object_type=dcim.site&object_id=${busySite}`,
          { headers: auth },
        ),
        200,
      ),
    );
    const linkedB = JSON.parse(
      await once(baseHandler, new Request(`${BASE_URL}/linked?object_id=${busySite}`), 200),
    );
    if (linked.count !== linkedB.count || linked.results.length !== linkedB.results.length)
      throw new Error(`linked-objects disagree: ${linked.count} vs ${linkedB.count}`);

    log("part 2: in-process (app.fetch / baseline.fetch)");
    await part2("in-process", appHandler, BASE_URL, baseHandler, BASE_URL);
    if (HTTP) {
      const appServer = Bun.serve({
        hostname: "127.0.0.1",
        port: 0,
        fetch: (req) => t.app.fetch(req),
      });
      const baseServer = Bun.serve({
        hostname: "127.0.0.1",
        port: 0,
        fetch: (req) => base.fetch(req),
      });
      try {
        log("part 2: HTTP (Bun.serve on 127.0.0.1, fetch with keep-alive from the same process)");
        await part2(
          "HTTP",
          (req) => fetch(req),
          `http://127.0.0.1:${appServer.port}`,
          (req) => fetch(req),
          `http://127.0.0.1:${baseServer.port}`,
        );
      } finally {
        appServer.stop(true);
        baseServer.stop(true);
      }
    }
  }

  // ---- part 3: linked-objects over many COTs ----------------------------------------------------------------
  let part3Facts: string[] = [];
  if (ONLY !== "part2") {
    t0 = performance.now();
    const target = (
      await t.json("POST", "/api/dcim/sites/", { body: { name: "Target", slug: "target" } })
    ).body.id as number;
    const every = Math.max(1, Math.floor(LINKED_ROWS / 20)); // ~20 rows per COT point at the target site
    for (let k = 0; k < LINKED_COTS; k++) {
      const c = await makeCot(t, `linker_${k}`, `linker_${k}`);
      await addField(t, c.id, { name: "name", type: "text", primary: true });
      await addField(t, c.id, { name: "n", type: "integer" });
      await addField(t, c.id, { name: "site", type: "object", related_object_type: "dcim.site" });
      // 20k rows in one statement inside one transaction: every `every`-th row → the target site,
      // one in ten → no site, the rest spread over the other sites.
      await db.client.batch(
        [
          {
            sql: `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?)
                  INSERT INTO "co_${c.id}" (created, last_updated, name, n, site_id)
                  SELECT '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', 'row-' || i, i,
                         CASE WHEN i % ? = 0 THEN ? WHEN i % 10 = 3 THEN NULL ELSE ? + (i % ?) END FROM s`,
            args: [LINKED_ROWS, every, target, siteIds[0]!, SITES],
          },
        ],
        "write",
      );
    }
    const setup3 = secs(t0);
    await db.client.execute("PRAGMA wal_checkpoint(TRUNCATE)");
    const url = `${CO}/linked-objects/?object_type=dcim.site&object_id=${target}`;
    const first = JSON.parse(
      await once(appHandler, new Request(BASE_URL + url, { headers: auth }), 200),
    );
    const firstB = JSON.parse(
      await once(baseHandler, new Request(`${BASE_URL}/linked?object_id=${target}`), 200),
    );
    if (first.count !== firstB.count)
      throw new Error(`part 3 counts disagree: ${first.count} vs ${firstB.count}`);
    const fieldsLinking = (await db.orm.all(
      sql`SELECT count(*) AS n FROM custom_object_type_fields WHERE related_object_type_id = ${siteTypeId}`,
    )) as { n: number }[];
    const plan = (await db.orm.all(
      sql.raw(
        `EXPLAIN QUERY PLAN SELECT count(*) FROM "co_${cot.id + 1}" WHERE "site_id" = ${target}`,
      ),
    )) as { detail: string }[];
    part3Facts = [
      `${LINKED_COTS} COTs × ${LINKED_ROWS} rows (SQL INSERT … SELECT from a recursive CTE, one transaction per COT; ${setup3}); ${fieldsLinking[0]!.n} object fields point at dcim.site (the ${LINKED_COTS} plus the main COT's); the target site has ${first.count} linking rows; page = ${first.results.length} full records`,
      `count plan: ${plan.map((p) => p.detail).join("; ")}`,
    ];
    log(`part 3: ${part3Facts.join(" | ")}`);
    const stmts3: [number, number] = [
      await countStatements(db.client, () =>
        once(appHandler, new Request(BASE_URL + url, { headers: auth }), 200),
      ),
      await countStatements(db.client, () =>
        once(baseHandler, new Request(`${BASE_URL}/linked?object_id=${target}`), 200),
      ),
    ];
    const [a, b] = await compare(
      {
        name: "app",
        handler: appHandler,
        make: () => new Request(BASE_URL + url, { headers: auth }),
        expect: 200,
      },
      {
        name: "base",
        handler: baseHandler,
        make: () => new Request(`${BASE_URL}/linked?object_id=${target}`),
        expect: 200,
      },
      LINKED_REQUESTS,
    );
    lines.push({
      part: "3",
      scenario: `linked-objects, ${LINKED_COTS} COTs × ${LINKED_ROWS}`,
      transport: "in-process",
      app: a,
      base: b,
      stmts: stmts3,
      targetMs: 5,
    });
    log(
      `  app ${fmt(a.median)} ms median, base ${fmt(b.median)} ms (target: app median < 5 ms → ${a.median < 5 ? "ok" : "MISS"})`,
    );
  }

  // ---- report -----------------------------------------------------------------------------------------------
  const cpu = cpus();
  console.log(`\n## bench/custom-objects — ${new Date().toISOString().slice(0, 10)}`);
  console.log(
    `bun ${Bun.version}, ${process.platform}/${process.arch}, ${cpu.length} × ${cpu[0]?.model ?? "?"}; scale ${SCALE}; ${REQUESTS} sequential requests per side and scenario (linked 1-COT: ${Math.min(REQUESTS, 300)}, part 3: ${LINKED_REQUESTS}), ${WARMUP} warm-up, ${ROUNDS} alternating rounds; SQLite ${pragmas.join(", ")}${CACHE_MB ? ` (BENCH_CACHE_MB=${CACHE_MB})` : ""}\n`,
  );
  for (const f of [...setupFacts, ...part3Facts]) console.log(`- ${f}`);
  console.log();
  printTable(lines);
  console.log(`\ntotal ${secs(tStart)}`);
} finally {
  await t.close();
}
