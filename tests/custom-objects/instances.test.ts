import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app";
import { makeTestApp, BASE, type TestApp } from "../helpers/app";
import { CO, addField, choiceSet, create, makeCot, namedCot } from "./fixtures";

let t: TestApp;
let siteId: number;
let site2Id: number;
let deviceIds: number[];
beforeAll(async () => {
  t = await makeTestApp();
  await choiceSet(t, "speeds", ["slow", "fast", "ludicrous"]);
  const cot = await makeCot(t, "all_types", "all_types", { verbose_name: "All types" });
  await addField(t, cot.id, {
    name: "title",
    type: "text",
    primary: true,
    required: true,
    unique: true,
    validation_regex: "^[A-Z]",
  });
  await addField(t, cot.id, { name: "notes", type: "longtext" });
  await addField(t, cot.id, {
    name: "count",
    type: "integer",
    validation_minimum: 0,
    validation_maximum: 100,
  });
  await addField(t, cot.id, { name: "price", type: "decimal", validation_minimum: 0 });
  await addField(t, cot.id, { name: "enabled", type: "boolean", default: false });
  await addField(t, cot.id, { name: "day", type: "date" });
  await addField(t, cot.id, { name: "moment", type: "datetime" });
  await addField(t, cot.id, { name: "link", type: "url" });
  await addField(t, cot.id, { name: "blob", type: "json" });
  await addField(t, cot.id, { name: "speed", type: "select", choice_set: "speeds" });
  await addField(t, cot.id, { name: "speeds", type: "multiselect", choice_set: "speeds" });
  await addField(t, cot.id, {
    name: "site",
    type: "object",
    related_object_type: "dcim.site",
    on_delete_behavior: "set_null",
  });
  await addField(t, cot.id, {
    name: "devices",
    type: "multiobject",
    related_object_type: "dcim.device",
  });
  const s = await t.json("POST", "/api/dcim/sites/", {
    body: [
      { name: "Alpha", slug: "alpha" },
      { name: "Beta", slug: "beta" },
    ],
  });
  [siteId, site2Id] = s.body.map((x: any) => x.id);
  const d = await t.json("POST", "/api/dcim/devices/", {
    body: [
      { name: "sw1", site: siteId },
      { name: "sw2", site: siteId },
    ],
  });
  deviceIds = d.body.map((x: any) => x.id);
});
afterAll(() => t.close());

const full = () => ({
  title: "Alpha one",
  notes: "multi\nline",
  count: 7,
  price: 12.5,
  enabled: true,
  day: "2024-02-29",
  moment: "2024-03-01T10:20:30Z",
  link: "https://example.test/path?q=1",
  blob: { nested: [1, "two", null], ok: true },
  speed: "fast",
  speeds: ["slow", "ludicrous"],
  site: siteId,
  devices: deviceIds,
});

