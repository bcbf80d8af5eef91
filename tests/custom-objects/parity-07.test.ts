/**
 * Issue 29, point 6: what custom objects 0.7 clients send and read (netboxlabs/netbox-custom-
 * objects: YAML schema interchange, the internal model name as a related type, Django's boolean
 * spellings, polymorphic values the caller may not view). Coordinates: parity-api.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { parse } from "yaml";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, create, makeCot } from "./fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const SCHEMA_YAML = `schema_version: "1"
types:
  - name: yaml_box
    slug: yaml_box
    fields:
      - id: 1
        name: code
        type: text
        primary: true
      - id: 2
        name: active
        type: boolean
`;

describe("schema documents in YAML (preview, apply, export)", () => {
  test("preview and apply take application/yaml; the answer follows Accept", async () => {
    const preview = await t.req("POST", `${CO}/schema/preview/`, {
      raw: SCHEMA_YAML,
      headers: { "content-type": "application/yaml", accept: "application/yaml" },
    });
    expect(preview.status).toBe(200);
    expect(preview.headers.get("content-type")).toContain("application/yaml");
    const diffs = parse(await preview.text()).diffs;
    expect(diffs[0]).toMatchObject({ slug: "yaml_box", is_new: true });
    const applied = await t.req("POST", `${CO}/schema/apply/`, {
      raw: SCHEMA_YAML,
      headers: { "content-type": "application/yaml" },
    });
    expect(applied.status).toBe(200);
    expect(applied.headers.get("content-type")).toContain("application/json");
    expect(((await applied.json()) as any).applied).toBe(true);
  });

  test("export answers YAML for Accept: application/yaml, and it applies back with no changes", async () => {
    const r = await t.req("GET", `${CO}/schema/export/?slug=yaml_box`, {
      headers: { accept: "application/yaml" },
    });
    expect(r.headers.get("content-type")).toContain("application/yaml");
    const text = await r.text();
    expect(parse(text).types[0].slug).toBe("yaml_box");
    const again = await t.req("POST", `${CO}/schema/apply/`, {
      raw: text,
      headers: { "content-type": "application/yaml" },
    });
    expect(((await again.json()) as any).diffs[0].has_changes).toBe(false);
    // JSON stays the default
    const json = await t.req("GET", `${CO}/schema/export/?slug=yaml_box`);
    expect(json.headers.get("content-type")).toContain("application/json");
  });

  test("bad YAML is a 400 invalid_schema, never a 500; aliases and nesting are bounded", async () => {
    const laughs = [
      'a: &a ["x","x","x","x","x","x","x","x","x"]',
      ...Array.from({ length: 12 }, (_, i) => {
        const prev = i === 0 ? "a" : `b${i - 1}`;
        return `b${i}: &b${i} [${Array(9).fill(`*${prev}`).join(",")}]`;
      }),
    ].join("\n");
    for (const raw of ["types: [unclosed", laughs, `${"[".repeat(5000)}${"]".repeat(5000)}`]) {
      const r = await t.json("POST", `${CO}/schema/preview/`, {
        raw,
        headers: { "content-type": "application/yaml" },
      } as any);
      expect(r.status).toBe(400);
      expect(r.body.error).toBe("invalid_schema");
    }
  });
});

describe("values and references as upstream 0.7 writes them", () => {
  test("boolean fields take 1/0 and Django's strings on write, and read back as booleans", async () => {
    const made = await create(t, "yaml_box", { code: "b1", active: 1 });
    expect(made.active).toBe(true);
    const off = await t.json("PATCH", `${CO}/yaml_box/${made.id}/`, { body: { active: 0 } });
    expect(off.body.active).toBe(false);
    for (const [raw, want] of [
      ["1", true],
      ["0", false],
      ["yes", true],
      ["off", false],
      ["True", true],
    ] as const) {
      const r = await t.json("PATCH", `${CO}/yaml_box/${made.id}/`, { body: { active: raw } });
      expect(r.body.active).toBe(want);
    }
    for (const bad of [2, "maybe", -1]) {
      const r = await t.json("PATCH", `${CO}/yaml_box/${made.id}/`, { body: { active: bad } });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual(["active"]);
    }
  });

  test("related_object_type as the internal model name {app_label, model: table<id>model}, either app label spelling", async () => {
    const target = await makeCot(t, "internal_target");
    const holder = await makeCot(t, "internal_holder");
    for (const [name, app_label] of [
      ["one", "custom-objects"],
      ["two", "custom_objects"],
    ] as const) {
      const r = await t.json("POST", `${CO}/custom-object-type-fields/`, {
        body: {
          custom_object_type: holder.id,
          name,
          type: "object",
          related_object_type: { app_label, model: `table${target.id}model` },
        },
      });
      expect(r.status).toBe(201);
      expect(r.body.related_object_type).toMatchObject({
        app_label: "custom_objects",
        model: "internal_target",
      });
    }
    const unknown = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: {
        custom_object_type: holder.id,
        name: "three",
        type: "object",
        related_object_type: { app_label: "custom_objects", model: "table999999model" },
      },
    });
    expect(unknown.status).toBe(400);
  });

  test("a polymorphic value the caller may not view keeps object_type beside its id (host models); a custom object type they cannot view stays unnamed", async () => {
    const hidden = await makeCot(t, "poly_hidden");
    const holder = await makeCot(t, "poly_holder");
    await addField(t, holder.id, {
      name: "thing",
      type: "object",
      is_polymorphic: true,
      related_object_types: ["dcim.site", `custom_objects.${hidden.slug}`],
    });
    const site = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Poly site", slug: "poly-site" },
    });
    const secret = await create(t, hidden.slug, {});
    const a = await create(t, holder.slug, {
      thing: { object_type: "dcim.site", id: site.body.id },
    });
    const b = await create(t, holder.slug, {
      thing: { object_type: `custom_objects.${hidden.slug}`, id: secret.id },
    });
    const reader = await t.user("poly-reader", [[["view"], `custom_objects.${holder.slug}`]]);
    const one = await t.json("GET", `${CO}/${holder.slug}/${a.id}/`, { token: reader });
    expect(one.body.thing).toEqual({ object_type: "dcim.site", id: site.body.id });
    const two = await t.json("GET", `${CO}/${holder.slug}/${b.id}/`, { token: reader });
    expect(two.body.thing).toEqual({ id: secret.id });
    expect(JSON.stringify(two.body)).not.toContain(hidden.slug);
  });
});
