/**
 * pynetbox 7 out of the box (issue 15). PyPI is not reachable from the test machine, so each
 * test sends the request pynetbox sends (method, path, headers), read from its source
 * (netbox-community/pynetbox, pynetbox/core/query.py `Request`, endpoint.py, app.py, api.py),
 * and checks what pynetbox reads from the answer.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, choiceSet, create, makeCot } from "../custom-objects/fixtures";

/** The NetBox API release Host answers as after issue 29 (ETag, cursors, tokens v2, background bulk). */
const NETBOX_API = "4.7";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

/** Request._make_call("options"): `accept: application/json` and the token; no body, no params. */
const options = (
  path: string,
  token: string | null = t.admin,
  headers: Record<string, string> = {},
) => t.req("OPTIONS", path, { token, headers: { accept: "application/json", ...headers } });

/** Endpoint.choices(): actions.POST (or PUT) → {field: choices} for fields that have them. */
async function choices(
  res: Response,
): Promise<Record<string, { value: unknown; display_name: string }[]>> {
  expect(res.status).toBe(200);
  const body = (await res.json()) as any;
  const post = body.actions?.POST ?? body.actions?.PUT;
  if (!post) throw new Error("Unexpected format in the OPTIONS response");
  return Object.fromEntries(
    Object.entries(post)
      .filter(([, v]: any) => "choices" in v)
      .map(([k, v]: any) => [k, v.choices]),
  );
}

describe("nb.version (Request.get_version)", () => {
  test("GET /api/ with Content-Type and the token answers the API-Version header", async () => {
    const r = await t.req("GET", "/api/", { headers: { "content-type": "application/json" } });
    expect(r.status).toBe(200);
    expect(r.headers.get("API-Version")).toBe(NETBOX_API);
  });

  test("pynetbox also reads it from a 403 (no token), and every /api/ answer carries it", async () => {
    const r = await t.req("GET", "/api/", {
      token: null,
      headers: { "content-type": "application/json" },
    });
    expect(r.status).toBe(403);
    expect(r.headers.get("API-Version")).toBe(NETBOX_API);
    expect((await t.req("GET", "/api/dcim/sites/")).headers.get("API-Version")).toBe(NETBOX_API);
    expect((await t.req("GET", "/api/nope/")).headers.get("API-Version")).toBe(NETBOX_API);
    expect((await t.req("GET", "/livez")).headers.get("API-Version")).toBeNull();
  });
});

describe("nb.status() (Request.get_status) and Terraform's start-up probe", () => {
  test("GET /api/status/ carries netbox-version (the NetBox release the API follows) beside Host's own keys", async () => {
    const r = await t.req("GET", "/api/status/", {
      headers: { "content-type": "application/json" },
    });
    expect(r.status).toBe(200);
    const body = (await r.json()) as Record<string, unknown>;
    expect(body["netbox-version"]).toBe(`${NETBOX_API}.0`);
    expect(String(body["netbox-version"]).startsWith(r.headers.get("API-Version")!)).toBe(true);
    expect(body["host-version"]).toEqual(expect.any(String));
    expect(body.plugins).toMatchObject({ custom_objects: expect.any(String) });
  });
});

describe("nb.openapi() (Request.get_openapi)", () => {
  const openapiHeaders = { accept: "application/json", "content-type": "application/json" };

  test("API-Version 4.7 ≥ 3.5: GET /api/schema/ with Accept JSON answers the document", async () => {
    // get_openapi sends no token; with LOGIN_REQUIRED (the default) the README's way is a
    // session header: nb.http_session.headers["Authorization"] = "Token …"
    const anon = await t.req("GET", "/api/schema/", { token: null, headers: openapiHeaders });
    expect(anon.status).toBe(403);
    const r = await t.req("GET", "/api/schema/", { headers: openapiHeaders });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("application/json");
    expect(((await r.json()) as any).openapi).toMatch(/^3\./);
  });

  test("older pynetbox: GET /api/docs/?format=openapi answers the same document, with the same access rule", async () => {
    const r = await t.req("GET", "/api/docs/?format=openapi", { headers: openapiHeaders });
    expect(r.status).toBe(200);
    const doc = (await r.json()) as any;
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.paths["/api/dcim/sites/"]).toBeDefined();
    const anon = await t.req("GET", "/api/docs/?format=openapi", {
      token: null,
      headers: openapiHeaders,
    });
    expect(anon.status).toBe(403);
  });

  test("with LOGIN_REQUIRED=false nb.openapi() works without a token", async () => {
    const open = await makeTestApp({ LOGIN_REQUIRED: "false" });
    try {
      const v = await open.req("GET", "/api/", {
        token: null,
        headers: { "content-type": "application/json" },
      });
      expect(v.headers.get("API-Version")).toBe(NETBOX_API);
      const r = await open.req("GET", "/api/schema/", { token: null, headers: openapiHeaders });
      expect(r.status).toBe(200);
      expect(((await r.json()) as any).paths).toBeDefined();
    } finally {
      await open.close();
    }
  });
});

