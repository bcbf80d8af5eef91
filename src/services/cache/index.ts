/** Picks and builds the configured cache backend (§3 `CACHE_BACKEND`). */
import type { Database } from "../../db/client";
import type { RedisClient } from "../redis-types";
import { createDatabaseCache } from "./database";
import { createKvCache, type KVNamespaceLike } from "./kv";
import { createMemoryCache } from "./memory";
import { createRedisCache } from "./redis";
import type { Cache } from "./types";

export type { Cache } from "./types";
export type { KVNamespaceLike } from "./kv";
export { createDatabaseCache } from "./database";
export { createKvCache, KV_MIN_TTL_SECONDS } from "./kv";
export { createMemoryCache } from "./memory";
export { createRedisCache } from "./redis";

/** What the backends may need; only the chosen backend's dependency is required. */
export interface CacheDeps {
  db?: Database;
  redis?: RedisClient;
  kv?: KVNamespaceLike;
}

/**
 * Builds the cache for `backend`; throws an Error naming the missing dependency.
 * @example createCache("redis", { redis: createUpstashRedis(config.redis.caching!) })
 */
export function createCache(backend: Cache["backend"], deps: CacheDeps = {}): Cache {
  switch (backend) {
    case "memory":
      return createMemoryCache();
    case "database":
      if (!deps.db) throw new Error("cache backend 'database' needs a database (deps.db)");
      return createDatabaseCache(deps.db);
    case "redis":
      if (!deps.redis)
        throw new Error(
          "cache backend 'redis' needs a Redis client (deps.redis; set REDIS_CACHING_URL)",
        );
      return createRedisCache(deps.redis);
    case "kv":
      if (!deps.kv)
        throw new Error("cache backend 'kv' needs a Workers KV namespace binding (deps.kv)");
      return createKvCache(deps.kv);
    default:
      throw new Error(`unknown cache backend ${JSON.stringify(backend satisfies never)}`);
  }
}
