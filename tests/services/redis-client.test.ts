/**
 * One `RedisClient` contract run against both implementations: Upstash REST (through the bridge)
 * and Bun's native client (straight to redis-server), plus their failure behaviour.
 */
import { RedisClient as BunRedisClient } from "bun";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createUpstashRedis, RedisClientError } from "../../src/services/redis";
import { createBunRedis } from "../../src/services/redis-bun";
import type { RedisClient } from "../../src/services/redis-types";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import { startRedisServer } from "../helpers/redis-server";
import { waitFor } from "../helpers/wait";

let stack: RedisStack;
/** Straight to redis-server, to read what the clients under test wrote (TTLs). */
let direct: BunRedisClient;

beforeAll(async () => {
  stack = await startRedisStack();
  direct = new BunRedisClient(stack.redis.url);
});

afterAll(async () => {
  direct?.close();
  await stack?.stop();
});

/** The key's remaining time to live in ms, as Redis keeps it (-1: none, -2: no key). */
const pttl = async (key: string) => Number(await direct.send("PTTL", [key]));

/** Waits until Redis itself has expired `key` (Redis's clock cannot be injected). */
const expired = (redis: RedisClient, key: string) =>
  waitFor(async () => (await redis.get(key)) === null, { message: `${key} expired` });

const implementations: Array<[string, () => RedisClient]> = [
  [
    "upstash",
    () =>
      createUpstashRedis({ url: stack.bridge.url, token: stack.bridge.token }, { timeoutMs: 2000 }),
  ],
  ["bun", () => createBunRedis({ url: stack.redis.url }, { timeoutMs: 2000 })],
];

async function rejection(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: Error) => e,
  );
}

