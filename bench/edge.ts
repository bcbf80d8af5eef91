/**
 * Issue 28's two edge tables: the Host server with its database one network hop away. A Hrana
 * server (tools/hrana-server.ts, the stand-in for sqld/Turso) sits behind a proxy that adds
 * latency each way and counts round trips (tools/counting-proxy.ts); the Host server runs as
 * `npm start` runs it (bundled, `HOST_ENGINE_ENV`) with `DATABASE_URL` on the proxy, as the
 * Worker reaches Turso. All loopback.
 *
 *   bun bench/edge.ts                                  # 10 ms each way, 16 clients, 10 s a row
 *   bun bench/edge.ts --latency 25 --seconds 5 --clients 16 --reps 5 --only ops,load
 *   bun bench/edge.ts --seconds 5 --only sites,reads --profile /tmp/edge-prof
 *
 * (a) `ops`: each operation once to warm the caches, then `--reps` times on its own: database
 *     round trips (min–max) and milliseconds (min–median–max).
 * (b) `load` (or some of `sites`, `objects`, `reads`): `--clients` concurrent clients for
 *     `--seconds` per row, in `--slices` slices (default 5) interleaved with the rows it is
 *     compared with, so that a row and its floor see the same load on a shared machine. Rows:
 *     creators of one site each, creators of one custom object each, a bare `@libsql/client`
 *     doing a row and its change record as one `batch()` through the same proxy (the floor);
 *     readers of a custom object / a site by id against the bare client's one `SELECT` by id
 *     (of a row that exists: its table is filled to 100 rows first, with `--only reads` too),
 *     against the bare client sending the one statement a GET site sends, and against the
 *     bare service (bench/bare-service.ts: a plain `Bun.serve` child doing the bare `SELECT`), whose
 *     answers cross the same HTTP hop as Host's.
 *     Per row: ops/s, p50, p99 (also in round trips of 2 × latency), 5xx, round trips per op
 *     (the proxy's count over the row ÷ requests, the app's background statements included),
 *     CPU ms per op of the Host process and of this one (which runs the clients, the proxy and
 *     the Hrana server). Before each Host row, 20 requests one at a time give the distribution
 *     of round trips per request. Ratios Host / bare at the end. `livez` adds a row of `/livez`
 *     (no database): the Host server's HTTP floor.
 * `--bare-concurrency N` lets the bare client have N requests in flight (its library's default is
 * 20, which caps it near 20 ÷ round trip however many clients ask; Host groups reads instead).
 * (c) `legs`: one client, 300 GETs of a site by id one after another, and as many bare `SELECT`s of
 *     the same row: the median time of each leg of one request — before its round trip reaches
 *     the proxy (client, HTTP hop, Host's work), at the database (the proxy's latency both ways and
 *     the Hrana server's work), after the answer leaves the proxy (Host's work, the hop back).
 *     Where Host's time goes with no load at all.
 * `--shapes` prints, per load row, the statements its round trips carried (grouped, counted).
 * `--profile DIR` writes the Host server's CPU profile (markdown) to DIR when it stops.
 * Every loop is bounded by time and count; every child is stopped at the end.
 */
import { createClient, type Client } from "@libsql/client";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { startCountingProxy, type CountingProxy } from "../tools/counting-proxy";
import { freePort, ROOT, startRemoteDatabase } from "../tests/helpers/worker";
import { bundle } from "../tools/bundle";
import { EDGE_TYPE_FIELDS, HOST_ENGINE_ENV, num, spawnServer } from "./child-server";

