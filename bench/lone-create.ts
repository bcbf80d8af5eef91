/**
 * Lone creates, in process (issue 28 item 5, decision 0104): POST one object of the 20-field
 * custom object type and POST one site, one request in flight, with the wall time, the median and
 * the CPU time per create, and the time spent inside `Database.read` / `write`; then the object
 * again with 16 clients at once (group commit joins their write batches).
 *
 *   npx bun bench/lone-create.ts            # BENCH_CREATES=400 per kind, 3 rounds
 */
import { makeTestApp } from "../tests/helpers/app";
import { addField, choiceSet, CO, makeCot } from "../tests/custom-objects/fixtures";
import { apiRow, FIELDS, SPEEDS, TIERS } from "./twenty-fields";

const N = Number(process.env.BENCH_CREATES ?? 400);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
if (!(N >= 10 && N <= 100_000 && ROUNDS >= 1 && ROUNDS <= 20)) throw new Error("bad BENCH_*");

const t = await makeTestApp();
const db = t.deps.db;
await choiceSet(t, "speeds", SPEEDS);
await choiceSet(t, "tiers", TIERS);
const sites = await t.json("POST", "/api/dcim/sites/", {
  body: Array.from({ length: 20 }, (_, i) => ({ name: `Site ${i}`, slug: `site-${i}` })),
});
const tenants = await t.json("POST", "/api/tenancy/tenants/", {
  body: Array.from({ length: 20 }, (_, i) => ({ name: `Tenant ${i}`, slug: `tenant-${i}` })),
});
const siteIds = (sites.body as { id: number }[]).map((s) => s.id);
const tenantIds = (tenants.body as { id: number }[]).map((s) => s.id);
const cot = await makeCot(t, "bench_item", "bench_item");
for (const f of FIELDS) await addField(t, cot.id, f);

// time inside the database's read and write (wall, including waiting)
const timing = { read: 0, write: 0 };
const wrap = (key: "read" | "write") => {
  const inner = db[key].bind(db);
  db[key] = (async (q: never) => {
    const t0 = performance.now();
    try {
      return await inner(q);
    } finally {
      timing[key] += performance.now() - t0;
    }
  }) as never;
};
wrap("read");
wrap("write");

let seq = 0;
const kinds: Record<string, () => Promise<Response>> = {
  object: () =>
    Promise.resolve(
      t.req("POST", `${CO}/bench_item/`, { body: apiRow(++seq, "lc", siteIds, tenantIds) }),
    ),
  site: () => {
    const i = ++seq;
    return Promise.resolve(
      t.req("POST", "/api/dcim/sites/", { body: { name: `LC ${i}`, slug: `lc-${i}` } }),
    );
  },
};

async function run(send: () => Promise<Response>, clients = 1) {
  timing.read = 0;
  timing.write = 0;
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let left = N;
  const client = async () => {
    while (left-- > 0) {
      const s = performance.now();
      const r = await send();
      if (r.status !== 201) throw new Error(`${r.status} ${(await r.text()).slice(0, 300)}`);
      await r.arrayBuffer();
      lat.push(performance.now() - s);
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  lat.sort((a, b) => a - b);
  return {
    rate: N / (wall / 1000),
    median: lat[Math.floor(N / 2)]!,
    cpu: (cpu.user + cpu.system) / 1000 / N,
    read: timing.read / N,
    write: timing.write / N,
  };
}

const cases: Array<[string, () => Promise<Response>, number]> = [
  ["object", kinds.object!, 1],
  ["site", kinds.site!, 1],
  ["object ×16", kinds.object!, 16],
];
for (const [, send, clients] of cases) await run(send, clients); // warm up
const load = (await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ");
console.log(`${N} sequential creates per kind and round; load average ${load}`);
console.log("| round | kind | creates/s | median ms | CPU ms/create | in read ms | in write ms |");
console.log("|---|---|---|---|---|---|---|");
for (let round = 1; round <= ROUNDS; round++)
  for (const [k, send, clients] of cases) {
    const r = await run(send, clients);
    console.log(
      `| ${round} | ${k} | ${r.rate.toFixed(0)} | ${r.median.toFixed(2)} | ${r.cpu.toFixed(2)} | ${r.read.toFixed(2)} | ${r.write.toFixed(2)} |`,
    );
  }
await t.close();
