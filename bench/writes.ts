/**
 * Creates under concurrency, in one process and one run: the app's POST of one custom object
 * (validation, change record, outbox when a rule matches, full-text index triggers) with and
 * without group commit (decision 0053) and with and without the full-text index (decision 0050),
 * next to a bare Hono + Drizzle "floor" inserting the same row into a plain table of the same
 * columns over the same connection. Bulk: batches of 1,000 through the API vs the floor's
 * multi-row insert.
 *
 *   npx bun bench/writes.ts       # BENCH_WRITES_SECONDS=5 per variant, 32 clients, 2 rounds
 */
import { Hono } from "hono";
import { makeTestApp } from "../tests/helpers/app";
import { addField, CO, makeCot } from "../tests/custom-objects/fixtures";

const SECONDS = Number(process.env.BENCH_WRITES_SECONDS ?? 5);
const CLIENTS = Number(process.env.BENCH_WRITES_CLIENTS ?? 32);
const ROUNDS = Number(process.env.BENCH_WRITES_ROUNDS ?? 2);
if (
  !(SECONDS > 0 && SECONDS <= 60 && CLIENTS >= 1 && CLIENTS <= 256 && ROUNDS >= 1 && ROUNDS <= 10)
)
  throw new Error("bad BENCH_WRITES_* values");

const t = await makeTestApp();
const db = t.deps.db;
const cot = await makeCot(t, "write_bench", "write_bench");
const FIELDS: Array<[string, string, string]> = [
  ["name", "text", "TEXT"],
  ["serial", "text", "TEXT"],
  ["description", "longtext", "TEXT"],
  ["quantity", "integer", "INTEGER"],
  ["weight", "decimal", "REAL"],
  ["enabled", "boolean", "INTEGER"],
  ["installed", "date", "TEXT"],
  ["homepage", "url", "TEXT"],
  ["attrs", "json", "TEXT"],
];
for (const [name, type] of FIELDS) await addField(t, cot.id, { name, type });
const table = `co_${cot.id}`;
await db.client.execute(
  `CREATE TABLE floor_items (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, last_updated TEXT NOT NULL, ${FIELDS.map(([n, , s]) => `${n} ${s}`).join(", ")})`,
);

let seq = 0;
const body = () => {
  const i = seq++;
  return {
    name: `item-${i}`,
    serial: `SN-${i}`,
    description: `Bench item ${i}: words in a longer text.`,
    quantity: i % 1000,
    weight: (i % 977) / 7,
    enabled: i % 2 === 0,
    installed: "2024-05-06",
    homepage: `https://example.com/items/${i}`,
    attrs: { rack: i % 42 },
  };
};

