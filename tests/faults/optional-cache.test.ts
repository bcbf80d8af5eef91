/**
 * Issue 30 item 8: the cache Redis is optional — while it is down, requests are served from the
 * database (the resilient cache degrades to misses), so `/readyz` stays 200 and the health page
 * still names the failing cache checks (as non-critical: "degraded", not "failing").
 */
import { afterAll, expect, test } from "bun:test";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import { HEALTH, healthJson, makeHealthApp, type HealthApp } from "../healthcheck/helpers";

let caching: RedisStack;
let tasks: RedisStack;
let t: HealthApp;
afterAll(async () => {
  await t?.close();
  await Promise.allSettled([caching?.stop(), tasks?.stop()]);
});

test("a stopped cache Redis keeps /readyz at 200 while the health page reports it", async () => {
  [caching, tasks] = await Promise.all([startRedisStack(), startRedisStack()]);
  t = await makeHealthApp({
    REDIS_CACHING_URL: caching.bridge.url,
    REDIS_CACHING_TOKEN: caching.bridge.token,
    REDIS_TASKS_URL: tasks.bridge.url,
    REDIS_TASKS_TOKEN: tasks.bridge.token,
    CACHE_BACKEND: "redis",
    PLUGINS_CONFIG: JSON.stringify({
      host_healthcheck_plugin: { timeout_ms: 1500, details: "always" },
    }),
  });
  expect((await t.req("GET", "/readyz", { token: null })).status).toBe(200);

  await caching.redis.stop();
  // Requests are served from the fallback (the token look-up misses the cache, reads the database).
  const sites = await t.json("GET", "/api/dcim/sites/");
  expect(sites.status).toBe(200);
  const ready = await t.req("GET", "/readyz", { token: null });
  expect(ready.status).toBe(200);
  const page = await healthJson(t, { path: HEALTH });
  expect(page.status).toBe(200);
  expect(page.body.status).toBe("degraded");
  expect(page.body.checks.CacheBackend).toMatch(/^unavailable: /);
  expect(page.body.checks.HostRedisCacheHealthCheck).toMatch(/^unavailable: /);
  expect(page.body.checks.Database).toBe("working");
  expect(page.body.checks.HostRedisTasksHealthCheck).toBe("working");
});
