/**
 * CPU per bulk create of 1,000 custom objects, in process (issue 28 item 5): on a loaded machine the
 * wall ratio of `bench/http-table.ts --only load` moves with other processes; this process's CPU
 * time (`process.cpuUsage()`, all its threads) per 1,000 rows moves far less. Each bulk is a
 * POST of 1,000 objects of the 20-field type (`twenty-fields.ts`) through `app.request` on a temp
 * libSQL file; the full-text flush that follows it is timed apart. `DATABASE_CACHE_MB` is passed on.
 *
 *   npx bun bench/bulk-cpu.ts [--bulks 8] [--warm 2]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { apiRow, FIELDS, SPEEDS, TIERS } from "./twenty-fields";

const { values: opt } = parseArgs({
  options: { bulks: { type: "string" }, warm: { type: "string" } },
});
const BULKS = Number(opt.bulks ?? 8);
const WARM = Number(opt.warm ?? 2);
const dir = mkdtempSync(join(tmpdir(), "bulk-cpu-"));
const { makeTestApp } = await import("../tests/helpers/app");
const { addField, choiceSet, CO, makeCot } = await import("../tests/custom-objects/fixtures");
const { flushSearchIndexesNow } = await import("../src/plugins/custom-objects/search/flush");
const t = await makeTestApp({
  DATABASE_URL: `file:${join(dir, "host.db")}`,
  ...(process.env.DATABASE_CACHE_MB ? { DATABASE_CACHE_MB: process.env.DATABASE_CACHE_MB } : {}),
});
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
try {
  await choiceSet(t, "speeds", SPEEDS);
  await choiceSet(t, "tiers", TIERS);
  const sites = await t.json("POST", "/api/dcim/sites/", {
    body: Array.from({ length: 5 }, (_, i) => ({ name: `Site ${i}`, slug: `site-${i}` })),
  });
  const tenants = await t.json("POST", "/api/tenancy/tenants/", {
    body: Array.from({ length: 5 }, (_, i) => ({ name: `Tenant ${i}`, slug: `tenant-${i}` })),
  });
  const siteIds = (sites.body as { id: number }[]).map((s) => s.id);
  const tenantIds = (tenants.body as { id: number }[]).map((s) => s.id);
  const cot = await makeCot(t, "bench_item", "bench_item");
  for (const f of FIELDS) await addField(t, cot.id, f);
  const bulks: number[] = [];
  const flushes: number[] = [];
  for (let b = 0; b < WARM + BULKS; b++) {
    const body = Array.from({ length: 1000 }, (_, j) =>
      apiRow(b * 1000 + j, "bulk-", siteIds, tenantIds),
    );
    const text = JSON.stringify(body);
    const c0 = cpuMs();
    const res = await t.app.request(`${CO}/bench_item/`, {
      method: "POST",
      headers: { authorization: `Token ${t.admin}`, "content-type": "application/json" },
      body: text,
    });
    await res.text();
    const c1 = cpuMs();
    if (res.status !== 201) throw new Error(`bulk ${res.status}`);
    await flushSearchIndexesNow(t.app.services);
    const c2 = cpuMs();
    if (b >= WARM) {
      bulks.push(c1 - c0);
      flushes.push(c2 - c1);
    }
  }
  // other processes' load only adds CPU time (caches, frequency): the lower quartile moves least
  const at = (a: number[], q: number) => [...a].sort((x, y) => x - y)[Math.floor(a.length * q)]!;
  const figures = (a: number[]) =>
    `median ${at(a, 0.5).toFixed(0)}, lower quartile ${at(a, 0.25).toFixed(0)} [${a.map((x) => x.toFixed(0)).join(" ")}]`;
  console.log(`bulk CPU ms per 1,000 rows: ${figures(bulks)}; flush: ${figures(flushes)}`);
} finally {
  await t.deps.db.close();
  rmSync(dir, { recursive: true, force: true });
}
