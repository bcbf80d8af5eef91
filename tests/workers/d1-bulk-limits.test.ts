/**
 * Bulk writes and long id lists on Cloudflare D1, whose statements take at most 100 bound values
 * (decision 0125): the real app in process over miniflare's D1 (migrated as a deploy migrates it).
 * Bulks of 100 custom objects (object, multiobject and tag values), sites, bulk updates and
 * deletes, and lists filtered by 150 ids answer as on libSQL, never a 500.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { type D1App, startD1App } from "../helpers/d1-app";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(90_000);

const CO = "/api/plugins/custom-objects";
const N = 100;
let d1: D1App;
let app: D1App["app"];
let siteId: number;
let deviceIds: number[];

const json = (method: string, path: string, body?: unknown) => d1.json(method, path, body);
const made = (path: string, body: unknown) => d1.made(path, body);

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

beforeAll(async () => {
  d1 = await startD1App("d1-bulk");
  app = d1.app;
  siteId = (await made("/api/dcim/sites/", { name: "bulk site", slug: "bulk-site" })).id;
  deviceIds = (
    await made("/api/dcim/devices/", [
      { name: "bulk-a", site: siteId },
      { name: "bulk-b", site: siteId },
    ])
  ).map((d: { id: number }) => d.id);
  const kit = await made(`${CO}/custom-object-types/`, { name: "crate", slug: "crate" });
  for (const f of [
    { name: "title", type: "text", primary: true, unique: true },
    { name: "count", type: "integer" },
    { name: "site", type: "object", related_object_type: "dcim.site" },
    { name: "devices", type: "multiobject", related_object_type: "dcim.device" },
    { name: "notes", type: "longtext" },
  ])
    await made(`${CO}/custom-object-type-fields/`, { custom_object_type: kit.id, ...f });
  await made("/api/extras/tags/", { name: "blue", slug: "blue" });
});

afterAll(() => d1?.stop());

test("a bulk of 100 custom objects with object, multiobject and tag values on D1: created, updated, listed by id, deleted", async () => {
  const created = await json(
    "POST",
    `${CO}/crate/`,
    range(N).map((i) => ({
      title: `crate ${i}`,
      count: i,
      site: siteId,
      devices: deviceIds,
      tags: [{ slug: "blue" }],
      // 150 KB of text in all: more SQL than one D1 statement takes, were it written out
      notes: `${"north wall ".repeat(136)}row ${i}`,
    })),
  );
  expect(created.status, JSON.stringify(created.body).slice(0, 500)).toBe(201);
  expect(created.body).toHaveLength(N);
  const ids = created.body.map((r: { id: number }) => r.id);
  const one = (await json("GET", `${CO}/crate/${ids[N - 1]}/`)).body;
  expect(one).toEqual(created.body[N - 1]);
  expect(one.devices.map((d: { id: number }) => d.id)).toEqual(deviceIds);
  expect(one.tags.map((t: { slug: string }) => t.slug)).toEqual(["blue"]);
  await flushSearchIndexesNow(servicesOf(app));
  const found = await json("GET", `${CO}/crate/?q=row%2099`);
  expect(found.body.results.map((r: { title: string }) => r.title)).toEqual(["crate 99"]);

  const patched = await json(
    "PATCH",
    `${CO}/crate/`,
    ids.map((id: number) => ({ id, count: 1, devices: [deviceIds[0]] })),
  );
  expect(patched.status, JSON.stringify(patched.body).slice(0, 500)).toBe(200);
  expect(patched.body.every((r: { count: number }) => r.count === 1)).toBe(true);

  // 100 ids and more filters: a statement of more than 100 values; 150 ids: the filter's own 400
  const byId = (list: number[]) => list.map((id) => `id=${id}`).join("&");
  const listed = await json("GET", `${CO}/crate/?${byId(ids)}&tag=blue&count__gte=0&limit=200`);
  expect(listed.status, JSON.stringify(listed.body).slice(0, 500)).toBe(200);
  expect(listed.body.count).toBe(N);
  const many = await json("GET", `${CO}/crate/?${byId([...ids, ...ids.slice(0, 50)])}`);
  expect(many).toEqual({
    status: 400,
    body: { id: ["A filter takes at most 100 values (got 150)."] },
  });

  const deleted = await json(
    "DELETE",
    `${CO}/crate/`,
    ids.map((id: number) => ({ id })),
  );
  expect(deleted.status, JSON.stringify(deleted.body).slice(0, 500)).toBe(204);
  expect((await json("GET", `${CO}/crate/`)).body.count).toBe(0);
});

test("a bulk of 100 sites on D1: created with tags, updated, listed by 150 ids, deleted", async () => {
  const created = await json(
    "POST",
    "/api/dcim/sites/",
    range(N).map((i) => ({ name: `bulk ${i}`, slug: `bulk-${i}`, tags: [{ slug: "blue" }] })),
  );
  expect(created.status, JSON.stringify(created.body).slice(0, 500)).toBe(201);
  const ids = created.body.map((r: { id: number }) => r.id);
  expect((await json("GET", `/api/dcim/sites/${ids[N - 1]}/`)).body).toEqual(created.body[N - 1]);

  const patched = await json(
    "PATCH",
    "/api/dcim/sites/",
    ids.map((id: number) => ({ id, description: "bulk" })),
  );
  expect(patched.status, JSON.stringify(patched.body).slice(0, 500)).toBe(200);

  const byId = (list: number[]) => list.map((id) => `id=${id}`).join("&");
  const listed = await json("GET", `/api/dcim/sites/?${byId(ids)}&tag=blue&limit=200`);
  expect(listed.status, JSON.stringify(listed.body).slice(0, 500)).toBe(200);
  expect(listed.body.count).toBe(N);
  expect(listed.body.results.every((s: { description: string }) => s.description === "bulk")).toBe(
    true,
  );
  const many = await json("GET", `/api/dcim/sites/?${byId([...ids, ...ids.slice(0, 50)])}`);
  expect(many).toEqual({
    status: 400,
    body: { id: ["A filter takes at most 100 values (got 150)."] },
  });
  const tagged = await json("GET", `/api/dcim/sites/?tag=blue&limit=200`);
  expect(tagged.body.count).toBe(N);

  const deleted = await json(
    "DELETE",
    "/api/dcim/sites/",
    ids.map((id: number) => ({ id })),
  );
  expect(deleted.status, JSON.stringify(deleted.body).slice(0, 500)).toBe(204);
  expect((await json("GET", `/api/dcim/sites/?limit=1`)).body.count).toBe(1);
});

test("GraphQL on D1: an OR of 99 filters and an in_list of 100 values answer as on libSQL", async () => {
  await made(
    "/api/dcim/sites/",
    range(5).map((i) => ({ name: `gq ${i}`, slug: `gq-${i}` })),
  );
  const names = async (filters: string) => {
    const r = await json("POST", "/graphql/", {
      query: `{ site_list(filters: ${filters}) { name } }`,
    });
    expect(r.status, JSON.stringify(r.body).slice(0, 500)).toBe(200);
    expect(r.body.errors, JSON.stringify(r.body.errors)).toBeUndefined();
    return (r.body.data.site_list as Array<{ name: string }>).map((s) => s.name).sort();
  };
  const ors = range(99).map((i) => `{slug: {exact: "gq-${i}"}}`);
  expect(await names(`{OR: [${ors.join(", ")}]}`)).toEqual(range(5).map((i) => `gq ${i}`));
  const list = range(100).map((i) => `"gq-${i}"`);
  expect(await names(`{slug: {in_list: [${list.join(", ")}]}}`)).toHaveLength(5);
});
