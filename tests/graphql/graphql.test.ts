/**
 * GraphQL at /graphql/, driven over HTTP with a real GraphQL client (graphql-request): NetBox 4
 * names for host models, upstream netbox-custom-objects names and query shapes for custom object
 * types, filters and pagination, relations resolved to their targets' types with batching, and
 * a schema that follows the database in this and another app instance.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ClientError, GraphQLClient, gql } from "graphql-request";
import { createApp, servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { loadConfig } from "../../src/config";
import { openDatabase } from "../../src/db/local";
import { createCache } from "../../src/services/cache";
import { makeTestApp, type TestApp } from "../helpers/app";
import { countStatements } from "../helpers/statements";
import { addField, choiceSet, CO, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
const ids: Record<string, number> = {};

export function clientFor(t: TestApp, token: string | null) {
  return new GraphQLClient("http://host.test/graphql/", {
    fetch: ((input: RequestInfo | URL, init?: RequestInit) =>
      Promise.resolve(
        t.app.request(input instanceof Request ? input : String(input), init),
      )) as typeof fetch,
    headers: token ? { authorization: `Token ${token}` } : {},
  });
}

let admin: GraphQLClient;

beforeAll(async () => {
  t = await makeTestApp();
  admin = clientFor(t, t.admin);
  const tag = await t.json("POST", "/api/extras/tags/", {
    body: { name: "Core", slug: "core", color: "ff0000" },
  });
  ids.tag = tag.body.id;
  for (const [name, slug] of [
    ["HQ", "hq"],
    ["Lab", "lab"],
    ["Site 3", "s3"],
  ] as const) {
    ids[slug] = (
      await t.json("POST", "/api/dcim/sites/", {
        body: { name, slug, status: "active", tags: slug === "hq" ? [ids.tag] : [] },
      })
    ).body.id;
  }
  for (const [name, site] of [
    ["hq-sw1", "hq"],
    ["hq-sw2", "hq"],
    ["lab-sw1", "lab"],
  ] as const) {
    ids[name] = (
      await t.json("POST", "/api/dcim/devices/", { body: { name, site: ids[site] } })
    ).body.id;
  }
  // upstream's "asset": scalar fields of every kind
  const cs = await choiceSet(t, "asset-status", ["choice1", "choice2", "choice3"]);
  const asset = await makeCot(t, "asset");
  await addField(t, asset.id, { name: "name", type: "text", primary: true });
  await addField(t, asset.id, { name: "count", type: "integer" });
  await addField(t, asset.id, { name: "active", type: "boolean" });
  await addField(t, asset.id, { name: "status", type: "select", choice_set: cs.id });
  await addField(t, asset.id, { name: "flags", type: "multiselect", choice_set: cs.id });
  await addField(t, asset.id, { name: "price", type: "decimal" });
  await addField(t, asset.id, { name: "data", type: "json" });
  await addField(t, asset.id, { name: "site", type: "object", related_object_type: "dcim.site" });
  await addField(t, asset.id, {
    name: "devices",
    type: "multiobject",
    related_object_type: "dcim.device",
  });
  await addField(t, asset.id, {
    name: "target",
    type: "object",
    is_polymorphic: true,
    related_object_types: ["dcim.site", "dcim.device"],
  });
  ids.first = (
    await create(t, "asset", {
      name: "First",
      count: 7,
      active: true,
      status: "choice1",
      flags: ["choice1", "choice3"],
      price: "19.99",
      data: { enabled: true, ports: [80, 443] },
      site: ids.hq,
      devices: [ids["hq-sw1"], ids["hq-sw2"]],
      target: { object_type: "dcim.site", id: ids.lab },
      tags: [ids.tag],
    })
  ).id;
  ids.second = (
    await create(t, "asset", {
      name: "Second",
      count: 3_000_000_000,
      active: false,
      site: ids.lab,
      target: { object_type: "dcim.device", id: ids["lab-sw1"] },
    })
  ).id;
});
afterAll(() => t.close());

describe("host models: NetBox 4 names, filters and pagination", () => {
  test("site(id:) and site_list", async () => {
    const r = await admin.request<any>(
      gql`
      query ($id: ID!) {
        site(id: $id) { id name slug status tags { name slug } }
        site_list { id name }
      }
    `,
      { id: String(ids.hq) },
    );
    expect(r.site).toEqual({
      id: String(ids.hq),
      name: "HQ",
      slug: "hq",
      status: "active",
      tags: [{ name: "Core", slug: "core" }],
    });
    expect(r.site_list.map((s: any) => s.name)).toEqual(["HQ", "Lab", "Site 3"]);
  });

  test("filters: lookups, in_list, AND / OR / NOT, related filters; pagination", async () => {
    const names = async (filters: string, pagination = "") =>
      (
        (await admin.request<any>(`{ device_list(filters: ${filters}${pagination}) { name } }`))
          .device_list as any[]
      ).map((d) => d.name);
    expect(await names(`{name: {i_contains: "SW1"}}`)).toEqual(["hq-sw1", "lab-sw1"]);
    expect(await names(`{name: {in_list: ["hq-sw2", "lab-sw1", "nope"]}}`)).toEqual([
      "hq-sw2",
      "lab-sw1",
    ]);
    expect(await names(`{site: {slug: {exact: "hq"}}}`)).toEqual(["hq-sw1", "hq-sw2"]);
    expect(await names(`{OR: [{name: {exact: "hq-sw1"}}, {name: {starts_with: "lab"}}]}`)).toEqual([
      "hq-sw1",
      "lab-sw1",
    ]);
    expect(await names(`{NOT: {site: {slug: {exact: "hq"}}}}`)).toEqual(["lab-sw1"]);
    expect(await names(`{AND: [{name: {starts_with: "hq"}}, {name: {ends_with: "2"}}]}`)).toEqual([
      "hq-sw2",
    ]);
    expect(await names(`{site_id: {exact: "${ids.lab}"}}`)).toEqual(["lab-sw1"]);
    expect(await names(`{}`, `, pagination: {offset: 1, limit: 1}`)).toEqual(["hq-sw2"]);
  });

  test("relations resolve to the target's own type", async () => {
    const r = await admin.request<any>(
      `{ device(id: "${ids["hq-sw1"]}") { name site { id name slug tags { slug } } } }`,
    );
    expect(r.device.site).toEqual({
      id: String(ids.hq),
      name: "HQ",
      slug: "hq",
      tags: [{ slug: "core" }],
    });
  });

  test("GET with query= works too", async () => {
    const res = await t.req(
      "GET",
      `/graphql/?query=${encodeURIComponent("{ site_list { slug } }")}`,
      { headers: { accept: "application/json" } },
    );
    expect(res.status).toBe(200);
    expect((await res.json()).data.site_list.length).toBe(3);
  });
});

describe("custom objects: upstream's names and query shapes", () => {
  test("scalar fields: { custom_objects_asset_list { id display name count active status { value label } } }", async () => {
    const r = await admin.request<any>(
      gql`{ custom_objects_asset_list { id display name count active status { value label } flags { value label } price data } }`,
    );
    const [first, second] = r.custom_objects_asset_list;
    expect(first).toEqual({
      id: String(ids.first),
      display: "First",
      name: "First",
      count: 7,
      active: true,
      status: { value: "choice1", label: "CHOICE1" },
      flags: [
        { value: "choice1", label: "CHOICE1" },
        { value: "choice3", label: "CHOICE3" },
      ],
      price: "19.99",
      data: { enabled: true, ports: [80, 443] },
    });
    expect(second.count).toBe(3_000_000_000); // beyond GraphQL's 32-bit Int
    expect(second.status).toBeNull();
    expect(second.flags).toEqual([]);
  });

  test("single object by id; an unknown id is null", async () => {
    const r = await admin.request<any>(
      `{ custom_objects_asset(id: ${ids.first}) { id display name } missing: custom_objects_asset(id: 99999) { id } }`,
    );
    expect(r.custom_objects_asset).toEqual({
      id: String(ids.first),
      display: "First",
      name: "First",
    });
    expect(r.missing).toBeNull();
  });

  test("object and multiobject fields resolve to SiteType and DeviceType, traversable", async () => {
    const r = await admin.request<any>(
      `{ custom_objects_asset_list { name site { id name slug } devices { id name site { slug } } tags { slug } } }`,
    );
    expect(r.custom_objects_asset_list[0]).toEqual({
      name: "First",
      site: { id: String(ids.hq), name: "HQ", slug: "hq" },
      devices: [
        { id: String(ids["hq-sw1"]), name: "hq-sw1", site: { slug: "hq" } },
        { id: String(ids["hq-sw2"]), name: "hq-sw2", site: { slug: "hq" } },
      ],
      tags: [{ slug: "core" }],
    });
  });

  test("a polymorphic field is a union of its targets' types", async () => {
    const r = await admin.request<any>(
      `{ custom_objects_asset_list { name target { __typename ... on SiteType { id siteName: name } ... on DeviceType { id deviceName: name } } } }`,
    );
    expect(r.custom_objects_asset_list.map((a: any) => a.target)).toEqual([
      { __typename: "SiteType", id: String(ids.lab), siteName: "Lab" },
      { __typename: "DeviceType", id: String(ids["lab-sw1"]), deviceName: "lab-sw1" },
    ]);
  });

  test("filters on custom object fields, including an object field's target", async () => {
    const r = await admin.request<any>(`{
      a: custom_objects_asset_list(filters: {count: {gt: 10}}) { name }
      b: custom_objects_asset_list(filters: {site: {slug: {exact: "hq"}}}) { name }
      c: custom_objects_asset_list(filters: {active: {exact: false}}) { name }
    }`);
    expect(r.a.map((x: any) => x.name)).toEqual(["Second"]);
    expect(r.b.map((x: any) => x.name)).toEqual(["First"]);
    expect(r.c.map((x: any) => x.name)).toEqual(["Second"]);
  });

  test("slugs are sanitised and collisions resolved as upstream does", async () => {
    const w = await makeCot(t, "my_widget", "my-widget");
    const a = await makeCot(t, "a_b_dash", "a-b");
    const b = await makeCot(t, "a_b_under", "a_b");
    const foo = await makeCot(t, "foo");
    const fooList = await makeCot(t, "foo_list_dash", "foo-list");
    const r = await admin.request<any>(`{ __schema { queryType { fields { name } } } }`);
    const fields = new Set((r.__schema.queryType.fields as any[]).map((f) => f.name));
    for (const name of [
      "custom_objects_my_widget",
      "custom_objects_a_b",
      `custom_objects_a_b_${b.id}`,
      "custom_objects_foo",
      "custom_objects_foo_list",
      `custom_objects_foo_list_${fooList.id}`,
      `custom_objects_foo_list_${fooList.id}_list`,
    ]) {
      expect(fields.has(name)).toBe(true);
    }
    for (const cot of [w, a, b, foo, fooList])
      await t.req("DELETE", `${CO}/custom-object-types/${cot.id}/`);
  });
});

describe("the schema follows the database", () => {
  test("a type created, changed and deleted through REST shows in the next request, here and in another app instance", async () => {
    // a second app on the same database: another process or isolate
    const config = loadConfig({ LOG_LEVEL: "silent", DATABASE_URL: t.dbUrl }, "bun");
    const db = await openDatabase(config.database.url);
    const other = await createApp({ config, db, cache: createCache("memory", {}) });
    try {
      const otherAdmin = clientFor({ app: other } as TestApp, t.admin);
      const cot = await makeCot(t, "runtime_thing");
      await addField(t, cot.id, { name: "label", type: "text", primary: true });
      await create(t, "runtime_thing", { label: "one" });
      for (const c of [admin, otherAdmin])
        expect(
          (await c.request<any>(`{ custom_objects_runtime_thing_list { label } }`))
            .custom_objects_runtime_thing_list,
        ).toEqual([{ label: "one" }]);
      await addField(t, cot.id, { name: "extra", type: "integer" });
      for (const c of [admin, otherAdmin])
        expect(
          (await c.request<any>(`{ custom_objects_runtime_thing_list { label extra } }`))
            .custom_objects_runtime_thing_list,
        ).toEqual([{ label: "one", extra: null }]);
      await t.req("DELETE", `${CO}/custom-object-types/${cot.id}/`);
      for (const c of [admin, otherAdmin]) {
        const err = await c
          .request(`{ custom_objects_runtime_thing_list { label } }`)
          .catch((e) => e);
        expect(err).toBeInstanceOf(ClientError);
        expect(String((err as ClientError).response.errors?.[0]?.message)).toContain(
          "Cannot query field",
        );
      }
    } finally {
      await db.close();
    }
  });

  test("a schema apply is visible at once", async () => {
    const apply = await t.json("POST", `${CO}/schema/apply/`, {
      body: {
        schema: {
          schema_version: "1",
          types: [
            {
              name: "applied",
              slug: "applied",
              fields: [{ id: 1, name: "code", type: "text", primary: true }],
            },
          ],
        },
      },
    });
    expect(apply.status).toBe(200);
    await create(t, "applied", { code: "X1" });
    expect(
      (await admin.request<any>(`{ custom_objects_applied_list { code display } }`))
        .custom_objects_applied_list,
    ).toEqual([{ code: "X1", display: "X1" }]);
  });
});

describe("batch loading: no N+1", () => {
  test("a list with an object and a multiobject field costs the same statements for 5 and 50 rows", async () => {
    const cot = await makeCot(t, "batched");
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    await addField(t, cot.id, { name: "site", type: "object", related_object_type: "dcim.site" });
    await addField(t, cot.id, {
      name: "devices",
      type: "multiobject",
      related_object_type: "dcim.device",
    });
    const rows = Array.from({ length: 50 }, (_, i) => ({
      name: `b${i}`,
      site: [ids.hq, ids.lab, ids.s3][i % 3],
      devices: [ids["hq-sw1"], ids["lab-sw1"]].slice(0, (i % 2) + 1),
    }));
    expect((await t.json("POST", `${CO}/batched/`, { body: rows })).status).toBe(201);
    const q = (n: number) =>
      `{ custom_objects_batched_list(pagination: {limit: ${n}}) { name site { name tags { slug } } devices { name site { slug } } } }`;
    // the deferred search-index flush (decision 0056) commits now, not between the measurements
    await flushSearchIndexesNow(servicesOf(t.app));
    await admin.request(q(1)); // warm the schema cache
    const five = await countStatements(t.deps.db, () => admin.request(q(5)));
    const fifty = await countStatements(t.deps.db, () => admin.request(q(50)));
    const r = await admin.request<any>(q(50));
    expect(r.custom_objects_batched_list.length).toBe(50);
    expect(r.custom_objects_batched_list[49].devices.length).toBe(2);
    // no more for 50 than for 5 (fewer when the first read's related objects are still cached)
    expect(fifty).toBeLessThanOrEqual(five);
    // 13: one of them sums the page's stored bytes for the response budget (decision 0068).
    expect(five).toBeLessThanOrEqual(13);
  });
});
