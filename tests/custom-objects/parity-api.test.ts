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
  const r = await t.json("POST", "/api/dcim/sites/", {
    body: { name, slug: name.toLowerCase().replace(/\W+/g, "-"), status: "active" },
  });
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
    const r = await t.json("POST", `${CO}/schema/preview/`, {
      body: { schema: { schema_version: "1", types: [{ name: "no_slug" }] } },
    });
    expect(r.status).toBe(400);
    expect(r.body.schema_errors).toContainEqual({
      path: "$.types[0].slug",
      message: "This field is required.",
    });
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
    expect(
      (await field({ custom_object_type: cot.id, name: "spot", type: "coordinates" })).body.type,
    ).toBe("coordinates");
    const unique = await field({
      custom_object_type: cot.id,
      name: "u",
      type: "coordinates",
      unique: true,
    });
    expect(unique.status).toBe(400);
    expect(Object.keys(unique.body)).toEqual(["unique"]);
    const withDefault = await field({
      custom_object_type: cot.id,
      name: "d",
      type: "coordinates",
      default: { latitude: 1, longitude: 2 },
    });
    expect(withDefault.status).toBe(400);
    expect(Object.keys(withDefault.body)).toEqual(["default"]);
  });

  test("a field cannot change to or from coordinates", async () => {
    const cot = await makeCot(t, "geo_change");
    const text = await addField(t, cot.id, { name: "where", type: "text" });
    const toCoords = await t.json("PATCH", `${FIELDS}${text.id}/`, {
      body: { type: "coordinates" },
    });
    expect(toCoords.status).toBe(400);
    expect(Object.keys(toCoords.body)).toEqual(["type"]);
    const coords = await addField(t, cot.id, { name: "spot", type: "coordinates" });
    const fromCoords = await t.json("PATCH", `${FIELDS}${coords.id}/`, { body: { type: "text" } });
    expect(fromCoords.status).toBe(400);
  });

  test("written and read flat as upstream 0.7 does: no nested <name> key (a write may still give the pair)", async () => {
    const made = await create(t, slug, {
      name: "Created box",
      location_latitude: "41.000000",
      location_longitude: "-75.000000",
    });
    expect(made).not.toHaveProperty("location");
    expect(made.location_latitude).toBe(41);
    expect(made.location_longitude).toBe(-75);
    const ours = await create(t, slug, {
      name: "Box",
      location: { latitude: 40.7128, longitude: -74.006 },
    });
    const got = await t.json("GET", `${CO}/${slug}/${ours.id}/`);
    expect(got.body).not.toHaveProperty("location");
    expect([got.body.location_latitude, got.body.location_longitude]).toEqual([40.7128, -74.006]);
  });

  test("half a pair is refused on the missing half; out of range and more than 6 decimal places on the wrong half", async () => {
    for (const body of [
      { location_latitude: "41.000000" },
      { location: { latitude: 41 } },
      { location: { latitude: 41, longitude: null } },
    ]) {
      const r = await t.json("POST", `${CO}/${slug}/`, { body: { name: "Bad box", ...body } });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({
        location_longitude: ["Latitude and longitude must both be set or both be empty."],
      });
    }
    for (const [body, wrong] of [
      [{ location_latitude: 120, location_longitude: 10 }, "location_latitude"],
      [{ location_latitude: 10, location_longitude: -181 }, "location_longitude"],
      [{ location_latitude: 10.1234567, location_longitude: 1 }, "location_latitude"],
      [{ location: { latitude: "north", longitude: 1 } }, "location_latitude"],
    ] as const) {
      const r = await t.json("POST", `${CO}/${slug}/`, {
        body: { name: "Out of range", ...body },
      });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual([wrong]);
    }
  });

  test("PATCH clearing one half is refused and leaves the row; clearing both is accepted", async () => {
    const box = await create(t, slug, {
      name: "Patch box",
      location_latitude: 40.7128,
      location_longitude: -74.006,
    });
    const half = await t.json("PATCH", `${CO}/${slug}/${box.id}/`, {
      body: { location_latitude: null },
    });
    expect(half.status).toBe(400);
    expect(Object.keys(half.body)).toEqual(["location_latitude"]);
    const kept = (await t.json("GET", `${CO}/${slug}/${box.id}/`)).body;
    expect([kept.location_latitude, kept.location_longitude]).toEqual([40.7128, -74.006]);
    const one = await t.json("PATCH", `${CO}/${slug}/${box.id}/`, {
      body: { location_latitude: 1.5 },
    });
    expect(one.status).toBe(200);
    expect([one.body.location_latitude, one.body.location_longitude]).toEqual([1.5, -74.006]);
    const both = await t.json("PATCH", `${CO}/${slug}/${box.id}/`, {
      body: { location_latitude: null, location_longitude: null },
    });
    expect(both.status).toBe(200);
    expect(both.body.location_latitude).toBeNull();
    expect(both.body.location_longitude).toBeNull();
  });

  test("its own filters: <name>_latitude and <name>_longitude with numeric lookups", async () => {
    const cot = await makeCot(t, "geo_filter");
    await addField(t, cot.id, { name: "name", type: "text" });
    await addField(t, cot.id, { name: "pos", type: "coordinates" });
    await create(t, cot.slug, { name: "north", pos: { latitude: 60, longitude: 10 } });
    await create(t, cot.slug, { name: "south", pos: { latitude: -30, longitude: 20 } });
    await create(t, cot.slug, { name: "nowhere" });
    const names = async (q: string) =>
      (await t.json("GET", `${CO}/${cot.slug}/?${q}`)).body.results
        .map((r: { name: string }) => r.name)
        .sort();
    expect(await names("pos_latitude__gt=0")).toEqual(["north"]);
    expect(await names("pos_longitude=20")).toEqual(["south"]);
    expect(await names("pos_latitude__lte=60&pos_longitude__gte=10")).toEqual(["north", "south"]);
    expect(await names("pos_latitude__empty=true")).toEqual(["nowhere"]);
  });

  test("schema documents take the type too", async () => {
    const schema = {
      schema_version: "1",
      types: [
        {
          name: "geo_doc",
          slug: "geo-doc",
          fields: [{ id: 1, name: "spot", type: "coordinates" }],
        },
      ],
    };
    expect((await t.json("POST", `${CO}/schema/apply/`, { body: { schema } })).status).toBe(200);
    const made = await create(t, "geo-doc", { spot_latitude: 1, spot_longitude: 2 });
    expect([made.spot_latitude, made.spot_longitude]).toEqual([1, 2]);
  });

  test("a field named like a coordinates half is refused, in either order, by the field API and documents", async () => {
    // `spot_latitude` as a text field would answer under the same key as the coordinates' half
    const cot = await makeCot(t, "geo_clash");
    await addField(t, cot.id, { name: "spot", type: "coordinates" });
    const half = await field({ custom_object_type: cot.id, name: "spot_latitude", type: "text" });
    expect(half.status).toBe(400);
    expect(half.body.name[0]).toContain('"spot_latitude"');
    const other = await makeCot(t, "geo_clash_rev");
    await addField(t, other.id, { name: "pin_longitude", type: "text" });
    const pair = await field({ custom_object_type: other.id, name: "pin", type: "coordinates" });
    expect(pair.status).toBe(400);
    expect(Object.keys(pair.body)).toEqual(["name"]);
    const doc = (fields: unknown[]) => ({
      schema_version: "1",
      types: [{ name: "geo_clash_doc", slug: "geo-clash-doc", fields }],
    });
    const spot = { id: 1, name: "spot", type: "coordinates" };
    const text = { id: 2, name: "spot_latitude", type: "text" };
    for (const fields of [
      [spot, text],
      [text, spot],
    ]) {
      const r = await t.json("POST", `${CO}/schema/preview/`, { body: { schema: doc(fields) } });
      expect(r.status).toBe(400);
      expect(r.body.schema_errors[0].path).toBe("$.types[0].fields[1].name");
    }
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
    await addField(t, holder.id, {
      name: "thing",
      type: "object",
      related_object_type: `custom_objects.${cot.slug}`,
    });
    expect((await create(t, holder.slug, { thing: made.id })).thing.display).toBe("RED");
  });
});

