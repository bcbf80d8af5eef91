/**
 * `GET /api/schema/`: a valid OpenAPI 3.1 document (checked by a maintained validator) that
 * describes every mounted route, is generated from the validation sources, follows schema
 * applies and field changes at once, and needs a token like every `/api/` route.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import { parse as parseYaml } from "yaml";
import { CORE_MODELS } from "../../src/core/routes";
import { templatePath } from "../../src/openapi/builder";
import { hostModelName } from "../../src/openapi/model-schemas";
import { createApp } from "../../src/app";
import { openDatabase } from "../../src/db/local";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";
import { addField, choiceSet, makeCot } from "../custom-objects/fixtures";
import { exampleChoiceSets, exampleDoc } from "../schema/helpers";
import { contractOf } from "./helpers";

const CO = "/api/plugins/custom-objects";
let t: TestApp;
const schema = async (path = "/api/schema/") => {
  const r = await t.json("GET", path);
  expect(r.status).toBe(200);
  return r.body;
};

beforeAll(async () => {
  t = await makeTestApp();
  await exampleChoiceSets(t);
  const r = await t.json("POST", `${CO}/schema/apply/`, { body: { schema: exampleDoc() } });
  if (r.status !== 200) throw new Error(JSON.stringify(r.body));
});
afterAll(() => t.close());

describe("validity", () => {
  test("passes an OpenAPI 3.1 validator, with and without custom object types", async () => {
    const validator = new Validator();
    const withTypes = await validator.validate(await schema());
    expect(withTypes.errors ?? []).toEqual([]);
    expect(validator.version).toBe("3.1");
    const bare = await makeTestApp();
    try {
      const r = await bare.json("GET", "/api/schema/");
      const result = await new Validator().validate(r.body);
      expect(result.errors ?? []).toEqual([]);
      expect(result.valid).toBe(true);
    } finally {
      await bare.close();
    }
  });

  test("every $ref resolves and every schema compiles under JSON Schema 2020-12", async () => {
    const doc = await schema();
    const c = contractOf(doc);
    for (const name of Object.keys(doc.components.schemas))
      expect({
        name,
        errors: c.schemaErrors(name, null).filter((e) => e.startsWith("no component")),
      }).toEqual({ name, errors: [] });
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
    for (const r of new Set(refs)) {
      const [, section, name] = /#\/components\/(\w+)\/(.+)"$/.exec(r)!;
      expect({ ref: r, found: !!doc.components[section!]?.[name!] }).toEqual({
        ref: r,
        found: true,
      });
    }
  });

  test("operation ids and component names stay unique whatever the slugs", async () => {
    const tricky = await makeTestApp();
    try {
      // `x_bulk` vs `x` + `_bulk_update`, `a-b` vs `a_b`, `xRequest` vs `x` + `Request`.
      for (const [i, slug] of ["x", "x_bulk", "a-b", "a_b", "xRequest", "Site"].entries())
        await makeCot(tricky, `tricky_${i}`, slug);
      const doc = (await tricky.json("GET", "/api/schema/")).body;
      expect(doc.paths).toBeDefined();
      const ids = Object.values(doc.paths).flatMap((ops: any) =>
        Object.values(ops).map((o: any) => o.operationId),
      );
      expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([]);
      for (const slug of ["x", "x_bulk", "a-b", "a_b", "xRequest", "Site"])
        expect(doc.components.schemas[`CustomObject.${slug}`]).toBeDefined();
      expect((await new Validator().validate(doc)).errors ?? []).toEqual([]);
    } finally {
      await tricky.close();
    }
  });
});

describe("coverage of the routes", () => {
  test("every mounted route and method is in the document, none undocumented", async () => {
    const doc = await schema();
    expect(doc["x-undocumented-routes"]).toBeUndefined();
    const documented = new Set<string>();
    for (const [path, ops] of Object.entries(doc.paths))
      for (const m of Object.keys(ops as object))
        documented.add(`${m} ${path === "/" ? path : path.replace(/\/$/, "")}`);
    const slugs = exampleDoc().types.map((x: { slug: string }) => x.slug);
    for (const r of t.app.routes) {
      const method = r.method.toLowerCase();
      if (!["get", "post", "put", "patch", "delete"].includes(method)) continue;
      const path = templatePath(r.path);
      // The `/{slug}` routes become one set of paths per type.
      const concrete = path.includes(`${CO}/{slug}`)
        ? slugs.map((s: string) => path.replace("{slug}", s))
        : [path];
      for (const p of concrete)
        expect({ route: `${method} ${p}`, documented: documented.has(`${method} ${p}`) }).toEqual({
          route: `${method} ${p}`,
          documented: true,
        });
    }
  });

  test("read-only models have only GET; the core model set is all there", async () => {
    const doc = await schema();
    expect(Object.keys(doc.paths["/api/core/object-types/"])).toEqual(["get"]);
    expect(Object.keys(doc.paths["/api/dcim/sites/"]).sort()).toEqual([
      "delete",
      "get",
      "patch",
      "post",
      "put",
    ]);
    for (const m of CORE_MODELS) {
      expect(doc.paths[`/api/${m.spec.path}/`]?.get).toBeDefined();
      expect(doc.components.schemas[hostModelName(m)]).toBeDefined();
    }
    expect(doc.paths["/plugins/host_healthcheck_plugin/healthcheck/"].get.security).toEqual([]);
    expect(doc.paths["/livez"].get).toBeDefined();
    expect(doc.paths["/api/users/tokens/provision/"].post.security).toEqual([]);
  });

  test("list parameters: paging, ordering, search, projection and NetBox lookups", async () => {
    const doc = await schema();
    const names = (path: string) =>
      doc.paths[path].get.parameters.map((p: any) =>
        p.$ref ? doc.components.parameters[p.$ref.split("/").pop()].name : p.name,
      );
    const site = names("/api/dcim/sites/");
    for (const p of [
      "limit",
      "offset",
      "ordering",
      "q",
      "brief",
      "fields",
      "omit",
      "id",
      "name",
      "name__ic",
      "name__nisw",
      "name__empty",
      "status",
      "tenant_id",
      "created__gte",
      "tag",
    ])
      expect(site).toContain(p);
    const circuit = names(`${CO}/circuit/`);
    for (const p of [
      "limit",
      "q",
      "cid",
      "cid__exact",
      "bandwidth_mbps__gt",
      "installed__lte",
      "provider_id",
      "terminations_id",
      "labels",
      "active",
    ])
      expect(circuit).toContain(p);
  });

  test("errors and security are components", async () => {
    const doc = await schema();
    expect(Object.keys(doc.components.responses)).toEqual(
      expect.arrayContaining(["BadRequest", "Forbidden", "NotFound", "Conflict"]),
    );
    expect(doc.components.schemas.ValidationError.additionalProperties).toBeDefined();
    expect(doc.components.schemas.Error.required).toEqual(["detail"]);
    expect(doc.components.securitySchemes.tokenAuth).toMatchObject({
      type: "apiKey",
      in: "header",
      name: "Authorization",
    });
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({
      type: "http",
      scheme: "bearer",
    });
    expect(doc.security).toEqual([{ tokenAuth: [] }, { bearerAuth: [] }]);
    expect(doc.paths["/api/dcim/sites/{id}/"].get.responses["404"]).toEqual({
      $ref: "#/components/responses/NotFound",
    });
  });
});

describe("generated from the validation sources", () => {
  test("host model requests follow the defineModel field specs", async () => {
    const doc = await schema();
    for (const m of CORE_MODELS) {
      const req = doc.components.schemas[`${hostModelName(m)}Request`];
      for (const f of m.spec.fields) {
        if (f.readOnly) expect(req.properties[f.name]).toBeUndefined();
        else
          expect({ model: m.spec.model, field: f.name, present: !!req.properties[f.name] }).toEqual(
            { model: m.spec.model, field: f.name, present: true },
          );
        if (f.required && !f.readOnly) expect(req.required).toContain(f.name);
        if (f.type === "choice" && !f.readOnly)
          expect(req.properties[f.name].enum).toEqual(f.choices!.map(([v]) => v));
        if (f.maxLength && ["string", "text", "slug"].includes(f.type))
          expect(req.properties[f.name].maxLength).toBe(f.maxLength);
      }
      expect(req.additionalProperties).toBe(false);
    }
    expect(doc.components.schemas.Site.properties.tenant).toEqual({
      anyOf: [{ $ref: "#/components/schemas/BriefTenant" }, { type: "null" }],
    });
    expect(doc.components.schemas.UserRequest.properties.password.writeOnly).toBe(true);
    expect(doc.components.schemas.User.properties.password).toBeUndefined();
  });

  test("custom object type schemas follow the field rows", async () => {
    const s = (await schema()).components.schemas;
    const req = s["CustomObject.circuit.Request"];
    expect(req.required.sort()).toEqual(["cid", "provider"]);
    expect(req.properties.bandwidth_mbps).toMatchObject({
      type: ["integer", "null"],
      minimum: 1,
      maximum: 400000,
    });
    expect(req.properties.labels.items.enum).toEqual(["primary", "backup", "lab"]);
    expect(req.properties.active.default).toBe(true);
    expect(s["CustomObject.circuit_provider.Request"].properties.support_hours.enum).toEqual([
      "24x7",
      "business",
      null,
    ]);
    expect(s["CustomObject.circuit_provider.Request"].properties.account_number.pattern).toBe(
      "^[A-Z0-9-]{4,32}$",
    );
    const rec = s["CustomObject.circuit"];
    expect(rec.properties.provider).toEqual({
      anyOf: [
        { $ref: "#/components/schemas/CustomObject.circuit_provider.Brief" },
        { type: "null" },
      ],
    });
    expect(rec.properties.terminations).toEqual({
      type: "array",
      items: { $ref: "#/components/schemas/BriefDevice" },
    });
    const served = s["CustomObject.dhcp_scope"].properties.served_by.anyOf[0].oneOf;
    expect(served.map((b: any) => b.properties.object_type.const).sort()).toEqual([
      "custom_objects.circuit",
      "dcim.device",
    ]);
    const servedBy = s["CustomObject.dhcp_scope.Request"].properties.served_by;
    expect(servedBy.type).toEqual(["object", "null"]);
    expect(servedBy.properties.object_type.enum.sort()).toEqual([
      "custom_objects.circuit",
      "dcim.device",
    ]);
    expect(Object.keys(rec.properties).slice(0, 7)).toEqual([
      "id",
      "url",
      "display",
      "custom_object_type",
      "created",
      "last_updated",
      "tags",
    ]);
    expect(s.SchemaDocument.additionalProperties).toBe(false);
    expect(s.SchemaDocumentField.properties.type.enum).toContain("multiobject");
  });
});

describe("freshness", () => {
  test("a new type, a field change, a choice set change and a type removal show up at once", async () => {
    const before = await schema();
    expect(before.paths[`${CO}/rack_note/`]).toBeUndefined();
    const cot = await makeCot(t, "rack_note", "rack_note");
    const withType = await schema();
    expect(Object.keys(withType.paths[`${CO}/rack_note/`]).sort()).toEqual([
      "delete",
      "get",
      "patch",
      "post",
      "put",
    ]);
    expect(withType.paths[`${CO}/rack_note/{id}/`].get).toBeDefined();

    const sizes = await choiceSet(t, "rack-sizes", ["small", "large"]);
    const field = await addField(t, cot.id, {
      name: "size",
      type: "select",
      choice_set: sizes.id,
      required: true,
    });
    const withField = await schema();
    expect(
      withField.components.schemas["CustomObject.rack_note.Request"].properties.size.enum,
    ).toEqual(["small", "large"]);
    expect(withField.components.schemas["CustomObject.rack_note.Request"].required).toEqual([
      "size",
    ]);

    const patched = await t.json("PATCH", `/api/extras/custom-field-choice-sets/${sizes.id}/`, {
      body: {
        extra_choices: [
          ["small", "S"],
          ["large", "L"],
          ["huge", "XL"],
        ],
      },
    });
    expect(patched.status).toBe(200);
    expect(
      (await schema()).components.schemas["CustomObject.rack_note.Request"].properties.size.enum,
    ).toEqual(["small", "large", "huge"]);

    await t.json("PATCH", `${CO}/custom-object-type-fields/${field.id}/`, {
      body: { name: "rack_size", required: false },
    });
    const renamed = (await schema()).components.schemas["CustomObject.rack_note.Request"];
    expect(renamed.properties.size).toBeUndefined();
    expect(renamed.properties.rack_size.enum).toEqual(["small", "large", "huge", null]);

    await t.json("PATCH", `${CO}/custom-object-types/${cot.id}/`, { body: { slug: "rack-note" } });
    const moved = await schema();
    expect(moved.paths[`${CO}/rack_note/`]).toBeUndefined();
    expect(moved.paths[`${CO}/rack-note/`]).toBeDefined();

    expect((await t.json("DELETE", `${CO}/custom-object-types/${cot.id}/`)).status).toBe(204);
    const after = await schema();
    expect(after.paths[`${CO}/rack-note/`]).toBeUndefined();
    expect(after.components.schemas["CustomObject.rack_note"]).toBeUndefined();
  });

  test("another app instance on the same database sees the change too", async () => {
    const db = await openDatabase(t.dbUrl);
    const other = await createApp({ ...t.deps, db });
    const get = async () =>
      (
        await other.request(`${BASE}/api/schema/`, {
          headers: { authorization: `Token ${t.admin}` },
        })
      ).json();
    try {
      expect((await get()).paths[`${CO}/cable_note/`]).toBeUndefined(); // and cached
      await makeCot(t, "cable_note", "cable_note");
      expect((await get()).paths[`${CO}/cable_note/`]).toBeDefined();
    } finally {
      await db.close();
    }
  });

  test("servers follows the request's origin; X-Forwarded-Proto only behind a trusted proxy", async () => {
    // TRUSTED_PROXY_HOPS=0 (the default): a client's header changes nothing (decision 0069).
    const r = await t.json("GET", "/api/schema/", { headers: { "x-forwarded-proto": "https" } });
    expect(r.body.servers[0].url).toBe("http://host.test");
    const proxied = await makeTestApp({ TRUSTED_PROXY_HOPS: "1" });
    try {
      const p = await proxied.json("GET", "/api/schema/", {
        headers: { "x-forwarded-proto": "https" },
      });
      expect(p.body.servers[0].url).toBe("https://host.test");
    } finally {
      await proxied.close();
    }
  });
});

describe("formats and access", () => {
  test("?format=yaml is the same document", async () => {
    const res = await t.req("GET", "/api/schema/?format=yaml");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/yaml");
    const text = await res.text();
    expect(text.startsWith("openapi: 3.1.0")).toBe(true);
    expect(parseYaml(text)).toEqual(await schema());
    const viaAccept = await t.req("GET", "/api/schema/", {
      headers: { accept: "application/yaml" },
    });
    expect(viaAccept.headers.get("content-type")).toContain("application/yaml");
    expect((await t.req("GET", "/api/schema/?format=xml")).status).toBe(400);
  });

  test("the document needs a token (LOGIN_REQUIRED); Bearer works; anonymous reads when login is optional", async () => {
    expect((await t.json("GET", "/api/schema/", { token: null })).body).toEqual({
      detail: "Authentication credentials were not provided.",
      error: "not_authenticated",
    });
    expect((await t.json("GET", "/api/schema/", { token: "nope" })).status).toBe(403);
    expect(
      (
        await t.json("GET", "/api/schema/", {
          token: null,
          headers: { authorization: `Bearer ${t.admin}` },
        })
      ).status,
    ).toBe(200);
    const open = await makeTestApp({ LOGIN_REQUIRED: "false" });
    try {
      const r = await open.json("GET", "/api/schema/", { token: null });
      expect(r.status).toBe(200);
      expect(r.body.paths["/api/dcim/sites/"].get.security).toEqual([
        { tokenAuth: [] },
        { bearerAuth: [] },
        {},
      ]);
      expect(r.body.paths["/api/dcim/sites/"].post.security).toBeUndefined();
    } finally {
      await open.close();
    }
  });

  test("the docs page and its assets are public, offline and locked to this origin", async () => {
    const page = await t.req("GET", "/api/docs/", { token: null });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.headers.get("content-security-policy")).toContain("connect-src 'self'");
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.every((a) => a.startsWith("/api/docs/assets/"))).toBe(true);
    for (const a of assets) {
      const res = await t.req("GET", a, { token: null });
      expect({ a, status: res.status }).toEqual({ a, status: 200 });
      const body = await res.text();
      expect(body.length).toBeGreaterThan(10);
    }
    expect((await t.req("GET", "/api/docs", { token: null })).status).toBe(200);
    expect((await t.json("GET", "/api/docs/assets/package.json", { token: null })).status).toBe(
      404,
    );
    expect(
      (await t.json("GET", "/api/docs/assets/..%2Fpackage.json", { token: null })).status,
    ).toBe(403);
    expect((await t.json("GET", "/api/docs/assets/..%2Fpackage.json")).status).toBe(404);
    // The exemption is for the page only: a bad token is still refused, and nothing else opens up.
    expect((await t.req("GET", "/api/docs/", { token: "bad" })).status).toBe(403);
    expect((await t.req("GET", "/api/docs/other", { token: null })).status).toBe(403);
  });
});