const floor = new Hono();
floor.post("/items", async (c) => {
  const b = (await c.req.json()) as ReturnType<typeof body>;
  const now = new Date().toISOString();
  const rs = await db.client.execute({
    sql: `INSERT INTO floor_items (created, last_updated, name, serial, description, quantity, weight, enabled, installed, homepage, attrs) VALUES (?,?,?,?,?,?,?,?,?,?,?) RETURNING *`,
    args: [
      now,
      now,
      b.name,
      b.serial,
      b.description,
      b.quantity,
      b.weight,
      b.enabled ? 1 : 0,
      b.installed,
      b.homepage,
      JSON.stringify(b.attrs),
    ],
  });
  return c.json(rs.rows[0], 201);
});
floor.post("/bulk", async (c) => {
  const items = (await c.req.json()) as Array<ReturnType<typeof body>>;
  const now = new Date().toISOString();
  await db.client.batch(
    items.map((b) => ({
      sql: `INSERT INTO floor_items (created, last_updated, name, serial, description, quantity, weight, enabled, installed, homepage, attrs) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
      args: [
        now,
        now,
        b.name,
        b.serial,
        b.description,
        b.quantity,
        b.weight,
        b.enabled ? 1 : 0,
        b.installed,
        b.homepage,
        JSON.stringify(b.attrs),
      ],
    })),
    "write",
  );
  return c.json({ n: items.length }, 201);
});

/** `CLIENTS` loops sending one request after another for `SECONDS`; requests per second. */
async function load(send: () => Promise<Response> | Response): Promise<number> {
  const end = performance.now() + SECONDS * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < end) {
        const r = await send();
        if (r.status !== 201) throw new Error(`${r.status} ${await r.text()}`);
        await r.arrayBuffer();
        done++;
      }
    }),
  );
  return done / SECONDS;
}
const appPost = () => t.req("POST", `${CO}/write_bench/`, { body: body() });
const floorPost = () =>
  floor.fetch(
    new Request("http://floor/items", {
      method: "POST",
      body: JSON.stringify(body()),
      headers: { "content-type": "application/json" },
    }),
  );

const group = db.transaction;
const withGroup = (on: boolean) => {
  // without group commit: each write transaction of its own on the serialised connection
  db.transaction = on ? group : (work) => db.orm.transaction(work);
};
// The type's full-text index is its three triggers into the shared pending table (decision 0130).
const ftsStatements = (
  await db.client.execute({
    sql: "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE ? ORDER BY name",
    args: [`${table}_fts%`],
  })
).rows.map((r) => String(r.sql));
const withIndex = async (on: boolean) => {
  const present = (
    await db.client.execute({
      sql: "SELECT count(*) AS n FROM sqlite_master WHERE type = 'trigger' AND name = ?",
      args: [`${table}_fts_ai`],
    })
  ).rows[0]!.n;
  if (on && !present) for (const s of ftsStatements) await db.client.execute(s);
  if (!on && present)
    for (const s of ["_ai", "_ad", "_au"])
      await db.client.execute(`DROP TRIGGER IF EXISTS ${table}_fts${s}`);
};

console.log(
  `${CLIENTS} clients in one process, ${SECONDS} s per variant; load average ${(await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ")}`,
);
console.log(
  "| round | floor req/s | app: group + index | app: group, no index | app: no group + index | app: no group, no index | best app / floor |\n|---|---|---|---|---|---|---|",
);
for (let round = 1; round <= ROUNDS; round++) {
  const f = await load(floorPost);
  const r: number[] = [];
  for (const [g, i] of [
    [true, true],
    [true, false],
    [false, true],
    [false, false],
  ] as const) {
    withGroup(g);
    await withIndex(i);
    r.push(await load(appPost));
  }
  withGroup(true);
  await withIndex(true);
  console.log(
    `| ${round} | ${f.toFixed(0)} | ${r.map((x) => x.toFixed(0)).join(" | ")} | ${(r[0]! / f).toFixed(2)} (with index) |`,
  );
}

// Bulk: batches of 1,000, sequential, 10 batches each side.
const batch = () => Array.from({ length: 1000 }, body);
const bulkRate = async (send: (items: unknown[]) => Promise<Response> | Response) => {
  const t0 = performance.now();
  for (let i = 0; i < 10; i++) {
    const r = await send(batch());
    if (r.status !== 201) throw new Error(`${r.status} ${(await r.text()).slice(0, 300)}`);
    await r.arrayBuffer();
  }
  return 10_000 / ((performance.now() - t0) / 1000);
};
for (let round = 1; round <= ROUNDS; round++) {
  const f = await bulkRate((items) =>
    floor.fetch(
      new Request("http://floor/bulk", {
        method: "POST",
        body: JSON.stringify(items),
        headers: { "content-type": "application/json" },
      }),
    ),
  );
  const a = await bulkRate((items) => t.req("POST", `${CO}/write_bench/`, { body: items }));
  console.log(
    `bulk round ${round}: floor ${f.toFixed(0)} rows/s, app ${a.toFixed(0)} rows/s (with index), ratio ${(a / f).toFixed(2)}`,
  );
}
console.log(
  `RSS ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MB; load average ${(await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ")}`,
);
await t.close();
process.exit(0);