describe("write spellings upstream clients send (test_api.py, test_polymorphic_fields.py)", () => {
  test("top-level app_label + model on a field write name the related type", async () => {
    const cot = await makeCot(t, "spell_obj");
    const r = await field({
      custom_object_type: cot.id,
      name: "site",
      type: "object",
      app_label: "dcim",
      model: "site",
    });
    expect(r.status).toBe(201);
    expect(r.body.related_object_type).toMatchObject({ app_label: "dcim", model: "site" });
    const target = await makeCot(t, "spell_target", "spell-target");
    for (const [i, app_label] of [
      "custom-objects",
      "netbox_custom_objects",
      "custom_objects",
    ].entries()) {
      const ok = await field({
        custom_object_type: cot.id,
        name: `t${i}`,
        type: "multiobject",
        app_label,
        model: target.slug,
      });
      expect(ok.status).toBe(201);
    }
    const bad = await field({
      custom_object_type: cot.id,
      name: "nowhere",
      type: "object",
      app_label: "dcim",
      model: "nope",
    });
    expect(bad.status).toBe(400);
  });

  test("related_object_types_input lists {app_label, model} for polymorphic fields", async () => {
    const cot = await makeCot(t, "spell_poly");
    const r = await field({
      custom_object_type: cot.id,
      name: "target",
      type: "object",
      is_polymorphic: true,
      related_object_types_input: [
        { app_label: "dcim", model: "site" },
        { app_label: "dcim", model: "device" },
      ],
    });
    expect(r.status).toBe(201);
    expect(r.body.related_object_types.map((x: { model: string }) => x.model).sort()).toEqual([
      "device",
      "site",
    ]);
  });

  test("polymorphic values as {content_type_id, object_id} and {app_label, model, object_id}", async () => {
    const cot = await makeCot(t, "spell_values");
    await addField(t, cot.id, {
      name: "target",
      type: "object",
      is_polymorphic: true,
      related_object_types: ["dcim.site", "dcim.device"],
    });
    await addField(t, cot.id, {
      name: "targets",
      type: "multiobject",
      is_polymorphic: true,
      related_object_types: ["dcim.site", "dcim.device"],
    });
    const s = await site("Spell Site");
    const ots = await t.json("GET", "/api/core/object-types/?app_label=dcim&model=site");
    const ct = ots.body.results[0].id;
    const a = await create(t, cot.slug, {
      target: { content_type_id: ct, object_id: s.id },
      targets: [{ app_label: "dcim", model: "site", object_id: s.id }],
    });
    expect(a.target).toMatchObject({ object_type: "dcim.site", id: s.id });
    expect(a.targets).toHaveLength(1);
    const roundTrip = await t.json("PATCH", `${CO}/${cot.slug}/${a.id}/`, {
      body: { target: { content_type_id: ct, id: s.id } },
    });
    expect(roundTrip.status).toBe(200);
  });

  test("a polymorphic value without its type says what to send (never 'Object type undefined')", async () => {
    const cot = await makeCot(t, "spell_missing");
    await addField(t, cot.id, {
      name: "target",
      type: "object",
      is_polymorphic: true,
      related_object_types: ["dcim.site"],
    });
    const r = await t.json("POST", `${CO}/${cot.slug}/`, { body: { target: { id: 1 } } });
    expect(r.status).toBe(400);
    expect(r.body.target[0]).not.toContain("undefined");
    expect(r.body.target[0]).toContain("content_type_id");
    const wrong = await t.json("POST", `${CO}/${cot.slug}/`, {
      body: { target: { app_label: "dcim", model: "device", object_id: 1 } },
    });
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
    expect(
      (
        await field({
          custom_object_type: c.a!.id,
          name: "to_b",
          type: "object",
          is_polymorphic: true,
          related_object_types: [ref(c.b!.slug), "dcim.site"],
        })
      ).status,
    ).toBe(201);
    const r = await field({
      custom_object_type: c.b!.id,
      name: "to_a",
      type: "multiobject",
      is_polymorphic: true,
      related_object_types: [ref(c.a!.slug)],
    });
    await expectCycle(r, [c.b!.slug, c.a!.slug, c.b!.slug]);
    expect((await t.json("GET", `${CO}/custom-object-types/${c.b!.id}/`)).body.fields).toEqual([]);
  });

  test("three hops: A → B → C, then C → A is refused", async () => {
    const c = await types("cyc_three");
    await addField(t, c.a!.id, {
      name: "to_b",
      type: "object",
      is_polymorphic: true,
      related_object_types: [ref(c.b!.slug)],
    });
    await addField(t, c.b!.id, {
      name: "to_c",
      type: "object",
      is_polymorphic: true,
      related_object_types: [ref(c.c!.slug)],
    });
    const r = await field({
      custom_object_type: c.c!.id,
      name: "to_a",
      type: "object",
      is_polymorphic: true,
      related_object_types: [ref(c.a!.slug)],
    });
    await expectCycle(r, [c.c!.slug, c.a!.slug, c.b!.slug, c.c!.slug]);
  });

  test("mixed legs: A → B plain, B →(poly) A is refused; plain A → B → C → A too", async () => {
    const c = await types("cyc_mixed");
    await addField(t, c.a!.id, {
      name: "to_b",
      type: "object",
      related_object_type: ref(c.b!.slug),
    });
    await expectCycle(
      await field({
        custom_object_type: c.b!.id,
        name: "to_a",
        type: "object",
        is_polymorphic: true,
        related_object_types: [ref(c.a!.slug)],
      }),
      [c.b!.slug, c.a!.slug, c.b!.slug],
    );
    await addField(t, c.b!.id, {
      name: "to_c",
      type: "multiobject",
      related_object_type: ref(c.c!.slug),
    });
    await expectCycle(
      await field({
        custom_object_type: c.c!.id,
        name: "to_a",
        type: "object",
        app_label: "custom-objects",
        model: c.a!.slug,
      }),
      [c.c!.slug, c.a!.slug, c.b!.slug, c.c!.slug],
    );
  });

  test("a self-reference is fine", async () => {
    const c = await makeCot(t, "cyc_self");
    expect(
      (
        await field({
          custom_object_type: c.id,
          name: "parent",
          type: "object",
          related_object_type: ref(c.slug),
        })
      ).status,
    ).toBe(201);
  });
});

