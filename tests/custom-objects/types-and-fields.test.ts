import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, choiceSet, create, makeCot } from "./fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const tables = async () =>
  (
    await t.deps.db.client.execute(
      "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'co_%'",
    )
  ).rows.map((r) => String(r.name));
const columns = async (table: string) =>
  (await t.deps.db.client.execute(`PRAGMA table_info("${table}")`)).rows.map((r) => String(r.name));

describe("custom object types", () => {
  test("record shape (§5 rule 3) and a real table per type", async () => {
    const cot = await makeCot(t, "widget", "widget", {
      verbose_name: "Widget",
      description: "d",
      schema_document: { a: 1 },
    });
    const r = await t.json("GET", `${CO}/custom-object-types/${cot.id}/`);
    for (const key of [
      "id",
      "url",
      "display",
      "name",
      "slug",
      "verbose_name",
      "verbose_name_plural",
      "version",
      "group_name",
      "description",
      "tags",
      "created",
      "last_updated",
      "schema_document",
      "fields",
      "object_type",
    ]) {
      expect(r.body).toHaveProperty(key);
    }
    expect(r.body.schema_document).toEqual({ a: 1 });
    expect(r.body.object_type).toMatchObject({ app_label: "custom_objects", model: "widget" });
    expect(await tables()).toContain(`co_${cot.id}`);
    const ots = await t.json(
      "GET",
      "/api/core/object-types/?app_label=custom_objects&model=widget",
    );
    expect(ots.body.count).toBe(1);
    const root = await t.json("GET", `${CO}/`);
    expect(root.body.widget).toBe(`http://host.test${CO}/widget/`);
  });

  test("validation: name and slug patterns, reserved route names, uniqueness", async () => {
    const bad = await t.json("POST", `${CO}/custom-object-types/`, {
      body: { name: "Bad Name", slug: "bad slug" },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.name).toBeDefined();
    expect(bad.body.slug).toBeDefined();
    for (const slug of [
      "linked-objects",
      "schema",
      "custom-object-types",
      "custom-object-type-fields",
    ]) {
      const r = await t.json("POST", `${CO}/custom-object-types/`, {
        body: { name: `n_${slug.replace(/-/g, "_")}`, slug },
      });
      expect(r.status).toBe(400);
      expect(r.body.slug[0]).toContain("reserved");
    }
    const dup = await t.json("POST", `${CO}/custom-object-types/`, {
      body: { name: "widget_two", slug: "widget" },
    });
    expect(dup.status).toBe(400);
    expect(dup.body.slug).toBeDefined();
    expect(
      (
        await t.json("POST", `${CO}/custom-object-types/`, {
          body: { name: "x1", slug: "x1", extra: 1 },
        })
      ).body.extra,
    ).toEqual(["Unknown field."]);
  });

  test("renaming a slug keeps the id, table, data and object type id", async () => {
    const cot = await makeCot(t, "gadget");
    await addField(t, cot.id, { name: "label", type: "text" });
    const obj = await create(t, "gadget", { label: "kept" });
    const r = await t.json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
      body: { slug: "gizmo" },
    });
    expect(r.status).toBe(200);
    expect(r.body.object_type.id).toBe(cot.object_type.id);
    expect(r.body.object_type.model).toBe("gizmo");
    expect((await t.req("GET", `${CO}/gadget/`)).status).toBe(404);
    const moved = await t.json("GET", `${CO}/gizmo/${obj.id}/`);
    expect(moved.body.label).toBe("kept");
    expect(moved.body.url).toBe(`http://host.test${CO}/gizmo/${obj.id}/`);
    expect(await tables()).toContain(`co_${cot.id}`);
  });

  test("deleting a type drops its table and object type", async () => {
    const cot = await makeCot(t, "doomed");
    await addField(t, cot.id, {
      name: "links",
      type: "multiobject",
      related_object_type: "dcim.site",
    });
    expect((await t.req("DELETE", `${CO}/custom-object-types/${cot.id}/`)).status).toBe(204);
    expect(await tables()).not.toContain(`co_${cot.id}`);
    expect((await tables()).some((n) => n.startsWith(`co_${cot.id}_`))).toBe(false);
    expect((await t.json("GET", "/api/core/object-types/?model=doomed")).body.count).toBe(0);
    expect((await t.req("GET", `${CO}/doomed/`)).status).toBe(404);
  });

  test("a type other types point at cannot be deleted (409), nothing changes", async () => {
    const target = await makeCot(t, "target_t");
    const source = await makeCot(t, "source_t");
    await addField(t, source.id, {
      name: "tgt",
      type: "object",
      related_object_type: "custom_objects.target_t",
    });
    const r = await t.json("DELETE", `${CO}/custom-object-types/${target.id}/`);
    expect(r.status).toBe(409);
    expect(await tables()).toContain(`co_${target.id}`);
  });

  test("tags scoped to custom_objects.customobjecttype go on COTs and are refused elsewhere", async () => {
    const tag = await t.json("POST", "/api/extras/tags/", {
      body: {
        name: "Schema",
        slug: "schema-tag",
        object_types: ["custom_objects.customobjecttype"],
      },
    });
    const cot = await makeCot(t, "tagged_type", "tagged_type", { tags: [tag.body.id] });
    const r = await t.json("GET", `${CO}/custom-object-types/${cot.id}/`);
    expect(r.body.tags.map((x: any) => x.slug)).toEqual(["schema-tag"]);
    const refused = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "tg", slug: "tg", tags: [tag.body.id] },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.tags).toBeDefined();
  });
});

