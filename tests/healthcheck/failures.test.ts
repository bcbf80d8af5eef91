/**
 * The checks against broken dependencies, with real processes: Redis stopped, frozen (SIGSTOP),
 * refusing our token; the database closed or its remote server gone. Secrets never show.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { openDatabase } from "../../src/db/local";
import { runMigrations } from "../../src/migrations";
import { createMemoryCache } from "../../src/services/cache";
import { createLogger } from "../../src/services/logger";
import { createUpstashRedis } from "../../src/services/redis";
import { startHranaServer } from "../../tools/hrana-server";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import { BASE } from "../helpers/app";
import { waitFor } from "../helpers/wait";
import {
  bridgeEnv,
  HEALTH,
  healthConfig,
  healthJson,
  makeHealthApp,
  type HealthApp,
} from "./helpers";

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

async function stackForTest(): Promise<RedisStack> {
  const stack = await startRedisStack();
  cleanups.push(() => stack.stop());
  return stack;
}

async function appForTest(
  env: Record<string, string>,
  extra: Parameters<typeof makeHealthApp>[1] = {},
): Promise<HealthApp> {
  const t = await makeHealthApp(env, extra);
  cleanups.push(() => t.close());
  return t;
}

/** Every representation of the endpoint, concatenated, for "never shows X" assertions. */
async function everyRepresentation(t: HealthApp): Promise<string> {
  const parts: string[] = [];
  for (const accept of ["application/json", "text/html", "application/health+json"]) {
    parts.push(await (await t.req("GET", HEALTH, { token: null, headers: { accept } })).text());
  }
  parts.push(await (await t.req("GET", "/readyz", { token: null })).text());
  return parts.join("\n");
}

describe("Redis stopped", () => {
  test("the Redis checks and the Redis cache report unavailable and the answer is 500, within the timeout", async () => {
    const stack = await stackForTest();
    const t = await appForTest({
      ...bridgeEnv(stack),
      CACHE_BACKEND: "redis",
      PLUGINS_CONFIG: healthConfig({ timeout_ms: 1500 }),
    });
    expect((await healthJson(t)).body.status).toBe("working");

    await stack.redis.stop(); // the bridge stays up and answers 503
    const r = await healthJson(t);
    expect(r.status).toBe(500); // answered by the failures, not by the 1,500 ms timeout (below)
    expect(r.body.status).toBe("failing");
    expect(r.body.checks.Database).toBe("working");
    for (const id of ["CacheBackend", "HostRedisCacheHealthCheck", "HostRedisTasksHealthCheck"]) {
      expect(r.body.checks[id]).toMatch(/^unavailable: /);
      expect(r.body.checks[id]).not.toContain("timeout");
    }
    expect(r.body.checks.HostRedisCacheHealthCheck).toStartWith(
      "unavailable: REDIS['caching'] did not answer PING",
    );
    expect(r.body.checks.HostRedisTasksHealthCheck).toStartWith(
      "unavailable: REDIS['tasks'] did not answer PING",
    );
    const ready = await t.req("GET", "/readyz", { token: null });
    expect(ready.status).toBe(503);
    // The cache is behind the resilient wrapper: optional, so only the tasks Redis fails readiness.
    expect((await ready.json()).failing).toEqual(["HostRedisTasksHealthCheck"]);

    await stack.stop(); // now the bridge is gone too: connection refused
    const gone = await healthJson(t);
    expect(gone.status).toBe(500);
    expect(gone.body.checks.HostRedisCacheHealthCheck).toMatch(/^unavailable: /);
    expect(gone.text).not.toContain("timeout");
    expect(await everyRepresentation(t)).not.toContain(stack.bridge.token);
  });

  test("CRUD on the API keeps working with CACHE_BACKEND=redis while Redis is down", async () => {
    const stack = await stackForTest();
    const t = await appForTest({ ...bridgeEnv(stack), CACHE_BACKEND: "redis" });
    const before = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Before", slug: "before" },
    });
    expect(before.status).toBe(201);

    await stack.redis.stop();
    const created = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "During outage", slug: "during-outage" },
    });
    expect(created.status).toBe(201);
    const list = await t.json("GET", "/api/dcim/sites/");
    expect(list.status).toBe(200);
    expect(list.body.results.map((s: { slug: string }) => s.slug).sort()).toEqual([
      "before",
      "during-outage",
    ]);
    const patched = await t.json("PATCH", `/api/dcim/sites/${created.body.id}/`, {
      body: { description: "still here" },
    });
    expect(patched.status).toBe(200);
    expect((await t.json("GET", `/api/dcim/sites/${created.body.id}/`)).body.description).toBe(
      "still here",
    );
    expect((await t.req("DELETE", `/api/dcim/sites/${before.body.id}/`)).status).toBe(204);
    // Authentication still refuses a bad token.
    expect((await t.json("GET", "/api/dcim/sites/", { token: "0".repeat(40) })).status).toBe(403);
    // The login throttle counts on the cache: a failed login during the outage is still refused
    // as a bad login (not a 500), and the resilient cache says once that it serves without Redis.
    const login = await t.json("POST", "/api/users/tokens/provision/", {
      token: null,
      body: { username: "nobody", password: "wrong" },
    });
    expect([400, 403]).toContain(login.status);

    const warnings = t.logs
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg === "cache backend failing; serving without cache");
    expect(warnings.length).toBeGreaterThanOrEqual(1);
    expect(warnings[0]).toMatchObject({ level: "warn", backend: "redis" });
    expect(t.logs.join("\n")).not.toContain(stack.bridge.token);

    const health = await healthJson(t);
    expect(health.status).toBe(500);
    expect(health.body.checks.CacheBackend).toMatch(/^unavailable: cache backend "redis": /);
  });
});