describe("context fields (test_api.py ContextFieldApiTestCase)", () => {
  let withPrimary: { id: number; slug: string };
  let multi: { id: number; slug: string };
  beforeAll(async () => {
    withPrimary = await makeCot(t, "ctxapiprimary", "ctx-api-primary");
    await addField(t, withPrimary.id, { name: "name", type: "text", primary: true });
    await addField(t, withPrimary.id, { name: "owner", type: "text", context: true });
    multi = await makeCot(t, "ctxapimultictx", "ctx-api-multi-ctx");
    await addField(t, multi.id, { name: "name", type: "text", primary: true });
    await addField(t, multi.id, { name: "owner", type: "text", context: true });
    await addField(t, multi.id, { name: "region", type: "text", context: true });
  });

  test("the field attribute is stored and shown", async () => {
    const fields = (await t.json("GET", `${CO}/custom-object-types/${withPrimary.id}/`)).body
      .fields;
    expect(fields.map((f: { name: string; context: boolean }) => [f.name, f.context])).toEqual([
      ["name", false],
      ["owner", true],
    ]);
  });

  test("display is the primary value; _context.display the context value, null when empty", async () => {
    const a = await create(t, withPrimary.slug, { name: "Route-A", owner: "Alice" });
    expect(a.display).toBe("Route-A");
    expect(a._context).toEqual({ display: "Alice" });
    expect(Object.keys(a).slice(0, 4)).toEqual(["id", "url", "display", "_context"]);
    const b = await create(t, withPrimary.slug, { name: "Route-B" });
    expect(b._context).toBeNull();
    const brief = await t.json("GET", `${CO}/${withPrimary.slug}/?brief=1&ordering=id`);
    expect(brief.body.results[0]).toEqual({
      id: a.id,
      url: a.url,
      display: "Route-A",
      _context: { display: "Alice" },
    });
  });

  test("with no primary field the fallback display and _context both work", async () => {
    const cot = await makeCot(t, "ctxapinoprimary2", "ctx-api-no-primary-2");
    await addField(t, cot.id, { name: "owner", type: "text", context: true });
    const b = await create(t, cot.slug, { owner: "Bob" });
    expect(b.display).toBe(`Ctxapinoprimary2 ${b.id}`);
    expect(b._context).toEqual({ display: "Bob" });
  });

  test("several context fields are joined with ', ', empty ones left out", async () => {
    expect(
      (await create(t, multi.slug, { name: "Route-C", owner: "Carol", region: "EU" }))._context,
    ).toEqual({ display: "Carol, EU" });
    expect((await create(t, multi.slug, { name: "Route-D", owner: "Dave" }))._context).toEqual({
      display: "Dave",
    });
  });

  test("a type without context fields has no _context; a read record PUT back is accepted", async () => {
    const cot = await makeCot(t, "ctxapinoctx", "ctx-api-no-ctx");
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    const made = await create(t, cot.slug, { name: "x" });
    expect(made).not.toHaveProperty("_context");
    const c = await create(t, withPrimary.slug, { name: "Route-E", owner: "Eve" });
    const put = await t.json("PUT", `${CO}/${withPrimary.slug}/${c.id}/`, {
      body: { ...c, owner: "Eva" },
    });
    expect(put.status).toBe(200);
    expect(put.body._context).toEqual({ display: "Eva" });
  });
});