const { values: opt } = parseArgs({
  options: {
    latency: { type: "string" },
    seconds: { type: "string" },
    clients: { type: "string" },
    reps: { type: "string" },
    only: { type: "string" },
    profile: { type: "string" },
    shapes: { type: "boolean" },
    slices: { type: "string" },
    "bare-concurrency": { type: "string" },
  },
});
const LATENCY_MS = opt.latency === "0" ? 0 : num(opt.latency, "--latency", 10, 1_000);
const SECONDS = num(opt.seconds, "--seconds", 10, 120);
const CLIENTS = num(opt.clients, "--clients", 16, 256);
const REPS = num(opt.reps, "--reps", 5, 100);
const ONLY = new Set((opt.only ?? "ops,load").split(","));
/** A directory for the Host server's CPU profile (Bun's `--cpu-prof-md`), written when it stops. */
const PROFILE_DIR = opt.profile;
/** Print, per load row, what the round trips carried (their statements' openings, counted). */
const SHAPES = opt.shapes ?? false;
/** Each load row runs in this many slices, interleaved with the rows it is compared with. */
const SLICES = num(opt.slices, "--slices", 5, 100);
const BARE_CONCURRENCY = num(opt["bare-concurrency"], "--bare-concurrency", 20, 1_000);
const MAX_REQUESTS = 200_000;
const CO = "/api/plugins/custom-objects";
const SLUG = "edge_kit";
const log = (...a: unknown[]) => console.error(...a);

interface Ctx {
  origin: string;
  /** The Host server's process, whose CPU time the load table reports. */
  hostPid: number;
  token: string;
  proxy: CountingProxy;
  siteIds: number[];
  objectIds: number[];
  /** Servers the bench started besides Host (the bare service), stopped at the end. */
  children: Array<ReturnType<typeof Bun.spawn>>;
}

