/**
 * Issue 28's two edge tables: the Host server with its database one network hop away. A Hrana
 * server (tools/hrana-server.ts, the stand-in for sqld/Turso) sits behind a proxy that adds
 * latency each way and counts round trips (tools/counting-proxy.ts); the Host server runs as
 * `bun src/server.ts` with `DATABASE_URL` on the proxy, as the Worker reaches Turso. All loopback.
 *
 *   bun bench/edge.ts                                  # 10 ms each way, 16 clients for 10 s
 *   bun bench/edge.ts --latency 25 --seconds 5 --clients 16 --reps 5 --only ops,load
 *
 * (a) `ops`: each operation once to warm the caches, then `--reps` times on its own: database
 *     round trips (min–max) and milliseconds (min–median–max).
 * (b) `load`: `--clients` concurrent creators of one custom object each for `--seconds`:
 *     creates/s, p50, p99, 5xx, round trips per create (the proxy's count over the run ÷ creates,
 *     and the p99 of a sequential sample). Then a bare `@libsql/client` doing the same row and
 *     change record as one `batch()` through the same proxy. Then readers (GET by id) against the
 *     bare client's one `SELECT` by id. Ratios Host / bare at the end.
 * Every loop is bounded by time and count; every child is stopped at the end.
 */
import { createClient, type Client } from "@libsql/client";
import { parseArgs } from "node:util";
import { startCountingProxy, type CountingProxy } from "../tools/counting-proxy";
import { freePort, ROOT, startRemoteDatabase } from "../tests/helpers/worker";
import { num } from "./child-server";

const { values: opt } = parseArgs({
  options: {
    latency: { type: "string" },
    seconds: { type: "string" },
    clients: { type: "string" },
    reps: { type: "string" },
    only: { type: "string" },
  },
});
const LATENCY_MS = opt.latency === "0" ? 0 : num(opt.latency, "--latency", 10, 1_000);
const SECONDS = num(opt.seconds, "--seconds", 10, 120);
const CLIENTS = num(opt.clients, "--clients", 16, 256);
const REPS = num(opt.reps, "--reps", 5, 100);
const ONLY = new Set((opt.only ?? "ops,load").split(","));
const MAX_REQUESTS = 200_000;
const CO = "/api/plugins/custom-objects";
const SLUG = "edge_kit";
const log = (...a: unknown[]) => console.error(...a);