describe("PEP 440 versions (test_api.py Pep440APIValidationTestCase)", () => {
  test("type version: invalid → 400 keyed version; valid accepted on create and PATCH", async () => {
    const bad = await t.json("POST", `${CO}/custom-object-types/`, {
      body: { name: "vertest", slug: "ver-test", version: "not-a-version" },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.version).toEqual([
      "'not-a-version' is not a valid version string (expected e.g. '1.0.0').",
    ]);
    const good = await t.json("POST", `${CO}/custom-object-types/`, {
      body: { name: "vertest2", slug: "ver-test-2", version: "1.2.3" },
    });
    expect(good.status).toBe(201);
    const cot = await makeCot(t, "pep440cot3", "pep440-cot-3");
    expect(
      (
        await t.json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
          body: { version: "2.0.0" },
        })
      ).status,
    ).toBe(200);
    for (const version of ["1.0rc1", "2!1.0.post2.dev3", "v1.0+local.7"]) {
      expect(
        (await t.json("PATCH", `${CO}/custom-object-types/${cot.id}/`, { body: { version } }))
          .status,
      ).toBe(200);
    }
  });

  test("field deprecated_since and scheduled_removal: invalid → 400 keyed by field", async () => {
    const cot = await makeCot(t, "pep440cot", "pep440-cot");
    const f = await addField(t, cot.id, { name: "alpha", type: "text" });
    const since = await t.json("PATCH", `${FIELDS}${f.id}/`, {
      body: { deprecated_since: "latest" },
    });
    expect(since.status).toBe(400);
    expect(Object.keys(since.body)).toEqual(["deprecated_since"]);
    const removal = await t.json("PATCH", `${FIELDS}${f.id}/`, {
      body: { scheduled_removal: "1.x.0" },
    });
    expect(Object.keys(removal.body)).toEqual(["scheduled_removal"]);
    const ok = await t.json("PATCH", `${FIELDS}${f.id}/`, {
      body: { deprecated: true, deprecated_since: "1.2", scheduled_removal: "2.0.0" },
    });
    expect(ok.status).toBe(200);
    expect([ok.body.deprecated, ok.body.deprecated_since, ok.body.scheduled_removal]).toEqual([
      true,
      "1.2",
      "2.0.0",
    ]);
  });

  test("schema documents check the same versions", async () => {
    const schema = {
      schema_version: "1",
      types: [
        {
          name: "ver_doc",
          slug: "ver-doc",
          version: "latest",
          fields: [{ id: 1, name: "a", type: "text", deprecated_since: "soon" }],
        },
      ],
    };
    const r = await t.json("POST", `${CO}/schema/preview/`, { body: { schema } });
    expect(r.status).toBe(400);
    expect(r.body.schema_errors.map((e: { path: string }) => e.path).sort()).toEqual([
      "$.types[0].fields[0].deprecated_since",
      "$.types[0].version",
    ]);
  });
});

describe("config context (test_api.py config_context_enabled, local_context_data)", () => {
  test("set at creation: objects carry local_context_data, written by POST and PATCH", async () => {
    const cot = await makeCot(t, "cc_api", "cc-api", { config_context_enabled: true });
    expect(cot).toMatchObject({ config_context_enabled: true });
    await addField(t, cot.id, { name: "name", type: "text", primary: true, required: true });
    const made = await create(t, cot.slug, {
      name: "obj-1",
      local_context_data: { ntp: ["10.0.0.1"] },
    });
    expect(made.local_context_data).toEqual({ ntp: ["10.0.0.1"] });
    const plain = await create(t, cot.slug, { name: "obj-2" });
    expect(plain.local_context_data).toBeNull();
    const patched = await t.json("PATCH", `${CO}/${cot.slug}/${plain.id}/`, {
      body: { local_context_data: { role: "edge" } },
    });
    expect(patched.status).toBe(200);
    expect((await t.json("GET", `${CO}/${cot.slug}/${plain.id}/`)).body.local_context_data).toEqual(
      { role: "edge" },
    );
    const bad = await t.json("PATCH", `${CO}/${cot.slug}/${plain.id}/`, {
      body: { local_context_data: [1] },
    });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body)).toEqual(["local_context_data"]);
  });

  test("immutable after creation; absent (and refused) when disabled", async () => {
    const cot = await makeCot(t, "cc_off", "cc-off");
    expect(
      (await t.json("GET", `${CO}/custom-object-types/${cot.id}/`)).body.config_context_enabled,
    ).toBe(false);
    const flip = await t.json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
      body: { config_context_enabled: true },
    });
    expect(flip.status).toBe(400);
    expect(flip.body.config_context_enabled).toEqual([
      "Config context support cannot be changed after creation.",
    ]);
    await addField(t, cot.id, { name: "name", type: "text" });
    const made = await create(t, cot.slug, { name: "x" });
    expect(made).not.toHaveProperty("local_context_data");
    const refused = await t.json("POST", `${CO}/${cot.slug}/`, {
      body: { name: "y", local_context_data: {} },
    });
    expect(refused.body.local_context_data).toEqual(["Unknown field."]);
  });
});

