/** Cache backend over a `RedisClient` (Upstash REST or Bun's client): JSON values, Redis TTLs. */
import type { RedisClient } from "../redis-types";
import type { Cache } from "./types";

/** Options of {@link createRedisCache}. */
export interface RedisCacheOptions {
  /** Prepended to every key; default `host:cache:`. */
  prefix?: string;
}

/**
 * A cache in Redis. TTLs are set in milliseconds (`PX`), so fractions of a second are honoured.
 * @example const cache = createRedisCache(createUpstashRedis(settings)); await cache.get("k");
 */
export function createRedisCache(redis: RedisClient, options: RedisCacheOptions = {}): Cache {
  const prefix = options.prefix ?? "host:cache:";
  return {
    backend: "redis",
    async get<T>(key: string): Promise<T | null> {
      const json = await redis.get(prefix + key);
      return json === null ? null : (JSON.parse(json) as T);
    },
    async set(key, value, ttlSeconds) {
      const json = JSON.stringify(value);
      if (json === undefined)
        throw new TypeError(`cache value for ${JSON.stringify(key)} is not JSON-serialisable`);
      if (ttlSeconds !== undefined && ttlSeconds <= 0) {
        await redis.del(prefix + key);
        return;
      }
      await redis.set(
        prefix + key,
        json,
        ttlSeconds === undefined ? undefined : { px: Math.max(1, Math.round(ttlSeconds * 1000)) },
      );
    },
    async delete(key) {
      await redis.del(prefix + key);
    },
  };
}
