/**
 * One cache contract over all four backends on real infrastructure (libSQL :memory: with the real
 * migrations, Redis behind the Upstash bridge, Miniflare KV), then what is particular to each.
 */
import { startMiniflare, type WatchedMiniflare } from "../helpers/workerd-watch";
import { RedisClient as BunRedisClient } from "bun";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import type { Database } from "../../src/db/client";
import { openDatabase } from "../../src/db/local";
import { runMigrations } from "../../src/migrations";
import { cacheEntries } from "../../src/db/schema/core";
import {
  createCache,
  createDatabaseCache,
  createKvCache,
  createMemoryCache,
  createRedisCache,
  KV_MIN_TTL_SECONDS,
  type Cache,
  type KVNamespaceLike,
} from "../../src/services/cache";
import { createUpstashRedis } from "../../src/services/redis";
import type { RedisClient } from "../../src/services/redis-types";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import { manualClock, waitFor, type ManualClock } from "../helpers/wait";

let db: Database;
let stack: RedisStack;
let redis: RedisClient;
let mf: WatchedMiniflare;
let kv: KVNamespaceLike & {
  list(opts?: { prefix?: string }): Promise<{ keys: Array<{ name: string; expiration?: number }> }>;
};

beforeAll(async () => {
  db = await openDatabase(":memory:");
  await runMigrations(db);
  stack = await startRedisStack();
  redis = createUpstashRedis({ url: stack.bridge.url, token: stack.bridge.token });
  mf = await startMiniflare("cache", {
    modules: true,
    script: "export default { fetch() { return new Response('') } }",
    kvNamespaces: ["CACHE"],
  });
  kv = mf.watched((await mf.mf.getKVNamespace("CACHE")) as unknown as typeof kv);
});

afterAll(async () => {
  await mf?.stop();
  await redis?.close();
  await stack?.stop();
  await db?.close();
});

/** Each backend on a clock the test moves (`true`), but Redis: it expires keys on its own clock. */
const backends: Array<[Cache["backend"], (clock: ManualClock) => Cache, boolean]> = [
  ["memory", (clock) => createMemoryCache({ now: clock.now }), true],
  ["database", (clock) => createDatabaseCache(db, { now: clock.now }), true],
  ["redis", () => createRedisCache(redis), false],
  ["kv", (clock) => createKvCache(kv, { now: clock.now }), true],
];

/** The remaining time to live of a cache key in Redis, in ms (-1: none). */
async function redisPttl(cacheKey: string): Promise<number> {
  const direct = new BunRedisClient(stack.redis.url);
  try {
    return Number(await direct.send("PTTL", [`host:cache:${cacheKey}`]));
  } finally {
    direct.close();
  }
}