describe("display_expression (models.py _render_display_expression)", () => {
  test("fields by name; an empty rendering falls back to the primary field", async () => {
    const cot = await makeCot(t, "expr_type", "expr-type", {
      display_expression: "{{ name }} - {{ code }}{% if rack %} ({{ rack }}){% endif %}",
    });
    expect(cot).toMatchObject({
      display_expression: "{{ name }} - {{ code }}{% if rack %} ({{ rack }}){% endif %}",
    });
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    await addField(t, cot.id, { name: "code", type: "integer" });
    await addField(t, cot.id, { name: "rack", type: "text" });
    expect((await create(t, cot.slug, { name: "Edge", code: 7, rack: "R1" })).display).toBe(
      "Edge - 7 (R1)",
    );
    const plain = await create(t, cot.slug, { name: "Core" });
    expect(plain.display).toBe("Core -");
    const holder = await makeCot(t, "expr_holder");
    await addField(t, holder.id, {
      name: "thing",
      type: "object",
      related_object_type: `custom_objects.${cot.slug}`,
    });
    expect((await create(t, holder.slug, { thing: plain.id })).thing.display).toBe("Core -");
    const empty = await makeCot(t, "expr_empty", "expr-empty", {
      display_expression: "{{ nothing }}",
    });
    await addField(t, empty.id, { name: "name", type: "text", primary: true });
    expect((await create(t, empty.slug, { name: "Fallback" })).display).toBe("Fallback");
  });
});

describe("related_name (models.py CustomObjectTypeField.related_name)", () => {
  test("only object and multiobject fields take one; lowercase, no double underscores; unique per related type", async () => {
    const cot = await makeCot(t, "rel_names");
    const onText = await field({
      custom_object_type: cot.id,
      name: "t",
      type: "text",
      related_name: "things",
    });
    expect(onText.status).toBe(400);
    expect(Object.keys(onText.body)).toEqual(["related_name"]);
    for (const related_name of ["Things", "my__things"]) {
      const r = await field({
        custom_object_type: cot.id,
        name: "s",
        type: "object",
        related_object_type: "dcim.site",
        related_name,
      });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual(["related_name"]);
    }
    const ok = await field({
      custom_object_type: cot.id,
      name: "s",
      type: "object",
      related_object_type: "dcim.site",
      related_name: "rel_things",
    });
    expect(ok.status).toBe(201);
    expect(ok.body.related_name).toBe("rel_things");
    const other = await makeCot(t, "rel_names_2");
    const clash = await field({
      custom_object_type: other.id,
      name: "s",
      type: "multiobject",
      related_object_type: "dcim.site",
      related_name: "rel_things",
    });
    expect(clash.status).toBe(400);
    expect(clash.body.related_name[0]).toContain("already used");
  });
});

