/**
 * Bulk writes and long id lists on Cloudflare D1, whose statements take at most 100 bound values
 * (decision 0125): the real app in process over miniflare's D1 (migrated as a deploy migrates it).
 * Bulks of 100 custom objects (object, multiobject and tag values), sites, bulk updates and
 * deletes, and lists filtered by 150 ids answer as on libSQL, never a 500.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { Miniflare } from "miniflare";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createApp, servicesOf } from "../../src/app";
import { loadConfig } from "../../src/config";
import { d1Database, type D1Binding } from "../../src/db/d1";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { createCache } from "../../src/services/cache";
import { d1PersistDir, d1Settings, d1SuperuserToken, migrateLocalD1 } from "../../tools/d1-local";
import { BASE } from "../helpers/app";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(90_000);

const CO = "/api/plugins/custom-objects";
const N = 100;
let dir: string;
let mf: Miniflare;
let app: Awaited<ReturnType<typeof createApp>>;
let token: string;
let siteId: number;
let deviceIds: number[];

async function json(method: string, path: string, body?: unknown) {
  const res = await app.request(BASE + path, {
    method,
    headers: { authorization: `Token ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function made(path: string, body: unknown) {
  const r = await json("POST", path, body);
  if (r.status !== 201) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "host-d1-bulk-"));
  await migrateLocalD1(dir);
  const d1 = d1Settings();
  mf = new Miniflare({
    modules: true,
    script: "export default { fetch() { return new Response('') } }",
    d1Databases: { [d1.binding]: d1.databaseId },
    d1Persist: d1PersistDir(dir),
  });
  const binding = (await mf.getD1Database(d1.binding)) as unknown as D1Binding;
  const config = loadConfig(
    { LOG_LEVEL: "silent", DATABASE_URL: `file:${join(dir, "unused.db")}` },
    "bun",
  );
  app = await createApp({ config, db: d1Database(binding), cache: createCache("memory", {}) });
  token = await d1SuperuserToken(binding, "admin");
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

afterAll(async () => {
  await mf?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

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
