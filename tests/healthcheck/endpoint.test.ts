/**
 * The health endpoint with every dependency healthy (real redis-server behind the Upstash bridge):
 * representations, negotiation, HEAD, probes, login_required, and the plugin switched off.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import {
  BUILTIN_IDS,
  bridgeEnv,
  HEALTH,
  healthConfig,
  healthJson,
  makeHealthApp,
  type HealthApp,
} from "./helpers";

let stack: RedisStack;
let t: HealthApp;

beforeAll(async () => {
  stack = await startRedisStack();
  t = await makeHealthApp({ ...bridgeEnv(stack), CACHE_BACKEND: "redis" });
});

afterAll(async () => {
  await t?.close();
  await stack?.stop();
});

const get = (path: string, headers: Record<string, string> = {}, method = "GET") =>
  t.req(method, path, { token: null, headers });

describe("JSON", () => {
  test("all four built-in checks are working over the bridge (caching and tasks)", async () => {
    const r = await healthJson(t);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      status: "working",
      checks: {
        Database: "working",
        CacheBackend: "working",
        HostRedisCacheHealthCheck: "working",
        HostRedisTasksHealthCheck: "working",
      },
    });
    expect(Object.keys(r.body.checks)).toEqual(BUILTIN_IDS);
    expect(r.res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(r.res.headers.get("cache-control")).toBe("no-store");
    expect(r.res.headers.get("vary")).toBe("Accept");
    expect(t.deps.cache.backend).toBe("redis");
  });

  test("?format=json wins over the Accept header, with or without the trailing slash", async () => {
    for (const path of [`${HEALTH}?format=json`, `${HEALTH.slice(0, -1)}?format=json`]) {
      for (const accept of [undefined, "text/html", "text/csv"]) {
        const r = await get(path, accept ? { accept } : {});
        expect(r.status).toBe(200);
        expect(r.headers.get("content-type")).toMatch(/^application\/json/);
        expect((await r.json()).status).toBe("working");
      }
    }
  });

  test("application/json is chosen by q-value over text/html", async () => {
    const r = await get(HEALTH, { accept: "text/html;q=0.5, application/json" });
    expect(r.headers.get("content-type")).toMatch(/^application\/json/);
    const r2 = await get(HEALTH, { accept: "application/*" });
    expect(r2.headers.get("content-type")).toMatch(/^application\/json/);
  });
});

describe("HTML", () => {
  test("browsers, */*, text/html and no Accept header get a readable table", async () => {
    const browser =
      "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";
    for (const headers of [
      {},
      { accept: "*/*" },
      { accept: "text/html" },
      { accept: browser },
    ] as Array<Record<string, string>>) {
      const r = await get(HEALTH, headers);
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toMatch(/^text\/html/);
      expect(r.headers.get("cache-control")).toBe("no-store");
      expect(r.headers.get("vary")).toBe("Accept");
      const html = await r.text();
      expect(html.startsWith("<!doctype html>")).toBe(true);
      expect(html).toContain("<table>");
      for (const id of BUILTIN_IDS)
        expect(html).toMatch(new RegExp(`<td>${id}</td><td class="ok">working</td>`));
      expect(html).toContain('System status: <span class="ok">working</span>');
    }
  });
});

describe("negotiation failures", () => {
  test("anything else answers 406 {detail} naming the supported types", async () => {
    for (const accept of [
      "text/csv",
      "application/xml",
      "image/png, text/plain",
      "application/json;q=0",
    ]) {
      const r = await get(HEALTH, { accept });
      expect(r.status).toBe(406);
      expect(r.headers.get("cache-control")).toBe("no-store");
      expect(r.headers.get("vary")).toBe("Accept");
      const body = await r.json();
      expect(Object.keys(body)).toEqual(["detail"]);
      expect(body.detail).toContain("application/json");
      expect(body.detail).toContain("text/html");
    }
    expect((await get(`${HEALTH}?format=yaml`)).status).toBe(406);
  });
});

describe("HEAD", () => {
  test("answers the same status with no body", async () => {
    for (const headers of [{}, { accept: "application/json" }] as Array<Record<string, string>>) {
      const r = await get(HEALTH, headers, "HEAD");
      expect(r.status).toBe(200);
      expect(r.headers.get("cache-control")).toBe("no-store");
      expect(await r.text()).toBe("");
    }
    expect((await get(HEALTH, { accept: "text/csv" }, "HEAD")).status).toBe(406);
  });
});