async function call(ctx: Ctx, method: string, path: string, body?: unknown) {
  const res = await fetch(ctx.origin + path, {
    method,
    headers: {
      authorization: `Token ${ctx.token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function ok(ctx: Ctx, method: string, path: string, body?: unknown) {
  const r = await call(ctx, method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

// ---- the Host server ------------------------------------------------------------------------

async function startHost(databaseUrl: string) {
  const port = await freePort();
  const profile = PROFILE_DIR ? ["--cpu-prof-md", `--cpu-prof-dir=${PROFILE_DIR}`] : [];
  // As `npm start` runs it (one bundled file, its engine settings); from the sources when
  // profiling (readable locations) or with BENCH_FROM_SOURCES=1.
  const script =
    PROFILE_DIR || process.env.BENCH_FROM_SOURCES
      ? "src/server.ts"
      : await bundle("src/server.ts", "bench-edge-server");
  const child = Bun.spawn([process.execPath, ...profile, script], {
    cwd: ROOT,
    stdout: "ignore",
    stderr: "inherit",
    env: {
      ...process.env,
      ...HOST_ENGINE_ENV,
      DATABASE_URL: databaseUrl,
      HOST: "127.0.0.1",
      PORT: String(port),
      HOST_LOCAL_REDIS: "off",
      CACHE_BACKEND: "memory",
      LOG_LEVEL: "warn",
      PLUGINS_CONFIG: JSON.stringify({
        host_healthcheck_plugin: { groups: { database: ["Database"] }, cache_seconds: 0 },
      }),
    },
  });
  const origin = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the Host server exited (${child.exitCode})`);
    const up = await fetch(`${origin}/livez`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) return { child, origin };
    await Bun.sleep(100);
  }
  child.kill();
  throw new Error("the Host server did not start in 60 s");
}

/** 60 sites, a custom object type with a site relation, 60 objects: enough for a list of 50. */
async function seed(ctx: Ctx) {
  const sites = await ok(
    ctx,
    "POST",
    "/api/dcim/sites/",
    Array.from({ length: 60 }, (_, i) => ({ name: `edge site ${i}`, slug: `edge-site-${i}` })),
  );
  ctx.siteIds = sites.map((s: { id: number }) => s.id);
  const cot = await ok(ctx, "POST", `${CO}/custom-object-types/`, { name: SLUG, slug: SLUG });
  for (const f of EDGE_TYPE_FIELDS)
    await ok(ctx, "POST", `${CO}/custom-object-type-fields/`, { custom_object_type: cot.id, ...f });
  const made = await ok(
    ctx,
    "POST",
    `${CO}/${SLUG}/`,
    Array.from({ length: 60 }, () => objectBody(ctx, uniqueTitle("seed"))),
  );
  ctx.objectIds = made.map((o: { id: number }) => o.id);
}

let serial = 0;
const uniqueTitle = (what: string) => `${what} ${process.pid}-${++serial}`;
const objectBody = (ctx: Ctx, title: string) => ({
  title,
  notes: `notes for ${title}; site code EDGE${serial % 10}`,
  count: serial % 100,
  site: ctx.siteIds[serial % ctx.siteIds.length],
});

// ---- (a) one operation at a time ------------------------------------------------------------

interface Op {
  name: string;
  /** Work done before each measured run, outside the count (e.g. the object a DELETE removes). */
  prepare?: () => Promise<unknown>;
  run: (prepared: unknown) => Promise<unknown>;
}

function operations(ctx: Ctx): Op[] {
  const someObject = () => ctx.objectIds[serial++ % ctx.objectIds.length];
  const schemaFields = [{ id: 1, name: "cid", type: "text", primary: true, required: true }];
  const schemaDoc = () => ({
    schema: {
      schema_version: "1",
      types: [{ name: "edge_schema", slug: "edge_schema", fields: schemaFields }],
    },
  });
  const gql = `{ custom_objects_${SLUG}_list(pagination: {limit: 50}) { id title site { id name } } }`;
  return [
    { name: "GET site by id", run: () => ok(ctx, "GET", `/api/dcim/sites/${ctx.siteIds[3]}/`) },
    {
      name: "GET custom object by id",
      run: () => ok(ctx, "GET", `${CO}/${SLUG}/${someObject()}/`),
    },
    { name: "list 50 sites", run: () => ok(ctx, "GET", "/api/dcim/sites/?limit=50") },
    { name: "list 50 custom objects", run: () => ok(ctx, "GET", `${CO}/${SLUG}/?limit=50`) },
    { name: "custom objects ?q=", run: () => ok(ctx, "GET", `${CO}/${SLUG}/?q=EDGE3`) },
    {
      name: "linked-objects",
      run: () =>
        ok(ctx, "GET", `${CO}/linked-objects/?object_type=dcim.site&object_id=${ctx.siteIds[5]}`),
    },
    {
      name: "GraphQL list + one relation",
      run: () => ok(ctx, "POST", "/graphql/", { query: gql }),
    },
    {
      name: "POST site",
      run: () => {
        const name = uniqueTitle("site");
        return ok(ctx, "POST", "/api/dcim/sites/", { name, slug: name.replace(/\W+/g, "-") });
      },
    },
    {
      name: "POST custom object",
      run: () => ok(ctx, "POST", `${CO}/${SLUG}/`, objectBody(ctx, uniqueTitle("post"))),
    },
    {
      name: "PATCH custom object",
      run: () => ok(ctx, "PATCH", `${CO}/${SLUG}/${someObject()}/`, { count: serial % 100 }),
    },
    {
      name: "DELETE custom object",
      prepare: () => ok(ctx, "POST", `${CO}/${SLUG}/`, objectBody(ctx, uniqueTitle("doomed"))),
      run: (made) => ok(ctx, "DELETE", `${CO}/${SLUG}/${(made as { id: number }).id}/`),
    },
    {
      name: "bulk POST of 100",
      run: () =>
        ok(
          ctx,
          "POST",
          `${CO}/${SLUG}/`,
          Array.from({ length: 100 }, () => objectBody(ctx, uniqueTitle("bulk"))),
        ),
    },
    {
      name: "schema apply adding one field",
      run: () => {
        schemaFields.push({
          id: schemaFields.length + 1,
          name: `f${schemaFields.length + 1}`,
          type: "text",
          primary: false,
          required: false,
        });
        return ok(ctx, "POST", `${CO}/schema/apply/`, schemaDoc());
      },
    },
    {
      name: "health check (database)",
      run: () =>
        ok(ctx, "GET", "/plugins/host_healthcheck_plugin/healthcheck/database/?format=json"),
    },
  ];
}

const percentile = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;
const range = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[0] === s.at(-1) ? `${s[0]}` : `${s[0]}–${s.at(-1)}`;
};

