/**
 * Builds the real app with real Redis clients (from the same settings the server would read) and a
 * log sink, for the health check suites; plus small HTTP helpers.
 */
import type { AppDeps } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createCache } from "../../src/services/cache";
import { createResilientCache } from "../../src/services/cache/resilient";
import { createLogger } from "../../src/services/logger";
import { createRedactor, secretsOf } from "../../src/services/redact";
import { createRedisClients } from "../../src/services/redis-factory";
import type { RedisClient } from "../../src/services/redis-types";
import { makeTestApp, type TestApp } from "../helpers/app";
import type { RedisStack } from "../helpers/redis-bridge";

export const HEALTH = "/plugins/host_healthcheck_plugin/healthcheck/";

export const BUILTIN_IDS = [
  "Database",
  "CacheBackend",
  "HostRedisCacheHealthCheck",
  "HostRedisTasksHealthCheck",
];

/** Settings that point both Redis roles at a stack's bridge (Upstash REST). */
export function bridgeEnv(stack: RedisStack): Record<string, string> {
  return {
    REDIS_CACHING_URL: stack.bridge.url,
    REDIS_CACHING_TOKEN: stack.bridge.token,
    REDIS_TASKS_URL: stack.bridge.url,
    REDIS_TASKS_TOKEN: stack.bridge.token,
  };
}

/** `PLUGINS_CONFIG` holding the health plugin's settings. */
export function healthConfig(settings: Record<string, unknown>): string {
  return JSON.stringify({ host_healthcheck_plugin: settings });
}

export interface HealthApp extends TestApp {
  /** Every log line the app wrote. */
  logs: string[];
  redis: { caching?: RedisClient; tasks?: RedisClient };
}

/**
 * The app over a fresh libSQL file with the Redis clients `env` describes (built the way
 * `src/server.ts` builds them); a Redis cache is wrapped like the server wraps it.
 */
export async function makeHealthApp(
  env: Record<string, string>,
  extra: Partial<AppDeps> = {},
): Promise<HealthApp> {
  const config = loadConfig({ LOG_LEVEL: "debug", ...env }, "bun");
  const logs: string[] = [];
  const logger = createLogger("debug", (line) => logs.push(line));
  const redis = extra.redis ?? (await createRedisClients(config));
  let cache = extra.cache;
  if (!cache && config.cacheBackend === "redis") {
    cache = createResilientCache(createCache("redis", { redis: redis.caching }), {
      logger,
      redact: createRedactor(secretsOf(config)),
      retryAfterMs: 200,
    });
  }
  const t = await makeTestApp(env, { redis, logger, ...(cache ? { cache } : {}), ...extra });
  const close = t.close;
  return Object.assign(t, {
    logs,
    redis,
    async close() {
      await Promise.allSettled([redis.caching?.close(), redis.tasks?.close()]);
      await close();
    },
  });
}

/** GETs the health endpoint as JSON (anonymous unless a token is given). */
export async function healthJson(t: TestApp, opts: { token?: string | null; path?: string } = {}) {
  const res = await t.req("GET", opts.path ?? HEALTH, {
    token: opts.token ?? null,
    headers: { accept: "application/json" },
  });
  const text = await res.text();
  return {
    status: res.status,
    text,
    body: JSON.parse(text) as { status: string; checks: Record<string, string> },
    res,
  };
}