for (const [name, make, clocked] of backends) {
  describe(`cache contract: ${name}`, () => {
    let cache: Cache;
    const clock = manualClock();
    let n = 0;
    const key = (k: string) => `contract:${++n}:${k}`;

    beforeAll(() => {
      cache = make(clock);
    });

    test("reports its backend", () => {
      expect(cache.backend).toBe(name);
    });

    test("a missing key reads as null", async () => {
      expect(await cache.get(key("missing"))).toBeNull();
    });

    test("JSON values round-trip", async () => {
      const values: unknown[] = [
        { a: 1, nested: { list: [1, "two", { three: true }], nil: null } },
        [1, 2, 3],
        'héllo ☃ 😀 "quoted" \n newline',
        "",
        42,
        -0.5,
        0,
        true,
        false,
      ];
      for (const value of values) {
        const k = key("json");
        await cache.set(k, value);
        expect(await cache.get(k)).toEqual(value);
      }
    });

    test("reads return copies: mutating the stored object afterwards changes nothing", async () => {
      const k = key("copy");
      const value = { list: [1] };
      await cache.set(k, value);
      value.list.push(2);
      const first = await cache.get<{ list: number[] }>(k);
      expect(first).toEqual({ list: [1] });
      first!.list.push(3);
      expect(await cache.get(k)).toEqual({ list: [1] });
    });

    test("set overwrites", async () => {
      const k = key("over");
      await cache.set(k, { v: 1 });
      await cache.set(k, { v: 2 });
      expect(await cache.get(k)).toEqual({ v: 2 });
    });

    test("delete removes; deleting a missing key is fine", async () => {
      const k = key("del");
      await cache.set(k, "x");
      await cache.delete(k);
      expect(await cache.get(k)).toBeNull();
      await cache.delete(key("never-set"));
    });

    test("keys with unusual characters are distinct", async () => {
      const a = key("ключ / with spaces?&#%");
      const b = `${key("ключ / with spaces?&#%")}2`;
      await cache.set(a, "A");
      await cache.set(b, "B");
      expect(await cache.get(a)).toBe("A");
      expect(await cache.get(b)).toBe("B");
    });

    test("a TTL expires the entry (sub-second TTLs included)", async () => {
      const k = key("ttl");
      const forever = key("forever");
      await cache.set(k, { short: true }, 0.4);
      await cache.set(forever, { short: false });
      expect(await cache.get(k)).toEqual({ short: true });
      if (clocked) {
        clock.advance(399);
        expect(await cache.get(k)).toEqual({ short: true });
        clock.advance(1);
      } else {
        expect(await redisPttl(k)).toBeGreaterThan(0);
        expect(await redisPttl(k)).toBeLessThanOrEqual(400); // ms: not rounded up to a second
        await waitFor(async () => (await cache.get(k)) === null, { message: "Redis expired it" });
      }
      expect(await cache.get(k)).toBeNull();
      expect(await cache.get(forever)).toEqual({ short: false });
    });

    test("overwriting without a TTL clears the old TTL", async () => {
      const k = key("ttl-cleared");
      await cache.set(k, 1, 0.3);
      await cache.set(k, 2);
      if (clocked) clock.advance(60_000);
      else expect(await redisPttl(k)).toBe(-1);
      expect(await cache.get(k)).toBe(2);
    });

    test("a TTL of zero or less stores nothing (and drops an old value)", async () => {
      const k = key("ttl-zero");
      await cache.set(k, "old");
      await cache.set(k, "new", 0);
      expect(await cache.get(k)).toBeNull();
      await cache.set(k, "neg", -5);
      expect(await cache.get(k)).toBeNull();
    });

    test("a value that is not JSON is refused", async () => {
      await expect(cache.set(key("undef"), undefined)).rejects.toThrow(TypeError);
      await expect(cache.set(key("fn"), () => 1)).rejects.toThrow(TypeError);
    });
  });
}

describe("memory backend", () => {
  test("evicts the least recently used entry beyond maxEntries", async () => {
    const cache = createMemoryCache({ maxEntries: 3 });
    await cache.set("a", 1);
    await cache.set("b", 2);
    await cache.set("c", 3);
    expect(await cache.get("a")).toBe(1); // a is now the most recently used
    await cache.set("d", 4);
    expect(await cache.get("b")).toBeNull();
    expect(await cache.get("a")).toBe(1);
    expect(await cache.get("c")).toBe(3);
    expect(await cache.get("d")).toBe(4);
  });

  test("expired entries are evicted before live ones", async () => {
    let now = 1_000_000;
    const cache = createMemoryCache({ maxEntries: 2, now: () => now });
    await cache.set("live", "L");
    await cache.set("short", "S", 1);
    now += 2_000;
    await cache.set("new", "N");
    expect(await cache.get("live")).toBe("L");
    expect(await cache.get("new")).toBe("N");
  });
});

