/**
 * Contract: real answers of the app match the schemas its OpenAPI document declares for them
 * (and the bodies we send match the declared request schemas). Sites, a token, a custom object
 * type with every field type (list, detail, create), linked objects, schema preview, and errors.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { exampleChoiceSets, exampleDoc } from "../schema/helpers";
import { contractFor, type Contract } from "./helpers";

const CO = "/api/plugins/custom-objects";
let t: TestApp;
let c: Contract;

/** A type with all 13 field types, including polymorphic object and multiobject fields. */
export const GADGET = {
  name: "gadget",
  slug: "gadget",
  fields: [
    {
      id: 1,
      name: "title",
      type: "text",
      primary: true,
      required: true,
      validation_regex: "^[A-Za-z0-9 -]+$",
    },
    { id: 2, name: "notes", type: "longtext" },
    {
      id: 3,
      name: "count",
      type: "integer",
      validation_minimum: 0,
      validation_maximum: 100,
      default: 1,
    },
    { id: 4, name: "price", type: "decimal" },
    { id: 5, name: "enabled", type: "boolean" },
    { id: 6, name: "bought", type: "date" },
    { id: 7, name: "seen", type: "datetime" },
    { id: 8, name: "homepage", type: "url" },
    { id: 9, name: "extra", type: "json" },
    { id: 10, name: "hours", type: "select", choice_set: "support-hours" },
    { id: 11, name: "labels", type: "multiselect", choice_set: "circuit-labels" },
    { id: 12, name: "site", type: "object", related_object_type: "dcim/site" },
    { id: 13, name: "devices", type: "multiobject", related_object_type: "dcim/device" },
    {
      id: 14,
      name: "owner",
      type: "object",
      is_polymorphic: true,
      related_object_types: ["tenancy/tenant", "custom-objects/circuit_provider"],
    },
    {
      id: 15,
      name: "links",
      type: "multiobject",
      is_polymorphic: true,
      related_object_types: ["dcim/site", "custom-objects/circuit"],
    },
    {
      id: 16,
      name: "provider",
      type: "object",
      related_object_type: "custom-objects/circuit_provider",
    },
  ],
};

/** Sends a request whose body must match the declared request schema, and checks the answer. */
async function call(method: string, path: string, docPath: string, status: number, body?: unknown) {
  if (body !== undefined && ["POST", "PUT", "PATCH"].includes(method) && status < 300) {
    expect(c.requestErrors(docPath, method, body)).toEqual([]);
  }
  const r = await t.json(method, path, body === undefined ? {} : { body });
  expect({ status: r.status, body: r.status === status ? "ok" : r.body }).toEqual({
    status,
    body: "ok",
  });
  expect(c.responseErrors(docPath, method, status, r.body)).toEqual([]);
  return r.body;
}

let site: any;
let device: any;
let tenant: any;
let provider: any;
let circuit: any;

beforeAll(async () => {
  t = await makeTestApp();
  await exampleChoiceSets(t);
  const doc = exampleDoc();
  doc.types.push(GADGET);
  const applied = await t.json("POST", `${CO}/schema/apply/`, { body: { schema: doc } });
  if (applied.status !== 200) throw new Error(JSON.stringify(applied.body));
  c = await contractFor(t);
});
afterAll(() => t.close());

