/**
 * On Workers (real workerd): `/api/schema/` is the same generated document, JSON and YAML, and
 * `/api/docs/` answers a clear 501 because the Worker bundle does not carry Swagger UI's assets.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import {
  startRemoteDatabase,
  startWorker,
  type RemoteDatabase,
  type RunningWorker,
} from "../helpers/worker";

setDefaultTimeout(60_000);

let db: RemoteDatabase;
let w: RunningWorker;
let token: string;

beforeAll(async () => {
  db = await startRemoteDatabase();
  token = await db.superuserToken();
  w = await startWorker({ bindings: { DATABASE_URL: db.url } });
}, 180_000);
afterAll(async () => {
  await w?.stop();
  await db?.stop();
});

describe("schema documents in YAML on Workers (the yaml package in the Worker bundle)", () => {
  test("schema/preview/ reads application/yaml and answers YAML for Accept: application/yaml", async () => {
    const r = await w.fetch("/api/plugins/custom-objects/schema/preview/", {
      method: "POST",
      headers: {
        authorization: `Token ${token}`,
        "content-type": "application/yaml",
        accept: "application/yaml",
      },
      body: 'schema_version: "1"\ntypes:\n  - name: edge_yaml\n    slug: edge_yaml\n',
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("application/yaml");
    const text = await r.text();
    expect(text).toContain("slug: edge_yaml");
    expect(text).toContain("is_new: true");
  });
});

describe("OpenAPI on Workers", () => {
  test("the document is served and valid, with a type's paths after it is created", async () => {
    const auth = { authorization: `Token ${token}` };
    const created = await w.fetch("/api/plugins/custom-objects/custom-object-types/", {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ name: "edge_note", slug: "edge_note" }),
    });
    expect(created.status).toBe(201);
    const res = await w.fetch("/api/schema/", { headers: auth });
    expect(res.status).toBe(200);
    const doc = await res.json();
    expect(doc.paths["/api/plugins/custom-objects/edge_note/"]).toBeDefined();
    expect(doc.servers[0].url).toBe(w.url.origin);
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    const yaml = await w.fetch("/api/schema/?format=yaml", { headers: auth });
    expect(yaml.headers.get("content-type")).toContain("application/yaml");
    expect((await yaml.text()).startsWith("openapi: 3.1.0")).toBe(true);
    expect((await w.fetch("/api/schema/")).status).toBe(403);
  });

  test("the document's JSON and YAML answer with a Content-Length equal to their bytes, each time", async () => {
    // identity: to a client taking gzip, Cloudflare's front line (as miniflare's entry) sends
    // the text compressed, chunked, whatever the Worker said
    const headers = { authorization: `Token ${token}`, "accept-encoding": "identity" };
    // twice each: the kept bytes serve every request whole (none handed over to the first)
    for (const path of ["/api/schema/", "/api/schema/?format=yaml", "/api/docs/?format=openapi"])
      for (let i = 0; i < 2; i++) {
        const res = await w.fetch(path, { headers });
        expect(res.status).toBe(200);
        const body = new Uint8Array(await res.arrayBuffer());
        expect(body.byteLength).toBeGreaterThan(100_000);
        expect(res.headers.get("content-length")).toBe(String(body.byteLength));
        expect(res.headers.get("transfer-encoding")).toBeNull();
        const text = new TextDecoder().decode(body);
        expect(
          text.startsWith(path.includes("yaml") ? "openapi: 3.1.0" : '{"openapi":"3.1.0"'),
        ).toBe(true);
      }
  });

  test("route schemas validate at the boundary in workerd too (the §4 400) and describe the route", async () => {
    const auth = { authorization: `Token ${token}` };
    const bad = await w.fetch("/api/schema/?format=xml", { headers: auth });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ format: ["Unknown format: use json or yaml."] });
    const linked = await w.fetch(
      "/api/plugins/custom-objects/linked-objects/?object_type=dcim.site&object_id=x",
      { headers: auth },
    );
    expect(linked.status).toBe(400);
    expect(await linked.json()).toEqual({ object_id: ["A valid integer is required."] });
    const provision = await w.fetch("/api/users/tokens/provision/", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: "x" }),
    });
    expect(provision.status).toBe(400);
    expect(await provision.json()).toEqual({ password: ["Provide username and password."] });
    const doc = await (await w.fetch("/api/schema/", { headers: auth })).json();
    const objectId = doc.paths["/api/plugins/custom-objects/linked-objects/"].get.parameters.find(
      (p: { name?: string }) => p.name === "object_id",
    );
    expect(objectId.schema.pattern).toBe("^\\d{1,15}$");
  });

  test("the docs page answers 501 with a pointer to /api/schema/", async () => {
    for (const path of ["/api/docs/", "/api/docs/assets/swagger-ui-bundle.js"]) {
      const res = await w.fetch(path);
      expect(res.status).toBe(501);
      const body = await res.json();
      expect(body.error).toBe("not_implemented");
      expect(body.detail).toContain("/api/schema/");
    }
  });
});
