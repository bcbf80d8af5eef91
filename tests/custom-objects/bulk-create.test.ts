/**
 * Bulk creates of custom objects (decision 0055): chunks of one multi-row INSERT each, with the
 * per-item answers, all-or-nothing behaviour and change records of creating item by item; and
 * the index policy (plain indexes on object fields only, dropped from older databases).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { countStatements } from "../helpers/statements";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { servicesOf } from "../../src/app";
import { runMigrations } from "../../src/migrations";
import { addField, choiceSet, CO, create, makeCot } from "./fixtures";

let t: TestApp;
let cotId: number;
const fieldIds: Record<string, number> = {};
let siteIds: number[] = [];

beforeAll(async () => {
  t = await makeTestApp();
  const sites = await t.json("POST", "/api/dcim/sites/", {
    body: [1, 2, 3].map((i) => ({ name: `Site ${i}`, slug: `site-${i}` })),
  });
  siteIds = (sites.body as { id: number }[]).map((s) => s.id);
  cotId = (await makeCot(t, "gadget", "gadget")).id;
  for (const f of [
    { name: "name", type: "text", primary: true, required: true },
    { name: "serial", type: "text", unique: true },
    { name: "n", type: "integer" },
    { name: "when", type: "date" },
    { name: "site", type: "object", related_object_type: "dcim.site" },
  ]) {
    fieldIds[f.name] = (await addField(t, cotId, f)).id;
  }
});
afterAll(() => t.close());

const item = (i: number, extra: Record<string, unknown> = {}) => ({
  name: `g-${i}`,
  serial: `S-${i}`,
  n: i,
  when: "2024-05-06",
  site: siteIds[i % 3],
  ...extra,
});
const rows = async () =>
  Number((await t.deps.db.client.execute(`SELECT count(*) AS c FROM co_${cotId}`)).rows[0]!.c);
const changes = async () =>
  (
    (
      await t.json(
        "GET",
        "/api/core/object-changes/?limit=1000&changed_object_type=custom_objects.gadget",
      )
    ).body.results as Array<{
      action: { value: string };
      changed_object_id: number;
      postchange_data: Record<string, unknown>;
    }>
  ).sort((a, b) => a.changed_object_id - b.changed_object_id);

describe("bulk create", () => {
  test("writes 250 objects in a handful of statements, not three per object", async () => {
    await create(t, "gadget", item(-1)); // warm the model
    const single = await countStatements(t.deps.db, () => create(t, "gadget", item(-2)), {
      transactions: true,
    });
    let r: Awaited<ReturnType<TestApp["json"]>> | undefined;
    const bulk = await countStatements(
      t.deps.db,
      async () =>
        (r = await t.json("POST", `${CO}/gadget/`, {
          body: Array.from({ length: 250 }, (_, i) => item(i)),
        })),
      { transactions: true },
    );
    expect(r!.status).toBe(201);
    // one read (the type's shape and choices, the site's nested form, the caller's token) and one
    // write batch (the type's shape guard, the INSERT, the change record): decision 0090
    expect(single).toBeLessThanOrEqual(6);
    // one read (preflight, the sites' nested forms, the token), then one batch: the shape guard,
    // one INSERT per 100 rows and the change records per 100
    expect(bulk).toBeLessThanOrEqual(12);
  });

  test("answers every record in order and logs one change per object with its record", async () => {
    const before = (await changes()).length;
    const r = await t.json("POST", `${CO}/gadget/`, {
      body: Array.from({ length: 230 }, (_, i) => item(1000 + i)),
    });
    expect(r.status).toBe(201);
    const records = r.body as Array<Record<string, any>>;
    expect(records.map((x) => x.name)).toEqual(
      Array.from({ length: 230 }, (_, i) => `g-${1000 + i}`),
    );
    expect(records.map((x) => x.site.id)).toEqual(
      Array.from({ length: 230 }, (_, i) => siteIds[(1000 + i) % 3]),
    );
    const ids = records.map((x) => x.id as number);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    const logged = (await changes()).slice(before);
    expect(logged.length).toBe(230);
    expect(logged.map((c) => c.action.value)).toEqual(Array(230).fill("create"));
    expect(logged.map((c) => c.changed_object_id)).toEqual(ids);
    for (const [i, c] of logged.entries()) expect(c.postchange_data).toEqual(records[i]!);
  });

  test("the answer is each object as a GET shows it, typed as a single create's; a projection still applies", async () => {
    const bulk = await t.json("POST", `${CO}/gadget/`, {
      body: Array.from({ length: 120 }, (_, i) => item(3000 + i)),
    });
    const single = await t.json("POST", `${CO}/gadget/`, { body: item(3999) });
    expect([bulk.status, single.status]).toEqual([201, 201]);
    expect(bulk.res.headers.get("content-type")).toBe(single.res.headers.get("content-type"));
    for (const rec of [bulk.body[0], bulk.body[57], bulk.body[119]] as Array<Record<string, any>>) {
      expect(rec).toEqual((await t.json("GET", `${CO}/gadget/${rec.id}/`)).body);
    }
    const projected = await t.json("POST", `${CO}/gadget/?fields=id,name`, {
      body: [item(4000), item(4001)],
    });
    expect(projected.status).toBe(201);
    expect(projected.body.map((r: Record<string, unknown>) => Object.keys(r).sort())).toEqual([
      ["id", "name"],
      ["id", "name"],
    ]);
  });

  test("is all or nothing, with each bad item's errors at its index, across chunks", async () => {
    const n0 = await rows();
    const c0 = (await changes()).length;
    const body: unknown[] = Array.from({ length: 260 }, (_, i) => item(5000 + i));
    body[3] = item(5003, { n: "many" });
    body[120] = item(5120, { serial: "S-5010" }); // clashes with item 10, in an earlier chunk
    body[150] = item(5150, { serial: "S-5140" }); // clashes with item 140, in its own chunk
    body[180] = item(5180, { site: 999999 });
    body[200] = "not an object";
    body[250] = item(5250, { name: null });
    const r = await t.json("POST", `${CO}/gadget/`, { body });
    expect(r.status).toBe(400);
    expect(r.body.detail).toBe("6 of 260 objects failed validation.");
    const errors: Record<number, Record<string, string[]>> = Object.fromEntries(
      (r.body.errors as Array<{ index: number; errors: Record<string, string[]> }>).map((e) => [
        e.index,
        e.errors,
      ]),
    );
    const bad = new Map(
      Object.entries(errors).map(([i, e]) => [Number(i), Object.keys(e)] as const),
    );
    expect([...bad]).toEqual([
      [3, ["n"]],
      [120, ["serial"]],
      [150, ["serial"]],
      [180, ["site"]],
      [200, ["non_field_errors"]],
      [250, ["name"]],
    ]);
    expect(errors[120]!.serial![0]).toContain("already exists");
    expect(errors[180]!.site![0]).toContain("999999");
    expect(await rows()).toBe(n0);
    expect((await changes()).length).toBe(c0);
  });

  test("the same bad item answers the same alone and in a bulk", async () => {
    const alone = await t.json("POST", `${CO}/gadget/`, {
      body: item(7000, { n: "x", site: 999999 }),
    });
    const bulk = await t.json("POST", `${CO}/gadget/`, {
      body: [item(7001), item(7000, { n: "x", site: 999999 })],
    });
    expect(alone.status).toBe(400);
    expect(bulk.status).toBe(400);
    expect(bulk.body).toEqual({
      detail: "1 of 2 objects failed validation.",
      errors: [{ index: 1, errors: alone.body }],
    });
  });
});

describe("bulk answers of every field type", () => {
  // The bulk INSERT returns only ids (and a select primary's label): each answer is built from
  // the values it bound. Here every field type, given in the spellings clients use (numerals as
  // strings, whole decimals, offsets on datetimes), must answer exactly what a GET reads back.
  test("each record equals its GET, for every field type, tags, links and local context", async () => {
    const { id: setId } = await choiceSet(t, "every-kinds", ["alpha", "beta", "gamma"]);
    const cot = await makeCot(t, "every", "every", { config_context_enabled: true });
    for (const f of [
      { name: "kind", type: "select", choice_set: setId, primary: true },
      { name: "label", type: "text" },
      { name: "notes", type: "longtext" },
      { name: "count", type: "integer" },
      { name: "ratio", type: "decimal" },
      { name: "on", type: "boolean" },
      { name: "day", type: "date" },
      { name: "seen", type: "datetime" },
      { name: "link", type: "url" },
      { name: "tags_of", type: "multiselect", choice_set: setId },
      { name: "data", type: "json" },
      { name: "where", type: "coordinates" },
      { name: "site", type: "object", related_object_type: "dcim.site" },
      { name: "gadget", type: "object", related_object_type: "custom-objects.gadget" },
      { name: "sites", type: "multiobject", related_object_type: "dcim.site" },
    ]) {
      await addField(t, cot.id, f);
    }
    const tag = await t.json("POST", "/api/extras/tags/", { body: { name: "Bulk", slug: "bulk" } });
    const gadget = await create(t, "gadget", item(9000));
    const body = Array.from({ length: 130 }, (_, i) => ({
      kind: ["alpha", "beta", "gamma"][i % 3],
      label: i % 5 ? `every ${i}` : null,
      notes: 'line one\nline "two" ✓',
      count: i % 4 ? i : String(i),
      ratio: [3, "2.50", 0.1 + i, -7e-3][i % 4],
      on: i % 2 === 0,
      day: "2024-02-29",
      seen: i % 2 ? "2025-06-01T12:30:00+02:00" : "2025-06-01T10:30:00Z",
      link: `https://example.com/${i}`,
      tags_of: i % 3 ? ["beta", "alpha"] : [],
      data: i % 2 ? { nested: [1, "two", null], n: i } : [i],
      where: i % 2 ? { latitude: 51.5, longitude: -0.12 } : null,
      site: siteIds[i % 3],
      gadget: i % 2 ? gadget.id : null,
      sites: i % 4 ? [siteIds[0], siteIds[2]] : [],
      ...(i % 10 === 0 ? { tags: [tag.body.id] } : {}),
      ...(i % 7 === 0 ? { local_context_data: { vlan: i } } : {}),
    }));
    const r = await t.json("POST", `${CO}/every/`, { body });
    expect(r.status).toBe(201);
    const records = r.body as Array<Record<string, any>>;
    expect(records.length).toBe(130);
    for (const rec of records)
      expect(rec).toEqual((await t.json("GET", `${CO}/every/${rec.id}/`)).body);
    // the spellings were read as the types' values, not stored as given
    expect(records.slice(0, 4).map((x) => [x.count, x.ratio])).toEqual(
      [
        ["0", 3],
        [1, 2.5],
        [2, 2.1],
        [3, -7e-3],
      ].map(([c, ratio]) => [Number(c), ratio]),
    );
    expect(records[0]!.display).toBe("ALPHA");
    expect(records[10]!.tags.map((x: { slug: string }) => x.slug)).toEqual(["bulk"]);
  });
});

describe("index policy", () => {
  const indexes = async () =>
    (
      await t.deps.db.client.execute(
        `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'co_${cotId}' AND sql IS NOT NULL ORDER BY name`,
      )
    ).rows.map((r) => String(r.name));

  test("plain indexes on object fields only; a unique field keeps its UNIQUE index", async () => {
    expect(await indexes()).toEqual(
      [
        `co_${cotId}_f${fieldIds.serial}_uq`,
        `co_${cotId}_f${fieldIds.site}_idx`,
        `co_${cotId}_id_idx`,
      ].sort(),
    );
  });

  test("migrations drop the plain indexes older databases gave other fields, and keep the rest", async () => {
    for (const name of ["name", "n", "when"])
      await t.deps.db.client.execute(
        `CREATE INDEX "co_${cotId}_f${fieldIds[name]}_idx" ON "co_${cotId}" ("${name}")`,
      );
    expect((await indexes()).length).toBe(6);
    await runMigrations(t.deps.db);
    expect(await indexes()).toEqual(
      [
        `co_${cotId}_f${fieldIds.serial}_uq`,
        `co_${cotId}_f${fieldIds.site}_idx`,
        `co_${cotId}_id_idx`,
      ].sort(),
    );
    // lookups answer the same without them
    const r = await t.json("GET", `${CO}/gadget/?n=1005&name=g-1005`);
    expect(r.body.results.map((x: { serial: string }) => x.serial)).toEqual(["S-1005"]);
  });
});

// after the tests that read the change log's first 1,000 records
describe("bulk create of 1,000", () => {
  test("a bulk of 1,000 writes in a bounded number of statements", async () => {
    let r: Awaited<ReturnType<TestApp["json"]>> | undefined;
    // Earlier tests' writes armed the search flusher: settle it, and leave out the flusher's own
    // statements (they all name the shared index) should the bulk's commit arm it meanwhile.
    await flushSearchIndexesNow(servicesOf(t.app));
    const n = await countStatements(
      t.deps.db,
      async () =>
        (r = await t.json("POST", `${CO}/gadget/`, {
          body: Array.from({ length: 1000 }, (_, i) => item(20_000 + i)),
        })),
      { transactions: true, ignore: /\bco_search/ },
    );
    expect(r!.status).toBe(201);
    expect((r!.body as unknown[]).length).toBe(1000);
    // the reads, the shape guard, one INSERT per 100 rows, one per 250 change records (17 today)
    expect(n).toBeLessThanOrEqual(18);
  });

  test("a NUL anywhere in a bulk is refused at its item; escaped text that only reads like one is kept", async () => {
    const n0 = await rows();
    const body: Record<string, unknown>[] = Array.from({ length: 300 }, (_, i) => item(30_000 + i));
    body[299] = item(30_299, { name: "a\u0000b" });
    const refused = await t.json("POST", `${CO}/gadget/`, { body });
    expect(refused.status).toBe(400);
    expect(refused.body.errors).toEqual([
      { index: 299, errors: { name: ["Null characters are not allowed."] } },
    ]);
    expect(await rows()).toBe(n0);
    // the six characters backslash, u, 0, 0, 0, 0 are text like any other
    body[299] = item(30_299, { name: "a\\u0000b" });
    const kept = await t.json("POST", `${CO}/gadget/`, { body });
    expect(kept.status).toBe(201);
    expect((kept.body as Array<{ name: string }>)[299]!.name).toBe("a\\u0000b");
    expect(await rows()).toBe(n0 + 300);
  });
});