async function opsTable(ctx: Ctx) {
  console.log(
    `\n(a) one operation at a time, ${LATENCY_MS} ms each way, warm caches, ${REPS} runs`,
  );
  console.log("| operation | database round trips | ms (min / median / max) |\n|---|---|---|");
  for (const op of operations(ctx)) {
    const warm = (await op.run(await op.prepare?.())) as { count?: number } | null;
    if (op.name.includes("?q=")) log(`  ?q= matched ${warm?.count} objects`);
    const trips: number[] = [];
    const ms: number[] = [];
    for (let i = 0; i < REPS; i++) {
      const prepared = await op.prepare?.();
      await quiet(ctx.proxy, 200); // the app's deferred background work stays out of the count
      const t0 = performance.now();
      const m = await ctx.proxy.measure(() => op.run(prepared));
      ms.push(performance.now() - t0);
      trips.push(m.trips);
    }
    ms.sort((a, b) => a - b);
    const f = (x: number) => x.toFixed(0);
    console.log(
      `| ${op.name} | ${range(trips)} | ${f(ms[0]!)} / ${f(percentile(ms, 50))} / ${f(ms.at(-1)!)} |`,
    );
  }
}

// ---- (b) concurrent load --------------------------------------------------------------------

interface LoadResult {
  label: string;
  done: number;
  perSecond: number;
  p50: number;
  p99: number;
  fiveXX: number;
  otherErrors: number;
  tripsPerOp: number;
  /** CPU milliseconds per completed op: the Host process, and this one (bench, proxy, Hrana). */
  hostCpuMs: number;
  benchCpuMs: number;
}

/** CPU seconds (user + system) a process has used so far: Linux's /proc, NaN elsewhere. */
function cpuSecondsOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks
  } catch {
    return NaN;
  }
}
const benchCpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/** One row of the load table: its requests, and what its slices measured so far. */
interface Row {
  label: string;
  /** The server process whose CPU the row's "Host" column reports (the Host server if unset). */
  pid?: number;
  /** One request; answers the HTTP status (200/201 = done). */
  once: () => Promise<number>;
  latencies: number[];
  fiveXX: number;
  otherErrors: number;
  trips: number;
  seconds: number;
  hostCpu: number;
  benchCpu: number;
}

const row = (label: string, once: () => Promise<number>, pid?: number): Row => ({
  label,
  pid,
  once,
  latencies: [],
  fiveXX: 0,
  otherErrors: 0,
  trips: 0,
  seconds: 0,
  hostCpu: 0,
  benchCpu: 0,
});

/** `CLIENTS` loops calling `r.once` for `seconds`; adds what they measured to `r`. */
async function slice(ctx: Ctx, r: Row, seconds: number) {
  let sent = 0;
  const trips0 = ctx.proxy.trips;
  const pid = r.pid ?? ctx.hostPid;
  const cpu0 = { host: cpuSecondsOf(pid), bench: benchCpuSeconds() };
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < until && sent < MAX_REQUESTS) {
        sent++;
        const t0 = performance.now();
        const status = await r.once().catch(() => 599);
        if (status < 300) r.latencies.push(performance.now() - t0);
        else if (status >= 500) r.fiveXX++;
        else r.otherErrors++;
      }
    }),
  );
  r.seconds += (performance.now() - started) / 1000;
  r.trips += ctx.proxy.trips - trips0;
  r.hostCpu += cpuSecondsOf(pid) - cpu0.host;
  r.benchCpu += benchCpuSeconds() - cpu0.bench;
  if (SHAPES) logShapes(ctx.proxy, ctx.proxy.trips - trips0);
}

/**
 * Runs `rows` for `SECONDS` each, interleaved in `SLICES` slices (A B C A B C …): on a shared
 * machine whose load swings, each row and its same-run floor see the same swings.
 */