describe("instances: all 13 field types", () => {
  test("round-trip through create and read, in §5 rule 5 shape", async () => {
    const made = await create(t, "all_types", full());
    const r = await t.json("GET", `${CO}/all_types/${made.id}/`);
    expect(r.status).toBe(200);
    const b = r.body;
    expect(Object.keys(b).slice(0, 7)).toEqual([
      "id",
      "url",
      "display",
      "custom_object_type",
      "created",
      "last_updated",
      "tags",
    ]);
    expect(b.url).toBe(`${BASE}${CO}/all_types/${made.id}/`);
    expect(b.display).toBe("Alpha one");
    expect(b.custom_object_type).toMatchObject({
      name: "all_types",
      slug: "all_types",
      display: "All types",
    });
    expect(b.title).toBe("Alpha one");
    expect(b.notes).toBe("multi\nline");
    expect(b.count).toBe(7);
    expect(b.price).toBe(12.5);
    expect(b.enabled).toBe(true);
    expect(b.day).toBe("2024-02-29");
    expect(b.moment).toBe("2024-03-01T10:20:30.000Z");
    expect(b.link).toBe("https://example.test/path?q=1");
    expect(b.blob).toEqual({ nested: [1, "two", null], ok: true });
    expect(b.speed).toBe("fast");
    expect(b.speeds).toEqual(["slow", "ludicrous"]);
    expect(b.site).toMatchObject({
      id: siteId,
      display: "Alpha",
      url: `${BASE}/api/dcim/sites/${siteId}/`,
    });
    expect(b.devices.map((d: any) => d.id)).toEqual(deviceIds);
    // the create's answer (read back from its INSERT … RETURNING) is the record a GET serves
    expect(made).toEqual(b);
  });

  test("defaults apply on create; PATCH changes only what it names", async () => {
    const made = await create(t, "all_types", { title: "Defaults" });
    expect(made.enabled).toBe(false);
    expect(made.speeds).toEqual([]);
    expect(made.devices).toEqual([]);
    const p = await t.json("PATCH", `${CO}/all_types/${made.id}/`, {
      body: { count: 3, devices: [deviceIds[1]] },
    });
    expect(p.body.count).toBe(3);
    expect(p.body.title).toBe("Defaults");
    expect(p.body.devices.map((d: any) => d.id)).toEqual([deviceIds[1]]);
    const cleared = await t.json("PATCH", `${CO}/all_types/${made.id}/`, {
      body: { count: null, devices: [] },
    });
    expect(cleared.body.count).toBeNull();
    expect(cleared.body.devices).toEqual([]);
  });

  test.each([
    [{ title: null }, "title"],
    [{}, "title"],
    [{ title: "lowercase" }, "title"],
    [{ title: "Valid", count: 101 }, "count"],
    [{ title: "Valid", count: -1 }, "count"],
    [{ title: "Valid", count: 1.5 }, "count"],
    [{ title: "Valid", price: "cheap" }, "price"],
    [{ title: "Valid", price: -2 }, "price"],
    [{ title: "Valid", enabled: "maybe" }, "enabled"],
    [{ title: "Valid", day: "2023-02-29" }, "day"],
    [{ title: "Valid", day: "yesterday" }, "day"],
    [{ title: "Valid", moment: "noon" }, "moment"],
    [{ title: "Valid", link: "not a url" }, "link"],
    [{ title: "Valid", link: "javascript:alert(1)" }, "link"],
    [{ title: "Valid", speed: "medium" }, "speed"],
    [{ title: "Valid", speeds: ["fast", "medium"] }, "speeds"],
    [{ title: "Valid", speeds: "fast" }, "speeds"],
    [{ title: "Valid", site: 999999 }, "site"],
    [{ title: "Valid", site: "alpha" }, "site"],
    [{ title: "Valid", devices: [999999] }, "devices"],
    [{ title: "Valid", devices: 5 }, "devices"],
    [{ title: "Valid", notes: 12 }, "notes"],
    [{ title: "Valid", colour: "red" }, "colour"],
  ])("invalid %j → 400 keyed by %s", async (body, key) => {
    const r = await t.json("POST", `${CO}/all_types/`, { body });
    expect(r.status).toBe(400);
    expect(r.body[key]).toBeDefined();
  });

  test("unique values are enforced with a 400 on the field", async () => {
    await create(t, "all_types", { title: "Unique one" });
    const r = await t.json("POST", `${CO}/all_types/`, { body: { title: "Unique one" } });
    expect(r.status).toBe(400);
    expect(r.body.title[0]).toContain("already exists");
    // inside a bulk request the clash is reported on its item, and nothing is written
    const before = (await t.json("GET", `${CO}/all_types/`)).body.count;
    const bulk = await t.json("POST", `${CO}/all_types/`, {
      body: [{ title: "Unique two" }, { title: "Unique two" }, { title: "Unique one" }],
    });
    expect(bulk.status).toBe(400);
    expect(bulk.body.errors.map((e: any) => e.index)).toEqual([1, 2]);
    expect(bulk.body.errors[0].errors.title[0]).toContain("already exists");
    expect(bulk.body.errors[1].errors.title[0]).toContain("already exists");
    expect((await t.json("GET", `${CO}/all_types/`)).body.count).toBe(before);
    // and an update onto a taken value
    const other = await create(t, "all_types", { title: "Unique three" });
    const clash = await t.json("PATCH", `${CO}/all_types/${other.id}/`, {
      body: { title: "Unique one" },
    });
    expect(clash.status).toBe(400);
    expect(clash.body.title[0]).toContain("already exists");
  });

  test("filters honour filter_logic, lookups, <field>_id and q", async () => {
    await create(t, "all_types", {
      title: "Filter a",
      count: 10,
      speed: "slow",
      speeds: ["fast"],
      site: site2Id,
      devices: [deviceIds[0]],
      enabled: true,
      day: "2020-01-01",
    });
    await create(t, "all_types", { title: "Filter b", count: 20, speed: "fast", site: site2Id });
    const count = async (qs: string) => {
      const r = await t.json("GET", `${CO}/all_types/?${qs}`);
      if (r.status !== 200) throw new Error(`${qs} → ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.count as number;
    };
    expect(await count("title=filter")).toBe(2); // loose: icontains
    expect(await count("title__ie=filter%20a")).toBe(1);
    expect(await count("count__gte=10&count__lte=15")).toBe(1);
    expect(await count(`site_id=${site2Id}`)).toBe(2);
    expect(await count(`site_id=${site2Id}&speed=slow`)).toBe(1);
    expect(await count(`devices_id=${deviceIds[0]}`)).toBeGreaterThanOrEqual(2);
    expect(await count("speeds=fast")).toBe(1);
    expect(await count("enabled=true&day__lt=2021-01-01")).toBe(1);
    expect(await count("q=Filter")).toBe(2);
    expect(await count("title__empty=false")).toBe(await count(""));
    const ordered = await t.json("GET", `${CO}/all_types/?title__isw=Filter&ordering=-count`);
    expect(ordered.body.results.map((o: any) => o.title)).toEqual(["Filter b", "Filter a"]);
    const brief = await t.json("GET", `${CO}/all_types/?brief=1&limit=1`);
    expect(Object.keys(brief.body.results[0]).sort()).toEqual(["display", "id", "url"]);
    expect((await t.json("GET", `${CO}/all_types/?count=abc`)).status).toBe(400);
  });

  test("bulk create/update/delete are all-or-nothing", async () => {
    const before = (await t.json("GET", `${CO}/all_types/`)).body.count;
    const bad = await t.json("POST", `${CO}/all_types/`, {
      body: [{ title: "Bulk a" }, { title: "bad" }],
    });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0]).toMatchObject({ index: 1, errors: { title: expect.any(Array) } });
    expect((await t.json("GET", `${CO}/all_types/`)).body.count).toBe(before);
    const good = await t.json("POST", `${CO}/all_types/`, {
      body: [{ title: "Bulk a" }, { title: "Bulk b" }],
    });
    expect(good.status).toBe(201);
    const ids = good.body.map((o: any) => o.id);
    const upd = await t.json("PATCH", `${CO}/all_types/`, {
      body: [
        { id: ids[0], count: 1 },
        { id: ids[1], count: 1000 },
      ],
    });
    expect(upd.status).toBe(400);
    expect((await t.json("GET", `${CO}/all_types/${ids[0]}/`)).body.count).toBeNull();
    expect(
      (await t.req("DELETE", `${CO}/all_types/`, { body: ids.map((id: number) => ({ id })) }))
        .status,
    ).toBe(204);
    expect((await t.json("GET", `${CO}/all_types/`)).body.count).toBe(before);
  });

  test("a bulk update whose item takes another's unique value names that item by its id (NetBox 4.7)", async () => {
    const [a, b] = (
      await t.json("POST", `${CO}/all_types/`, { body: [{ title: "Uq a" }, { title: "Uq b" }] })
    ).body;
    const r = await t.json("PATCH", `${CO}/all_types/`, {
      body: [
        { id: a.id, count: 2 },
        { id: b.id, title: "Uq a" },
      ],
    });
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual([
      { id: b.id, errors: { title: [expect.stringContaining("already exists")] } },
    ]);
    expect((await t.json("GET", `${CO}/all_types/${a.id}/`)).body.count).toBeNull();
  });

  test("tags on instances", async () => {
    const tag = await t.json("POST", "/api/extras/tags/", { body: { name: "Blue", slug: "blue" } });
    const o = await create(t, "all_types", { title: "Tagged", tags: [{ slug: "blue" }] });
    expect(o.tags.map((x: any) => x.id)).toEqual([tag.body.id]);
    expect(o).toEqual((await t.json("GET", `${CO}/all_types/${o.id}/`)).body);
    expect((await t.json("GET", `${CO}/all_types/?tag=blue`)).body.count).toBe(1);
  });
});

describe("slugs and permissions", () => {
  test("a slug with underscores works; its dashed spelling is a different slug (404)", async () => {
    expect((await t.req("GET", `${CO}/all_types/`)).status).toBe(200);
    expect((await t.req("GET", `${CO}/all-types/`)).status).toBe(404);
    await makeCot(t, "dashed", "all-types");
    expect((await t.json("GET", `${CO}/all-types/`)).body.count).toBe(0);
    expect((await t.json("GET", `${CO}/all_types/`)).body.count).toBeGreaterThan(0);
  });

  test("order: authentication, then unknown slug 404, then permission 403", async () => {
    // a caller holding no permission on a type hears 404 as for an unknown slug (decision 0178)
    expect((await t.json("GET", `${CO}/nope/`, { token: null })).status).toBe(403);
    const key = await t.user("co-viewer", [[["view"], "custom_objects.all_types"]]);
    const none = await t.user("co-nobody");
    expect((await t.req("GET", `${CO}/nope/`, { token: none })).status).toBe(404);
    expect((await t.req("POST", `${CO}/nope/`, { token: none, body: {} })).status).toBe(404);
    expect((await t.req("GET", `${CO}/all_types/`, { token: none })).status).toBe(404);
    expect((await t.req("GET", `${CO}/all_types/`, { token: key })).status).toBe(200);
    expect(
      (await t.req("POST", `${CO}/all_types/`, { token: key, body: { title: "Nope" } })).status,
    ).toBe(403);
    // the app_label alias is accepted when naming the object type
    const writer = await t.user("co-writer", [[["view", "add"], "custom-objects.all_types"]]);
    expect(
      (await t.req("POST", `${CO}/all_types/`, { token: writer, body: { title: "Writer" } }))
        .status,
    ).toBe(201);
  });

  test("COT and field CRUD need the customobjecttype / customobjecttypefield permissions", async () => {
    const key = await t.user("schema-viewer", [[["view"], "custom_objects.customobjecttype"]]);
    expect((await t.req("GET", `${CO}/custom-object-types/`, { token: key })).status).toBe(200);
    expect(
      (
        await t.req("POST", `${CO}/custom-object-types/`, {
          token: key,
          body: { name: "nope", slug: "nope" },
        })
      ).status,
    ).toBe(403);
    expect((await t.req("GET", `${CO}/custom-object-type-fields/`, { token: key })).status).toBe(
      403,
    );
    const fk = await t.user("field-adder", [
      [["view", "add"], "custom_objects.customobjecttypefield"],
    ]);
    const cots = await t.json("GET", `${CO}/custom-object-types/?slug=all_types`);
    const r = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      token: fk,
      body: { custom_object_type: cots.body.results[0].id, name: "extra_note", type: "text" },
    });
    expect(r.status).toBe(201);
  });
});

describe("on_delete_behavior", () => {
  beforeAll(async () => {
    await namedCot(t, "parent_t");
    const parent = "custom_objects.parent_t";
    await namedCot(t, "child_t", {
      guarded: { to: parent, onDelete: "protect" },
      owner: { to: parent, onDelete: "cascade" },
      loose: { to: parent, onDelete: "set_null" },
      prefix: { to: "ipam.prefix", onDelete: "cascade" },
      me: { to: "custom_objects.child_t", onDelete: "cascade" },
    });
  });

  test("protect → 409 with a clear body, nothing deleted", async () => {
    const p = await create(t, "parent_t", { name: "p1" });
    const c = await create(t, "child_t", { name: "c1", guarded: p.id });
    const r = await t.json("DELETE", `${CO}/parent_t/${p.id}/`);
    expect(r.status).toBe(409);
    expect(r.body.error).toBe("protected");
    expect(r.body.detail).toContain("guarded");
    expect((await t.req("GET", `${CO}/parent_t/${p.id}/`)).status).toBe(200);
    expect((await t.req("GET", `${CO}/child_t/${c.id}/`)).status).toBe(200);
  });

  test("cascade deletes linking objects, set_null clears links", async () => {
    const p = await create(t, "parent_t", { name: "p2" });
    const owned = await create(t, "child_t", { name: "owned", owner: p.id });
    const loose = await create(t, "child_t", { name: "loose", loose: p.id });
    expect((await t.req("DELETE", `${CO}/parent_t/${p.id}/`)).status).toBe(204);
    expect((await t.req("GET", `${CO}/child_t/${owned.id}/`)).status).toBe(404);
    const l = await t.json("GET", `${CO}/child_t/${loose.id}/`);
    expect(l.status).toBe(200);
    expect(l.body.loose).toBeNull();
  });

  test("host objects honour it too (cascade from a prefix), and self-references terminate", async () => {
    const prefix = await t.json("POST", "/api/ipam/prefixes/", {
      body: { prefix: "192.0.2.0/24" },
    });
    const a = await create(t, "child_t", { name: "a", prefix: prefix.body.id });
    const b = await create(t, "child_t", { name: "b", me: a.id });
    await t.json("PATCH", `${CO}/child_t/${a.id}/`, { body: { me: a.id } });
    expect((await t.req("DELETE", `/api/ipam/prefixes/${prefix.body.id}/`)).status).toBe(204);
    expect((await t.req("GET", `${CO}/child_t/${a.id}/`)).status).toBe(404);
    expect((await t.req("GET", `${CO}/child_t/${b.id}/`)).status).toBe(404);
  });

  test("deleting a host site sets links to null (set_null) and drops multiobject links", async () => {
    const s = await t.json("POST", "/api/dcim/sites/", { body: { name: "Gone", slug: "gone" } });
    const d = await t.json("POST", "/api/dcim/devices/", {
      body: { name: "gone-dev", site: siteId },
    });
    const o = await create(t, "all_types", {
      title: "Links",
      site: s.body.id,
      devices: [d.body.id, deviceIds[0]],
    });
    expect((await t.req("DELETE", `/api/dcim/sites/${s.body.id}/`)).status).toBe(204);
    expect((await t.req("DELETE", `/api/dcim/devices/${d.body.id}/`)).status).toBe(204);
    const after = await t.json("GET", `${CO}/all_types/${o.id}/`);
    expect(after.body.site).toBeNull();
    expect(after.body.devices.map((x: any) => x.id)).toEqual([deviceIds[0]]);
  });
});

describe("linked-objects", () => {
  test("400s for missing/bad parameters and unknown type; 404 for unknown id", async () => {
    const L = `${CO}/linked-objects/`;
    expect((await t.json("GET", L)).status).toBe(400);
    expect((await t.json("GET", `${L}?object_type=dcim.site`)).body.object_id).toBeDefined();
    expect((await t.json("GET", `${L}?object_type=dcim.site&object_id=abc`)).status).toBe(400);
    expect(
      (await t.json("GET", `${L}?object_type=nothing.here&object_id=1`)).body.object_type,
    ).toBeDefined();
    expect((await t.json("GET", `${L}?object_type=dcim&object_id=1`)).status).toBe(400);
    expect((await t.json("GET", `${L}?object_type=dcim.site&object_id=987654`)).status).toBe(404);
    expect((await t.json("POST", L, { body: {} })).status).toBe(405);
  });

  test("a link through two fields gives two rows; multiobject and polymorphic links; paging", async () => {
    const lt = await makeCot(t, "linker");
    await addField(t, lt.id, { name: "name", type: "text", primary: true });
    await addField(t, lt.id, { name: "home", type: "object", related_object_type: "dcim.site" });
    await addField(t, lt.id, { name: "away", type: "object", related_object_type: "dcim.site" });
    await addField(t, lt.id, {
      name: "many",
      type: "multiobject",
      related_object_type: "dcim.site",
    });
    await addField(t, lt.id, {
      name: "any",
      type: "object",
      is_polymorphic: true,
      related_object_types: ["dcim.site", "custom_objects.linker"],
    });
    const s = (
      await t.json("POST", "/api/dcim/sites/", { body: { name: "Linked", slug: "linked" } })
    ).body.id;
    const both = await create(t, "linker", { name: "both", home: s, away: s });
    await create(t, "linker", { name: "many", many: [s, siteId] });
    await create(t, "linker", { name: "poly", any: { object_type: "dcim.site", id: s } });
    await create(t, "linker", { name: "other", home: siteId });
    const r = await t.json("GET", `${CO}/linked-objects/?object_type=dcim.site&object_id=${s}`);
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(4);
    const rows = r.body.results.map((x: any) => `${x.object.name}:${x.field_name}`);
    expect(rows.sort()).toEqual(["both:away", "both:home", "many:many", "poly:any"]);
    expect(r.body.results[0].custom_object_type).toMatchObject({ slug: "linker", name: "linker" });
    expect(r.body.results[0].object.url).toContain(`${CO}/linker/`);
    const p1 = await t.json(
      "GET",
      `${CO}/linked-objects/?object_type=dcim.site&object_id=${s}&limit=3`,
    );
    expect(p1.body.results.length).toBe(3);
    expect(p1.body.next).toContain("offset=3");
    const p2 = await t.json("GET", p1.body.next.replace(BASE, ""));
    expect(p2.body.results.length).toBe(1);
    const all = [...p1.body.results, ...p2.body.results].map(
      (x: any) => `${x.object.id}:${x.field_name}`,
    );
    expect(new Set(all).size).toBe(4);
    // links to custom objects, addressed with either app_label spelling
    await create(t, "linker", {
      name: "self",
      any: { object_type: "custom_objects.linker", id: both.id },
    });
    for (const label of ["custom_objects.linker", "custom-objects.linker"]) {
      const co = await t.json(
        "GET",
        `${CO}/linked-objects/?object_type=${label}&object_id=${both.id}`,
      );
      expect(co.body.results.map((x: any) => x.field_name)).toEqual(["any"]);
    }
  });

  test("rows of types the caller cannot view are left out", async () => {
    const key = await t.user("linked-viewer", [[["view"], "dcim.site"]]);
    const r = await t.json(
      "GET",
      `${CO}/linked-objects/?object_type=dcim.site&object_id=${siteId}`,
      { token: key },
    );
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(0);
  });
});

describe("model registry", () => {
  test("a write rebuilding a model that links to another COT runs inside its transaction (no hang)", async () => {
    const target = await makeCot(t, "reg_target");
    await addField(t, target.id, { name: "name", type: "text", primary: true });
    const tg = await create(t, "reg_target", { name: "T1" });
    const cot = await makeCot(t, "reg_thing");
    await addField(t, cot.id, {
      name: "tgt",
      type: "object",
      related_object_type: "custom_objects.reg_target",
    });
    await create(t, "reg_thing", { tgt: tg.id }); // caches the model
    await addField(t, cot.id, { name: "n", type: "integer" }); // the next write rebuilds it in its transaction
    const made = await create(t, "reg_thing", { tgt: tg.id, n: 2 });
    expect(made).toMatchObject({ n: 2, tgt: { id: tg.id, display: "T1" } });
    await addField(t, cot.id, { name: "m", type: "integer" });
    const changed = await t.json("PATCH", `${CO}/reg_thing/${made.id}/`, { body: { m: 3 } });
    expect(changed.body).toMatchObject({ n: 2, m: 3 });
  }, 10_000);

  test("two app instances on one database never serve a stale shape", async () => {
    const second = await createApp({ ...t.deps });
    const call = async (app: typeof t.app, method: string, path: string, body?: unknown) => {
      const res = await app.request(BASE + path, {
        method,
        headers: { authorization: `Token ${t.admin}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: await res.json().catch(() => null) };
    };
    const cot = await makeCot(t, "shared_shape");
    await addField(t, cot.id, { name: "a", type: "text" });
    expect((await call(second, "POST", `${CO}/shared_shape/`, { a: "one" })).status).toBe(201); // second app caches the shape
    const b = await addField(t, cot.id, { name: "b", type: "integer" }); // changed through the first app
    const viaSecond = await call(second, "POST", `${CO}/shared_shape/`, { a: "two", b: 2 });
    expect(viaSecond.status).toBe(201);
    expect(viaSecond.body.b).toBe(2);
    await call(second, "PATCH", `${CO}/custom-object-type-fields/${b.id}/`, { name: "bee" }); // and back the other way
    const viaFirst = await t.json("GET", `${CO}/shared_shape/?ordering=id`);
    expect(viaFirst.body.results[1].bee).toBe(2);
    expect(viaFirst.body.results[1].b).toBeUndefined();
    // a create through an instance whose cached shape lacks a new required field is refused
    await call(second, "GET", `${CO}/shared_shape/`); // second caches the current shape
    await addField(t, cot.id, { name: "c", type: "integer", required: true, default: null });
    const missing = await call(second, "POST", `${CO}/shared_shape/`, { a: "three" });
    expect(missing.status).toBe(400);
    expect(missing.body.c).toBeDefined();
    expect((await call(second, "POST", `${CO}/shared_shape/`, { a: "three", c: 3 })).body.c).toBe(
      3,
    );
    await call(second, "PATCH", `${CO}/custom-object-types/${cot.id}/`, { slug: "renamed_shape" });
    expect((await t.req("GET", `${CO}/shared_shape/`)).status).toBe(404);
    // the first app still holds the model under its old slug: a create there finds nothing
    const before = (await t.json("GET", `${CO}/renamed_shape/`)).body.count;
    expect((await t.req("POST", `${CO}/shared_shape/`, { body: { a: "four", c: 4 } })).status).toBe(
      404,
    );
    expect((await t.json("GET", `${CO}/renamed_shape/`)).body.count).toBe(before);
    // once another COT takes the old slug, the stale instance writes to that one
    const other = await makeCot(t, "shared_shape_2", "shared_shape");
    await addField(t, other.id, { name: "z", type: "text" });
    const into = await t.json("POST", `${CO}/shared_shape/`, { body: { z: "new owner" } });
    expect(into.status).toBe(201);
    expect(into.body.custom_object_type.id).toBe(other.id);
    expect((await t.json("GET", `${CO}/renamed_shape/`)).body.count).toBe(before);
  });
});