for (const [name, make] of implementations) {
  describe(`RedisClient contract: ${name}`, () => {
    let redis: RedisClient;
    let n = 0;
    const key = (k: string) => `client:${name}:${++n}:${k}`;

    beforeAll(() => {
      redis = make();
    });
    afterAll(async () => {
      await redis?.close();
    });

    test("ping and describe", async () => {
      expect(await redis.ping()).toBe("PONG");
      expect(redis.describe).not.toContain(stack.bridge.token);
      expect(redis.describe).toMatch(/^(http|redis):\/\/127\.0\.0\.1:\d+/);
    });

    test("get, set (ex, px, nx), del", async () => {
      const k = key("s");
      expect(await redis.get(k)).toBeNull();
      expect(await redis.set(k, "v1")).toBe("OK");
      expect(await redis.get(k)).toBe("v1");
      expect(await redis.set(k, "v2", { nx: true })).toBeNull();
      expect(await redis.get(k)).toBe("v1");
      const fresh = key("new");
      expect(await redis.set(fresh, "v", { nx: true, ex: 10 })).toBe("OK");
      const short = key("px");
      await redis.set(short, "gone soon", { px: 60 });
      expect(await redis.get(short)).toBe("gone soon");
      expect(await pttl(short)).toBeGreaterThan(0);
      expect(await pttl(short)).toBeLessThanOrEqual(60); // milliseconds, not rounded up to seconds
      await expired(redis, short);
      expect(await redis.del(k, key("missing"), fresh)).toBe(2);
      expect(await redis.del()).toBe(0);
      expect(await redis.get(k)).toBeNull();
    });

    test("strings are returned verbatim (no JSON parsing, unicode intact)", async () => {
      for (const value of ['{"a":1}', "42", "true", "null", "héllo ☃ 😀", "OK", "", "a\nb"]) {
        const k = key("verbatim");
        await redis.set(k, value);
        expect(await redis.get(k)).toBe(value);
      }
    });

    test("incr and expire", async () => {
      const k = key("n");
      expect(await redis.incr(k)).toBe(1);
      expect(await redis.incr(k)).toBe(2);
      expect(await redis.expire(k, 1)).toBe(1);
      expect(await redis.expire(key("missing"), 1)).toBe(0);
      expect(await pttl(k)).toBeGreaterThan(0);
      expect(await pttl(k)).toBeLessThanOrEqual(1000);
      await expired(redis, k);
    });

    test("lists: push, range, rem, len, trim, lmove", async () => {
      const a = key("a");
      const b = key("b");
      expect(await redis.rpush(a, "1", "2", "3")).toBe(3);
      expect(await redis.lpush(a, "0")).toBe(4);
      expect(await redis.lrange(a, 0, -1)).toEqual(["0", "1", "2", "3"]);
      expect(await redis.lmove(a, b, "right", "left")).toBe("3");
      expect(await redis.lmove(a, b, "left", "left")).toBe("0");
      expect(await redis.lrange(b, 0, -1)).toEqual(["0", "3"]);
      expect(await redis.lrem(a, 0, "2")).toBe(1);
      expect(await redis.llen(a)).toBe(1);
      expect(await redis.rpush(b, "4", "5")).toBe(4);
      expect(await redis.ltrim(b, 0, 1)).toBe("OK");
      expect(await redis.lrange(b, 0, -1)).toEqual(["0", "3"]);
      expect(await redis.lmove(key("empty"), b, "right", "left")).toBeNull();
      expect(await redis.lrange(key("empty"), 0, -1)).toEqual([]);
    });

    test("sorted sets: zadd, zrangebyscore (limits, infinities, exclusive), zrem", async () => {
      const z = key("z");
      expect(await redis.zadd(z, 3, "c")).toBe(1);
      expect(await redis.zadd(z, 1, "a")).toBe(1);
      expect(await redis.zadd(z, 2.5, "b")).toBe(1);
      expect(await redis.zadd(z, 2, "b")).toBe(0);
      expect(await redis.zrangebyscore(z, "-inf", "+inf")).toEqual(["a", "b", "c"]);
      expect(await redis.zrangebyscore(z, 2, 3)).toEqual(["b", "c"]);
      expect(await redis.zrangebyscore(z, "(2", "+inf")).toEqual(["c"]);
      expect(await redis.zrangebyscore(z, 0, "+inf", { offset: 1, count: 1 })).toEqual(["b"]);
      expect(await redis.zrem(z, "a", "nope")).toBe(1);
      expect(await redis.zrangebyscore(z, "-inf", "+inf")).toEqual(["b", "c"]);
    });

    test("hashes: hset and hgetall (strings; missing hash is null)", async () => {
      const h = key("h");
      expect(await redis.hset(h, { name: "Ada", n: "1", json: '{"x":1}' })).toBe(3);
      expect(await redis.hset(h, { n: "2" })).toBe(0);
      expect(await redis.hgetall(h)).toEqual({ name: "Ada", n: "2", json: '{"x":1}' });
      expect(await redis.hgetall(key("missing"))).toBeNull();
    });

    test("a command error rejects with a RedisClientError of kind command", async () => {
      const k = key("wrongtype");
      await redis.set(k, "text");
      const err = await rejection(redis.incr(k));
      expect(err).toBeInstanceOf(RedisClientError);
      expect((err as RedisClientError).kind).toBe("command");
      expect(err.message).toContain("not an integer");
    });

    test("after close, calls reject", async () => {
      const other = make();
      expect(await other.ping()).toBe("PONG");
      await other.close();
      const err = await rejection(other.ping());
      expect((err as RedisClientError).kind).toBe("closed");
    });
  });
}

