/**
 * Builds the host's two Redis roles (`REDIS['caching']`, `REDIS['tasks']`) from settings:
 * http(s) URLs use Upstash REST (everywhere); redis:// uses Bun's client (Bun only).
 */
import type { Config, RedisSettings } from "../config";
import type { RedisClient } from "./redis-types";
import { createUpstashRedis } from "./redis";

const REDIS_TIMEOUT_MS = 2000;

async function createRedisClient(
  settings: RedisSettings,
  runtime: Config["runtime"],
): Promise<RedisClient> {
  if (/^rediss?:/i.test(settings.url)) {
    if (runtime !== "bun")
      throw new Error("redis:// URLs need Bun; use an Upstash REST (https://) URL on Workers");
    const { createBunRedis } = await import("./redis-bun");
    return createBunRedis(settings, { timeoutMs: REDIS_TIMEOUT_MS });
  }
  return createUpstashRedis(settings, { timeoutMs: REDIS_TIMEOUT_MS });
}

export async function createRedisClients(
  config: Config,
): Promise<{ caching?: RedisClient; tasks?: RedisClient }> {
  const out: { caching?: RedisClient; tasks?: RedisClient } = {};
  if (config.redis.caching)
    out.caching = await createRedisClient(config.redis.caching, config.runtime);
  if (config.redis.tasks) out.tasks = await createRedisClient(config.redis.tasks, config.runtime);
  return out;
}