describe("Endpoint.choices() (OPTIONS with DRF metadata)", () => {
  test("host model list endpoint: actions.POST.status.choices", async () => {
    const c = await choices(await options("/api/dcim/sites/"));
    expect(c.status!.map((x) => x.value)).toEqual([
      "planned",
      "staging",
      "active",
      "decommissioning",
      "retired",
    ]);
    // display_name is the label, as NetBox's metadata gives it (decision 0200)
    expect(c.status![0]).toEqual({ value: "planned", display_name: "Planned" });
  });

  test("the whole answer has DRF's shape; Allow lists the methods", async () => {
    const r = await options("/api/dcim/sites/");
    const body = (await r.json()) as any;
    expect(Object.keys(body).sort()).toEqual([
      "actions",
      "description",
      "name",
      "parses",
      "renders",
    ]);
    expect(body.actions.POST.name).toMatchObject({
      type: "string",
      required: true,
      read_only: false,
      label: "Name",
      max_length: 100,
    });
    expect(body.actions.POST.id).toMatchObject({ type: "integer", read_only: true });
    expect(r.headers.get("allow")).toContain("POST");
    expect(r.headers.get("API-Version")).toBe(NETBOX_API);
  });

  test("detail endpoint: actions.PUT", async () => {
    const s = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Choices", slug: "choices" },
    });
    const r = await options(`/api/dcim/sites/${s.body.id}/`);
    const body = (await r.json()) as any;
    expect(body.actions.PUT.status.type).toBe("choice");
  });

  test("custom object endpoint: select and multiselect fields list their choice set", async () => {
    await choiceSet(t, "pyn_speeds", ["slow", "fast"]);
    const cot = await makeCot(t, "circuit_provider");
    await addField(t, cot.id, { name: "name", type: "text", primary: true, required: true });
    await addField(t, cot.id, { name: "speed", type: "select", choice_set: "pyn_speeds" });
    await addField(t, cot.id, { name: "speeds", type: "multiselect", choice_set: "pyn_speeds" });
    const c = await choices(await options(`${CO}/circuit_provider/`));
    expect(c.speed!.map((x) => x.value)).toEqual(["slow", "fast"]);
    expect(c.speeds!.map((x) => x.value)).toEqual(["slow", "fast"]);
    const body = (await (await options(`${CO}/circuit_provider/`)).json()) as any;
    expect(body.actions.POST.name.required).toBe(true);
  });

  test("needs a token like GET; types the caller may not view are not described", async () => {
    expect((await options("/api/dcim/sites/", null)).status).toBe(403);
    const key = await t.user("pyn-viewer", [[["view"], "dcim.site"]]);
    expect((await options("/api/dcim/sites/", key)).status).toBe(200);
    const hidden = await options(`${CO}/circuit_provider/`, key);
    expect(hidden.status).not.toBe(200);
    expect(JSON.stringify(await hidden.json())).not.toContain("speed");
  });

  test("an unknown path stays 404, a known one with another method stays 405", async () => {
    expect((await options("/api/dcim/nothing/")).status).toBe(404);
    expect((await t.req("POST", "/api/status/")).status).toBe(405);
  });
});

