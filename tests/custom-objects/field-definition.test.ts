/**
 * One field-definition schema (issue 14 item 2): the REST field API and schema documents refuse
 * the same definitions with the same words, keyed by attribute (REST) or by path (documents).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, makeCot } from "./fixtures";

let t: TestApp;
let cotId: number;
beforeAll(async () => {
  t = await makeTestApp();
  cotId = (await makeCot(t, "defs_rest")).id;
});
afterAll(() => t.close());

/** [definition, attribute the refusal is about] */
const CASES: Array<[Record<string, unknown>, string]> = [
  [{ name: "Bad-Name", type: "text" }, "name"],
  [{ name: "tags", type: "text" }, "name"],
  [{ name: "f1", type: "colour" }, "type"],
  [{ name: "f2", type: "text", label: "x".repeat(51) }, "label"],
  [{ name: "f3", type: "text", required: "yes" }, "required"],
  [{ name: "f4", type: "text", weight: 40000 }, "weight"],
  [{ name: "f5", type: "text", ui_visible: "sometimes" }, "ui_visible"],
  [{ name: "f6", type: "text", related_object_filter: [1] }, "related_object_filter"],
  [{ name: "f7", type: "text", validation_minimum: 1 }, "validation_minimum"],
  [
    { name: "f8", type: "integer", validation_minimum: 5, validation_maximum: 1 },
    "validation_maximum",
  ],
  [{ name: "f9", type: "integer", validation_regex: "^a$" }, "validation_regex"],
  [{ name: "f10", type: "text", validation_regex: "(" }, "validation_regex"],
  [{ name: "f11", type: "select" }, "choice_set"],
  [{ name: "f12", type: "object" }, "related_object_type"],
  [{ name: "f13", type: "object", is_polymorphic: true }, "related_object_types"],
  [{ name: "f14", type: "text", is_polymorphic: true }, "is_polymorphic"],
  [{ name: "f15", type: "multiobject", primary: true }, "primary"],
  [{ name: "f16", type: "text", colour: "red" }, "colour"],
];

describe("REST and documents say the same thing", () => {
  for (const [definition, key] of CASES) {
    test(`${JSON.stringify(definition)} → ${key}`, async () => {
      const rest = await t.json("POST", `${CO}/custom-object-type-fields/`, {
        body: { custom_object_type: cotId, ...definition },
      });
      expect(rest.status).toBe(400);
      expect(Object.keys(rest.body)).toContain(key);
      const document = {
        schema_version: "1",
        types: [{ name: "defs_doc", slug: "defs_doc", fields: [{ id: 1, ...definition }] }],
      };
      const doc = await t.json("POST", `${CO}/schema/preview/`, { body: { schema: document } });
      expect(doc.status).toBe(400);
      expect(doc.body.error).toBe("invalid_schema");
      const at = doc.body.schema_errors
        .filter((e: { path: string }) => e.path === `$.types[0].fields[0].${key}`)
        .map((e: { message: string }) => e.message);
      expect(at).toEqual(rest.body[key]);
    });
  }

  test("a missing name: the same message both ways", async () => {
    const rest = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: cotId, type: "text" },
    });
    const document = {
      schema_version: "1",
      types: [{ name: "defs_doc", slug: "defs_doc", fields: [{ id: 1, type: "text" }] }],
    };
    const doc = await t.json("POST", `${CO}/schema/preview/`, { body: { schema: document } });
    expect(rest.body.name).toEqual(["This field is required."]);
    expect(doc.body.schema_errors).toContainEqual({
      path: "$.types[0].fields[0].name",
      message: "This field is required.",
    });
  });

  test("defaults are the same: a field made over REST exports as a document with no attributes beyond its name and type", async () => {
    const cot = await makeCot(t, "defs_plain");
    const made = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: cot.id, name: "plain", type: "text" },
    });
    expect(made.status).toBe(201);
    const exported = await t.json("GET", `${CO}/schema/export/?slug=defs_plain`);
    expect(exported.status).toBe(200);
    const again = await t.json("POST", `${CO}/schema/preview/`, {
      body: { schema: exported.body },
    });
    expect(again.status).toBe(200);
    expect(again.body.diffs.every((d: { has_changes: boolean }) => !d.has_changes)).toBe(true);
    const minimal = {
      schema_version: "1",
      types: [
        {
          name: "defs_plain",
          slug: "defs_plain",
          fields: [{ id: exported.body.types[0].fields[0].id, name: "plain", type: "text" }],
        },
      ],
    };
    const same = await t.json("POST", `${CO}/schema/preview/`, { body: { schema: minimal } });
    expect(same.body.diffs.every((d: { has_changes: boolean }) => !d.has_changes)).toBe(true);
  });
});
