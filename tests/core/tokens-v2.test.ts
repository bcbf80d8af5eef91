/**
 * Issue 29, point 2: tokens v2 as NetBox 4.5+ issues them and pynetbox ≥ 7.6 uses them
 * (pynetbox/core/api.py `create_token`, core/query.py `_add_auth_header`; NetBox 4.7
 * netbox/api/authentication.py, users/api/serializers_/tokens.py). Over HTTP, real libSQL.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp({ TRUSTED_PROXY_HOPS: "1" });
  const made = await t.req("POST", "/api/users/users/", {
    body: { username: "pyuser", password: "s3cret-pass" },
  });
  if (made.status !== 201) throw new Error(await made.text());
});
afterAll(() => t.close());

/** What pynetbox sends: JSON, `accept: application/json`, its own Authorization header. */
const send = (method: string, path: string, authorization: string | null, body?: unknown) =>
  t.app.request(`http://host.test${path}`, {
    method,
    headers: {
      accept: "application/json",
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
      ...(authorization ? { authorization } : {}),
      "x-forwarded-for": "192.0.2.10",
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });

/** pynetbox 7.8 `Api.create_token`: provision, then `nbt_<key>.<token>` when `version` is 2. */
async function createToken(username: string, password: string) {
  const r = await send("POST", "/api/users/tokens/provision/", null, { username, password });
  expect(r.status).toBe(201);
  const resp = (await r.json()) as Record<string, any>;
  const token = resp.version === 2 ? `nbt_${resp.key}.${resp.token}` : (resp.token ?? resp.key);
  return { resp, token: token as string };
}

/** pynetbox's `_add_auth_header`: Bearer for a v2 token, Token otherwise. */
const header = (token: string) =>
  token.startsWith("nbt_") && token.slice(4).includes(".") ? `Bearer ${token}` : `Token ${token}`;

describe("nb.create_token() (POST /api/users/tokens/provision/)", () => {
  test("answers a v2 token: version 2, a 12-character key, a 40-character token shown once", async () => {
    const { resp, token } = await createToken("pyuser", "s3cret-pass");
    expect(resp).toMatchObject({ version: 2, enabled: true, write_enabled: true });
    expect(resp.key).toMatch(/^[A-Za-z0-9]{12}$/);
    expect(resp.token).toMatch(/^[A-Za-z0-9]{40}$/);
    expect(resp.display).toBe(resp.key);
    expect(resp.allowed_ips).toBeNull();
    expect((await send("GET", "/api/status/", header(token))).status).toBe(200);
    const read = await send("GET", `/api/users/tokens/${resp.id}/`, `Token ${t.admin}`);
    expect(read.status).toBe(200);
    const again = (await read.json()) as Record<string, unknown>;
    expect(again.key).toBe(resp.key);
    expect(again).not.toHaveProperty("token");
    expect(JSON.stringify(again)).not.toContain(resp.token);
  });

  test("Authorization: Bearer nbt_<key>.<token> authenticates; a wrong secret or key does not", async () => {
    const { resp, token } = await createToken("pyuser", "s3cret-pass");
    expect((await send("GET", "/api/status/", header(token))).status).toBe(200);
    // NetBox infers the version from the prefix, so `Token nbt_…` works as well (pynetbox < 7.6)
    expect((await send("GET", "/api/status/", `Token ${token}`)).status).toBe(200);
    const wrongSecret = `Bearer nbt_${resp.key}.${"x".repeat(40)}`;
    const wrongKey = `Bearer nbt_${"A".repeat(12)}.${resp.token}`;
    const noDot = `Bearer nbt_${resp.key}${resp.token}`;
    const asV1 = `Token ${resp.token}`;
    for (const bad of [wrongSecret, wrongKey, noDot, asV1]) {
      const r = await send("GET", "/api/status/", bad);
      expect(r.status).toBe(403);
      expect(((await r.json()) as any).detail).toBe("Invalid token");
    }
  });

  test("GET /api/authentication-check/ names the user; 403 without a token", async () => {
    const { token } = await createToken("pyuser", "s3cret-pass");
    const r = await send("GET", "/api/authentication-check/", header(token));
    expect(r.status).toBe(200);
    const user = (await r.json()) as Record<string, unknown>;
    expect(user).toMatchObject({ username: "pyuser", id: expect.any(Number) });
    expect(user).not.toHaveProperty("password");
    expect((await send("GET", "/api/authentication-check/", null)).status).toBe(403);
  });
});

describe("v1 tokens stay accepted (deprecated, as in NetBox 4.6)", () => {
  test("POST /api/users/tokens/ with version 1: Token <40> works; key is null; token shown once", async () => {
    const r = await send("POST", "/api/users/tokens/", `Token ${t.admin}`, { version: 1 });
    expect(r.status).toBe(201);
    const v1 = (await r.json()) as Record<string, any>;
    expect(v1).toMatchObject({ version: 1, key: null });
    expect(v1.token).toMatch(/^[0-9a-f]{40}$/);
    expect((await send("GET", "/api/status/", `Token ${v1.token}`)).status).toBe(200);
    expect((await send("GET", "/api/status/", `Bearer ${v1.token}`)).status).toBe(200);
  });

  test("the tokens API issues v2 by default; version cannot change afterwards", async () => {
    const r = await send("POST", "/api/users/tokens/", `Token ${t.admin}`, {});
    const v2 = (await r.json()) as Record<string, any>;
    expect(v2.version).toBe(2);
    const change = await send("PATCH", `/api/users/tokens/${v2.id}/`, `Token ${t.admin}`, {
      version: 1,
    });
    expect(change.status).toBe(400);
    expect(((await change.json()) as any).version).toBeDefined();
    const bad = await send("POST", "/api/users/tokens/", `Token ${t.admin}`, { version: 3 });
    expect(bad.status).toBe(400);
  });
});

describe("NetBox 4.7 token fields: enabled, write_enabled, allowed_ips", () => {
  async function token(body: Record<string, unknown>) {
    const r = await send("POST", "/api/users/tokens/", `Token ${t.admin}`, body);
    expect(r.status).toBe(201);
    const made = (await r.json()) as Record<string, any>;
    return { id: made.id as number, auth: `Bearer nbt_${made.key}.${made.token}` };
  }

  test("enabled: false refuses the token (Token disabled) until enabled again", async () => {
    const tk = await token({});
    const off = await send("PATCH", `/api/users/tokens/${tk.id}/`, `Token ${t.admin}`, {
      enabled: false,
    });
    expect(off.status).toBe(200);
    const r = await send("GET", "/api/status/", tk.auth);
    expect(r.status).toBe(403);
    expect(((await r.json()) as any).detail).toBe("Token disabled");
    await send("PATCH", `/api/users/tokens/${tk.id}/`, `Token ${t.admin}`, { enabled: true });
    expect((await send("GET", "/api/status/", tk.auth)).status).toBe(200);
  });

  test("write_enabled: false reads but cannot write", async () => {
    const tk = await token({ write_enabled: false });
    expect((await send("GET", "/api/dcim/sites/", tk.auth)).status).toBe(200);
    const w = await send("POST", "/api/dcim/sites/", tk.auth, { name: "ro", slug: "ro" });
    expect(w.status).toBe(403);
  });

  test("allowed_ips is checked against the client address", async () => {
    const inside = await token({ allowed_ips: ["192.0.2.0/24", "2001:db8::/32"] });
    expect((await send("GET", "/api/status/", inside.auth)).status).toBe(200);
    const outside = await token({ allowed_ips: ["198.51.100.0/24"] });
    const r = await send("GET", "/api/status/", outside.auth);
    expect(r.status).toBe(403);
    expect(((await r.json()) as any).detail).toBe(
      "Source IP 192.0.2.10 is not permitted to authenticate using this token.",
    );
    const bad = await send("POST", "/api/users/tokens/", `Token ${t.admin}`, {
      allowed_ips: ["10.0.0.0/33"],
    });
    expect(bad.status).toBe(400);
    expect(Object.keys((await bad.json()) as object)).toEqual(["allowed_ips"]);
  });
});
