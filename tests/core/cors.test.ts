/**
 * CORS_ORIGINS through `hono/cors`: preflights answer without a token for allowed origins, other
 * origins get no Access-Control-* grant, and with the setting unset nothing changes.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { loadConfig } from "../../src/config";

const APP = "https://app.example.com";
const apps: TestApp[] = [];
afterAll(async () => {
  for (const t of apps) await t.close();
});
async function app(env: Record<string, string>) {
  const t = await makeTestApp(env);
  apps.push(t);
  return t;
}

const preflight = (t: TestApp, origin: string, path = "/api/dcim/sites/") =>
  t.req("OPTIONS", path, {
    token: null,
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization, content-type",
    },
  });

describe("CORS", () => {
  test("an allowed origin's preflight answers 204 with the grant, without a token", async () => {
    const t = await app({ CORS_ORIGINS: `${APP}, http://localhost:5173` });
    const res = await preflight(t, APP);
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(APP);
    expect(res.headers.get("access-control-allow-methods")).toContain("POST");
    expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toContain(
      "authorization",
    );
    expect(res.headers.get("vary")).toContain("Origin");
    expect(
      (await preflight(t, "http://localhost:5173")).headers.get("access-control-allow-origin"),
    ).toBe("http://localhost:5173");
  });

  test("an allowed origin's request carries the grant and exposes X-Request-Id; the token still decides access", async () => {
    const t = await app({ CORS_ORIGINS: APP });
    const ok = await t.req("GET", "/api/status/", { headers: { origin: APP } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("access-control-allow-origin")).toBe(APP);
    expect(ok.headers.get("access-control-expose-headers")).toContain("X-Request-Id");
    const anonymous = await t.req("GET", "/api/status/", { token: null, headers: { origin: APP } });
    expect(anonymous.status).toBe(403);
    expect(anonymous.headers.get("access-control-allow-origin")).toBe(APP); // the browser may read the 403
  });

  test("a denied origin gets no grant, on preflight or request", async () => {
    const t = await app({ CORS_ORIGINS: APP });
    const pre = await preflight(t, "https://evil.example.net");
    expect(pre.headers.get("access-control-allow-origin")).toBeNull();
    const res = await t.req("GET", "/api/status/", {
      headers: { origin: "https://evil.example.net" },
    });
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });

  test("CORS_ORIGINS=* allows any origin", async () => {
    const t = await app({ CORS_ORIGINS: "*" });
    const res = await preflight(t, "https://anything.example.org");
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
  });

  test("unset (the default): no CORS headers, a preflight is refused like any anonymous request", async () => {
    const t = await app({});
    const res = await preflight(t, APP);
    expect(res.status).toBe(403);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });

  test("a bad CORS_ORIGINS stops start-up naming the setting", () => {
    expect(() => loadConfig({ CORS_ORIGINS: "app.example.com" })).toThrow(
      "invalid setting CORS_ORIGINS",
    );
    expect(() => loadConfig({ CORS_ORIGINS: "https://app.example.com/path" })).toThrow(
      "invalid setting CORS_ORIGINS",
    );
    expect(loadConfig({ CORS_ORIGINS: "https://App.example.com/" }).corsOrigins).toEqual([
      "https://app.example.com",
    ]);
    expect(loadConfig({}).corsOrigins).toEqual([]);
  });
});