async function interleaved(ctx: Ctx, rows: Row[]): Promise<LoadResult[]> {
  for (let i = 0; i < SLICES; i++) for (const r of rows) await slice(ctx, r, SECONDS / SLICES);
  return rows.map((r) => {
    const latencies = [...r.latencies].sort((a, b) => a - b);
    const done = Math.max(1, latencies.length);
    log(`  ${r.label}: ${latencies.length} in ${r.seconds.toFixed(1)} s`);
    return {
      label: r.label,
      done: latencies.length,
      perSecond: latencies.length / r.seconds,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      fiveXX: r.fiveXX,
      otherErrors: r.otherErrors,
      tripsPerOp: r.trips / Math.max(1, latencies.length + r.fiveXX + r.otherErrors),
      hostCpuMs: (r.hostCpu * 1000) / done,
      benchCpuMs: (r.benchCpu * 1000) / done,
    };
  });
}

/** The last `n` round trips (at most the proxy's log) grouped by their statements' openings. */
function logShapes(proxy: CountingProxy, n: number) {
  const seen = new Map<string, number>();
  const recent = proxy.log.slice(-Math.min(n, proxy.log.length));
  for (const trip of recent) {
    const shape = trip.sql.map((q) => q.slice(0, 48).replace(/\s+/g, " ")).join(" ; ");
    seen.set(shape, (seen.get(shape) ?? 0) + 1);
  }
  for (const [shape, count] of [...seen].sort((a, b) => b[1] - a[1]).slice(0, 12))
    log(`    ${((100 * count) / recent.length).toFixed(1)}% ${shape}`);
}

async function bareTable(bare: Client) {
  await bare.execute(`CREATE TABLE IF NOT EXISTS bare_item (id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL, last_updated TEXT NOT NULL, title TEXT NOT NULL UNIQUE, notes TEXT,
    count INTEGER, site_id INTEGER REFERENCES sites(id))`);
  const { rows } = await bare.execute("SELECT id FROM object_types LIMIT 1");
  return Number(rows[0]?.id ?? 1);
}

/**
 * At least `n` rows in the bare client's table, so that its `SELECT` by id (ids 1 to `n`) reads a
 * row as Host's GET does: with `--only reads` no bare create ran before it.
 */
async function bareRows(ctx: Ctx, bare: Client, n: number) {
  const { rows } = await bare.execute("SELECT count(*) AS n FROM bare_item");
  const now = new Date().toISOString();
  const missing = Math.max(0, n - Number(rows[0]?.n ?? 0));
  if (!missing) return;
  await bare.batch(
    Array.from({ length: missing }, () => {
      const body = objectBody(ctx, uniqueTitle("bare"));
      return {
        sql: "INSERT INTO bare_item (created, last_updated, title, notes, count, site_id) VALUES (?, ?, ?, ?, ?, ?)",
        args: [now, now, body.title, body.notes, body.count, body.site ?? null],
      };
    }),
    "write",
  );
}

/** The bare client's create: the row and its change record, one `batch()` (one round trip). */
async function bareCreate(ctx: Ctx, bare: Client, typeId: number) {
  const title = uniqueTitle("bare");
  const body = objectBody(ctx, title);
  const now = new Date().toISOString();
  await bare.batch(
    [
      {
        sql: "INSERT INTO bare_item (created, last_updated, title, notes, count, site_id) VALUES (?, ?, ?, ?, ?, ?)",
        args: [now, now, title, body.notes, body.count, body.site ?? null],
      },
      {
        sql: `INSERT INTO object_changes (time, user_name, request_id, action, changed_object_type_id,
          changed_object_id, object_repr, postchange_data)
          VALUES (?, 'bench', ?, 'create', ?, last_insert_rowid(), ?, ?)`,
        args: [now, crypto.randomUUID(), typeId, title, JSON.stringify(body)],
      },
    ],
    "write",
  );
  return 201;
}

/**
 * What one Host GET of a site sends (seen through the proxy), as the bare client's one statement:
 * the print of the token (its own columns and its user's auth stamp, decision 0209) and the row
 * with its tags, folded into one statement with no transaction around it. Against Host's own row,
 * it separates the cost of the statement from the Host server's. (Before 0209 a GET sent a read
 * batch of two, the print computing the grants; before 0122 four.)
 */