describe("database backend", () => {
  test("stores rows in cache_entries with expires_at in epoch ms, and deletes expired rows on read", async () => {
    const clock = manualClock();
    const cache = createDatabaseCache(db, { now: clock.now });
    await cache.set("db:row", { x: 1 }, 0.2);
    const [row] = await db.orm.select().from(cacheEntries).where(eq(cacheEntries.key, "db:row"));
    expect(JSON.parse(row!.value)).toEqual({ x: 1 });
    expect(row!.expiresAt).toBe(clock.now() + 200);
    clock.advance(199);
    expect(await cache.get("db:row")).toEqual({ x: 1 });
    expect(
      await db.orm.select().from(cacheEntries).where(eq(cacheEntries.key, "db:row")),
    ).toHaveLength(1);
    clock.advance(1);
    expect(await cache.get("db:row")).toBeNull();
    expect(await db.orm.select().from(cacheEntries).where(eq(cacheEntries.key, "db:row"))).toEqual(
      [],
    );
  });

  test("a row without expiry has expires_at null", async () => {
    const cache = createDatabaseCache(db);
    await cache.set("db:forever", "v");
    const [row] = await db.orm
      .select()
      .from(cacheEntries)
      .where(eq(cacheEntries.key, "db:forever"));
    expect(row!.expiresAt).toBeNull();
  });
});

describe("redis backend", () => {
  test("keys live under the host:cache: prefix (or a chosen one) with a Redis TTL", async () => {
    await createRedisCache(redis).set("r:k", { a: 1 }, 100);
    expect(await redis.get("host:cache:r:k")).toBe('{"a":1}');
    await createRedisCache(redis, { prefix: "other:" }).set("r:k", 2);
    expect(await redis.get("other:r:k")).toBe("2");
    expect(await createRedisCache(redis).get("r:k")).toEqual({ a: 1 });
    const direct = new BunRedisClient(stack.redis.url);
    try {
      const pttl = Number(await direct.send("PTTL", ["host:cache:r:k"]));
      expect(pttl).toBeGreaterThan(95_000);
      expect(pttl).toBeLessThanOrEqual(100_000);
      expect(Number(await direct.send("PTTL", ["other:r:k"]))).toBe(-1);
    } finally {
      direct.close();
    }
  });
});

describe("kv backend", () => {
  test("short TTLs are clamped up to KV's 60 s minimum but honoured on read", async () => {
    const cache = createKvCache(kv, { prefix: "kvtest:" });
    const before = Date.now() / 1000;
    await cache.set("short", "s", 2);
    await cache.set("long", "l", 3600);
    const { keys } = await kv.list({ prefix: "kvtest:" });
    const byName = Object.fromEntries(keys.map((k) => [k.name, k.expiration]));
    expect(byName["kvtest:short"]).toBeGreaterThanOrEqual(
      Math.floor(before + KV_MIN_TTL_SECONDS) - 1,
    );
    expect(byName["kvtest:short"]).toBeLessThan(before + KV_MIN_TTL_SECONDS + 5);
    expect(byName["kvtest:long"]).toBeGreaterThanOrEqual(Math.floor(before + 3600) - 1);
    expect(await cache.get("short")).toBe("s");
  });

  test("values not written by the cache read as misses", async () => {
    await kv.put("foreign", "not json at all");
    expect(await createKvCache(kv).get("foreign")).toBeNull();
  });
});

describe("createCache", () => {
  test("builds each backend from its dependency", () => {
    expect(createCache("memory").backend).toBe("memory");
    expect(createCache("database", { db }).backend).toBe("database");
    expect(createCache("redis", { redis }).backend).toBe("redis");
    expect(createCache("kv", { kv }).backend).toBe("kv");
  });

  test("names the missing dependency", () => {
    expect(() => createCache("database")).toThrow(/needs a database/);
    expect(() => createCache("redis", { db })).toThrow(/needs a Redis client/);
    expect(() => createCache("kv", { redis })).toThrow(/needs a Workers KV namespace/);
    expect(() => createCache("nope" as Cache["backend"])).toThrow(/unknown cache backend/);
  });
});
