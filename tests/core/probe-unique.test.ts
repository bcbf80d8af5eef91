import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
let t: TestApp;
beforeAll(async () => { t = await makeTestApp(); });
afterAll(async () => { await t.close(); });
test("probe", async () => {
  await t.json("POST", "/api/dcim/sites/", { body: { name: "a", slug: "a" } });
  await t.json("POST", "/api/dcim/sites/", { body: { name: "b", slug: "b" } });
  console.log(JSON.stringify((await t.json("POST", "/api/dcim/sites/", { body: { name: "a", slug: "a" } })).body));
  console.log(JSON.stringify((await t.json("POST", "/api/dcim/sites/", { body: [{ name: "c", slug: "c" }, { name: "a", slug: "a" }] })).body));
  console.log(JSON.stringify((await t.json("POST", "/api/dcim/sites/", { body: [{ name: "d", slug: "d" }, { name: "d", slug: "d" }] })).body));
  console.log(JSON.stringify((await t.json("PATCH", "/api/dcim/sites/", { body: [{ id: 1, description: "x" }, { id: 2, name: "a", slug: "a" }] })).body));
  const s = (await t.json("POST", "/api/dcim/sites/", { body: { name: "s", slug: "s" } })).body;
  console.log(JSON.stringify((await t.json("POST", "/api/dcim/devices/", { body: { name: "x", site: s.id, role: 1, device_type: 1 } })).body));
});
