/**
 * Parity with upstream netbox-custom-objects (issue 15), over HTTP: behaviour its tests pin
 * (tests/test_api.py, test_field_types.py, test_polymorphic_fields.py, schema/test_schema_api.py),
 * in our words. Each block names the upstream case it follows.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, choiceSet, create, makeCot } from "./fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const FIELDS = `${CO}/custom-object-type-fields/`;
const field = (body: Record<string, unknown>) => t.json("POST", FIELDS, { body });
const site = async (name: string) => {
  const r = await t.json("POST", "/api/dcim/sites/", { body: { name, slug: name.toLowerCase().replace(/\W+/g, "-"), status: "active" } });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  return r.body as { id: number };
};

describe("schema documents (schema/test_schema_api.py)", () => {
  test("a type entry needs only name and slug; applying it makes the type", async () => {
    const schema = { schema_version: "1", types: [{ name: "bare_type", slug: "bare-type" }] };
    const preview = await t.json("POST", `${CO}/schema/preview/`, { body: { schema } });
    expect(preview.status).toBe(200);
    const applied = await t.json("POST", `${CO}/schema/apply/`, { body: { schema } });
    expect(applied.status).toBe(200);
    const list = await t.json("GET", `${CO}/custom-object-types/?slug=bare-type`);
    expect(list.body.count).toBe(1);
    expect(list.body.results[0].fields).toEqual([]);
  });
  test("name and slug are still required", async () => {
    const r = await t.json("POST", `${CO}/schema/preview/`, { body: { schema: { schema_version: "1", types: [{ name: "no_slug" }] } } });
    expect(r.status).toBe(400);
    expect(r.body.schema_errors).toContainEqual({ path: "$.types[0].slug", message: "This field is required." });
  });
});

describe("coordinates (test_field_types.py CoordinatesFieldTypeTestCase, test_api.py coordinates)", () => {
  let slug: string;
  beforeAll(async () => {
    const cot = await makeCot(t, "geo_box", "geo-box");
    slug = cot.slug;
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    await addField(t, cot.id, { name: "location", type: "coordinates" });
  });

  test("the field is created with type coordinates; unique and default are refused", async () => {
    const cot = await makeCot(t, "geo_rules");
    expect((await field({ custom_object_type: cot.id, name: "spot", type: "coordinates" })).body.type).toBe("coordinates");
    const unique = await field({ custom_object_type: cot.id, name: "u", type: "coordinates", unique: true });
    expect(unique.status).toBe(400);
    expect(Object.keys(unique.body)).toEqual(["unique"]);
    const withDefault = await field({ custom_object_type: cot.id, name: "d", type: "coordinates", default: { latitude: 1, longitude: 2 } });
    expect(withDefault.status).toBe(400);
    expect(Object.keys(withDefault.body)).toEqual(["default"]);
  });

  test("a field cannot change to or from coordinates", async () => {
    const cot = await makeCot(t, "geo_change");
    const text = await addField(t, cot.id, { name: "where", type: "text" });
    const toCoords = await t.json("PATCH", `${FIELDS}${text.id}/`, { body: { type: "coordinates" } });
    expect(toCoords.status).toBe(400);
    expect(Object.keys(toCoords.body)).toEqual(["type"]);
    const coords = await addField(t, cot.id, { name: "spot", type: "coordinates" });
    const fromCoords = await t.json("PATCH", `${FIELDS}${coords.id}/`, { body: { type: "text" } });
    expect(fromCoords.status).toBe(400);
  });

  test("written flat as upstream clients do, read back as the pair and flat", async () => {
    const made = await create(t, slug, { name: "Created box", location_latitude: "41.000000", location_longitude: "-75.000000" });
    expect(made.location).toEqual({ latitude: 41, longitude: -75 });
    expect(made.location_latitude).toBe(41);
    expect(made.location_longitude).toBe(-75);
    const ours = await create(t, slug, { name: "Box", location: { latitude: 40.7128, longitude: -74.006 } });
    const got = await t.json("GET", `${CO}/${slug}/${ours.id}/`);
    expect(got.body.location).toEqual({ latitude: 40.7128, longitude: -74.006 });
    expect([got.body.location_latitude, got.body.location_longitude]).toEqual([40.7128, -74.006]);
  });

  test("half a pair is refused; out of range and more than 6 decimal places are refused", async () => {
    for (const body of [{ location_latitude: "41.000000" }, { location: { latitude: 41 } }, { location: { latitude: 41, longitude: null } }]) {
      const r = await t.json("POST", `${CO}/${slug}/`, { body: { name: "Bad box", ...body } });
      expect(r.status).toBe(400);
      expect(r.body.location[0]).toContain("Latitude and longitude must both be set or both be empty.");
    }
    for (const location of [{ latitude: 120, longitude: 10 }, { latitude: 10, longitude: -181 }, { latitude: 10.1234567, longitude: 1 }, { latitude: "north", longitude: 1 }]) {
      const r = await t.json("POST", `${CO}/${slug}/`, { body: { name: "Out of range", location } });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual(["location"]);
    }
  });

  test("PATCH clearing one half is refused and leaves the row; clearing both is accepted", async () => {
    const box = await create(t, slug, { name: "Patch box", location_latitude: 40.7128, location_longitude: -74.006 });
    const half = await t.json("PATCH", `${CO}/${slug}/${box.id}/`, { body: { location_latitude: null } });
    expect(half.status).toBe(400);
    expect((await t.json("GET", `${CO}/${slug}/${box.id}/`)).body.location).toEqual({ latitude: 40.7128, longitude: -74.006 });
    const one = await t.json("PATCH", `${CO}/${slug}/${box.id}/`, { body: { location_latitude: 1.5 } });
    expect(one.status).toBe(200);
    expect(one.body.location).toEqual({ latitude: 1.5, longitude: -74.006 });
    const both = await t.json("PATCH", `${CO}/${slug}/${box.id}/`, { body: { location_latitude: null, location_longitude: null } });
    expect(both.status).toBe(200);
    expect(both.body.location).toBeNull();
    expect(both.body.location_latitude).toBeNull();
  });

  test("its own filters: <name>_latitude and <name>_longitude with numeric lookups", async () => {
    const cot = await makeCot(t, "geo_filter");
    await addField(t, cot.id, { name: "name", type: "text" });
    await addField(t, cot.id, { name: "pos", type: "coordinates" });
    await create(t, cot.slug, { name: "north", pos: { latitude: 60, longitude: 10 } });
    await create(t, cot.slug, { name: "south", pos: { latitude: -30, longitude: 20 } });
    await create(t, cot.slug, { name: "nowhere" });
    const names = async (q: string) => (await t.json("GET", `${CO}/${cot.slug}/?${q}`)).body.results.map((r: { name: string }) => r.name).sort();
    expect(await names("pos_latitude__gt=0")).toEqual(["north"]);
    expect(await names("pos_longitude=20")).toEqual(["south"]);
    expect(await names("pos_latitude__lte=60&pos_longitude__gte=10")).toEqual(["north", "south"]);
    expect(await names("pos_latitude__empty=true")).toEqual(["nowhere"]);
  });

  test("schema documents take the type too", async () => {
    const schema = { schema_version: "1", types: [{ name: "geo_doc", slug: "geo-doc", fields: [{ id: 1, name: "spot", type: "coordinates" }] }] };
    expect((await t.json("POST", `${CO}/schema/apply/`, { body: { schema } })).status).toBe(200);
    const made = await create(t, "geo-doc", { spot: { latitude: 1, longitude: 2 } });
    expect(made.spot).toEqual({ latitude: 1, longitude: 2 });
  });
});

describe("display (test_api.py ContextFieldApiTestCase, select primary)", () => {
  test("no primary field: the verbose name title-cased and the id", async () => {
    const cot = await makeCot(t, "ctxapinoprimary", "ctx-api-no-primary");
    await addField(t, cot.id, { name: "owner", type: "text" });
    const made = await create(t, cot.slug, { owner: "Bob" });
    expect(made.display).toBe(`Ctxapinoprimary ${made.id}`);
    const named = await makeCot(t, "named_type", "named-type", { verbose_name: "my thing" });
    await addField(t, named.id, { name: "owner", type: "text" });
    expect((await create(t, named.slug, { owner: "x" })).display).toMatch(/^my thing \d+$/);
  });

  test("a select primary field shows its choice's label, in records and nested forms", async () => {
    const cs = await choiceSet(t, "parity_colours", ["red", "blue"]);
    const cot = await makeCot(t, "painted");
    await addField(t, cot.id, { name: "colour", type: "select", choice_set: cs.id, primary: true });
    const made = await create(t, cot.slug, { colour: "red" });
    expect(made.display).toBe("RED");
    expect((await t.json("GET", `${CO}/${cot.slug}/?brief=1`)).body.results[0].display).toBe("RED");
    const holder = await makeCot(t, "painted_holder");
    await addField(t, holder.id, { name: "thing", type: "object", related_object_type: `custom_objects.${cot.slug}` });
    expect((await create(t, holder.slug, { thing: made.id })).thing.display).toBe("RED");
  });
});

describe("write spellings upstream clients send (test_api.py, test_polymorphic_fields.py)", () => {
  test("top-level app_label + model on a field write name the related type", async () => {
    const cot = await makeCot(t, "spell_obj");
    const r = await field({ custom_object_type: cot.id, name: "site", type: "object", app_label: "dcim", model: "site" });
    expect(r.status).toBe(201);
    expect(r.body.related_object_type).toMatchObject({ app_label: "dcim", model: "site" });
    const target = await makeCot(t, "spell_target", "spell-target");
    for (const [i, app_label] of ["custom-objects", "netbox_custom_objects", "custom_objects"].entries()) {
      const ok = await field({ custom_object_type: cot.id, name: `t${i}`, type: "multiobject", app_label, model: target.slug });
      expect(ok.status).toBe(201);
    }
    const bad = await field({ custom_object_type: cot.id, name: "nowhere", type: "object", app_label: "dcim", model: "nope" });
    expect(bad.status).toBe(400);
  });

  test("related_object_types_input lists {app_label, model} for polymorphic fields", async () => {
    const cot = await makeCot(t, "spell_poly");
    const r = await field({ custom_object_type: cot.id, name: "target", type: "object", is_polymorphic: true, related_object_types_input: [{ app_label: "dcim", model: "site" }, { app_label: "dcim", model: "device" }] });
    expect(r.status).toBe(201);
    expect(r.body.related_object_types.map((x: { model: string }) => x.model).sort()).toEqual(["device", "site"]);
  });

  test("polymorphic values as {content_type_id, object_id} and {app_label, model, object_id}", async () => {
    const cot = await makeCot(t, "spell_values");
    await addField(t, cot.id, { name: "target", type: "object", is_polymorphic: true, related_object_types: ["dcim.site", "dcim.device"] });
    await addField(t, cot.id, { name: "targets", type: "multiobject", is_polymorphic: true, related_object_types: ["dcim.site", "dcim.device"] });
    const s = await site("Spell Site");
    const ots = await t.json("GET", "/api/core/object-types/?app_label=dcim&model=site");
    const ct = ots.body.results[0].id;
    const a = await create(t, cot.slug, { target: { content_type_id: ct, object_id: s.id }, targets: [{ app_label: "dcim", model: "site", object_id: s.id }] });
    expect(a.target).toMatchObject({ object_type: "dcim.site", id: s.id });
    expect(a.targets).toHaveLength(1);
    const roundTrip = await t.json("PATCH", `${CO}/${cot.slug}/${a.id}/`, { body: { target: { content_type_id: ct, id: s.id } } });
    expect(roundTrip.status).toBe(200);
  });

  test("a polymorphic value without its type says what to send (never 'Object type undefined')", async () => {
    const cot = await makeCot(t, "spell_missing");
    await addField(t, cot.id, { name: "target", type: "object", is_polymorphic: true, related_object_types: ["dcim.site"] });
    const r = await t.json("POST", `${CO}/${cot.slug}/`, { body: { target: { id: 1 } } });
    expect(r.status).toBe(400);
    expect(r.body.target[0]).not.toContain("undefined");
    expect(r.body.target[0]).toContain("content_type_id");
    const wrong = await t.json("POST", `${CO}/${cot.slug}/`, { body: { target: { app_label: "dcim", model: "device", object_id: 1 } } });
    expect(wrong.body.target).toEqual(['Object type "dcim.device" is not allowed for this field.']);
  });
});

describe("cycles through the field API (test_polymorphic_fields.py PolymorphicCycleDetectionTest)", () => {
  const ref = (slug: string) => `custom_objects.${slug}`;
  const types = async (prefix: string) => {
    const out: Record<string, { id: number; slug: string }> = {};
    for (const x of ["a", "b", "c"]) out[x] = await makeCot(t, `${prefix}_${x}`);
    return out;
  };
  const expectCycle = async (r: { status: number; body: any }, path: string[]) => {
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("circular_dependency");
    expect(r.body.cycle).toEqual(path);
  };

  test("A →(poly) B is fine; B →(poly) A closes A → B → A: 400, nothing added", async () => {
    const c = await types("cyc_two");
    expect((await field({ custom_object_type: c.a!.id, name: "to_b", type: "object", is_polymorphic: true, related_object_types: [ref(c.b!.slug), "dcim.site"] })).status).toBe(201);
    const r = await field({ custom_object_type: c.b!.id, name: "to_a", type: "multiobject", is_polymorphic: true, related_object_types: [ref(c.a!.slug)] });
    await expectCycle(r, [c.b!.slug, c.a!.slug, c.b!.slug]);
    expect((await t.json("GET", `${CO}/custom-object-types/${c.b!.id}/`)).body.fields).toEqual([]);
  });

  test("three hops: A → B → C, then C → A is refused", async () => {
    const c = await types("cyc_three");
    await addField(t, c.a!.id, { name: "to_b", type: "object", is_polymorphic: true, related_object_types: [ref(c.b!.slug)] });
    await addField(t, c.b!.id, { name: "to_c", type: "object", is_polymorphic: true, related_object_types: [ref(c.c!.slug)] });
    const r = await field({ custom_object_type: c.c!.id, name: "to_a", type: "object", is_polymorphic: true, related_object_types: [ref(c.a!.slug)] });
    await expectCycle(r, [c.c!.slug, c.a!.slug, c.b!.slug, c.c!.slug]);
  });

  test("mixed legs: A → B plain, B →(poly) A is refused; plain A → B → C → A too", async () => {
    const c = await types("cyc_mixed");
    await addField(t, c.a!.id, { name: "to_b", type: "object", related_object_type: ref(c.b!.slug) });
    await expectCycle(await field({ custom_object_type: c.b!.id, name: "to_a", type: "object", is_polymorphic: true, related_object_types: [ref(c.a!.slug)] }), [c.b!.slug, c.a!.slug, c.b!.slug]);
    await addField(t, c.b!.id, { name: "to_c", type: "multiobject", related_object_type: ref(c.c!.slug) });
    await expectCycle(await field({ custom_object_type: c.c!.id, name: "to_a", type: "object", app_label: "custom-objects", model: c.a!.slug }), [c.c!.slug, c.a!.slug, c.b!.slug, c.c!.slug]);
  });

  test("a self-reference is fine", async () => {
    const c = await makeCot(t, "cyc_self");
    expect((await field({ custom_object_type: c.id, name: "parent", type: "object", related_object_type: ref(c.slug) })).status).toBe(201);
  });
});