describe("host models", () => {
  test("sites: create, list, detail, partial update", async () => {
    tenant = await call("POST", "/api/tenancy/tenants/", "/api/tenancy/tenants/", 201, {
      name: "Acme",
      slug: "acme",
    });
    site = await call("POST", "/api/dcim/sites/", "/api/dcim/sites/", 201, {
      name: "HQ",
      slug: "hq",
      status: "active",
      tenant: tenant.id,
      time_zone: null,
    });
    await call("POST", "/api/dcim/sites/", "/api/dcim/sites/", 201, [
      { name: "Lab", slug: "lab" },
      { name: "DC", slug: "dc", description: "datacentre" },
    ]);
    const list = await call("GET", "/api/dcim/sites/?limit=2", "/api/dcim/sites/", 200);
    expect(list.count).toBe(3);
    expect(list.next).toContain("offset=2");
    await call("GET", `/api/dcim/sites/${site.id}/`, "/api/dcim/sites/{id}/", 200);
    await call("PATCH", `/api/dcim/sites/${site.id}/`, "/api/dcim/sites/{id}/", 200, {
      description: "head office",
    });
    device = await call("POST", "/api/dcim/devices/", "/api/dcim/devices/", 201, {
      name: "edge1",
      site: site.id,
      status: "active",
    });
    await call("GET", "/api/dcim/devices/", "/api/dcim/devices/", 200);
  });

  test("a token create answers the token with its key", async () => {
    const created = await call("POST", "/api/users/tokens/", "/api/users/tokens/", 201, {
      user: 1,
      description: "ci",
      write_enabled: false,
    });
    expect(created.key).toMatch(/^[A-Za-z0-9]{12}$/);
    expect(created.token).toMatch(/^[A-Za-z0-9]{40}$/);
    await call("GET", `/api/users/tokens/${created.id}/`, "/api/users/tokens/{id}/", 200);
  });

  test("every list the document declares answers what it declares", async () => {
    for (const [path, ops] of Object.entries(c.doc.paths) as [string, any][]) {
      if (!ops.get || path.includes("{") || !ops.get.operationId?.endsWith("_list")) continue;
      const r = await t.json("GET", path);
      expect({ path, status: r.status }).toEqual({ path, status: 200 });
      expect({ path, errors: c.responseErrors(path, "GET", 200, r.body) }).toEqual({
        path,
        errors: [],
      });
    }
  });
});

describe("a custom object type with every field type", () => {
  test("create (full and minimal), list, detail", async () => {
    provider = await call("POST", `${CO}/circuit_provider/`, `${CO}/circuit_provider/`, 201, {
      name: "Carrier",
      support_hours: "24x7",
      portal: "https://carrier.example",
    });
    circuit = await call("POST", `${CO}/circuit/`, `${CO}/circuit/`, 201, {
      cid: "C-1",
      provider: provider.id,
      a_side: site.id,
      terminations: [device.id],
      labels: ["primary"],
      provider_data: { x: 1 },
    });
    const full = {
      title: "Widget 1",
      notes: "multi\nline",
      count: 5,
      price: 9.5,
      enabled: true,
      bought: "2024-02-29",
      seen: "2024-03-01T10:00:00Z",
      homepage: "https://example.com/w",
      extra: { nested: [1, 2, { a: null }] },
      hours: "business",
      labels: ["primary", "lab"],
      site: site.id,
      devices: [device.id],
      owner: { object_type: "custom_objects.circuit_provider", id: provider.id },
      links: [
        { object_type: "dcim.site", id: site.id },
        { object_type: "custom_objects.circuit", id: circuit.id },
      ],
      provider: provider.id,
      tags: [],
    };
    const made = await call("POST", `${CO}/gadget/`, `${CO}/gadget/`, 201, full);
    expect(made.owner.object_type).toBe("custom_objects.circuit_provider");
    expect(made.links.map((l: any) => l.object_type)).toEqual([
      "dcim.site",
      "custom_objects.circuit",
    ]);
    const minimal = await call("POST", `${CO}/gadget/`, `${CO}/gadget/`, 201, {
      title: "Widget 2",
      owner: { object_type: "tenancy.tenant", id: tenant.id },
    });
    expect(minimal.count).toBe(1);
    await call("POST", `${CO}/gadget/`, `${CO}/gadget/`, 201, [
      { title: "Widget 3", hours: null, site: null, labels: [] },
    ]);
    const list = await call("GET", `${CO}/gadget/`, `${CO}/gadget/`, 200);
    expect(list.count).toBe(3);
    await call("GET", `${CO}/gadget/${made.id}/`, `${CO}/gadget/{id}/`, 200);
    await call("PATCH", `${CO}/gadget/${made.id}/`, `${CO}/gadget/{id}/`, 200, {
      count: 7,
      owner: null,
    });
    await call("GET", `${CO}/circuit/`, `${CO}/circuit/`, 200);
    await call("GET", `${CO}/dhcp_scope/`, `${CO}/dhcp_scope/`, 200);
  });

  test("linked objects", async () => {
    const page = await call(
      "GET",
      `${CO}/linked-objects/?object_type=dcim.site&object_id=${site.id}`,
      `${CO}/linked-objects/`,
      200,
    );
    expect(page.count).toBeGreaterThanOrEqual(3);
    await call("GET", `${CO}/linked-objects/?object_type=dcim.site`, `${CO}/linked-objects/`, 400);
  });

  test("types and fields", async () => {
    await call("GET", `${CO}/custom-object-types/`, `${CO}/custom-object-types/`, 200);
    await call(
      "GET",
      `${CO}/custom-object-type-fields/?limit=100`,
      `${CO}/custom-object-type-fields/`,
      200,
    );
    const cot = await call(
      "POST",
      `${CO}/custom-object-types/`,
      `${CO}/custom-object-types/`,
      201,
      { name: "rack_note", slug: "rack-note", description: "notes" },
    );
    await call(
      "POST",
      `${CO}/custom-object-type-fields/`,
      `${CO}/custom-object-type-fields/`,
      201,
      { custom_object_type: cot.id, name: "body", type: "longtext", required: true },
    );
    await call(
      "POST",
      `${CO}/custom-object-type-fields/`,
      `${CO}/custom-object-type-fields/`,
      201,
      { custom_object_type: cot.id, name: "hours", type: "select", choice_set: "support-hours" },
    );
    await call(
      "GET",
      `${CO}/custom-object-types/${cot.id}/`,
      `${CO}/custom-object-types/{id}/`,
      200,
    );
  });
});