function siteReadLikeHost(keyHash: string, siteId: number) {
  const print = ["t.id", "t.user_id", "t.version", "t.key", "t.enabled", "t.write_enabled"]
    .concat(["t.allowed_ips", "t.expires"])
    .map((column) => `quote(${column})`)
    .join(" || ',' || ");
  const stamp = "(SELECT stamp FROM auth_stamp WHERE user_id = t.user_id)";
  const printSql = `SELECT ${print} || '#' || coalesce(${stamp}, '') AS print
    FROM tokens t WHERE t.key_hash = ? LIMIT 1`;
  const rowSql = `SELECT *, (SELECT json_group_array(json(x.j)) FROM (SELECT json_object('id', t.id,
    'name', t.name, 'slug', t.slug, 'color', t.color) AS j FROM tagged_items ti
    JOIN tags t ON t.id = ti.tag_id WHERE ti.object_type_id =
    (SELECT id FROM object_types WHERE app_label = 'dcim' AND model = 'site')
    AND ti.object_id = sites.id ORDER BY t.name) x) AS __tags FROM sites WHERE id IN (?)`;
  return {
    sql: `SELECT * FROM (SELECT (${printSql}) AS "__fold0") LEFT JOIN (SELECT 1 AS "__fold1",
      row_number() OVER () AS "__fold_order", * FROM (${rowSql})) ON 1 ORDER BY "__fold_order"`,
    args: [keyHash, siteId],
  };
}

/** The two kinds of Host create under load: a site (a host model) and a custom object. */
const creates = {
  sites: (ctx: Ctx) => async () => {
    const name = uniqueTitle("load site");
    const r = await call(ctx, "POST", "/api/dcim/sites/", {
      name,
      slug: name.replace(/\W+/g, "-"),
    });
    return r.status;
  },
  objects: (ctx: Ctx) => async () => {
    const r = await call(ctx, "POST", `${CO}/${SLUG}/`, objectBody(ctx, uniqueTitle("load")));
    return r.status;
  },
};

/** Round trips of single requests, one at a time (the proxy's count is then the request's own). */
/**
 * Waits (at most 15 s) until the proxy has seen no round trip for `quietMs`: the app's background
 * work (the deferred search-index flush after the seed) would otherwise land in a sample's count.
 */
async function quiet(proxy: CountingProxy, quietMs = 500) {
  const deadline = performance.now() + 15_000;
  let seen = proxy.trips;
  let since = performance.now();
  while (performance.now() < deadline && performance.now() - since < quietMs) {
    await Bun.sleep(50);
    if (proxy.trips !== seen) [seen, since] = [proxy.trips, performance.now()];
  }
}

async function tripsSample(ctx: Ctx, once: () => Promise<number>, n = 20) {
  await once(); // warms what the first request of its kind loads (e.g. after the seed's schema)
  await quiet(ctx.proxy);
  const sample: number[] = [];
  for (let i = 0; i < n; i++) {
    const { trips } = await ctx.proxy.measure(once);
    if (SHAPES && sample.length && trips > Math.min(...sample)) {
      log(`    request ${i + 1} of the sample: ${trips} round trips`);
      logShapes(ctx.proxy, trips);
    }
    sample.push(trips);
  }
  sample.sort((a, b) => a - b);
  return `p50 ${percentile(sample, 50)}, p99 ${percentile(sample, 99)}, max ${sample.at(-1)}`;
}

