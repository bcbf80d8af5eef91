import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Database } from "bun:sqlite";
import { startHranaServer } from "./tools/hrana-tmp";
import { makeTestApp } from "./tests/helpers/app";
const dir = mkdtempSync(join(tmpdir(), "m-"));
const hrana = await startHranaServer({ path: join(dir, "r.db"), port: 0 });
const t = await makeTestApp({ DATABASE_URL: hrana.url });
const site = (await t.json("POST", "/api/dcim/sites/", { body: { name: "s1", slug: "s1" } })).body.id;
await t.req("GET", `/api/dcim/sites/${site}/`);
(globalThis as any).__seen = [];
await t.req(process.argv[2] === "post" ? "POST" : "GET", process.argv[2] === "post" ? "/api/dcim/sites/" : `/api/dcim/sites/${site}/`, process.argv[2] === "post" ? { body: { name: "s2", slug: "s2" } } : {}).then(r => r.text());
const seen = (globalThis as any).__seen; (globalThis as any).__seen = undefined;
const db = new Database(join(dir, "r.db"));
for (const [sql, args] of seen) {
  let ms = NaN;
  try { const s = db.prepare(sql); const t0 = performance.now(); for (let i = 0; i < 200; i++) s.values(...args); ms = (performance.now() - t0) / 200; } catch (e) { }
  console.log(ms.toFixed(4), "ms", sql.slice(0, 1500));
  try { console.log("  plan:", db.prepare("EXPLAIN QUERY PLAN " + sql).values(...args).map((r: any) => r[3]).join(" | ")); } catch {}
}
await t.close(); await hrana.stop();