describe("Redis frozen (SIGSTOP)", () => {
  test("the check's timeout fires first: unavailable: timeout after 300 ms", async () => {
    const stack = await stackForTest();
    cleanups.push(() => stack.redis.thaw());
    const t = await appForTest({
      ...bridgeEnv(stack),
      CACHE_BACKEND: "redis",
      PLUGINS_CONFIG: healthConfig({ timeout_ms: 300 }),
    });
    expect((await healthJson(t)).status).toBe(200);

    stack.redis.freeze(); // the Redis client's own timeout (2000 ms) is longer than the check's
    const r = await healthJson(t);
    expect(r.status).toBe(500);
    expect(r.body.checks).toEqual({
      Database: "working",
      CacheBackend: "unavailable: timeout after 300 ms",
      HostRedisCacheHealthCheck: "unavailable: timeout after 300 ms",
      HostRedisTasksHealthCheck: "unavailable: timeout after 300 ms",
    });
    expect((await t.req("HEAD", HEALTH, { token: null })).status).toBe(500);

    stack.redis.thaw();
    const last = await waitFor(
      async () => {
        const answer = await healthJson(t);
        return answer.status === 200 && answer;
      },
      { message: "the health check recovers once Redis thaws" },
    );
    expect(last.body.status).toBe("working");
  });

  test("a Redis client timeout shorter than the check's is reported by the client", async () => {
    const stack = await stackForTest();
    cleanups.push(() => stack.redis.thaw());
    const settings = { url: stack.bridge.url, token: stack.bridge.token };
    const redis = {
      caching: createUpstashRedis(settings, { timeoutMs: 150 }),
      tasks: createUpstashRedis(settings, { timeoutMs: 150 }),
    };
    const t = await appForTest(
      { ...bridgeEnv(stack), PLUGINS_CONFIG: healthConfig({ timeout_ms: 2000 }) },
      { redis },
    );
    stack.redis.freeze();
    const r = await healthJson(t);
    expect(r.status).toBe(500); // by the client's 150 ms timeout, not the check's 2,000 ms one
    expect(r.body.checks.HostRedisCacheHealthCheck).toMatch(
      /^unavailable: REDIS\['caching'\] did not answer PING \(redis http:\/\/127\.0\.0\.1:\d+\/: timeout after 150 ms\)$/,
    );
    expect(r.body.checks.HostRedisTasksHealthCheck).toMatch(/timeout after 150 ms/);
  });
});