async function loadTable(ctx: Ctx, bare: Client) {
  const typeId = await bareTable(bare);
  const rtt = 2 * LATENCY_MS;
  const rows: LoadResult[] = [];
  const samples: string[] = [];
  const wanted = (what: string) => ONLY.has(what) || ONLY.has("load");
  log(`(b) ${CLIENTS} clients, ${SECONDS} s per row in ${SLICES} slices (${[...ONLY].join(", ")})`);
  // each kind of create beside a floor of its own: a custom object's create leaves background
  // work (its search index) that would otherwise weigh on the site creates' slices
  for (const kind of ["sites", "objects"] as const) {
    if (!wanted(kind)) continue;
    samples.push(`${kind}: ${await tripsSample(ctx, creates[kind](ctx))}`);
    const host = row(`Host ${kind} creates`, creates[kind](ctx));
    const floor = row(`bare creates (one batch), beside ${kind}`, () =>
      bareCreate(ctx, bare, typeId),
    );
    rows.push(...(await interleaved(ctx, [host, floor])));
    await quiet(ctx.proxy);
  }
  if (wanted("reads")) {
    const object = () => `${CO}/${SLUG}/${ctx.objectIds[serial++ % ctx.objectIds.length]}/`;
    const site = () => `/api/dcim/sites/${ctx.siteIds[serial++ % ctx.siteIds.length]}/`;
    const readers: Row[] = [];
    for (const [label, path] of [
      ["Host GET custom object by id", object],
      ["Host GET site by id", site],
    ] as const) {
      const once = async () => (await call(ctx, "GET", path())).status;
      samples.push(`${label}: ${await tripsSample(ctx, once)}`);
      readers.push(row(label, once));
    }
    await bareRows(ctx, bare, 100);
    const keyHash = (await bare.execute("SELECT key_hash FROM tokens LIMIT 1")).rows[0]?.key_hash;
    readers.push(
      row("bare SELECT by id", async () => {
        await bare.execute({
          sql: "SELECT * FROM bare_item WHERE id = ?",
          args: [1 + (serial++ % 100)],
        });
        return 200;
      }),
      row("bare statement of a Host GET site", async () => {
        await bare.execute(siteReadLikeHost(String(keyHash), ctx.siteIds[serial++ % 60]!));
        return 200;
      }),
    );
    const service = await spawnServer(
      [join(ROOT, "bench/bare-service.ts"), "--serve", ctx.proxy.url],
      ctx.children,
      "the bare service",
    );
    readers.push(
      row(
        "bare service GET by id (HTTP, one SELECT)",
        async () => {
          const r = await fetch(`${service.origin}/items/${1 + (serial++ % 100)}`);
          await r.arrayBuffer();
          return r.status;
        },
        service.pid,
      ),
    );
    rows.push(...(await interleaved(ctx, readers)));
  }
  if (ONLY.has("livez")) {
    const livez = row("Host /livez (no database)", async () => {
      const r = await fetch(`${ctx.origin}/livez`);
      await r.arrayBuffer();
      return r.status;
    });
    rows.push(...(await interleaved(ctx, [livez])));
  }
  const [load1, , load15] = loadavg().map((x) => x.toFixed(2));
  console.log(
    `\n(b) ${CLIENTS} concurrent clients for ${SECONDS} s, ${LATENCY_MS} ms each way ` +
      `(one round trip ${rtt} ms); load average ${load1} (1 min) ${load15} (15 min) at the end\n` +
      "| | per s | p50 ms | p99 ms | p99 in round trips | 5xx | other errors | round trips per op (mean) | CPU ms per op: Host / bench |\n" +
      "|---|---|---|---|---|---|---|---|---|",
  );
  const f = (x: number, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : "–");
  for (const r of rows)
    console.log(
      `| ${r.label} | ${f(r.perSecond, 1)} | ${f(r.p50)} | ${f(r.p99)} | ${f(r.p99 / rtt, 1)} | ${r.fiveXX} | ${r.otherErrors} | ${f(r.tripsPerOp, 1)} | ${f(r.hostCpuMs, 2)} / ${f(r.benchCpuMs, 2)} |`,
    );
  console.log(`\nround trips per request, one at a time (20 each): ${samples.join("; ")}`);
  const rate = (label: string) => rows.find((r) => r.label.startsWith(label))?.perSecond ?? NaN;
  console.log(
    `ratios Host / bare: site creates ${f(rate("Host sites") / rate("bare creates (one batch), beside sites"), 2)}×, ` +
      `custom-object creates ${f(rate("Host objects") / rate("bare creates (one batch), beside objects"), 2)}×, ` +
      `reads ${f(rate("Host GET custom") / rate("bare SELECT"), 2)}× (objects), ` +
      `${f(rate("Host GET site") / rate("bare SELECT"), 2)}× (sites), ` +
      `${f(rate("Host GET site") / rate("bare statement of a Host GET"), 2)}× (sites against the bare statement they send), ` +
      `${f(rate("Host GET custom") / rate("bare service"), 2)}× / ${f(rate("Host GET site") / rate("bare service"), 2)}× (objects / sites against the bare service, the same HTTP hop)`,
  );
}