describe("schema documents", () => {
  test("preview, apply without changes, export", async () => {
    const doc = exampleDoc();
    const preview = await call("POST", `${CO}/schema/preview/`, `${CO}/schema/preview/`, 200, doc);
    expect(preview.diffs.every((d: any) => !d.has_changes)).toBe(true);
    const changed = exampleDoc();
    changed.types[0].fields.push({ id: 5, name: "notes", type: "longtext" });
    const diff = await call("POST", `${CO}/schema/preview/`, `${CO}/schema/preview/`, 200, {
      schema: changed,
    });
    expect(diff.diffs[0].field_changes).toHaveLength(1);
    await call("POST", `${CO}/schema/apply/`, `${CO}/schema/apply/`, 200, { schema: exampleDoc() });
    const exported = await call(
      "GET",
      `${CO}/schema/export/?slug=gadget`,
      `${CO}/schema/export/`,
      200,
    );
    expect(c.schemaErrors("SchemaDocument", exported)).toEqual([]);
  });

  test("refusals: invalid document 400, destructive 409", async () => {
    await call("POST", `${CO}/schema/preview/`, `${CO}/schema/preview/`, 400, {
      schema_version: "2",
      types: [],
    });
    const removing = exampleDoc();
    const provider = removing.types[0];
    provider.removed_fields = [provider.fields.pop()];
    const refused = await call("POST", `${CO}/schema/apply/`, `${CO}/schema/apply/`, 409, {
      schema: removing,
    });
    expect(refused.error).toBe("destructive_changes");
  });

  test("the document's schema of schema documents agrees with the valibot schema", () => {
    expect(c.schemaErrors("SchemaDocument", exampleDoc())).toEqual([]);
    expect(
      c.schemaErrors("SchemaDocument", { schema_version: "1", types: [], extra: 1 }),
    ).not.toEqual([]);
    const badType = exampleDoc();
    badType.types[0].fields[0].type = "colour";
    expect(c.schemaErrors("SchemaDocument", badType)).not.toEqual([]);
  });
});

describe("errors", () => {
  test("validation 400s: a field map, a bulk list, a custom object value", async () => {
    const single = await call("POST", "/api/dcim/sites/", "/api/dcim/sites/", 400, {});
    expect(single.name).toEqual(["This field is required."]);
    const bulk = await call("POST", "/api/dcim/sites/", "/api/dcim/sites/", 400, [
      { name: "X", slug: "x" },
      {},
    ]);
    expect(bulk.errors).toEqual([{ index: 1, errors: expect.any(Object) }]);
    const value = await call("POST", `${CO}/gadget/`, `${CO}/gadget/`, 400, {
      title: "ok",
      count: 1000,
    });
    expect(Object.keys(value)).toEqual(["count"]);
    const parse = await t.json("POST", "/api/dcim/sites/", { raw: "{not json" } as any);
    expect(c.responseErrors("/api/dcim/sites/", "POST", 400, parse.body)).toEqual([]);
  });

  test("404s and 403s", async () => {
    await call("GET", "/api/dcim/sites/999999/", "/api/dcim/sites/{id}/", 404);
    await call("GET", `${CO}/gadget/999999/`, `${CO}/gadget/{id}/`, 404);
    const anonymous = await t.json("GET", "/api/dcim/sites/", { token: null });
    expect(anonymous.status).toBe(403);
    expect(c.responseErrors("/api/dcim/sites/", "GET", 403, anonymous.body)).toEqual([]);
  });
});