describe("Redis refusing our credentials", () => {
  test("a bad Upstash token: unavailable, and no token anywhere in the answer or the logs", async () => {
    const stack = await stackForTest();
    const bad = `wrong-${crypto.randomUUID()}`;
    const t = await appForTest({
      REDIS_CACHING_URL: stack.bridge.url,
      REDIS_CACHING_TOKEN: bad,
      REDIS_TASKS_URL: stack.bridge.url,
      REDIS_TASKS_TOKEN: bad,
      CACHE_BACKEND: "redis",
    });
    const r = await healthJson(t);
    expect(r.status).toBe(500);
    expect(r.body.checks.HostRedisCacheHealthCheck).toMatch(
      /^unavailable: REDIS\['caching'\] did not answer PING \(.*Unauthorized/,
    );
    expect(r.body.checks.HostRedisTasksHealthCheck).toMatch(/^unavailable: .*Unauthorized/);
    expect(r.body.checks.CacheBackend).toMatch(/^unavailable: /);
    const everything = `${await everyRepresentation(t)}\n${t.logs.join("\n")}`;
    expect(everything).not.toContain(bad);
    expect(everything).not.toContain(stack.bridge.token);
    expect(t.logs.some((l) => l.includes("health check failed"))).toBe(true);
  });

  test("a password inside a redis:// URL never shows", async () => {
    const stack = await stackForTest();
    const password = `pw-${crypto.randomUUID()}`;
    const url = `redis://nobody:${password}@127.0.0.1:${stack.redis.port}/?token=${password}x`;
    const t = await appForTest({ REDIS_CACHING_URL: url, REDIS_TASKS_URL: url });
    const r = await healthJson(t);
    expect(r.status).toBe(500);
    expect(r.body.checks.HostRedisCacheHealthCheck).toMatch(/^unavailable: /);
    const everything = `${await everyRepresentation(t)}\n${t.logs.join("\n")}`;
    expect(everything).not.toContain(password);
  });
});

describe("database unreachable", () => {
  test("a closed database: Database is unavailable, the rest still answers", async () => {
    const t = await appForTest({
      PLUGINS_CONFIG: healthConfig({
        checks: ["health_check.Database", "health_check.cache.backends.CacheBackend"],
      }),
    });
    expect((await healthJson(t)).status).toBe(200);
    await t.deps.db.close();
    const r = await healthJson(t);
    expect(r.status).toBe(500);
    expect(r.body.checks.Database).toMatch(/^unavailable: SELECT 1 failed: /);
    expect(r.body.checks.CacheBackend).toBe("working");
    expect((await t.req("GET", "/livez", { token: null })).status).toBe(200);
    expect((await t.req("GET", "/readyz", { token: null })).status).toBe(503);
  });

  test("a remote libSQL server that went away: Database is unavailable, its auth token never shows", async () => {
    const dir = mkdtempSync(join(tmpdir(), "host-health-remote-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const authToken = `dbtoken-${crypto.randomUUID()}`;
    const hrana = await startHranaServer({ path: join(dir, "remote.db"), authToken });
    cleanups.push(() => hrana.stop());
    const config = loadConfig(
      {
        DATABASE_URL: hrana.url,
        DATABASE_AUTH_TOKEN: authToken,
        PLUGINS_CONFIG: healthConfig({ checks: ["health_check.Database"], timeout_ms: 2000 }),
      },
      "bun",
    );
    const lines: string[] = [];
    const db = await openDatabase(config.database.url, config.database.authToken);
    cleanups.push(() => db.close());
    await runMigrations(db);
    const app = await createApp({
      config,
      db,
      cache: createMemoryCache(),
      logger: createLogger("debug", (l) => lines.push(l)),
    });
    const get = async (accept: string) => {
      const res = await app.request(BASE + HEALTH, { headers: { accept } });
      return { status: res.status, text: await res.text() };
    };
    expect((await get("application/json")).status).toBe(200);

    await hrana.stop();
    const r = await get("application/json");
    expect(r.status).toBe(500);
    expect(JSON.parse(r.text).checks.Database).toMatch(/^unavailable: SELECT 1 failed: /);
    const everything = [
      r.text,
      (await get("text/html")).text,
      (await get("application/health+json")).text,
      ...lines,
    ].join("\n");
    expect(everything).not.toContain(authToken);
  });
});
