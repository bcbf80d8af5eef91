/**
 * `RedisClient` over Bun's built-in Redis client for `redis://` and `rediss://` URLs (Bun only:
 * never import this from code that runs on Workers).
 */
import { RedisClient as BunRedisClient } from "bun";
import { redactUrl, type RedisSettings } from "../config";
import { RedisClientError, toRedisError } from "./redis";
import type { RedisClient } from "./redis-types";

/** Options of {@link createBunRedis}. */
export interface BunRedisOptions {
  /** Deadline for connecting and for each command; default 5000 ms. */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 5_000;

// The URL Bun connects to: a separate token becomes the password when the URL has none.
function connectUrl(settings: RedisSettings): string {
  if (!settings.token) return settings.url;
  const u = new URL(settings.url);
  if (u.password) return settings.url;
  u.password = settings.token;
  return u.toString();
}

// The URL's password, raw and decoded, so both can be scrubbed from messages.
function passwordsOf(url: string): string[] {
  try {
    const password = new URL(url).password;
    return password ? [password, decodeURIComponent(password)] : [];
  } catch {
    return [];
  }
}

/**
 * A `RedisClient` over Bun's native client. Each call connects on demand (a lost or timed-out
 * connection is dropped and reopened on the next call) and fails within `timeoutMs`.
 * @example const redis = createBunRedis({ url: "redis://127.0.0.1:6379" }); await redis.ping();
 */
export function createBunRedis(settings: RedisSettings, opts: BunRedisOptions = {}): RedisClient {
  const describe = redactUrl(settings.url);
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const url = connectUrl(settings);
  const ctx = {
    describe,
    secrets: [settings.token, url, settings.url, ...passwordsOf(url)],
    timeoutMs,
  };
  let current: BunRedisClient | null = null;
  let connecting: Promise<BunRedisClient> | null = null;
  let closed = false;

  const open = async (): Promise<BunRedisClient> => {
    const client = new BunRedisClient(url, {
      autoReconnect: false,
      enableOfflineQueue: false,
      connectionTimeout: timeoutMs,
    });
    client.onclose = () => {
      if (current === client) current = null;
    };
    try {
      await client.connect();
    } catch (e) {
      client.close();
      throw e;
    }
    return client;
  };

  const connection = (): Promise<BunRedisClient> => {
    if (current?.connected) return Promise.resolve(current);
    connecting ??= open()
      .then((client) => {
        if (closed) {
          client.close();
          throw new RedisClientError("closed", `redis ${describe}: client is closed`);
        }
        current = client;
        return client;
      })
      .finally(() => {
        connecting = null;
      });
    return connecting;
  };

  /** Runs one command against the connection, bounded by `timeoutMs`. */
  const send = async <T>(command: string, args: Array<string | number>): Promise<T> => {
    if (closed) throw new RedisClientError("closed", `redis ${describe}: client is closed`);
    let timer: ReturnType<typeof setTimeout> | undefined;
    let used: BunRedisClient | null = null;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        // A server that stopped answering: drop the connection so the next call starts afresh.
        if (used && current === used) current = null;
        used?.close();
        reject(new RedisClientError("timeout", `redis ${describe}: timeout after ${timeoutMs} ms`));
      }, timeoutMs);
    });
    const work = (async () => {
      const client = await connection();
      used = client;
      return (await client.send(command, args.map(String))) as T;
    })();
    work.catch(() => {}); // settled by the race below; avoid an unhandled rejection after a timeout
    try {
      return await Promise.race([work, timeout]);
    } catch (e) {
      const kind =
        (e as { code?: string }).code === "ERR_REDIS_SERVER_ERROR" ? "command" : undefined;
      throw toRedisError(e, { ...ctx, kind });
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    describe,
    ping: () => send<string>("PING", []),
    get: (key) => send<string | null>("GET", [key]),
    set: (key, value, options) => {
      const args: Array<string | number> = [key, value];
      if (options?.nx) args.push("NX");
      if (options?.ex !== undefined) args.push("EX", options.ex);
      else if (options?.px !== undefined) args.push("PX", options.px);
      return send<string | null>("SET", args);
    },
    del: async (...keys) => (keys.length === 0 ? 0 : send<number>("DEL", keys)),
    incr: (key) => send<number>("INCR", [key]),
    expire: (key, seconds) => send<number>("EXPIRE", [key, seconds]),
    lpush: (key, ...values) => send<number>("LPUSH", [key, ...values]),
    rpush: (key, ...values) => send<number>("RPUSH", [key, ...values]),
    lrange: (key, start, stop) => send<string[]>("LRANGE", [key, start, stop]),
    lrem: (key, count, value) => send<number>("LREM", [key, count, value]),
    llen: (key) => send<number>("LLEN", [key]),
    ltrim: (key, start, stop) => send<string>("LTRIM", [key, start, stop]),
    lmove: (source, destination, from, to) =>
      send<string | null>("LMOVE", [source, destination, from.toUpperCase(), to.toUpperCase()]),
    zadd: (key, score, member) => send<number>("ZADD", [key, score, member]),
    zrangebyscore: (key, min, max, limit) =>
      send<string[]>(
        "ZRANGEBYSCORE",
        limit ? [key, min, max, "LIMIT", limit.offset, limit.count] : [key, min, max],
      ),
    zrem: (key, ...members) => send<number>("ZREM", [key, ...members]),
    hset: (key, fields) => send<number>("HSET", [key, ...Object.entries(fields).flat()]),
    hgetall: async (key) => {
      // RESP3 answers a map (a null-prototype object); Upstash answers null for a missing hash.
      const map = await send<Record<string, string> | string[] | null>("HGETALL", [key]);
      if (!map) return null;
      const entries = Array.isArray(map)
        ? Array.from({ length: map.length / 2 }, (_, i) => [map[2 * i]!, map[2 * i + 1]!] as const)
        : Object.entries(map);
      return entries.length ? Object.fromEntries(entries.map(([k, v]) => [k, String(v)])) : null;
    },
    async close() {
      closed = true;
      const client = current;
      current = null;
      client?.close();
    },
  };
}