describe("fields", () => {
  let cot: { id: number; slug: string };
  beforeAll(async () => {
    cot = await makeCot(t, "field_lab");
    await choiceSet(t, "lab-colours", ["red", "green"]);
  });

  test("record shape (§5 rule 4), schema_id per COT, monotonic and never reused", async () => {
    const a = await addField(t, cot.id, { name: "alpha", type: "text" });
    const b = await addField(t, cot.id, { name: "beta", type: "integer" });
    expect(b.schema_id).toBe(a.schema_id + 1);
    expect((await t.req("DELETE", `${CO}/custom-object-type-fields/${b.id}/`)).status).toBe(204);
    const c = await addField(t, cot.id, { name: "gamma", type: "text" });
    expect(c.schema_id).toBe(b.schema_id + 1);
    const r = await t.json("GET", `${CO}/custom-object-type-fields/${a.id}/`);
    for (const key of [
      "id",
      "url",
      "display",
      "custom_object_type",
      "name",
      "label",
      "description",
      "type",
      "primary",
      "required",
      "unique",
      "default",
      "choice_set",
      "validation_regex",
      "validation_minimum",
      "validation_maximum",
      "is_polymorphic",
      "related_object_type",
      "related_object_types",
      "related_object_filter",
      "on_delete_behavior",
      "group_name",
      "search_weight",
      "filter_logic",
      "ui_visible",
      "ui_editable",
      "weight",
      "is_cloneable",
      "schema_id",
      "deprecated",
      "deprecated_since",
      "scheduled_removal",
      "created",
      "last_updated",
    ]) {
      expect(r.body).toHaveProperty(key);
    }
    expect(r.body.custom_object_type).toBe(cot.id);
    const ro = await t.json("PATCH", `${CO}/custom-object-type-fields/${a.id}/`, {
      body: { schema_id: 99 },
    });
    expect(ro.body.schema_id).toBe(a.schema_id); // read-only
    // another COT counts from 1
    const other = await makeCot(t, "other_lab");
    expect((await addField(t, other.id, { name: "x", type: "text" })).schema_id).toBe(1);
  });

  test.each([
    [{ name: "Bad-Name", type: "text" }, "name"],
    [{ name: "id", type: "text" }, "name"],
    [{ name: "tags", type: "text" }, "name"],
    [{ name: "custom_object_type", type: "text" }, "name"],
    [{ name: "ok1", type: "colour" }, "type"],
    [{ name: "ok2", type: "text", validation_minimum: 1 }, "validation_minimum"],
    [{ name: "ok3", type: "integer", validation_regex: "^a$" }, "validation_regex"],
    [{ name: "ok4", type: "text", validation_regex: "(" }, "validation_regex"],
    [{ name: "ok5", type: "select" }, "choice_set"],
    [{ name: "ok6", type: "text", choice_set: "lab-colours" }, "choice_set"],
    [{ name: "ok7", type: "object" }, "related_object_type"],
    [{ name: "ok8", type: "object", related_object_type: "users.token" }, "related_object_type"],
    [{ name: "ok9", type: "object", related_object_type: "nope.nothing" }, "related_object_type"],
    [
      { name: "ok10", type: "object", is_polymorphic: true, related_object_types: [] },
      "related_object_types",
    ],
    [{ name: "ok11", type: "text", related_object_type: "dcim.site" }, "related_object_type"],
    [{ name: "ok12", type: "integer", default: "many" }, "default"],
    [{ name: "ok13", type: "select", choice_set: "lab-colours", default: "blue" }, "default"],
    [
      { name: "ok14", type: "integer", validation_minimum: 5, validation_maximum: 1 },
      "validation_maximum",
    ],
    [
      { name: "ok15", type: "multiobject", related_object_type: "dcim.site", unique: true },
      "unique",
    ],
    [{ name: "ok16", type: "text", on_delete_behavior: "explode" }, "on_delete_behavior"],
  ])("invalid definition %j → 400 on %s", async (body, key) => {
    const r = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: cot.id, ...body },
    });
    expect(r.status).toBe(400);
    expect(r.body[key]).toBeDefined();
  });

  test("primary on at most one field; name collisions with object columns are refused", async () => {
    const lab = await makeCot(t, "primary_lab");
    await addField(t, lab.id, { name: "first", type: "text", primary: true });
    const second = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: lab.id, name: "second", type: "text", primary: true },
    });
    expect(second.status).toBe(400);
    expect(second.body.primary).toBeDefined();
    await addField(t, lab.id, { name: "site", type: "object", related_object_type: "dcim.site" });
    const clash = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: lab.id, name: "site_id", type: "text" },
    });
    expect(clash.status).toBe(400);
    expect(clash.body.name).toBeDefined();
  });

  test("is_polymorphic and related types are immutable", async () => {
    const lab = await makeCot(t, "immut_lab");
    const f = await addField(t, lab.id, {
      name: "dev",
      type: "object",
      related_object_type: "dcim.device",
    });
    const r1 = await t.json("PATCH", `${CO}/custom-object-type-fields/${f.id}/`, {
      body: { related_object_type: "dcim.site" },
    });
    expect(r1.status).toBe(400);
    const r2 = await t.json("PATCH", `${CO}/custom-object-type-fields/${f.id}/`, {
      body: { is_polymorphic: true, related_object_types: ["dcim.site"] },
    });
    expect(r2.status).toBe(400);
    const r3 = await t.json("PATCH", `${CO}/custom-object-type-fields/${f.id}/`, {
      body: { type: "text" },
    });
    expect(r3.status).toBe(400);
  });

  test("add, rename, alter and delete change the table in place, keeping data", async () => {
    const lab = await makeCot(t, "ddl_lab");
    const f = await addField(t, lab.id, { name: "size", type: "text" });
    await create(t, "ddl_lab", { size: "42" });
    await create(t, "ddl_lab", { size: "7" });
    expect(await columns(`co_${lab.id}`)).toContain("size");
    const renamed = await t.json("PATCH", `${CO}/custom-object-type-fields/${f.id}/`, {
      body: { name: "capacity" },
    });
    expect(renamed.status).toBe(200);
    expect(await columns(`co_${lab.id}`)).toContain("capacity");
    expect(await columns(`co_${lab.id}`)).not.toContain("size");
    // text → integer converts numeric strings
    const retyped = await t.json("PATCH", `${CO}/custom-object-type-fields/${f.id}/`, {
      body: { type: "integer", validation_minimum: 0 },
    });
    expect(retyped.status).toBe(200);
    const list = await t.json("GET", `${CO}/ddl_lab/?ordering=capacity`);
    expect(list.body.results.map((o: any) => o.capacity)).toEqual([7, 42]);
    expect((await t.json("GET", `${CO}/ddl_lab/?capacity__gt=10`)).body.count).toBe(1);
    // adding a field with a default fills existing rows
    await addField(t, lab.id, { name: "enabled", type: "boolean", default: true });
    expect((await t.json("GET", `${CO}/ddl_lab/?enabled=true`)).body.count).toBe(2);
    expect((await t.req("DELETE", `${CO}/custom-object-type-fields/${f.id}/`)).status).toBe(204);
    expect(await columns(`co_${lab.id}`)).not.toContain("capacity");
    expect((await t.json("GET", `${CO}/ddl_lab/`)).body.results[0].capacity).toBeUndefined();
  });

  test("a lossy type change answers 409 unless allow_destructive=true", async () => {
    const lab = await makeCot(t, "lossy_lab");
    const f = await addField(t, lab.id, { name: "code", type: "text" });
    const a = await create(t, "lossy_lab", { code: "12" });
    const b = await create(t, "lossy_lab", { code: "twelve" });
    const refused = await t.json("PATCH", `${CO}/custom-object-type-fields/${f.id}/`, {
      body: { type: "integer" },
    });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe("destructive_changes");
    expect((await t.json("GET", `${CO}/lossy_lab/${b.id}/`)).body.code).toBe("twelve");
    const forced = await t.json(
      "PATCH",
      `${CO}/custom-object-type-fields/${f.id}/?allow_destructive=true`,
      { body: { type: "integer" } },
    );
    expect(forced.status).toBe(200);
    expect((await t.json("GET", `${CO}/lossy_lab/${a.id}/`)).body.code).toBe(12);
    expect((await t.json("GET", `${CO}/lossy_lab/${b.id}/`)).body.code).toBeNull();
  });

  test("making a field unique over duplicate values → 400, nothing changes", async () => {
    const lab = await makeCot(t, "uniq_lab");
    const f = await addField(t, lab.id, { name: "serial", type: "text" });
    await create(t, "uniq_lab", { serial: "A" });
    await create(t, "uniq_lab", { serial: "A" });
    const r = await t.json("PATCH", `${CO}/custom-object-type-fields/${f.id}/`, {
      body: { unique: true },
    });
    expect(r.status).toBe(400);
    expect((await t.json("GET", `${CO}/custom-object-type-fields/${f.id}/`)).body.unique).toBe(
      false,
    );
    expect((await t.json("GET", `${CO}/uniq_lab/`)).body.count).toBe(2);
  });
});