describe("application/health+json", () => {
  test("IETF health format with per-check timings", async () => {
    const r = await get(HEALTH, { accept: "application/health+json" });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("application/health+json");
    expect(r.headers.get("cache-control")).toBe("no-store");
    const body = await r.json();
    expect(body.status).toBe("pass");
    expect(Object.keys(body.checks)).toEqual(BUILTIN_IDS);
    for (const id of BUILTIN_IDS) {
      const [entry] = body.checks[id];
      expect(entry.status).toBe("pass");
      expect(entry.observedUnit).toBe("ms");
      expect(typeof entry.observedValue).toBe("number");
      expect(entry.observedValue).toBeGreaterThanOrEqual(0);
      expect(Number.isNaN(Date.parse(entry.time))).toBe(false);
      expect(entry.output).toBeUndefined();
      expect(typeof entry.componentId).toBe("string");
    }
    expect(body.checks.Database[0].componentId).toBe("health_check.Database");
    expect((await get(`${HEALTH}?format=health%2Bjson`)).headers.get("content-type")).toBe(
      "application/health+json",
    );
  });
});

describe("probes", () => {
  test("/livez is 200 {status: ok}, with or without the slash, and answers HEAD", async () => {
    for (const path of ["/livez", "/livez/"]) {
      const r = await get(path);
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual({ status: "ok" });
      expect(r.headers.get("cache-control")).toBe("no-store");
    }
    const head = await get("/livez", {}, "HEAD");
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
  });

  test("/readyz runs the checks: 200 when ready", async () => {
    for (const path of ["/readyz", "/readyz/"]) {
      const r = await get(path);
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual({ status: "ready" });
      expect(r.headers.get("cache-control")).toBe("no-store");
    }
  });
});

describe("Redis over Bun's client (redis://)", () => {
  test("both roles work straight against redis-server", async () => {
    const direct = await makeHealthApp({
      REDIS_CACHING_URL: stack.redis.url,
      REDIS_TASKS_URL: stack.redis.url,
      CACHE_BACKEND: "redis",
    });
    try {
      const r = await healthJson(direct);
      expect(r.status).toBe(200);
      expect(r.body.status).toBe("working");
      expect(Object.values(r.body.checks)).toEqual(["working", "working", "working", "working"]);
    } finally {
      await direct.close();
    }
  });
});

describe("login_required", () => {
  let locked: HealthApp;
  beforeAll(async () => {
    locked = await makeHealthApp({
      ...bridgeEnv(stack),
      PLUGINS_CONFIG: healthConfig({ login_required: true }),
    });
  });
  afterAll(async () => {
    await locked?.close();
  });

  test("no token: 401 with WWW-Authenticate: Token, never a redirect", async () => {
    for (const accept of ["application/json", "text/html"]) {
      const r = await locked.req("GET", HEALTH, { token: null, headers: { accept } });
      expect(r.status).toBe(401);
      expect(r.headers.get("www-authenticate")).toMatch(/^Token\b/);
      expect(r.headers.get("location")).toBeNull();
      expect((await r.json()).detail).toBe("Authentication credentials were not provided.");
    }
    expect((await locked.req("HEAD", HEALTH, { token: null })).status).toBe(401);
  });

  test("a bad or malformed token: 401", async () => {
    for (const authorization of [
      "Token 0000000000000000000000000000000000000000",
      "Token",
      "Basic abc",
    ]) {
      const r = await locked.req("GET", HEALTH, {
        token: null,
        headers: { accept: "application/json", authorization },
      });
      expect(r.status).toBe(401);
      expect(r.headers.get("www-authenticate")).toMatch(/^Token\b/);
    }
  });

  test("any valid token (Token or Bearer) passes", async () => {
    const plain = await locked.user("monitor");
    for (const authorization of [`Token ${plain}`, `Bearer ${locked.admin}`]) {
      const r = await locked.req("GET", HEALTH, {
        token: null,
        headers: { accept: "application/json", authorization },
      });
      expect(r.status).toBe(200);
      expect((await r.json()).status).toBe("working");
    }
  });

  test("the probes stay open to anonymous callers", async () => {
    expect((await locked.req("GET", "/livez", { token: null })).status).toBe(200);
    const ready = await locked.req("GET", "/readyz", { token: null });
    expect(ready.status).toBe(200);
  });

  test("by default the endpoint is open to anonymous callers even with LOGIN_REQUIRED=true", async () => {
    expect(t.deps.config.loginRequired).toBe(true);
    expect((await get(HEALTH, { accept: "application/json" })).status).toBe(200);
  });
});

describe("plugin not enabled", () => {
  let off: TestApp;
  beforeAll(async () => {
    off = await makeTestApp({ PLUGINS: "custom_objects" });
  });
  afterAll(async () => {
    await off?.close();
  });

  test("its paths answer 404 exactly like unknown paths", async () => {
    const unknown = await (
      await off.req("GET", "/plugins/nope/healthcheck/", { token: null })
    ).text();
    for (const path of [HEALTH, "/livez", "/readyz"]) {
      const r = await off.req("GET", path, {
        token: null,
        headers: { accept: "application/json" },
      });
      expect(r.status).toBe(404);
      expect(await r.text()).toBe(unknown);
    }
  });
});
