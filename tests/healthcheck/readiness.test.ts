/**
 * `/readyz` counts only the dependencies the operator configured: a server run without Redis on
 * purpose is ready, while the health page still lists the seed's default checks and says the
 * Redis roles are not configured.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { HEALTH } from "./helpers";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

test("no Redis configured: /readyz is ready, the health page still reports the Redis checks", async () => {
  const ready = await t.req("GET", "/readyz", { token: null });
  expect(ready.status).toBe(200);
  expect(await ready.json()).toEqual({ status: "ready" });

  const page = await t.json("GET", `${HEALTH}?format=json`, { token: null });
  expect(page.status).toBe(500);
  expect(page.body.checks.HostRedisTasksHealthCheck).toBe(
    "unavailable: REDIS['tasks'] is not configured",
  );
  expect(page.body.checks.HostRedisCacheHealthCheck).toBe(
    "unavailable: REDIS['caching'] is not configured",
  );
});

test("a Redis role meant to run but down (the local one failed to start) keeps /readyz failing", async () => {
  t.app.services.redisDown = { tasks: "redis-server exited at start" };
  try {
    expect((await t.req("GET", "/readyz", { token: null })).status).toBe(503);
  } finally {
    t.app.services.redisDown = undefined;
  }
});
