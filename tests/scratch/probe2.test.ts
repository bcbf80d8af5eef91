import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { CO, addField, makeCot } from "../custom-objects/fixtures";
for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let t: TestApp;
    let remote: RemoteDb | null = null;
    beforeAll(async () => {
      remote = backend === "remote" ? await startRemoteDb("probe-y") : null;
      t = await makeTestApp({ ...(remote ? { DATABASE_URL: remote.url } : {}) });
      const node = await makeCot(t, "node");
      await addField(t, node.id, { name: "name", type: "text", primary: true });
      await addField(t, node.id, { name: "peers", type: "multiobject", related_object_type: "custom_objects.node" });
      await t.json("POST", `${CO}/node/`, { body: [{ name: "a" }, { name: "b" }] });
    });
    afterAll(async () => { await t.close(); await remote?.stop(); });
    test("cap", async () => {
      const ids = Array.from({ length: 5000 }, (_, i) => i + 1);
      for (const [m, p, b] of [
        ["PATCH", `${CO}/node/1/`, { peers: ids }],
        ["PUT", `${CO}/node/1/`, { name: "a", peers: ids }],
        ["PATCH", `${CO}/node/`, [{ id: 1, peers: ids }]],
        ["PUT", `${CO}/node/`, [{ id: 1, name: "a", peers: ids }]],
        ["POST", `${CO}/node/`, { name: "c", peers: ids }],
        ["PATCH", `${CO}/node/1/`, { peers: "x" }],
        ["PATCH", `${CO}/node/1/`, { peers: [{ id: "x" }] }],
      ] as const) {
        const t0 = performance.now();
        const r = await t.json(m, p, { body: b });
        console.log(m, p, r.status, Math.round(performance.now() - t0), JSON.stringify(r.body).slice(0, 150));
      }
    });
  });