interface Ctx {
  origin: string;
  token: string;
  proxy: CountingProxy;
  siteIds: number[];
  objectIds: number[];
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
  const child = Bun.spawn([process.execPath, "src/server.ts"], {
    cwd: ROOT,
    stdout: "ignore",
    stderr: "inherit",
    env: {
      ...process.env,
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
  const fields = [
    { name: "title", type: "text", primary: true, required: true, unique: true },
    { name: "notes", type: "longtext" },
    { name: "count", type: "integer" },
    {
      name: "site",
      type: "object",
      related_object_type: "dcim.site",
      on_delete_behavior: "set_null",
    },
  ];
  for (const f of fields)
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
}

/** `CLIENTS` loops calling `once` for `SECONDS`; `once` answers the HTTP status (200/201 = done). */
async function drive(label: string, proxy: CountingProxy, once: () => Promise<number>) {
  const latencies: number[] = [];
  let fiveXX = 0;
  let otherErrors = 0;
  let sent = 0;
  const trips0 = proxy.trips;
  const started = performance.now();
  const until = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < until && sent < MAX_REQUESTS) {
        sent++;
        const t0 = performance.now();
        const status = await once().catch(() => 599);
        if (status < 300) latencies.push(performance.now() - t0);
        else if (status >= 500) fiveXX++;
        else otherErrors++;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const result: LoadResult = {
    label,
    done: latencies.length,
    perSecond: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    fiveXX,
    otherErrors,
    tripsPerOp: (proxy.trips - trips0) / Math.max(1, latencies.length + fiveXX + otherErrors),
  };
  log(`  ${label}: ${result.done} in ${elapsed.toFixed(1)} s`);
  return result;
}

async function bareTable(bare: Client) {
  await bare.execute(`CREATE TABLE IF NOT EXISTS bare_item (id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL, last_updated TEXT NOT NULL, title TEXT NOT NULL UNIQUE, notes TEXT,
    count INTEGER, site_id INTEGER REFERENCES sites(id))`);
  const { rows } = await bare.execute("SELECT id FROM object_types LIMIT 1");
  return Number(rows[0]?.id ?? 1);
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

async function creatorsTable(ctx: Ctx, bare: Client) {
  const typeId = await bareTable(bare);
  // Sequential sample first: round trips of single creates (their p99).
  const sample: number[] = [];
  for (let i = 0; i < 20; i++) {
    const m = await ctx.proxy.measure(() =>
      call(ctx, "POST", `${CO}/${SLUG}/`, objectBody(ctx, uniqueTitle("sample"))),
    );
    sample.push(m.trips);
  }
  sample.sort((a, b) => a - b);
  log(`(b) ${CLIENTS} creators for ${SECONDS} s, then the bare client, then readers`);
  const host = await drive("Host creates", ctx.proxy, async () => {
    const r = await call(ctx, "POST", `${CO}/${SLUG}/`, objectBody(ctx, uniqueTitle("load")));
    return r.status;
  });
  const floor = await drive("bare creates", ctx.proxy, () => bareCreate(ctx, bare, typeId));
  const hostRead = await drive("Host GET by id", ctx.proxy, async () => {
    const r = await call(ctx, "GET", `${CO}/${SLUG}/${ctx.objectIds[serial++ % 60]}/`);
    return r.status;
  });
  const bareRead = await drive("bare SELECT by id", ctx.proxy, async () => {
    await bare.execute({
      sql: "SELECT * FROM bare_item WHERE id = ?",
      args: [1 + (serial++ % 100)],
    });
    return 200;
  });
  console.log(
    `\n(b) ${CLIENTS} concurrent clients for ${SECONDS} s, ${LATENCY_MS} ms each way\n` +
      "| | per s | p50 ms | p99 ms | 5xx | other errors | round trips per op (mean) |\n|---|---|---|---|---|---|---|",
  );
  for (const r of [host, floor, hostRead, bareRead])
    console.log(
      `| ${r.label} | ${r.perSecond.toFixed(1)} | ${r.p50.toFixed(0)} | ${r.p99.toFixed(0)} | ${r.fiveXX} | ${r.otherErrors} | ${r.tripsPerOp.toFixed(1)} |`,
    );
  console.log(
    `\nround trips of one create, sequential (20): p50 ${percentile(sample, 50)}, p99 ${percentile(sample, 99)}, max ${sample.at(-1)}`,
  );
  console.log(
    `ratios Host / bare: creates/s ${(host.perSecond / floor.perSecond).toFixed(2)}×, reads/s ${(hostRead.perSecond / bareRead.perSecond).toFixed(2)}×`,
  );
}

// ---- main -----------------------------------------------------------------------------------

const remote = await startRemoteDatabase();
const proxy = startCountingProxy({ target: remote.url, latencyMs: LATENCY_MS });
let host: Awaited<ReturnType<typeof startHost>> | undefined;
const bare = createClient({ url: proxy.url });
try {
  const token = await remote.superuserToken("edge-bench");
  host = await startHost(proxy.url);
  const ctx: Ctx = { origin: host.origin, token, proxy, siteIds: [], objectIds: [] };
  log(
    `Host on ${host.origin}, database ${remote.url} behind ${proxy.url} (+${LATENCY_MS} ms each way)`,
  );
  await seed(ctx);
  if (ONLY.has("ops")) await opsTable(ctx);
  if (ONLY.has("load")) await creatorsTable(ctx, bare);
} finally {
  bare.close();
  host?.child.kill("SIGTERM");
  await host?.child.exited;
  await proxy.stop();
  await remote.stop();
}
