/**
 * Pages read from the read pool take related objects' nested forms from a cache kept while the
 * database is unchanged (`objects/forms-cache.ts`). A page must still show exactly what a
 * GET of each object shows, at once after any commit (this process's or another connection's),
 * with the URLs of the host it was asked on, and a caller's hidden objects never change what
 * another caller sees.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createClient } from "@libsql/client";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, makeCot } from "./fixtures";

let t: TestApp;
let sites: Array<{ id: number; name: string }>;

beforeAll(async () => {
  t = await makeTestApp();
  sites = (
    await t.json("POST", "/api/dcim/sites/", {
      body: [1, 2, 3].map((i) => ({ name: `Site ${i}`, slug: `site-${i}` })),
    })
  ).body;
  const tenant = (
    await t.json("POST", "/api/tenancy/tenants/", { body: { name: "Tenant 1", slug: "tenant-1" } })
  ).body;
  const cot = await makeCot(t, "rack", "rack");
  await addField(t, cot.id, { name: "name", type: "text", primary: true });
  await addField(t, cot.id, { name: "site", type: "object", related_object_type: "dcim.site" });
  await addField(t, cot.id, {
    name: "tenant",
    type: "object",
    related_object_type: "tenancy.tenant",
  });
  const created = await t.json("POST", `${CO}/rack/`, {
    body: Array.from({ length: 60 }, (_, i) => ({
      name: `r${i}`,
      site: sites[i % 3]!.id,
      tenant: i % 2 ? tenant.id : null,
    })),
  });
  expect(created.status).toBe(201);
});
afterAll(() => t.close());

const page = async (token?: string) =>
  (await t.json("GET", `${CO}/rack/?limit=50&ordering=id`, { token })).body.results as Array<
    Record<string, any>
  >;
const siteNames = (records: Array<Record<string, any>>) =>
  [...new Set(records.map((r) => r.site.name))].sort();

describe("a page's related objects", () => {
  test("every record of a page (read twice, the second time from the cache) equals its GET", async () => {
    await page();
    const records = await page();
    expect(records.length).toBe(50);
    for (const rec of [records[0]!, records[1]!, records[2]!, records[49]!])
      expect(rec).toEqual((await t.json("GET", `${CO}/rack/${rec.id}/`)).body);
  });

  test("a change through the API shows on the next page", async () => {
    expect(siteNames(await page())).toEqual(["Site 1", "Site 2", "Site 3"]);
    expect(
      (await t.json("PATCH", `/api/dcim/sites/${sites[0]!.id}/`, { body: { name: "Renamed 1" } }))
        .status,
    ).toBe(200);
    expect(siteNames(await page())).toEqual(["Renamed 1", "Site 2", "Site 3"]);
  });

  test("a change committed by another connection (another process) shows on the next page", async () => {
    await page();
    const other = createClient({ url: t.dbUrl });
    try {
      await other.execute({
        sql: "UPDATE sites SET name = ? WHERE id = ?",
        args: ["Elsewhere 2", sites[1]!.id],
      });
    } finally {
      other.close();
    }
    expect(siteNames(await page())).toEqual(["Elsewhere 2", "Renamed 1", "Site 3"]);
  });

  test("a commit that lands between a page's stamp and its rows: the page shows that commit's forms", async () => {
    await page(); // the forms are cached
    const db = t.deps.db;
    const readRows = db.readRows!;
    let renamed = false;
    // the next pooled read first lets another connection commit a rename
    db.readRows = async (sql, args) => {
      if (!renamed) {
        renamed = true;
        const other = createClient({ url: t.dbUrl });
        try {
          await other.execute({
            sql: "UPDATE sites SET name = ? WHERE id = ?",
            args: ["Between 3", sites[2]!.id],
          });
        } finally {
          other.close();
        }
      }
      return readRows(sql, args);
    };
    try {
      expect(siteNames(await page())).toContain("Between 3");
    } finally {
      db.readRows = readRows;
    }
    expect(renamed).toBe(true);
  });

  test("URLs name the host each page was asked on", async () => {
    await page();
    const res = await t.app.request(`http://other.test${CO}/rack/?limit=50&ordering=id`, {
      headers: { authorization: `Token ${t.admin}` },
    });
    const records = ((await res.json()) as { results: Array<Record<string, any>> }).results;
    expect(records[0]!.site.url).toBe(`http://other.test/api/dcim/sites/${records[0]!.site.id}/`);
    expect((await page())[0]!.site.url).toBe(
      `http://host.test/api/dcim/sites/${records[0]!.site.id}/`,
    );
  });

  test("a caller who may not view sites sees their ids only, and that does not leak into another caller's page", async () => {
    const viewer = await t.user("rack-viewer", [[["view"], "custom_objects.rack"]]);
    await page(); // the forms are cached
    const hidden = await page(viewer);
    expect(hidden.length).toBe(50);
    expect(hidden[0]!.site).toEqual({ id: hidden[0]!.site.id });
    expect(hidden[1]!.tenant).toEqual({ id: hidden[1]!.tenant.id });
    const full = await page();
    expect(Object.keys(full[0]!.site).sort()).toEqual([
      "description",
      "display",
      "id",
      "name",
      "slug",
      "url",
    ]);
    expect(full[1]!.tenant.name).toBe("Tenant 1");
  });
});