describe("polymorphic fields (test_polymorphic_fields.py PolymorphicFieldAPITest)", () => {
  let cot: { id: number; slug: string };
  let polyObj: { id: number };
  let siteId: number;
  let prefixId: number;
  let siteCt: number;
  let prefixCt: number;
  beforeAll(async () => {
    siteId = (await site("Poly Site")).id;
    const p = await t.json("POST", "/api/ipam/prefixes/", {
      body: { prefix: "10.0.0.0/8", status: "active" },
    });
    prefixId = p.body.id;
    const ot = async (app: string, model: string) =>
      (await t.json("GET", `/api/core/object-types/?app_label=${app}&model=${model}`)).body
        .results[0].id as number;
    siteCt = await ot("dcim", "site");
    prefixCt = await ot("ipam", "prefix");
    cot = await makeCot(t, "polytest", "poly-test", { verbose_name_plural: "Poly Tests" });
    await addField(t, cot.id, {
      name: "name",
      label: "Name",
      type: "text",
      primary: true,
      required: true,
    });
    polyObj = await addField(t, cot.id, {
      name: "poly_obj",
      label: "Poly Obj",
      type: "object",
      is_polymorphic: true,
      related_object_types_input: [
        { app_label: "dcim", model: "site" },
        { app_label: "ipam", model: "prefix" },
      ],
    });
    await addField(t, cot.id, {
      name: "poly_multi",
      label: "Poly Multi",
      type: "multiobject",
      is_polymorphic: true,
      related_object_types: ["dcim.site", "ipam.prefix"],
    });
  });

  test("a polymorphic field needs its related types; its record lists them", async () => {
    expect(
      (
        await field({
          custom_object_type: cot.id,
          name: "bad_poly",
          type: "object",
          is_polymorphic: true,
        })
      ).status,
    ).toBe(400);
    const r = await t.json("GET", `${FIELDS}${polyObj.id}/`);
    expect(r.body.is_polymorphic).toBe(true);
    expect(
      r.body.related_object_types
        .map((x: { app_label: string; model: string }) => `${x.app_label}.${x.model}`)
        .sort(),
    ).toEqual(["dcim.site", "ipam.prefix"]);
  });

  test("is_polymorphic, the related types and app_label+model cannot change after creation", async () => {
    expect(
      (await t.json("PATCH", `${FIELDS}${polyObj.id}/`, { body: { is_polymorphic: false } }))
        .status,
    ).toBe(400);
    expect(
      (
        await t.json("PATCH", `${FIELDS}${polyObj.id}/`, {
          body: { related_object_types_input: [{ app_label: "dcim", model: "site" }] },
        })
      ).status,
    ).toBe(400);
    const same = await t.json("PATCH", `${FIELDS}${polyObj.id}/`, {
      body: {
        related_object_types_input: [
          { app_label: "ipam", model: "prefix" },
          { app_label: "dcim", model: "site" },
        ],
      },
    });
    expect(same.status).toBe(200);
    const single = await addField(t, cot.id, {
      name: "single_obj",
      type: "object",
      app_label: "dcim",
      model: "site",
    });
    const moved = await t.json("PATCH", `${FIELDS}${single.id}/`, {
      body: { app_label: "ipam", model: "prefix" },
    });
    expect(moved.status).toBe(400);
    expect((await t.json("GET", `${FIELDS}${single.id}/`)).body.related_object_type).toMatchObject({
      app_label: "dcim",
      model: "site",
    });
  });

  test("a duplicate name, or a rename onto another field, is refused", async () => {
    expect(
      (
        await field({
          custom_object_type: cot.id,
          name: "poly_obj",
          type: "object",
          is_polymorphic: true,
          related_object_types: ["dcim.site"],
        })
      ).status,
    ).toBe(400);
    expect(
      (await t.json("PATCH", `${FIELDS}${polyObj.id}/`, { body: { name: "poly_multi" } })).status,
    ).toBe(400);
  });

  test("objects: site and prefix values, read with _content_type, cleared by null", async () => {
    const a = await create(t, cot.slug, {
      name: "gfk-test-obj",
      poly_obj: { content_type_id: siteCt, object_id: siteId },
    });
    expect(a.poly_obj).toMatchObject({
      _content_type: "dcim.site",
      object_type: "dcim.site",
      id: siteId,
    });
    const b = await create(t, cot.slug, {
      name: "gfk-prefix-obj",
      poly_obj: { content_type_id: prefixCt, object_id: prefixId },
    });
    expect(b.poly_obj).toMatchObject({ _content_type: "ipam.prefix", id: prefixId });
    const cleared = await t.json("PATCH", `${CO}/${cot.slug}/${a.id}/`, {
      body: { poly_obj: null },
    });
    expect(cleared.status).toBe(200);
    expect(cleared.body.poly_obj).toBeNull();
  });

  test("multiobject values: created, read, replaced, cleared by null", async () => {
    const m = await create(t, cot.slug, {
      name: "m2m",
      poly_multi: [
        { content_type_id: siteCt, object_id: siteId },
        { content_type_id: prefixCt, object_id: prefixId },
      ],
    });
    expect(m.poly_multi.map((x: { _content_type: string }) => x._content_type).sort()).toEqual([
      "dcim.site",
      "ipam.prefix",
    ]);
    const replaced = await t.json("PATCH", `${CO}/${cot.slug}/${m.id}/`, {
      body: { poly_multi: [{ content_type_id: prefixCt, object_id: prefixId }] },
    });
    expect(replaced.body.poly_multi.map((x: { id: number }) => x.id)).toEqual([prefixId]);
    const cleared = await t.json("PATCH", `${CO}/${cot.slug}/${m.id}/`, {
      body: { poly_multi: null },
    });
    expect(cleared.body.poly_multi).toEqual([]);
  });

  test("an unknown or disallowed type is refused, single and multi", async () => {
    expect(
      (
        await t.json("POST", `${CO}/${cot.slug}/`, {
          body: { name: "x", poly_obj: { content_type_id: 999999, object_id: 1 } },
        })
      ).status,
    ).toBe(400);
    const tenant = await t.json("POST", "/api/tenancy/tenants/", {
      body: { name: "Poly Tenant", slug: "poly-tenant" },
    });
    for (const body of [
      { poly_obj: { app_label: "tenancy", model: "tenant", object_id: tenant.body.id } },
      { poly_multi: [{ app_label: "tenancy", model: "tenant", object_id: tenant.body.id }] },
    ]) {
      const r = await t.json("POST", `${CO}/${cot.slug}/`, { body: { name: "x", ...body } });
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body)).toContain(
        'Object type \\"tenancy.tenant\\" is not allowed for this field.',
      );
    }
  });

  test("deleting objects with polymorphic values, set or empty", async () => {
    const a = await create(t, cot.slug, {
      name: "del-a",
      poly_obj: { object_type: "dcim.site", id: siteId },
      poly_multi: [{ object_type: "ipam.prefix", id: prefixId }],
    });
    const b = await create(t, cot.slug, { name: "del-b" });
    for (const o of [a, b])
      expect((await t.json("DELETE", `${CO}/${cot.slug}/${o.id}/`)).status).toBe(204);
  });
});

