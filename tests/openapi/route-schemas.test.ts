/**
 * Route schemas (docs/decisions/0042-route-schemas.md): a hand-written route's valibot schemas
 * validate its query and body at the boundary (one hook → the §4 400 `{"field": ["message"]}`)
 * and are the same schemas its OpenAPI operation is generated from.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
let doc: any;
beforeAll(async () => {
  t = await makeTestApp();
  doc = (await t.json("GET", "/api/schema/")).body;
});
afterAll(() => t.close());

const CO = "/api/plugins/custom-objects";

describe("validation at the boundary", () => {
  test("a query value outside the schema is a field error", async () => {
    const r = await t.json("GET", "/api/schema/?format=xml");
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ format: ["Unknown format: use json or yaml."] });
  });

  test("a body missing required keys names each key; a non-object body is a non-field error", async () => {
    const missing = await t.json("POST", "/api/users/tokens/provision/", {
      token: null,
      body: { username: "admin" },
    });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ password: ["Provide username and password."] });
    const list = await t.json("POST", "/api/users/tokens/", { body: [{}] });
    expect(list.status).toBe(400);
    expect(list.body).toEqual({
      non_field_errors: ["Create one token per request (a JSON object)."],
    });
  });

  test("the media type, size and depth checks still come before the schema", async () => {
    const r = await t.req("POST", "/api/users/tokens/provision/", {
      token: null,
      raw: "username=a",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(r.status).toBe(415);
  });

  test("linked-objects keeps its messages, one per parameter", async () => {
    const r = await t.json("GET", `${CO}/linked-objects/?object_id=x`);
    expect(r.status).toBe(400);
    expect(r.body).toEqual({
      object_type: ["This parameter is required (<app_label>.<model>)."],
      object_id: ["A valid integer is required."],
    });
    const empty = await t.json("GET", `${CO}/linked-objects/?object_type=dcim.site&object_id=`);
    expect(empty.body).toEqual({ object_id: ["This parameter is required."] });
  });
});

describe("operations generated from the same schemas", () => {
  test("query parameters, their rules and descriptions come from the route's schema", () => {
    const linked = doc.paths[`${CO}/linked-objects/`].get;
    const objectId = linked.parameters.find((p: any) => p.name === "object_id");
    expect(objectId).toMatchObject({
      in: "query",
      required: true,
      description: "The target's id.",
      schema: { type: "string", pattern: "^\\d{1,15}$" },
    });
    const format = doc.paths["/api/schema/"].get.parameters.find((p: any) => p.name === "format");
    expect(format.schema.enum).toEqual(["json", "yaml", "yml", "openapi-json"]);
    const exclude =
      doc.paths["/plugins/host_healthcheck_plugin/healthcheck/{group}/"].get.parameters;
    expect(exclude.map((p: any) => `${p.in} ${p.name}`)).toEqual([
      "path group",
      "query format",
      "query exclude",
    ]);
    expect(exclude[2]).toMatchObject({
      style: "form",
      explode: true,
      schema: { type: "array", items: { type: "string" } },
    });
  });

  test("response schemas written in valibot are converted; a validated route documents its 400", () => {
    const status =
      doc.paths["/api/status/"].get.responses["200"].content["application/json"].schema;
    expect(status.required).toEqual(["netbox-version", "host-version", "runtime", "plugins"]);
    expect(status.properties["started-at"]).toEqual({ type: "string", format: "date-time" });
    expect(doc.paths["/api/schema/"].get.responses["400"]).toEqual({
      $ref: "#/components/responses/BadRequest",
    });
    expect(doc["x-undocumented-routes"]).toBeUndefined();
  });
});
