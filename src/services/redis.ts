/**
 * `RedisClient` over Upstash REST (`@upstash/redis`, fetch only, so it runs on Bun and Workers),
 * plus the error type every Redis client of the host throws.
 */
import { Redis } from "@upstash/redis/cloudflare";
import { redactUrl, type RedisSettings } from "../config";
import type { RedisClient } from "./redis-types";

/** What went wrong: `timeout` (no answer in time), `connection`, `command` (an error reply), `closed`. */
export type RedisErrorKind = "timeout" | "connection" | "command" | "closed";

/** A Redis failure whose message is safe to log: it never holds a token or password. */
export class RedisClientError extends Error {
  constructor(
    readonly kind: RedisErrorKind,
    message: string,
  ) {
    super(message);
    this.name = "RedisClientError";
  }
}

/** Characters of a failure's own message kept in a `RedisClientError`. */
const MAX_MESSAGE = 200;

/**
 * Maps any failure to a {@link RedisClientError}, removing every secret from its message.
 * `describe` is the redacted URL; `timeoutMs` is named in timeout messages.
 */
export function toRedisError(
  err: unknown,
  ctx: {
    describe: string;
    secrets: Array<string | undefined>;
    timeoutMs: number;
    kind?: RedisErrorKind;
  },
): RedisClientError {
  if (err instanceof RedisClientError) return err;
  const name = err instanceof Error ? err.name : "";
  let message = err instanceof Error ? err.message : String(err);
  let kind: RedisErrorKind = ctx.kind ?? "connection";
  if (name === "TimeoutError" || name === "AbortError") {
    kind = "timeout";
    message = `timeout after ${ctx.timeoutMs} ms`;
  }
  const secrets = ctx.secrets
    .filter((s): s is string => !!s && s.length >= 3)
    .sort((a, b) => b.length - a.length);
  for (const secret of secrets) message = message.split(secret).join("***");
  // An answer that is not JSON (a proxy's error page, a cut answer) is named, never echoed: it
  // would reach logs and the anonymous health page. Anything else is kept to one short line.
  message = message
    .replace(
      /(Unable to parse response body)[\s\S]*$/,
      "$1 (the REST endpoint's answer is not JSON)",
    )
    .replace(/\s+/g, " ")
    .slice(0, MAX_MESSAGE);
  return new RedisClientError(kind, `redis ${ctx.describe}: ${message}`);
}

/** Options of {@link createUpstashRedis}. */
export interface UpstashRedisOptions {
  /** Per-request deadline; default 5000 ms. */
  timeoutMs?: number;
  /** Retry failed fetches (a few times, short backoff). Default false. */
  retry?: boolean;
}

const DEFAULT_TIMEOUT_MS = 5_000;

function flatToRecord(flat: unknown): Record<string, string> | null {
  if (!Array.isArray(flat)) {
    if (flat && typeof flat === "object") {
      const entries = Object.entries(flat as Record<string, unknown>);
      return entries.length ? Object.fromEntries(entries.map(([k, v]) => [k, String(v)])) : null;
    }
    return null;
  }
  if (flat.length === 0) return null;
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) record[String(flat[i])] = String(flat[i + 1]);
  return record;
}

/**
 * A `RedisClient` for an Upstash REST URL (`http(s)://…`, e.g. Upstash or `src/services/redis-bridge.ts`).
 * Values come back as strings (automatic deserialisation is off); errors are {@link RedisClientError}.
 * @example const redis = createUpstashRedis({ url: "https://x.upstash.io", token }); await redis.ping();
 */
export function createUpstashRedis(
  settings: RedisSettings,
  opts: UpstashRedisOptions = {},
): RedisClient {
  const describe = redactUrl(settings.url);
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const ctx = {
    describe,
    secrets: [settings.token, settings.url === describe ? undefined : settings.url],
    timeoutMs,
  };
  if (!settings.token)
    throw new RedisClientError(
      "connection",
      `redis ${describe}: an Upstash REST URL needs a token`,
    );
  let redis: Redis;
  try {
    redis = new Redis({
      url: settings.url,
      token: settings.token,
      enableTelemetry: false,
      automaticDeserialization: false,
      retry: opts.retry ? { retries: 3, backoff: (n) => Math.min(1_000, 50 * 2 ** n) } : false,
      signal: () => AbortSignal.timeout(timeoutMs),
      // The library's default, spelled out: calls made in the same tick share one /pipeline
      // request (fewer subrequests on Workers). Errors then read "Command failed: …".
      enableAutoPipelining: true,
    });
  } catch (e) {
    throw toRedisError(e, ctx);
  }
  let closed = false;

  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    if (closed) throw new RedisClientError("closed", `redis ${describe}: client is closed`);
    try {
      return await fn();
    } catch (e) {
      // Upstash error replies end with ", command was: [...]" (the arguments): drop them.
      if (e instanceof Error && e.name === "UpstashError") {
        const message = e.message
          .replace(/^Command failed: /, "")
          .replace(/, command was: [\s\S]*$/, "");
        // Redis error replies start with an upper-case code (ERR, WRONGTYPE, EXECABORT, …);
        // anything else (Unauthorized, a proxy's own failure) means the service is unavailable.
        const kind: RedisErrorKind =
          /^[A-Z][A-Z_]+ /.test(message) && !/^ERR max /.test(message) ? "command" : "connection";
        throw toRedisError(new Error(message), { ...ctx, kind });
      }
      throw toRedisError(e, ctx);
    }
  };

  return {
    describe,
    ping: () => call(() => redis.ping()),
    get: (key) => call(() => redis.get<string>(key)),
    set: (key, value, options) =>
      call(async () => {
        const o = options ?? {};
        const args: Array<string | number> = ["SET", key, value];
        if (o.nx) args.push("NX");
        if (o.ex !== undefined) args.push("EX", o.ex);
        else if (o.px !== undefined) args.push("PX", o.px);
        return redis.exec<string | null>(args as [string, ...Array<string | number>]);
      }),
    del: (...keys) => (keys.length === 0 ? call(async () => 0) : call(() => redis.del(...keys))),
    incr: (key) => call(() => redis.incr(key)),
    expire: (key, seconds) => call(() => redis.expire(key, seconds)),
    lpush: (key, ...values) => call(() => redis.lpush(key, ...values)),
    rpush: (key, ...values) => call(() => redis.rpush(key, ...values)),
    lrange: (key, start, stop) => call(() => redis.lrange<string>(key, start, stop)),
    lrem: (key, count, value) => call(() => redis.lrem(key, count, value)),
    llen: (key) => call(() => redis.llen(key)),
    ltrim: (key, start, stop) => call(async () => String(await redis.ltrim(key, start, stop))),
    lmove: (source, destination, from, to) =>
      call(async () => (await redis.lmove<string | null>(source, destination, from, to)) ?? null),
    zadd: (key, score, member) => call(async () => (await redis.zadd(key, { score, member })) ?? 0),
    zrangebyscore: (key, min, max, limit) =>
      call(() => {
        const args: Array<string | number> = ["ZRANGEBYSCORE", key, String(min), String(max)];
        if (limit) args.push("LIMIT", limit.offset, limit.count);
        return redis.exec<string[]>(args as [string, ...Array<string | number>]);
      }),
    zrem: (key, ...members) => call(() => redis.zrem(key, ...members)),
    hset: (key, fields) => call(() => redis.hset(key, fields)),
    // With automatic deserialisation off, HGETALL answers the raw flat [field, value, …] array.
    hgetall: (key) => call(async () => flatToRecord(await redis.exec<unknown>(["HGETALL", key]))),
    async close() {
      closed = true;
    },
  };
}