describe("context and primary (test_field_types.py ContextFieldValidationTestCase)", () => {
  test("a field cannot be both primary and context; either alone is fine", async () => {
    const cot = await makeCot(t, "ctxvalidationcot", "ctx-validation-cot");
    const dual = await field({
      custom_object_type: cot.id,
      name: "dual",
      type: "text",
      primary: true,
      context: true,
    });
    expect(dual.status).toBe(400);
    expect(dual.body.context).toEqual(["A field cannot be both primary and context."]);
    expect(
      (
        await field({
          custom_object_type: cot.id,
          name: "primaryonly",
          type: "text",
          primary: true,
        })
      ).status,
    ).toBe(201);
    expect(
      (
        await field({
          custom_object_type: cot.id,
          name: "contextonly",
          type: "text",
          context: true,
        })
      ).status,
    ).toBe(201);
  });
});

describe("schema preview and apply (schema/test_schema_api.py)", () => {
  const preview = (schema: unknown) => t.json("POST", `${CO}/schema/preview/`, { body: schema });
  const apply = (schema: unknown, allow_destructive = false) =>
    t.json("POST", `${CO}/schema/apply/`, { body: { schema, allow_destructive } });
  const exported = async (slug: string) =>
    (await t.json("GET", `${CO}/schema/export/?slug=${slug}`)).body.types[0];
  const nextId = (type: { fields: { id: number }[] }) =>
    Math.max(0, ...type.fields.map((f) => f.id)) + 1;
  let cot: { id: number; slug: string };
  beforeAll(async () => {
    cot = await makeCot(t, "previewcot", "preview-cot");
    await addField(t, cot.id, { name: "alpha", type: "text" });
  });

  test("preview of the exported type (the bare document as body): 200, one diff, no changes", async () => {
    const r = await preview({ schema_version: "1", types: [await exported(cot.slug)] });
    expect(r.status).toBe(200);
    expect(r.body.diffs).toHaveLength(1);
    expect(r.body.diffs[0].has_changes).toBe(false);
  });

  test("preview detects an added and an altered field, and changes nothing", async () => {
    const type = await exported(cot.slug);
    const added = await preview({
      schema_version: "1",
      types: [
        { ...type, fields: [...type.fields, { id: nextId(type), name: "ghost", type: "text" }] },
      ],
    });
    expect(added.body.diffs[0].has_changes).toBe(true);
    expect(added.body.diffs[0].field_changes.map((c: { op: string }) => c.op)).toContain("add");
    const altered = await preview({
      schema_version: "1",
      types: [
        { ...type, fields: type.fields.map((f: object) => ({ ...f, description: "changed" })) },
      ],
    });
    const alters = altered.body.diffs[0].field_changes.filter(
      (c: { op: string }) => c.op === "alter",
    );
    expect(alters).toHaveLength(1);
    expect(alters[0].changed_attrs).toHaveProperty("description");
    const fields = (await t.json("GET", `${CO}/custom-object-types/${cot.id}/`)).body.fields.map(
      (f: { name: string }) => f.name,
    );
    expect(fields).toEqual(["alpha"]);
  });

  // Every removal is destructive, as upstream has it (decision 0075); the row below gives the
  // counted impact something to count.
  test("a new type is reported as new; a removal previews without error", async () => {
    await create(t, cot.slug, { alpha: "kept" });
    expect(
      (await preview({ schema_version: "1", types: [{ name: "brandnew", slug: "brand-new" }] }))
        .body.diffs[0].is_new,
    ).toBe(true);
    const type = await exported(cot.slug);
    const removal = await preview({
      schema_version: "1",
      types: [
        {
          ...type,
          fields: [],
          removed_fields: type.fields.map((f: { id: number; name: string; type: string }) => ({
            id: f.id,
            name: f.name,
            type: f.type,
          })),
        },
      ],
    });
    expect(removal.status).toBe(200);
    expect(removal.body.destructive_changes.length).toBeGreaterThan(0);
  });

  test("apply: a new type, then an added field; a removal is 409 (nothing removed) until allow_destructive", async () => {
    expect(
      (await apply({ schema_version: "1", types: [{ name: "applynew", slug: "apply-new" }] }))
        .status,
    ).toBe(200);
    const made = (await t.json("GET", `${CO}/custom-object-types/?slug=apply-new`)).body.results[0];
    expect(made.schema_document).toMatchObject({ slug: "apply-new" });
    let type = await exported("apply-new");
    const added = await apply({
      schema_version: "1",
      types: [{ ...type, fields: [{ id: nextId(type), name: "bye", type: "text" }] }],
    });
    expect(added.status).toBe(200);
    expect(added.body.diffs[0].slug).toBe("apply-new");
    await create(t, "apply-new", { bye: "value" });
    type = await exported("apply-new");
    const removal = {
      schema_version: "1",
      types: [
        {
          ...type,
          fields: [],
          removed_fields: [{ id: type.fields[0].id, name: "bye", type: "text" }],
        },
      ],
    };
    const refused = await apply(removal);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe("destructive_changes");
    expect(refused.body.destructive_slugs).toContain("apply-new");
    expect((await exported("apply-new")).fields).toHaveLength(1);
    expect((await apply(removal, true)).status).toBe(200);
    expect((await exported("apply-new")).fields).toHaveLength(0);
  });

  test("bad requests: no schema, a schema that is not an object, allow_destructive as a string, unresolvable references", async () => {
    expect(
      (await t.json("POST", `${CO}/schema/apply/`, { body: { allow_destructive: false } })).status,
    ).toBe(400);
    expect(
      (
        await t.json("POST", `${CO}/schema/apply/`, {
          body: { schema: "not a dict", allow_destructive: false },
        })
      ).status,
    ).toBe(400);
    expect(
      (
        await t.json("POST", `${CO}/schema/apply/`, {
          body: { schema: { schema_version: "1", types: [] }, allow_destructive: "yes" },
        })
      ).status,
    ).toBe(400);
    const ghostType = await apply({
      schema_version: "1",
      types: [
        {
          name: "ghost_ref",
          slug: "ghost-ref",
          fields: [{ id: 1, name: "x", type: "object", related_object_type: "dcim/nothing" }],
        },
      ],
    });
    expect(ghostType.status).toBe(400);
    const ghostChoices = await apply({
      schema_version: "1",
      types: [
        {
          name: "ghost_cs",
          slug: "ghost-cs",
          fields: [{ id: 1, name: "x", type: "select", choice_set: "no-such-set" }],
        },
      ],
    });
    expect(ghostChoices.status).toBe(400);
  });

  test("unauthenticated preview and apply: 403", async () => {
    expect(
      (
        await t.json("POST", `${CO}/schema/preview/`, {
          body: { schema_version: "1", types: [] },
          token: null,
        })
      ).status,
    ).toBe(403);
    expect(
      (
        await t.json("POST", `${CO}/schema/apply/`, {
          body: { schema: { schema_version: "1", types: [] } },
          token: null,
        })
      ).status,
    ).toBe(403);
  });
});