describe("CORS preflight is still answered before authentication", () => {
  test("OPTIONS with Access-Control-Request-Method is a preflight (204); without it, metadata (200) with CORS headers", async () => {
    const c = await makeTestApp({ CORS_ORIGINS: "https://ui.example" });
    try {
      const pre = await c.req("OPTIONS", "/api/dcim/sites/", {
        token: null,
        headers: {
          origin: "https://ui.example",
          "access-control-request-method": "POST",
          "access-control-request-headers": "authorization",
        },
      });
      expect(pre.status).toBe(204);
      expect(pre.headers.get("access-control-allow-origin")).toBe("https://ui.example");
      expect(pre.headers.get("access-control-allow-methods")).toContain("POST");
      const meta = await c.req("OPTIONS", "/api/dcim/sites/", {
        headers: { origin: "https://ui.example", accept: "application/json" },
      });
      expect(meta.status).toBe(200);
      expect(((await meta.json()) as any).actions.POST.status.type).toBe("choice");
      expect(meta.headers.get("access-control-allow-origin")).toBe("https://ui.example");
      expect(meta.headers.get("access-control-expose-headers")).toContain("API-Version");
      const other = await c.req("OPTIONS", "/api/dcim/sites/", {
        headers: { origin: "https://evil.example", accept: "application/json" },
      });
      expect(other.headers.get("access-control-allow-origin")).toBeNull();
    } finally {
      await c.close();
    }
  });
});

describe("nb.plugins.custom_objects.<name> (PluginsApp / App / Endpoint)", () => {
  test("attribute access dashes underscores: circuit_provider is reached as circuit-provider/ (404, decision 0048)", async () => {
    // PluginsApp.__getattr__ → App("plugins/custom-objects"); App.__getattr__ → Endpoint(name.replace("_", "-"))
    const r = await t.json("GET", `${CO}/circuit-provider/`);
    expect(r.status).toBe(404);
  });

  test("the README's ways: a dashed slug, App.endpoint() (7.8+) or a literal Endpoint (any 7.x) reach the type", async () => {
    await create(t, "circuit_provider", { name: "Acme" });
    // App.endpoint("circuit_provider") / the README's LiteralEndpoint: the slug verbatim
    const lit = await t.json("GET", `${CO}/circuit_provider/?name=Acme`, {
      headers: { accept: "application/json" },
    });
    expect(lit.status).toBe(200);
    expect(lit.body.count).toBe(1);
    // a dashed slug is reached by attribute access (nb.plugins.custom_objects.wan_link)
    const cot = await makeCot(t, "wan_link", "wan-link");
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    await create(t, "wan-link", { name: "w1" });
    const dashed = await t.json("GET", `${CO}/wan-link/`);
    expect(dashed.body.count).toBe(1);
  });
});

describe("pynetbox 7.8 CustomObjectsExtension (extensions/custom_objects.py)", () => {
  /** `_plugin_request(api, path).post(data)`: JSON body, accept JSON, `Bearer nbt_…` (a v2 token). */
  const post = (path: string, body: unknown) =>
    t.req("POST", `${CO}/${path}`, {
      token: null,
      body,
      headers: {
        accept: "application/json",
        "content-type": "application/json",
        authorization: `Bearer ${t.admin}`,
      },
    });
  const doc = (fields: unknown[], removed?: unknown[]) => ({
    schema_version: "1",
    types: [
      {
        name: "ext_provider",
        slug: "ext_provider",
        fields,
        ...(removed ? { removed_fields: removed } : {}),
      },
    ],
  });
  const name = { id: 1, name: "name", type: "text", primary: true };
  const note = { id: 2, name: "note", type: "text" };

  test("schema_preview(nb, doc) posts the bare document and reads diffs", async () => {
    expect(t.admin).toStartWith("nbt_");
    const r = await post("schema/preview/", doc([name, note]));
    expect(r.status).toBe(200);
    expect(((await r.json()) as any).diffs[0]).toMatchObject({
      slug: "ext_provider",
      is_new: true,
    });
  });

  test("schema_apply(nb, doc, allow_destructive=False) posts {schema, allow_destructive}; a removal raises (409) until allowed", async () => {
    expect(
      (await post("schema/apply/", { schema: doc([name, note]), allow_destructive: false })).status,
    ).toBe(200);
    const removal = doc([name], [note]);
    const refused = await post("schema/apply/", { schema: removal, allow_destructive: false });
    expect(refused.status).toBe(409);
    expect(((await refused.json()) as any).destructive_slugs).toEqual(["ext_provider"]);
    const allowed = await post("schema/apply/", { schema: removal, allow_destructive: true });
    expect(allowed.status).toBe(200);
    expect(((await allowed.json()) as any).applied).toBe(true);
  });

  test("linked_objects.filter(object_type=, object_id=) is GET linked-objects/ with those params", async () => {
    const r = await t.json("GET", `${CO}/linked-objects/?object_type=dcim.site&object_id=1`, {
      headers: { accept: "application/json" },
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ count: expect.any(Number), results: expect.any(Array) });
  });
});