describe("failures are bounded and hold no secrets", () => {
  test("upstash: wrong token rejects without the token in the message", async () => {
    const token = `secret-${crypto.randomUUID()}`;
    const redis = createUpstashRedis({ url: stack.bridge.url, token });
    const err = await rejection(redis.get("x"));
    expect(err.message).toContain("Unauthorized");
    expect(err.message).not.toContain(token);
    expect(err.message).not.toContain(stack.bridge.token);
  });

  test("upstash: a bridge that is not listening rejects at once, as a connection error", async () => {
    const token = `secret-${crypto.randomUUID()}`;
    const redis = createUpstashRedis({ url: "http://127.0.0.1:1", token }, { timeoutMs: 20_000 });
    const err = await rejection(redis.ping());
    expect(err).toBeInstanceOf(RedisClientError);
    expect((err as RedisClientError).kind).toBe("connection"); // refused, not waited out
    expect(err.message).not.toContain(token);
  });

  test("upstash: needs a token", () => {
    expect(() => createUpstashRedis({ url: stack.bridge.url })).toThrow(/needs a token/);
  });

  test("bun: password from the URL never shows in describe or errors", async () => {
    const password = `pw-${crypto.randomUUID()}`;
    // redis-server has no password set: AUTH fails with an error that must not echo the password.
    const redis = createBunRedis(
      { url: `redis://user:${password}@127.0.0.1:${stack.redis.port}` },
      { timeoutMs: 1500 },
    );
    expect(redis.describe).not.toContain(password);
    const err = await rejection(redis.ping());
    expect(err.message).not.toContain(password);
    await redis.close();
  });

  test("password-protected redis: bun takes the token as password; a wrong one fails without echoing it", async () => {
    const password = `pw-${crypto.randomUUID()}`;
    const server = await startRedisServer({ extraArgs: ["--requirepass", password] });
    const good = createBunRedis({ url: server.url, token: password }, { timeoutMs: 1500 });
    const inUrl = createBunRedis(
      { url: `redis://:${password}@127.0.0.1:${server.port}` },
      { timeoutMs: 1500 },
    );
    const wrong = createBunRedis(
      { url: server.url, token: `${password}-wrong` },
      { timeoutMs: 1500 },
    );
    try {
      expect(await good.ping()).toBe("PONG");
      expect(await inUrl.ping()).toBe("PONG");
      expect(inUrl.describe).not.toContain(password);
      const err = await rejection(wrong.get("x"));
      expect(err).toBeInstanceOf(RedisClientError);
      expect(err.message).not.toContain(password);
    } finally {
      for (const c of [good, inUrl, wrong]) await c.close();
      await server.stop();
    }
  });

  test("stopped redis: both clients reject as a connection error, without waiting out the timeout", async () => {
    const server = await startRedisServer();
    const stopped = await startRedisStackOn(server.url);
    const clients = [
      createUpstashRedis({ url: stopped.url, token: stopped.token }, { timeoutMs: 20_000 }),
      createBunRedis({ url: server.url }, { timeoutMs: 20_000 }),
    ];
    try {
      for (const c of clients) expect(await c.ping()).toBe("PONG");
      await server.stop();
      for (const c of clients) {
        const err = await rejection(c.ping());
        expect(err).toBeInstanceOf(RedisClientError);
        expect((err as RedisClientError).kind).toBe("connection");
        expect(err.message).not.toContain(stopped.token);
      }
    } finally {
      for (const c of clients) await c.close();
      await stopped.stop();
      await server.stop();
    }
  });

  test("frozen redis: both clients time out, and recover after it thaws", async () => {
    const server = await startRedisServer();
    const bridged = await startRedisStackOn(server.url);
    const clients = [
      createUpstashRedis({ url: bridged.url, token: bridged.token }, { timeoutMs: 700 }),
      createBunRedis({ url: server.url }, { timeoutMs: 700 }),
    ];
    try {
      for (const c of clients) expect(await c.ping()).toBe("PONG");
      server.freeze();
      for (const c of clients) {
        const err = await rejection(c.ping());
        expect((err as RedisClientError).kind).toBe("timeout"); // the client's own 700 ms timer

        expect(err.message).toContain("timeout after 700 ms");
      }
      server.thaw();
      for (const c of clients) expect(await c.ping()).toBe("PONG");
    } finally {
      server.thaw();
      for (const c of clients) await c.close();
      await bridged.stop();
      await server.stop();
    }
  });
});

// A bridge (only) in front of an already running server.
async function startRedisStackOn(
  redisUrl: string,
): Promise<{ url: string; token: string; stop(): Promise<void> }> {
  const { startRedisBridge } = await import("../../tools/redis-bridge");
  const token = `tok-${crypto.randomUUID()}`;
  const bridge = await startRedisBridge({ redisUrl, token });
  return { url: bridge.url, token, stop: () => bridge.stop() };
}
