/**
 * The OpenAPI document never describes custom object types the caller may not view (§4: nothing
 * a user may not view is named): no paths, tags, schemas, references, enum values or texts that
 * name them, in JSON or YAML. Superusers see every type; the document stays valid for everyone.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import { parse } from "yaml";
import { makeTestApp, type TestApp } from "../helpers/app";

const VISIBLE = "alpha_visible";
const HIDDEN = ["zeta_hidden_one", "omega_hidden_two"];
const HIDDEN_TEXT: [string, string] = ["Qx9 secret name", "Kp7 secret description"];

let t: TestApp;
let viewer: string;
let nobody: string;

beforeAll(async () => {
  t = await makeTestApp();
  const schema = {
    schema_version: "1",
    types: [
      {
        name: "zeta_hidden_one",
        slug: HIDDEN[0],
        verbose_name: HIDDEN_TEXT[0],
        description: HIDDEN_TEXT[1],
        fields: [{ id: 1, name: "code", type: "text", primary: true }],
      },
      {
        name: "omega_hidden_two",
        slug: HIDDEN[1],
        fields: [
          { id: 1, name: "label", type: "text", primary: true },
          { id: 2, name: "site", type: "object", related_object_type: "dcim/site" },
        ],
      },
      {
        name: "alpha_visible",
        slug: VISIBLE,
        fields: [
          { id: 1, name: "title", type: "text", primary: true },
          {
            id: 2,
            name: "peer",
            type: "object",
            related_object_type: `custom-objects/${HIDDEN[0]}`,
          },
          {
            id: 3,
            name: "peers",
            type: "multiobject",
            related_object_type: `custom-objects/${HIDDEN[0]}`,
          },
          {
            id: 4,
            name: "anything",
            type: "object",
            is_polymorphic: true,
            related_object_types: ["dcim/site", `custom-objects/${HIDDEN[1]}`],
          },
        ],
      },
    ],
  };
  const applied = await t.json("POST", "/api/plugins/custom-objects/schema/apply/", {
    body: { schema },
  });
  if (applied.status !== 200) throw new Error(JSON.stringify(applied.body));
  viewer = await t.user("viewer", [[["view"], `custom_objects.${VISIBLE}`]]);
  nobody = await t.user("nobody", [[["view"], "dcim.site"]]);
});
afterAll(() => t.close());

async function documentAs(token: string) {
  const json = await t.req("GET", "/api/schema/", { token });
  const yaml = await t.req("GET", "/api/schema/?format=yaml", { token });
  expect(json.status).toBe(200);
  expect(yaml.status).toBe(200);
  const [jsonText, yamlText] = [await json.text(), await yaml.text()];
  return { doc: JSON.parse(jsonText), jsonText, yamlText };
}

/** Every `$ref` in the document points at something it defines. */
function danglingRefs(doc: any): string[] {
  const out: string[] = [];
  const walk = (n: unknown) => {
    if (Array.isArray(n)) return n.forEach(walk);
    if (!n || typeof n !== "object") return;
    const r = (n as { $ref?: unknown }).$ref;
    if (typeof r === "string") {
      const [, kind, name] = /^#\/components\/(\w+)\/(.+)$/.exec(r) ?? [];
      if (!kind || !doc.components?.[kind]?.[name!]) out.push(r);
    }
    Object.values(n).forEach(walk);
  };
  walk(doc);
  return out;
}

const cotPaths = (doc: any) =>
  Object.keys(doc.paths).filter((p) =>
    /^\/api\/plugins\/custom-objects\/(?!custom-object-types|custom-object-type-fields|linked-objects|schema)[^/]+\//.test(
      p,
    ),
  );

describe("OpenAPI document per caller", () => {
  test("a user with view on one type sees only that type's paths and schemas", async () => {
    const { doc } = await documentAs(viewer);
    expect(cotPaths(doc).sort()).toEqual([
      `/api/plugins/custom-objects/${VISIBLE}/`,
      `/api/plugins/custom-objects/${VISIBLE}/{id}/`,
    ]);
    const cotSchemas = Object.keys(doc.components.schemas).filter((n) =>
      n.startsWith("CustomObject."),
    );
    expect(cotSchemas.length).toBeGreaterThan(0);
    for (const name of cotSchemas) expect(name.startsWith(`CustomObject.${VISIBLE}`)).toBe(true);
    // The visible type's references to hidden types fall back to the generic nested form.
    const record = doc.components.schemas[`CustomObject.${VISIBLE}`];
    expect(JSON.stringify(record.properties.peer)).toContain("#/components/schemas/NestedObject");
    expect(danglingRefs(doc)).toEqual([]);
  });

  test("no hidden slug, name or description appears anywhere in the JSON or YAML", async () => {
    const { jsonText, yamlText } = await documentAs(viewer);
    for (const text of [jsonText, yamlText]) {
      for (const s of [...HIDDEN, ...HIDDEN_TEXT]) expect(text).not.toContain(s);
      expect(text).toContain(VISIBLE);
    }
  });

  test("a user who may view no type sees none, and nothing names them", async () => {
    const { doc, jsonText, yamlText } = await documentAs(nobody);
    expect(cotPaths(doc)).toEqual([]);
    expect(
      Object.keys(doc.components.schemas).filter((n) => n.startsWith("CustomObject.")),
    ).toEqual([]);
    for (const text of [jsonText, yamlText])
      for (const s of [VISIBLE, ...HIDDEN, ...HIDDEN_TEXT]) expect(text).not.toContain(s);
    expect(danglingRefs(doc)).toEqual([]);
  });

  test("the filtered documents are valid OpenAPI 3.1, and YAML says the same as JSON", async () => {
    for (const token of [viewer, nobody]) {
      const { doc, yamlText } = await documentAs(token);
      expect((await new Validator().validate(doc)).errors ?? []).toEqual([]);
      expect(parse(yamlText)).toEqual(doc);
    }
  });

  test("a superuser sees every type", async () => {
    const { doc, yamlText } = await documentAs(t.admin);
    expect(cotPaths(doc).length).toBe(6);
    for (const s of [VISIBLE, ...HIDDEN])
      expect(doc.components.schemas[`CustomObject.${s}`]).toBeDefined();
    expect(yamlText).toContain(HIDDEN_TEXT[1]);
  });
});
