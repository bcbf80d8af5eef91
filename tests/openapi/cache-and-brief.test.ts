/**
 * The OpenAPI document with 100 custom object types: built well under a second (JSON and YAML),
 * served from the cache while the schema version holds, rebuilt at once when it changes. And the
 * `?brief` answers match the schemas the document declares for them.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { parse } from "yaml";
import { makeTestApp, type TestApp } from "../helpers/app";
import { contractOf } from "./helpers";

const TYPES = 100;
let t: TestApp;

beforeAll(async () => {
  t = await makeTestApp();
  const kinds = ["text", "integer", "decimal", "boolean", "date", "url", "json", "longtext"];
  const types = Array.from({ length: TYPES }, (_, i) => ({
    name: `kind_${i}`,
    slug: `kind_${i}`,
    fields: [
      { id: 1, name: "name", type: "text", primary: true, required: true },
      ...kinds.map((type, j) => ({ id: j + 2, name: `f${j}`, type })),
      {
        id: 20,
        name: "site",
        type: "object",
        related_object_type: i ? `custom-objects/kind_${i - 1}` : "dcim/site",
      },
    ],
  }));
  const r = await t.json("POST", "/api/plugins/custom-objects/schema/apply/", {
    body: { schema: { schema_version: "1", types } },
  });
  if (r.status !== 200) throw new Error(JSON.stringify(r.body).slice(0, 300));
}, 120_000);
afterAll(() => t.close());

async function timed(path: string): Promise<{ ms: number; text: string }> {
  const start = performance.now();
  const res = await t.req("GET", path);
  const text = await res.text();
  expect(res.status).toBe(200);
  return { ms: performance.now() - start, text };
}

describe("OpenAPI document with 100 types", () => {
  test("first build, YAML, cache and rebuild after a change are all well under a second", async () => {
    const json = await timed("/api/schema/");
    const yaml = await timed("/api/schema/?format=yaml");
    const again = await timed("/api/schema/");
    const yamlAgain = await timed("/api/schema/?format=yaml");
    console.log(
      `openapi ${TYPES} types: build ${json.ms.toFixed(0)} ms, yaml ${yaml.ms.toFixed(0)} ms, cached ${again.ms.toFixed(1)} / ${yamlAgain.ms.toFixed(1)} ms`,
    );
    expect(
      Object.keys(JSON.parse(json.text).paths).filter((p) => p.includes("/kind_")).length,
    ).toBe(2 * TYPES);
    expect(json.ms).toBeLessThan(1000);
    expect(yaml.ms).toBeLessThan(1000);
    expect(again.text).toBe(json.text);
    expect(again.ms).toBeLessThan(100);
    expect(yamlAgain.ms).toBeLessThan(100);
    expect(yaml.text.startsWith("openapi: 3.1.0\n")).toBe(true);

    // A change to one type is in the very next answer.
    const cot = (
      await t.json("GET", "/api/plugins/custom-objects/custom-object-types/?slug=kind_5")
    ).body.results[0];
    expect(
      (
        await t.json("PATCH", `/api/plugins/custom-objects/custom-object-types/${cot.id}/`, {
          body: { description: "Changed just now" },
        })
      ).status,
    ).toBe(200);
    const rebuilt = await timed("/api/schema/?format=yaml");
    expect(rebuilt.ms).toBeLessThan(1000);
    expect(rebuilt.text).toContain("Changed just now");
  }, 60_000);

  test("the YAML is the same document as the JSON", async () => {
    const json = JSON.parse((await timed("/api/schema/")).text);
    const yaml = parse((await timed("/api/schema/?format=yaml")).text);
    expect(yaml).toEqual(json);
  }, 60_000);
});

describe("brief forms are described", () => {
  test("?brief lists and details of host models and custom objects match the declared responses", async () => {
    const c = contractOf(JSON.parse((await timed("/api/schema/")).text));
    const site = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Brief site", slug: "brief-site" },
    });
    const obj = await t.json("POST", "/api/plugins/custom-objects/kind_0/", {
      body: { name: "brief one", site: site.body.id },
    });
    expect(obj.status).toBe(201);
    const cases: Array<[string, string]> = [
      ["/api/dcim/sites/?brief=1", "/api/dcim/sites/"],
      [`/api/dcim/sites/${site.body.id}/?brief=1`, "/api/dcim/sites/{id}/"],
      ["/api/plugins/custom-objects/kind_0/?brief=true", "/api/plugins/custom-objects/kind_0/"],
      [
        `/api/plugins/custom-objects/kind_0/${obj.body.id}/?brief=true`,
        "/api/plugins/custom-objects/kind_0/{id}/",
      ],
    ];
    for (const [path, docPath] of cases) {
      const r = await t.json("GET", path);
      expect(r.status).toBe(200);
      expect({ path, errors: c.responseErrors(docPath, "get", 200, r.body) }).toEqual({
        path,
        errors: [],
      });
    }
    const list = c.doc.paths["/api/dcim/sites/"].get.responses["200"];
    expect(list.description).toContain("?brief");
  });
});