// ---- main -----------------------------------------------------------------------------------

const remote = await startRemoteDatabase();
const proxy = startCountingProxy({ target: remote.url, latencyMs: LATENCY_MS });
let host: Awaited<ReturnType<typeof startHost>> | undefined;
const children: Array<ReturnType<typeof Bun.spawn>> = [];
/** Milliseconds of one request's legs: before its round trip, at the database, after it. */
async function legsOf(proxy: CountingProxy, once: () => Promise<unknown>) {
  proxy.reset();
  const start = performance.now();
  await once();
  const end = performance.now();
  const [trip, ...more] = proxy.log;
  if (!trip?.answered || more.length) return null; // background work joined in: not this one's
  return [trip.arrived - start, trip.answered - trip.arrived, end - trip.answered, end - start];
}

/** (c): where one request's time goes, Host's GET of a site against the bare `SELECT` of it. */
async function legsTable(ctx: Ctx, bare: Client) {
  const id = ctx.siteIds[0]!;
  const kinds: Array<[string, () => Promise<unknown>]> = [
    ["Host GET site by id", () => call(ctx, "GET", `/api/dcim/sites/${id}/`)],
    [
      "bare SELECT of the site",
      () => bare.execute({ sql: "SELECT * FROM sites WHERE id = ?", args: [id] }),
    ],
  ];
  console.log(
    `\n(c) one request at a time, ${LATENCY_MS} ms each way: median ms of each leg (300 each)\n` +
      "| | before the round trip | at the database | after it | in all | samples |\n|---|---|---|---|---|---|",
  );
  for (const [label, once] of kinds) {
    await once();
    await quiet(ctx.proxy);
    const legs: number[][] = [];
    for (let i = 0; i < 300; i++) {
      const l = await legsOf(ctx.proxy, once);
      if (l) legs.push(l);
    }
    const median = (k: number) => {
      const v = legs.map((l) => l[k]!).sort((a, b) => a - b);
      return (v[v.length >> 1] ?? NaN).toFixed(2);
    };
    console.log(
      `| ${label} | ${median(0)} | ${median(1)} | ${median(2)} | ${median(3)} | ${legs.length} |`,
    );
  }
}

/** The bare client's requests in flight at most: `@libsql/client`'s default (20) unless given. */
const bare = createClient({ url: proxy.url, concurrency: BARE_CONCURRENCY });
try {
  const token = await remote.superuserToken("edge-bench");
  host = await startHost(proxy.url);
  const ctx: Ctx = {
    origin: host.origin,
    hostPid: host.child.pid,
    token,
    proxy,
    siteIds: [],
    objectIds: [],
    children,
  };
  log(
    `Host on ${host.origin}, database ${remote.url} behind ${proxy.url} (+${LATENCY_MS} ms each way)`,
  );
  await seed(ctx);
  if (ONLY.has("ops")) await opsTable(ctx);
  if (ONLY.has("legs")) await legsTable(ctx, bare);
  if ([...ONLY].some((o) => o !== "ops" && o !== "legs")) await loadTable(ctx, bare);
} finally {
  bare.close();
  for (const child of children) child.kill("SIGTERM");
  await Promise.all(children.map((child) => child.exited));
  host?.child.kill("SIGTERM");
  await host?.child.exited;
  await proxy.stop();
  await remote.stop();
}
