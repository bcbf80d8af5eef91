/**
 * The OpenAPI document with 100 custom object types: served from the cache while the schema
 * version holds (no rebuild, however many requests), rebuilt on the very next request when it
 * changes. How fast a build is lives in `bench/openapi.ts`. And the `?brief` answers match the
 * schemas the document declares for them.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { parse } from "yaml";
import { BUILTIN_PLUGINS } from "../../src/plugins/registry";
import type { HostPlugin } from "../../src/plugins/types";
import { makeTestApp, type TestApp } from "../helpers/app";
import { contractOf } from "./helpers";

const TYPES = 100;
let t: TestApp;

/** Every build of the document asks each plugin to describe its part: this one counts them. */
let builds = 0;
const buildCounter: HostPlugin = {
  name: "build_counter",
  version: "1.0.0",
  setup: () => ({ openapi: { describe: () => void builds++ } }),
};

beforeAll(async () => {
  t = await makeTestApp(
    { PLUGINS: "custom_objects,host_healthcheck_plugin,build_counter" },
    { availablePlugins: [...BUILTIN_PLUGINS, buildCounter] },
  );
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

async function fetched(path: string): Promise<{ text: string }> {
  const res = await t.req("GET", path);
  const text = await res.text();
  expect(res.status).toBe(200);
  return { text };
}

describe("OpenAPI document with 100 types", () => {
  test("built once, then served from the cache (JSON and YAML) until a change rebuilds it", async () => {
    builds = 0;
    const json = await fetched("/api/schema/");
    expect(builds).toBe(1);
    const yaml = await fetched("/api/schema/?format=yaml");
    const again = await fetched("/api/schema/");
    const yamlAgain = await fetched("/api/schema/?format=yaml");
    expect(builds).toBe(1); // YAML and repeated requests reuse the one build
    expect(
      Object.keys(JSON.parse(json.text).paths).filter((p) => p.includes("/kind_")).length,
    ).toBe(2 * TYPES);
    expect(again.text).toBe(json.text);
    expect(yamlAgain.text).toBe(yaml.text);
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
    const rebuilt = await fetched("/api/schema/?format=yaml");
    expect(builds).toBe(2);
    expect(rebuilt.text).toContain("Changed just now");
    expect((await fetched("/api/schema/")).text).toContain("Changed just now");
    expect(builds).toBe(2);
  }, 60_000);

  test("the YAML is the same document as the JSON", async () => {
    const json = JSON.parse((await fetched("/api/schema/")).text);
    const yaml = parse((await fetched("/api/schema/?format=yaml")).text);
    expect(yaml).toEqual(json);
  }, 60_000);
});

describe("brief forms are described", () => {
  test("?brief lists and details of host models and custom objects match the declared responses", async () => {
    const c = contractOf(JSON.parse((await fetched("/api/schema/")).text));
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