describe("values per field type (test_field_types.py *FieldTypeTestCase validation)", () => {
  let slug: string;
  beforeAll(async () => {
    const cs = await choiceSet(t, "parity_choices", ["choice1", "choice2", "choice3"]);
    const cot = await makeCot(t, "typed_values", "typed-values");
    slug = cot.slug;
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    await addField(t, cot.id, {
      name: "description",
      type: "text",
      validation_regex: "^[A-Za-z ]+$",
    });
    await addField(t, cot.id, {
      name: "count",
      type: "integer",
      validation_minimum: 0,
      validation_maximum: 100,
    });
    await addField(t, cot.id, {
      name: "price",
      type: "decimal",
      validation_minimum: 0,
      validation_maximum: 1000,
    });
    await addField(t, cot.id, { name: "active", type: "boolean", default: true });
    await addField(t, cot.id, { name: "created_date", type: "date" });
    await addField(t, cot.id, { name: "created_datetime", type: "datetime" });
    await addField(t, cot.id, { name: "website", type: "url", validation_regex: "^https://.*" });
    await addField(t, cot.id, {
      name: "status",
      type: "select",
      choice_set: cs.id,
      default: "choice1",
    });
    await addField(t, cot.id, { name: "labels", type: "multiselect", choice_set: cs.id });
  });

  test("good values are stored; defaults fill omitted fields", async () => {
    const made = await create(t, slug, {
      name: "Test",
      description: "Test description",
      count: 50,
      price: 99.5,
      created_date: "2024-01-15",
      created_datetime: "2024-01-15T10:30:00Z",
      website: "https://example.com",
      labels: ["choice1", "choice3"],
    });
    expect(made).toMatchObject({
      count: 50,
      price: 99.5,
      active: true,
      created_date: "2024-01-15",
      website: "https://example.com",
      status: "choice1",
      labels: ["choice1", "choice3"],
    });
  });

  const refused: Array<[string, unknown]> = [
    ["description", "Invalid123"],
    ["count", -1],
    ["count", 101],
    ["count", "not a number"],
    ["price", -0.01],
    ["price", 1000.01],
    ["price", "abc"],
    ["active", "not a boolean"],
    ["created_date", "not-a-date"],
    ["created_datetime", "not-a-datetime"],
    ["website", "http://example.com"],
    ["status", "invalid_choice"],
    ["labels", ["choice1", "invalid_choice"]],
  ];
  for (const [key, value] of refused) {
    test(`${key}=${JSON.stringify(value)} → 400 keyed by ${key}`, async () => {
      const r = await t.json("POST", `${CO}/${slug}/`, { body: { name: "Bad", [key]: value } });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual([key]);
    });
  }

  test("moving primary to another field changes display (PrimaryFieldChangeTestCase)", async () => {
    const cot = await makeCot(t, "primary_move");
    const first = await addField(t, cot.id, { name: "name", type: "text", primary: true });
    const second = await addField(t, cot.id, { name: "label", type: "text" });
    const made = await create(t, cot.slug, { name: "OldPrimary", label: "NewPrimary" });
    expect(made.display).toBe("OldPrimary");
    expect(
      (await t.json("PATCH", `${FIELDS}${first.id}/`, { body: { primary: false } })).status,
    ).toBe(200);
    expect(
      (await t.json("PATCH", `${FIELDS}${second.id}/`, { body: { primary: true } })).status,
    ).toBe(200);
    expect((await t.json("GET", `${CO}/${cot.slug}/${made.id}/`)).body.display).toBe("NewPrimary");
  });

  test("two object fields and a multiobject field to the same type (MultipleObjectFieldsToSameCOTTestCase)", async () => {
    const target = await makeCot(t, "same_target");
    await addField(t, target.id, { name: "name", type: "text", primary: true });
    const a = await create(t, target.slug, { name: "A" });
    const b = await create(t, target.slug, { name: "B" });
    const holder = await makeCot(t, "same_holder");
    for (const [name, type] of [
      ["first", "object"],
      ["second", "object"],
      ["many", "multiobject"],
    ] as const)
      await addField(t, holder.id, {
        name,
        type,
        related_object_type: `custom_objects.${target.slug}`,
      });
    const made = await create(t, holder.slug, { first: a.id, second: b.id, many: [a.id, b.id] });
    expect([
      made.first.display,
      made.second.display,
      made.many.map((x: { display: string }) => x.display),
    ]).toEqual(["A", "B", ["A", "B"]]);
  });
});
