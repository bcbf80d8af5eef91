import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { makeCot } from "../custom-objects/fixtures";

const HIDDEN = "custom_objects.secret_thing";
for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let t: TestApp;
    let remote: RemoteDb | null = null;
    let tok = "";
    beforeAll(async () => {
      remote = backend === "remote" ? await startRemoteDb("probe-x") : null;
      t = await makeTestApp({ ...(remote ? { DATABASE_URL: remote.url } : {}) });
      await makeCot(t, "secret_thing");
      tok = (await userWith(t, "a", [[["view", "add", "change", "delete"], "extras.tag", null], [["view"], "users.objectpermission", null], [["view","change"], "core.objectchange", null]])).token;
    });
    afterAll(async () => { await t.close(); await remote?.stop(); });
    test("bulk", async () => {
      const mk = async (slug: string) => (await t.json("POST", "/api/extras/tags/", { body: { name: slug, slug, object_types: [HIDDEN, "dcim.site"] } })).body.id;
      const a = await mk("a1"), b = await mk("b1");
      const p = await t.json("PATCH", "/api/extras/tags/", { token: tok, body: [{ id: a, object_types: ["ipam.prefix"] }, { id: b, object_types: [] }] });
      console.log("bulk patch", p.status, JSON.stringify(p.body).slice(0, 300));
      console.log((await t.json("GET", `/api/extras/tags/${a}/`)).body.object_types, (await t.json("GET", `/api/extras/tags/${b}/`)).body.object_types);
      const u = await t.json("PUT", "/api/extras/tags/", { token: tok, body: [{ id: a, name: "a1", slug: "a1", object_types: ["dcim.site"] }] });
      console.log("bulk put", u.status, JSON.stringify(u.body).slice(0, 300));
      console.log((await t.json("GET", `/api/extras/tags/${a}/`)).body.object_types);
      const one = await t.json("PUT", `/api/extras/tags/${b}/`, { token: tok, body: { name: "b1", slug: "b1", object_types: ["dcim.site"] } });
      console.log("put", one.status, (await t.json("GET", `/api/extras/tags/${b}/`)).body.object_types);
      // if-none-match
      const g = await t.req("GET", `/api/extras/tags/${a}/`, { token: tok });
      console.log("etag", g.headers.get("etag"), await g.text());
      // search
      for (const q of ["?q=secret", "?object_types=" + HIDDEN, "?ordering=object_types", "?for_object_type_id=1"]) {
        const r = await t.req("GET", `/api/extras/tags/${q}`, { token: tok });
        console.log(q, r.status, (await r.text()).slice(0, 200));
      }
      const perms = await t.req("GET", `/api/users/permissions/?object_types=${HIDDEN}`, { token: tok });
      console.log("perms", perms.status, (await perms.text()).slice(0, 200));
    });
  });
