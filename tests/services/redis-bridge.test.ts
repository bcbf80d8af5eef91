/** The Upstash-compatible bridge, driven by the real `@upstash/redis` client and by raw fetch. */
import { RedisClient as BunRedisClient } from "bun";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Redis } from "@upstash/redis";
import { startRedisBridge } from "../../tools/redis-bridge";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import { startRedisServer } from "../helpers/redis-server";
import { waitFor } from "../helpers/wait";

let stack: RedisStack;
let redis: Redis;
let raw: Redis;

beforeAll(async () => {
  stack = await startRedisStack();
  // @upstash/redis auto-pipelines by default (every call becomes POST /pipeline); these two
  // clients turn it off so single commands go through POST / as well.
  redis = new Redis({
    url: stack.bridge.url,
    token: stack.bridge.token,
    retry: false,
    enableTelemetry: false,
    enableAutoPipelining: false,
  });
  raw = new Redis({
    url: stack.bridge.url,
    token: stack.bridge.token,
    retry: false,
    enableTelemetry: false,
    automaticDeserialization: false,
    enableAutoPipelining: false,
  });
});

afterAll(async () => {
  await stack?.stop();
});

let n = 0;
const key = (name: string) => `bridge:${++n}:${name}`;

async function post(
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(stack.bridge.url + path, {
    method: "POST",
    headers: {
      authorization: `Bearer ${stack.bridge.token}`,
      "content-type": "application/json",
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

describe("strings and keys", () => {
  test("set, get, del, incr, expire", async () => {
    const k = key("s");
    expect(await redis.set(k, "v1")).toBe("OK");
    expect(await redis.get<string>(k)).toBe("v1");
    expect(await redis.set(k, "v2", { nx: true })).toBeNull();
    expect(await redis.del(k, key("missing"))).toBe(1);
    expect(await redis.get(k)).toBeNull();
    const c = key("counter");
    expect(await redis.incr(c)).toBe(1);
    expect(await redis.incr(c)).toBe(2);
    expect(await redis.expire(c, 100)).toBe(1);
    const ttl = await redis.ttl(c);
    expect(ttl).toBeGreaterThan(90);
    expect(ttl).toBeLessThanOrEqual(100);
    expect(await redis.expire(key("nope"), 100)).toBe(0);
  });

  test("set with px expires", async () => {
    const k = key("px");
    await redis.set(k, "x", { px: 50 });
    expect(await raw.get(k)).toBe("x");
    const pttl = await redis.pttl(k);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(50);
    await waitFor(async () => (await raw.get(k)) === null, { message: "Redis expired the key" });
  });

  test("unicode and binary-ish strings round-trip, with and without base64 encoding", async () => {
    const plain = new Redis({
      url: stack.bridge.url,
      token: stack.bridge.token,
      retry: false,
      enableTelemetry: false,
      automaticDeserialization: false,
      responseEncoding: false,
      enableAutoPipelining: false,
    });
    const values = [
      "héllo wörld ☃ 😀 中文",
      "nul\u0000and\u0001ctrl\u007f",
      "line1\nline2\r\n\ttab",
      "OK",
      "T0s=",
      '{"json":"looking",  "n": 1}',
      "12345678901234567890",
      " padded ",
      "",
    ];
    for (const client of [raw, plain]) {
      for (const value of values) {
        const k = key("u");
        expect(await client.set(k, value)).toBe("OK");
        expect(await client.get<string>(k)).toBe(value);
        await client.rpush(`${k}:list`, value);
        expect(await client.lrange(`${k}:list`, -1, -1)).toEqual([value]);
      }
    }
  });

  test("unicode keys", async () => {
    const k = key("ключ/with spaces?&#");
    await raw.set(k, "v");
    expect(await raw.get(k)).toBe("v");
    expect(await raw.exists(k)).toBe(1);
  });
});

describe("lists, sorted sets, hashes", () => {
  test("lists including lmove", async () => {
    const a = key("la");
    const b = key("lb");
    expect(await raw.rpush(a, "1", "2", "3")).toBe(3);
    expect(await raw.lpush(a, "0")).toBe(4);
    expect(await raw.lrange(a, 0, -1)).toEqual(["0", "1", "2", "3"]);
    expect(await raw.lmove(a, b, "right", "left")).toBe("3");
    expect(await raw.lmove(a, b, "left", "right")).toBe("0");
    expect(await raw.lrange(b, 0, -1)).toEqual(["3", "0"]);
    expect(await raw.lrem(a, 0, "1")).toBe(1);
    expect(await raw.llen(a)).toBe(1);
    expect(await raw.lmove(key("empty"), b, "right", "left")).toBeNull();
  });

  test("sorted sets", async () => {
    const z = key("z");
    expect(
      await redis.zadd(
        z,
        { score: 1.5, member: "a" },
        { score: 2, member: "b" },
        { score: 3, member: "c" },
      ),
    ).toBe(3);
    expect(await redis.zrange(z, 0, -1)).toEqual(["a", "b", "c"]);
    expect(await redis.zrange(z, 2, "+inf", { byScore: true })).toEqual(["b", "c"]);
    expect(await redis.zrange(z, "-inf", "+inf", { byScore: true, offset: 1, count: 1 })).toEqual([
      "b",
    ]);
    expect(await raw.zrange(z, 0, -1, { withScores: true })).toEqual([
      "a",
      "1.5",
      "b",
      "2",
      "c",
      "3",
    ]);
    expect(await redis.zscore(z, "a")).toBe(1.5);
    expect(await redis.zrem(z, "a", "zz")).toBe(1);
    expect(await raw.exec(["ZRANGEBYSCORE", z, "(2", "+inf"])).toEqual(["c"]);
  });

  test("hashes, hgetall", async () => {
    const h = key("h");
    expect(await redis.hset(h, { name: "Ada", n: 1, emoji: "😀" })).toBe(3);
    expect(await redis.hgetall(h)).toEqual({ name: "Ada", n: 1, emoji: "😀" });
    expect(await raw.hgetall(h)).toEqual(["name", "Ada", "n", "1", "emoji", "😀"] as never);
    expect(await redis.hgetall(key("missing"))).toBeNull();
  });
});

describe("pipeline, multi-exec, auto-pipelining", () => {
  test("pipeline returns each result in order", async () => {
    const k = key("p");
    const res = await redis.pipeline().set(k, "1").incr(k).get(k).del(k).exec();
    expect(res).toEqual(["OK", 2, 2, 1]);
  });

  test("a failing command in a pipeline fails only its slot", async () => {
    const k = key("pf");
    await redis.set(k, "text");
    const res = await redis.pipeline().incr(k).set(`${k}:b`, "x").exec({ keepErrors: true });
    expect(res[0]!.error).toContain("not an integer");
    expect(res[1]!.result).toBe("OK");
    await expect(redis.pipeline().incr(k).exec()).rejects.toThrow(/not an integer/);
  });

  test("multi-exec runs atomically", async () => {
    const c = key("atomic");
    const other = key("other");
    // Interleave plenty of other traffic; each transaction must see its two INCRs back to back.
    const txs = Array.from({ length: 30 }, () => redis.multi().incr(c).incr(c).exec());
    const noise = Array.from({ length: 60 }, () => redis.incr(other));
    const results = (await Promise.all(txs)) as number[][];
    await Promise.all(noise);
    for (const [first, second] of results) expect(second).toBe(first! + 1);
    expect(await redis.get(c)).toBe(60);
  });

  test("multi-exec: a run-time error fails its command only", async () => {
    const k = key("mr");
    await redis.set(k, "text");
    const res = await redis
      .multi()
      .set(`${k}:a`, "1")
      .incr(k)
      .get(`${k}:a`)
      .exec({ keepErrors: true });
    expect(res.map((r) => r.result ?? null)).toEqual(["OK", null, 1]);
    expect(res[1]!.error).toContain("not an integer");
  });

  test("multi-exec: a queue-time error discards the whole transaction", async () => {
    const k = key("mq");
    const res = await post("/multi-exec", [
      ["SET", k, "1"],
      ["NOSUCHCOMMAND", k],
    ]);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string };
    expect(body.error).toStartWith("EXECABORT");
    expect(body.error).toContain("NOSUCHCOMMAND");
    expect(await redis.get(k)).toBeNull();
  });

  test("auto-pipelining batches concurrent calls and keeps results straight", async () => {
    const auto = new Redis({
      url: stack.bridge.url,
      token: stack.bridge.token,
      retry: false,
      enableTelemetry: false,
      enableAutoPipelining: true,
    });
    const keys = Array.from({ length: 40 }, (_, i) => key(`ap${i}`));
    await Promise.all(keys.map((k, i) => auto.set(k, `v${i}`)));
    const values = await Promise.all(keys.map((k) => auto.get<string>(k)));
    expect(values).toEqual(keys.map((_, i) => `v${i}`));
    // The auto-pipelining proxy exposes how many /pipeline requests it made (not in the types).
    const requests = (auto as unknown as { pipelineCounter: number }).pipelineCounter;
    expect(requests).toBeGreaterThanOrEqual(1);
    expect(requests).toBeLessThanOrEqual(4);
    await expect(Promise.all([auto.incr(keys[0]!), auto.get(keys[1]!)])).rejects.toThrow(
      /not an integer/,
    );
  });
});

describe("protocol details", () => {
  test("missing or wrong token is refused with 401, and the client error holds no token", async () => {
    const none = await fetch(stack.bridge.url, { method: "POST", body: '["PING"]' });
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: "Unauthorized" });
    const wrong = await post("/", ["PING"], { authorization: "Bearer nope" });
    expect(wrong.status).toBe(401);

    const badToken = `bad-${crypto.randomUUID()}`;
    const bad = new Redis({
      url: stack.bridge.url,
      token: badToken,
      retry: false,
      enableTelemetry: false,
    });
    const err = await bad.get("x").then(
      () => null,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect(err!.message).toContain("Unauthorized");
    expect(err!.message).not.toContain(badToken);
    expect(err!.message).not.toContain(stack.bridge.token);
  });

  test("a command error answers 400 {error} and the client throws", async () => {
    const res = await post("/", ["NOSUCHCOMMAND", "x"]);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/unknown command/i);
    await expect(redis.exec(["NOSUCHCOMMAND", "x"])).rejects.toThrow(/unknown command/i);
    const k = key("wrongtype");
    await redis.set(k, "v");
    await expect(redis.lpush(k, "x")).rejects.toThrow(/WRONGTYPE/);
  });

  test("connection-state commands are refused", async () => {
    for (const cmd of [["SELECT", "1"], ["MULTI"], ["SUBSCRIBE", "c"]]) {
      const res = await post("/", cmd);
      expect(res.status).toBe(400);
    }
    expect(await redis.ping()).toBe("PONG");
  });

  test("base64 encoding: strings encoded recursively, top-level OK left plain", async () => {
    const k = key("b64");
    const headers = { "upstash-encoding": "base64" };
    expect(await (await post("/", ["SET", k, "héllo"], headers)).json()).toEqual({ result: "OK" });
    expect(await (await post("/", ["GET", k], headers)).json()).toEqual({
      result: Buffer.from("héllo").toString("base64"),
    });
    expect(await (await post("/", ["INCR", `${k}:n`], headers)).json()).toEqual({ result: 1 });
    await post("/", ["RPUSH", `${k}:l`, "OK", "x"]);
    expect(await (await post("/", ["LRANGE", `${k}:l`, "0", "-1"], headers)).json()).toEqual({
      result: ["T0s=", "eA=="],
    });
    expect(await (await post("/", ["GET", k])).json()).toEqual({ result: "héllo" });
  });

  test("path form: GET /set/k/v, POST body as last argument, query options, _token", async () => {
    const k = key("path/with slash");
    const auth = { authorization: `Bearer ${stack.bridge.token}` };
    const set = await fetch(`${stack.bridge.url}/set/${encodeURIComponent(k)}/v1`, {
      headers: auth,
    });
    expect(await set.json()).toEqual({ result: "OK" });
    const get = await fetch(
      `${stack.bridge.url}/get/${encodeURIComponent(k)}?_token=${stack.bridge.token}`,
    );
    expect(await get.json()).toEqual({ result: "v1" });
    const post2 = await fetch(`${stack.bridge.url}/set/${encodeURIComponent(k)}?EX=100`, {
      method: "POST",
      headers: auth,
      body: '{"a": 1}',
    });
    expect(post2.status).toBe(200);
    expect(await redis.get(k)).toEqual({ a: 1 });
    expect(await redis.ttl(k)).toBeGreaterThan(90);
  });

  test("a malformed path answers 400, an unsupported method 405", async () => {
    const auth = { authorization: `Bearer ${stack.bridge.token}` };
    expect((await fetch(`${stack.bridge.url}/get/%E0%A4%A`, { headers: auth })).status).toBe(400);
    expect(
      (await fetch(`${stack.bridge.url}/get/k`, { method: "DELETE", headers: auth })).status,
    ).toBe(405);
  });

  test("pipeline body must be an array of commands", async () => {
    expect((await post("/pipeline", "not json")).status).toBe(400);
    expect((await post("/pipeline", [])).status).toBe(400);
  });

  test("a blocking command does not stall other traffic", async () => {
    const list = key("blocking");
    const direct = new BunRedisClient(stack.redis.url);
    try {
      let answered = false;
      const blpop = redis.exec<[string, string] | null>(["BLPOP", list, "30"]).finally(() => {
        answered = true;
      });
      // Redis itself says the BLPOP is blocked: then other traffic goes through meanwhile.
      await waitFor(
        async () => /blocked_clients:1\b/.test(String(await direct.send("INFO", ["clients"]))),
        {
          message: "the BLPOP blocked in Redis",
        },
      );
      expect(await redis.ping()).toBe("PONG");
      expect(answered).toBe(false);
      await redis.rpush(list, "item");
      expect(await blpop).toEqual([list, "item"]);
    } finally {
      direct.close();
    }
  });
});

describe("pub/sub over SSE", () => {
  test("subscribe and psubscribe receive published messages", async () => {
    const channel = key("chan");
    const sub = raw.subscribe([channel]);
    const psub = raw.psubscribe([`${channel}*`]);
    const messages: unknown[] = [];
    const pmessages: unknown[] = [];
    const subscribed = new Promise<number>((resolve) => sub.on("subscribe", resolve));
    const psubscribed = new Promise<number>((resolve) => psub.on("psubscribe", resolve));
    sub.on("message", (m) => messages.push(m));
    psub.on("pmessage", (m) => pmessages.push(m));
    try {
      expect(await subscribed).toBe(1);
      expect(await psubscribed).toBe(1);
      expect(await raw.publish(channel, "hi there")).toBe(2);
      await waitFor(() => messages.length >= 1 && pmessages.length >= 1, {
        message: "both subscriptions received the message",
      });
      expect(messages).toEqual([{ channel, message: "hi there" }]);
      expect(pmessages).toEqual([{ pattern: `${channel}*`, channel, message: "hi there" }]);
    } finally {
      await sub.unsubscribe();
      await psub.unsubscribe();
    }
    // The subscriber connections go away once the streams are closed.
    await waitFor(async () => (await raw.publish(channel, "bye")) === 0, {
      message: "no subscriber left on the channel",
    });
  });
});

describe("a password-protected redis-server behind the bridge", () => {
  test("commands and pub/sub authenticate with the password from the URL", async () => {
    const password = `pw-${crypto.randomUUID()}`;
    const server = await startRedisServer({ extraArgs: ["--requirepass", password] });
    const token = `tok-${crypto.randomUUID()}`;
    const bridge = await startRedisBridge({
      redisUrl: `redis://:${password}@127.0.0.1:${server.port}`,
      token,
    });
    const client = new Redis({
      url: bridge.url,
      token,
      retry: false,
      enableTelemetry: false,
      automaticDeserialization: false,
    });
    const sub = client.subscribe(["secure"]);
    const subscribed = new Promise((resolve) => sub.on("subscribe", resolve));
    const got = new Promise((resolve) => sub.on("message", resolve));
    try {
      expect(await client.set("k", "v")).toBe("OK");
      expect(await client.get("k")).toBe("v");
      await subscribed;
      expect(await client.publish("secure", "m")).toBe(1);
      expect(await got).toEqual({ channel: "secure", message: "m" });
    } finally {
      await sub.unsubscribe();
      await bridge.stop();
      await server.stop();
    }
  });

  test("a stopped redis-server answers 503 with a bridge error, not a hang", async () => {
    const server = await startRedisServer();
    const token = `tok-${crypto.randomUUID()}`;
    const bridge = await startRedisBridge({ redisUrl: server.url, token });
    try {
      await server.stop();
      const res = await fetch(bridge.url, {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
        body: '["PING"]',
      });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: string }).error).toStartWith(
        "bridge: redis unavailable",
      );
    } finally {
      await bridge.stop();
      await server.stop();
    }
  });
});
