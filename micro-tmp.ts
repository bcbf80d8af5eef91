import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHranaServer } from "./tools/hrana-server";
import { makeTestApp } from "./tests/helpers/app";
const hrana = await startHranaServer({ path: join(mkdtempSync(join(tmpdir(), "m-")), "r.db"), port: 0 });
const t = await makeTestApp({ DATABASE_URL: hrana.url });
const site = (await t.json("POST", "/api/dcim/sites/", { body: { name: "s1", slug: "s1" } })).body.id;
const what = process.argv[2] ?? "get";
const N = Number(process.argv[3] ?? 2000);
let i = 0;
const once = what === "get"
  ? () => t.req("GET", `/api/dcim/sites/${site}/`).then((r) => r.text())
  : () => t.req("POST", "/api/dcim/sites/", { body: { name: `x${++i}`, slug: `x${i}` } }).then((r) => r.text());
for (let k = 0; k < 200; k++) await once();
const c0 = process.cpuUsage(); const t0 = performance.now();
for (let k = 0; k < N; k++) await once();
const c = process.cpuUsage(c0);
console.log(what, "ms/op wall", ((performance.now() - t0) / N).toFixed(3), "cpu ms/op (app+hrana)", ((c.user + c.system) / 1000 / N).toFixed(3));
await t.close(); await hrana.stop();
