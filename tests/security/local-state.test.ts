/**
 * Row 16 of issue 27: the README's setup (a server on `data/host.db`, the tour's on
 * `data/tour.db`) shared one local redis-server: a token used on one database was accepted as
 * superuser on the other, both drained one job queue, and stopping either server killed the
 * other's Redis. Local state belongs to one database (decision 0069).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestApp, type TestApp } from "../helpers/app";
import { ping, startRedisServer, type RedisServerHandle } from "../helpers/redis-server";
import { createBunRedis } from "../../src/services/redis-bun";
import { createCache } from "../../src/services/cache";
import { servicesOf } from "../../src/app";
import { databaseIdentity } from "../../src/db/identity";
import { startLocalRedisStack } from "../../src/services/local-redis";
import type { RedisClient } from "../../src/services/redis-types";
import { waitFor } from "../helpers/wait";

let redis: RedisServerHandle;
let client: RedisClient;
let host: TestApp;
let tour: TestApp;

beforeAll(async () => {
  redis = await startRedisServer();
  client = createBunRedis({ url: redis.url }, { timeoutMs: 2000 });
  // Two databases, one Redis for the cache and the tasks: the README's two servers.
  const shared = () => ({
    cache: createCache("redis", { redis: client }),
    redis: { caching: client, tasks: client },
  });
  host = await makeTestApp({}, shared());
  tour = await makeTestApp({}, shared());
});
afterAll(async () => {
  await host.close();
  await tour.close();
  await client.close();
  await redis.stop();
});

describe("two databases sharing one Redis", () => {
  test("a token used on one database is unknown to the other", async () => {
    // host's superuser token, used there first (so it is cached), then tried on tour.
    expect((await host.req("GET", "/api/users/users/", { token: host.admin })).status).toBe(200);
    const r = await tour.json("GET", "/api/users/users/", { token: host.admin });
    expect(r.status).toBe(403);
    expect(r.body.detail).toBe("Invalid token");
  });

  test("each database has its own identity, kept across restarts", async () => {
    const a = await databaseIdentity(host.deps.db.orm);
    const b = await databaseIdentity(tour.deps.db.orm);
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(b).not.toBe(a);
    expect(await databaseIdentity(host.deps.db.orm)).toBe(a);
  });

  test("a job queued for one database is not in the other's queue", async () => {
    const hostTasks = servicesOf(host.app).tasks!;
    const tourTasks = servicesOf(tour.app).tasks!;
    hostTasks.register("probe.noop", async () => undefined);
    tourTasks.register("probe.noop", async () => undefined);
    await hostTasks.enqueue("probe.noop", {});
    await waitFor(async () => (await hostTasks.depth()).ready > 0, { message: "the job queued" });
    expect((await hostTasks.depth()).ready).toBe(1);
    expect((await tourTasks.depth()).ready).toBe(0);
    await tourTasks.runOne(); // tour's worker finds nothing of host's to take
    expect((await hostTasks.depth()).ready).toBe(1);
  });
});

describe("the local redis-server of npm start", () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), "host-local-state-"));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  test("one per database; stopping one server never stops another's", async () => {
    const a = (await startLocalRedisStack({ dataDir, database: "host" }))!;
    const b = (await startLocalRedisStack({ dataDir, database: "tour" }))!;
    try {
      expect(b.redisPid).not.toBe(a.redisPid);
      await b.stop();
      expect(await ping(Number(new URL(a.redisUrl).port), 2000)).toBe(true);
    } finally {
      await b.stop();
      await a.stop();
    }
  });

  test("two servers on one database share it, and the last one out stops it", async () => {
    const first = (await startLocalRedisStack({ dataDir, database: "host" }))!;
    const second = (await startLocalRedisStack({ dataDir, database: "host" }))!;
    const port = Number(new URL(first.redisUrl).port);
    try {
      expect(second.redisPid).toBe(first.redisPid);
      await second.stop();
      expect(await ping(port, 2000)).toBe(true);
      await first.stop();
      await waitFor(async () => !(await ping(port, 200)), {
        message: "the shared redis-server to stop",
      });
    } finally {
      await second.stop();
      await first.stop();
    }
  });
});
