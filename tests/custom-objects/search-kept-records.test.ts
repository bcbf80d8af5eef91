/**
 * A `?q=` page's records kept under the change stamp (decision 0116) are what `load` gives, for
 * every caller alike: what a caller may not view is still hidden on each request, whoever's
 * request kept them, and a constraint still narrows the count. Over HTTP, with the read pool.
 */
import { createClient, type Client } from "@libsql/client";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { CO, siteLinkedCot } from "./fixtures";

let t: TestApp;
let other: Client; // another connection to the same file, as another process would be
let table: string;
const sites: number[] = [];

beforeAll(async () => {
  t = await makeTestApp();
  const made = await siteLinkedCot(t, "kept");
  sites.push(...made.sites);
  const cot = { id: made.cotId };
  table = `co_${cot.id}`;
  other = createClient({ url: t.dbUrl });
  await other.execute(
    `INSERT INTO ${table} (created, last_updated, name, site_id)
     WITH RECURSIVE x(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM x WHERE i < 120)
     SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z',
       CASE WHEN i % 2 = 0 THEN 'box-' ELSE 'crate-' END || i, ${sites[0]} + i % 2 FROM x`,
  );
  await flushSearchIndexesNow(servicesOf(t.app));
});
afterAll(async () => {
  other.close();
  await t.close();
});

type Page = {
  count: number;
  results: { id: number; name: string; site: Record<string, unknown> }[];
};
const search = async (token?: string) => {
  const r = await t.json("GET", `${CO}/kept/?q=box&limit=10`, token ? { token } : {});
  expect(r.status).toBe(200);
  return r.body as Page;
};

test("a caller who may not view the sites gets them hidden, whoever's request kept the page", async () => {
  const viewer = (await userWith(t, "co-only", [[["view"], "custom_objects.kept", null]])).token;
  const full = await search(); // the superuser's request keeps the page and its records
  expect(full.count).toBe(60);
  expect(full.results[0]!.site).toMatchObject({ id: sites[0], name: "hq", slug: "hq" });
  for (let round = 0; round < 2; round++) {
    const hidden = await search(viewer);
    expect(hidden.count).toBe(60);
    expect(hidden.results.map((r) => r.id)).toEqual(full.results.map((r) => r.id));
    // only what the record itself stores: the id (decision 0077)
    for (const r of hidden.results) expect(r.site).toEqual({ id: r.site.id });
  }
  // ...and the kept records themselves are untouched by hiding or by a projection
  const brief = await t.json("GET", `${CO}/kept/?q=box&limit=10&brief=1`);
  expect(Object.keys(brief.body.results[0]).sort()).toEqual(["display", "id", "url"]);
  expect(await search()).toEqual(full);
});

test("a caller with a constraint counts and sees only the rows it admits", async () => {
  const some = (
    await userWith(t, "some-boxes", [
      [["view"], "custom_objects.kept", { name__in: ["box-2", "box-4", "crate-3"] }],
      [["view"], "dcim.site", null],
    ])
  ).token;
  await search(); // kept by the superuser's request
  const page = await search(some);
  expect(page.count).toBe(2);
  expect(page.results.map((r) => r.name).sort()).toEqual(["box-2", "box-4"]);
});

test("a write by another connection committed before the request is in its answer", async () => {
  const before = await search();
  const id = before.results[0]!.id;
  await other.execute(`UPDATE ${table} SET site_id = ${sites[1]} WHERE id = ${id}`);
  await other.execute(
    `UPDATE ${table} SET name = 'crate-renamed' WHERE id = ${before.results[1]!.id}`,
  );
  const after = await search();
  expect(after.count).toBe(59);
  expect(after.results[0]!.site).toMatchObject({ id: sites[1], name: "lab" });
  expect(after.results.map((r) => r.id)).not.toContain(before.results[1]!.id);
  // the site renamed behind the app's back: the nested form follows
  await other.execute(`UPDATE sites SET name = 'lab-renamed' WHERE id = ${sites[1]}`);
  expect((await search()).results[0]!.site).toMatchObject({ name: "lab-renamed" });
});
