/**
 * An attacker's view of the kept `?q=` page (decision 0116): the superuser's request keeps the
 * page and its records, then an ordinary caller asks the same search. Related objects outside
 * the caller's view constraints (a site they may see only some of, another custom object type
 * they may not view at all, in single and multi fields) are hidden exactly as without the cache,
 * and a permission taken away by another connection (as another process would) holds on the very
 * next request although nothing about the searched rows changed.
 */
import { createClient, type Client } from "@libsql/client";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
let other: Client; // another connection to the same file, as another process would be
const sites: Record<string, number> = {};
let secret: { id: number };

beforeAll(async () => {
  t = await makeTestApp();
  for (const slug of ["open", "closed"]) {
    const r = await t.json("POST", "/api/dcim/sites/", { body: { name: slug, slug } });
    sites[slug] = r.body.id;
  }
  const vault = await makeCot(t, "vault");
  await addField(t, vault.id, { name: "name", type: "text", primary: true });
  secret = await create(t, "vault", { name: "launch-codes" });
  const cot = await makeCot(t, "asset");
  await addField(t, cot.id, { name: "name", type: "text", primary: true });
  await addField(t, cot.id, { name: "site", type: "object", related_object_type: "dcim.site" });
  await addField(t, cot.id, {
    name: "sites",
    type: "multiobject",
    related_object_type: "dcim.site",
  });
  await addField(t, cot.id, {
    name: "vault",
    type: "object",
    related_object_type: "custom_objects.vault",
  });
  for (let i = 0; i < 6; i++)
    await create(t, "asset", {
      name: `probe-${i}`,
      site: i % 2 ? sites.closed : sites.open,
      sites: [sites.open, sites.closed],
      vault: secret.id,
    });
  await flushSearchIndexesNow(servicesOf(t.app));
  other = createClient({ url: t.dbUrl });
});
afterAll(async () => {
  other.close();
  await t.close();
});

const search = (token?: string) =>
  t.json("GET", `${CO}/asset/?q=probe&limit=10`, token ? { token } : {});

test("a caller with view constraints on the targets sees only what they admit, whoever kept the page", async () => {
  const viewer = await userWith(t, "asset-viewer", [
    [["view"], "custom_objects.asset", null],
    [["view"], "dcim.site", { slug: "open" }],
  ]);
  // a token's first use records it (a commit, which drops kept pages): used once beforehand, so
  // that the superuser's request below keeps the records the viewer's then answer from
  expect((await t.json("GET", `${CO}/asset/?limit=1`, { token: viewer.token })).status).toBe(200);
  const full = await search();
  expect(full.body.count).toBe(6);
  expect(full.body.results[0].vault).toMatchObject({ display: "launch-codes" });
  for (let round = 0; round < 2; round++) {
    const r = await search(viewer.token);
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(6);
    const text = JSON.stringify(r.body);
    expect(text).not.toContain("closed");
    expect(text).not.toContain("launch-codes");
    expect(text).not.toContain("/vault/"); // a URL would name the type they may not view
    for (const rec of r.body.results) {
      expect(rec.vault).toEqual({ id: secret.id });
      if (rec.site.id === sites.closed) expect(rec.site).toEqual({ id: sites.closed });
      else expect(rec.site).toMatchObject({ slug: "open" });
      expect(rec.sites).toEqual([
        expect.objectContaining({ id: sites.open, slug: "open" }),
        { id: sites.closed },
      ]);
    }
  }
  // the kept records were not changed by hiding: the superuser still sees them whole
  expect(await search()).toEqual(full);
});

test("a grant removed or an account deactivated by another process holds on the next request", async () => {
  const viewer = await userWith(t, "asset-revoked", [[["view"], "custom_objects.asset", null]]);
  await search(); // kept
  expect((await search(viewer.token)).status).toBe(200);
  await other.execute(`DELETE FROM object_permission_users WHERE user_id = ${viewer.id}`);
  const refused = await search(viewer.token);
  // no permission left on the type: it answers as a slug no type has (decision 0178)
  expect(refused.status).toBe(404);
  expect(JSON.stringify(refused.body)).not.toContain("probe");

  const inactive = await userWith(t, "asset-inactive", [[["view"], "custom_objects.asset", null]]);
  await search();
  expect((await search(inactive.token)).status).toBe(200);
  await other.execute(`UPDATE users SET is_active = 0 WHERE id = ${inactive.id}`);
  const gone = await search(inactive.token);
  expect([401, 403]).toContain(gone.status);
  expect(JSON.stringify(gone.body)).not.toContain("probe");
});

test("a view constraint added by another process narrows the very next count and page", async () => {
  const viewer = await userWith(t, "asset-narrowed", [[["view"], "custom_objects.asset", null]]);
  await search();
  expect((await search(viewer.token)).body.count).toBe(6);
  await other.execute(
    `UPDATE object_permissions SET constraints = '{"name": "probe-1"}' WHERE name = 'asset-narrowed-0'`,
  );
  const narrowed = await search(viewer.token);
  expect(narrowed.status).toBe(200);
  expect(narrowed.body.count).toBe(1);
  expect(narrowed.body.results.map((r: { name: string }) => r.name)).toEqual(["probe-1"]);
});
