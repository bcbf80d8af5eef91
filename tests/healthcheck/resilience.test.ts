/**
 * The two pieces the health plugin leans on: the redactor (one place that removes secrets) and
 * the resilient cache wrapper, over a real redis-server behind the bridge.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadConfig } from "../../src/config";
import { createRedisCache } from "../../src/services/cache";
import { createResilientCache, unwrapCache } from "../../src/services/cache/resilient";
import { createLogger } from "../../src/services/logger";
import { createRedactor, secretsOf } from "../../src/services/redact";
import { createUpstashRedis } from "../../src/services/redis";
import type { Cache } from "../../src/services/cache/types";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import { manualClock, waitFor } from "../helpers/wait";

describe("createRedactor", () => {
  const redact = createRedactor(["s3cr3t-token", "p@ss word"]);

  test("URLs lose userinfo, query and fragment; sentence punctuation stays", () => {
    expect(redact("connect to redis://user:pw@cache.example:6379/0?password=x#frag failed.")).toBe(
      "connect to redis://cache.example:6379/0 failed.",
    );
    expect(redact("GET https://db.example/v2/pipeline?authToken=abc&x=1 (503)")).toBe(
      "GET https://db.example/v2/pipeline (503)",
    );
    expect(redact("see http://127.0.0.1:8079/, then retry")).toBe(
      "see http://127.0.0.1:8079/, then retry",
    );
  });

  test("configured secrets are masked, raw and URL-encoded", () => {
    expect(redact("Unauthorized: token s3cr3t-token rejected")).toBe(
      "Unauthorized: token *** rejected",
    );
    expect(redact("auth p%40ss%20word failed")).toBe("auth *** failed");
    expect(redact("nothing to hide")).toBe("nothing to hide");
  });

  test("secretsOf collects tokens, URL passwords and secret-looking plugin settings", () => {
    const config = loadConfig(
      {
        DATABASE_URL: "libsql://db.example",
        DATABASE_AUTH_TOKEN: "db-token-123",
        REDIS_CACHING_URL: "https://cache.example",
        REDIS_CACHING_TOKEN: "cache-token-456",
        REDIS_TASKS_URL: "redis://worker:tasks-pw-789@tasks.example:6379",
        PLUGINS_CONFIG: JSON.stringify({ acme: { api_key: "acme-key-000", name: "visible" } }),
      },
      "bun",
    );
    const secrets = secretsOf(config);
    for (const s of ["db-token-123", "cache-token-456", "tasks-pw-789", "acme-key-000"])
      expect(secrets).toContain(s);
    expect(secrets).not.toContain("visible");
  });
});

describe("createResilientCache over real Redis", () => {
  let stack: RedisStack;
  beforeAll(async () => {
    stack = await startRedisStack();
  });
  afterAll(async () => {
    stack?.redis.thaw();
    await stack?.stop();
  });

  function build(retryAfterMs: number) {
    const lines: string[] = [];
    const redis = createUpstashRedis(
      { url: stack.bridge.url, token: stack.bridge.token },
      { timeoutMs: 150 },
    );
    const inner = createRedisCache(redis, { prefix: `resilience:${crypto.randomUUID()}:` });
    const clock = manualClock();
    // Counts the calls that reach Redis: a skipped call never gets here.
    const reached = { calls: 0 };
    const counted: Cache = {
      backend: inner.backend,
      get: (k) => (reached.calls++, inner.get(k)),
      set: (k, v, ttl) => (reached.calls++, inner.set(k, v, ttl)),
      delete: (k) => (reached.calls++, inner.delete(k)),
    };
    const cache = createResilientCache(counted, {
      logger: createLogger("debug", (l) => lines.push(l)),
      redact: createRedactor([stack.bridge.token]),
      retryAfterMs,
      now: clock.now,
    });
    return { cache, inner, counted, lines, redis, clock, reached };
  }

  test("passes through while Redis is healthy; unwrapCache returns the backend", async () => {
    const { cache, counted, lines } = build(1000);
    await cache.set("a", { n: 1 }, 30);
    expect(await cache.get("a")).toEqual({ n: 1 });
    await cache.delete("a");
    expect(await cache.get("a")).toBeNull();
    expect(cache.backend).toBe("redis");
    expect(unwrapCache(cache)).toBe(counted);
    expect(unwrapCache(counted)).toBe(counted);
    expect(lines).toEqual([]);
    await expect(cache.set("bad", undefined)).rejects.toThrow(TypeError); // a caller bug is not an outage
  });

  test("a frozen Redis costs one client timeout, then misses are immediate; recovery is logged", async () => {
    const { cache, lines, clock, reached } = build(400);
    await cache.set("k", "v", 30);
    stack.redis.freeze();
    try {
      reached.calls = 0;
      expect(await cache.get("k")).toBeNull(); // the client's 150 ms timeout (below)
      expect(reached.calls).toBe(1);
      clock.advance(399);
      for (let i = 0; i < 20; i++) {
        expect(await cache.get("k")).toBeNull();
        await cache.set("k2", "v");
        await cache.delete("k");
      }
      expect(reached.calls).toBe(1); // skipped for retryAfterMs: no waiting on a dead server
      const warned = lines.map((l) => JSON.parse(l)).filter((l) => l.level === "warn");
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatchObject({
        msg: "cache backend failing; serving without cache",
        backend: "redis",
        op: "get",
      });
      expect(warned[0].error).toContain("timeout after 150 ms");
    } finally {
      stack.redis.thaw();
    }
    // Each retryAfterMs on the clock, one call tries Redis again, until the thawed server answers.
    await waitFor(
      async () => {
        clock.advance(400);
        return (await cache.get("k")) === "v";
      },
      { message: "the cache reads through to the thawed Redis" },
    );
    expect(lines.some((l) => JSON.parse(l).msg === "cache backend recovered")).toBe(true);
    expect(lines.join("\n")).not.toContain(stack.bridge.token);
  });
});
