/**
 * Cloudflare Workers entry: settings from the env bindings (`[vars]` and secrets), libSQL over
 * HTTP (`@libsql/client/web`), Upstash Redis over fetch and Workers KV, then the same `createApp`.
 */
import { errorBody } from "./api-error";
import { createClient } from "@libsql/client/web";
import type { ExecutionContext } from "hono";
import { createApp, servicesOf, type App } from "./app";
import { ConfigError, loadConfig, redactUrl, type Config, type RedisSettings } from "./config";
import type { Database } from "./db/client";
import { d1Database, type D1Binding } from "./db/d1";
import { libsqlDatabase } from "./db/libsql";
import { fetchWithDeadline } from "./db/remote-link";
import { classifyDatabaseError } from "./db/connection-errors";
import { createCache, type KVNamespaceLike } from "./services/cache";
import { createLogger, type Logger } from "./services/logger";
import { createRedactor } from "./services/redact";
import { createUpstashRedis } from "./services/redis";
import type { RedisClient } from "./services/redis-types";
import { pruneExpired } from "./services/tasks/retention";
import { drainQueue } from "./services/tasks/worker";
import { beat } from "./services/tasks/heartbeat";

/**
 * The bindings this Worker reads: the KV namespace `CACHE`, the D1 database `DB` (wrangler.toml's
 * `d1` environment; when bound it is the database and `DATABASE_URL` is unused), plus the §3
 * settings as strings.
 */
export interface WorkerEnv {
  CACHE?: KVNamespaceLike;
  DB?: D1Binding;
  [setting: string]: unknown;
}

// Same deadline as the Bun side (redis-factory.ts), which cannot be imported here: it reaches
// the Bun-only client for redis:// URLs.
const REDIS_TIMEOUT_MS = 2_000;

function redisClient(settings: RedisSettings | undefined, role: string): RedisClient | undefined {
  if (!settings) return undefined;
  if (!/^https?:/i.test(settings.url)) {
    throw new ConfigError(
      `REDIS_${role}_URL`,
      "must be an Upstash REST URL (https://…) on Workers; redis:// needs Bun",
    );
  }
  return createUpstashRedis(settings, { timeoutMs: REDIS_TIMEOUT_MS });
}

// The libSQL client queues calls beyond `concurrency` (default 20) in one limiter per client. In
// an isolate that queue is shared by concurrent requests, and a call queued by one request but
// released by another is a cross-request promise: workerd cancels it and the request hangs
// ("code had hung"), leaking limiter slots until the isolate serves nothing. Workers already cap
// outbound connections per request, so the client's own cap is switched off.
const UNLIMITED = Number.MAX_SAFE_INTEGER;

/** D1 when the `DB` binding is present, else libSQL over HTTP at `DATABASE_URL`. */
function openDatabase(env: WorkerEnv, config: Config): Database {
  if (env.DB) return d1Database(env.DB);
  if (config.database.url.startsWith("file:")) {
    throw new ConfigError(
      "DATABASE_URL",
      "must be a remote libSQL URL (libsql:, https:) on Workers, or bind a D1 database as DB",
    );
  }
  return libsqlDatabase(
    createClient({
      url: config.database.url,
      authToken: config.database.authToken,
      concurrency: UNLIMITED,
      // every round trip bounded: a hung server is a 503, not a hung request (decision 0202)
      fetch: fetchWithDeadline(config.database.timeoutMs),
    }),
    "remote",
    // For the same reason, reads of concurrent requests cannot share one request (decision 0098).
    { groupReads: false },
  );
}

async function build(env: WorkerEnv, logger: Logger): Promise<App> {
  const config: Config = loadConfig(env, "workerd");
  if (config.cacheBackend === "kv" && !env.CACHE) {
    throw new ConfigError(
      "CACHE_BACKEND",
      "is kv but the KV namespace binding CACHE is missing (wrangler.toml [[kv_namespaces]])",
    );
  }
  const db = openDatabase(env, config);
  const redis = {
    caching: redisClient(config.redis.caching, "CACHING"),
    tasks: redisClient(config.redis.tasks, "TASKS"),
  };
  const cache = createCache(config.cacheBackend, { db, redis: redis.caching, kv: env.CACHE });
  const app = await createApp({ config, db, cache, redis, logger: createLogger(config.logLevel) });
  logger.info("isolate ready", {
    database: env.DB ? "d1" : redactUrl(config.database.url),
    cache: config.cacheBackend,
    plugins: config.plugins,
  });
  return app;
}

/**
 * Start-up failures answer this. A database that cannot be reached is a 503 naming the cause
 * (refused, unauthorized, …) and `/livez` still answers 200: the isolate lives, and the next
 * request retries. A `ConfigError` is a 500 naming the setting (never its value).
 */
function startupFailure(
  request: Request,
  env: WorkerEnv,
  error: unknown,
  redact: (s: string) => string,
): Response {
  const headers = { "cache-control": "no-store" };
  const database = databaseFailure(env, error);
  const path = new URL(request.url).pathname;
  if (
    (path === "/livez" || path === "/livez/") &&
    !(error instanceof ConfigError) &&
    healthPluginEnabled(env)
  ) {
    return Response.json({ status: "ok" }, { headers });
  }
  if (database) {
    const detail = redact(`The database is unavailable: ${database.reason}.`);
    return Response.json(errorBody("database_unavailable", detail), {
      status: 503,
      headers: { ...headers, "retry-after": "5" },
    });
  }
  const detail =
    error instanceof ConfigError ? redact(error.message) : "The service could not start.";
  return Response.json(errorBody("startup_failed", detail), { status: 500, headers });
}

function databaseFailure(env: WorkerEnv, error: unknown) {
  return error instanceof ConfigError
    ? null
    : classifyDatabaseError(
        error,
        typeof env.DATABASE_AUTH_TOKEN === "string" && env.DATABASE_AUTH_TOKEN !== "",
      );
}

function healthPluginEnabled(env: WorkerEnv): boolean {
  try {
    return loadConfig(env, "workerd").plugins.includes("host_healthcheck_plugin");
  } catch {
    return false;
  }
}

/**
 * Builds the Worker's fetch handler. The app is built once per isolate (the promise is shared
 * by concurrent first requests); a failed build answers 500 and is retried on the next request.
 */
export function createWorker(): {
  fetch(request: Request, env: WorkerEnv, ctx: ExecutionContext): Promise<Response>;
  scheduled(
    event: { cron: string; scheduledTime: number },
    env: WorkerEnv,
    ctx: ExecutionContext,
  ): Promise<void>;
} {
  let app: Promise<App> | null = null;
  const appFor = async (env: WorkerEnv, logger: Logger): Promise<App> => {
    const pending = (app ??= build(env, logger));
    try {
      return await pending;
    } catch (error) {
      if (app === pending) app = null;
      throw error;
    }
  };
  return {
    async fetch(request, env, ctx) {
      const logger = createLogger(env.LOG_LEVEL === "silent" ? "silent" : "info");
      let ready: App;
      try {
        ready = await appFor(env, logger);
      } catch (error) {
        const redact = createRedactor(
          ["DATABASE_AUTH_TOKEN", "REDIS_CACHING_TOKEN", "REDIS_TASKS_TOKEN"].flatMap((k) =>
            typeof env[k] === "string" ? [env[k] as string] : [],
          ),
        );
        const database = databaseFailure(env, error);
        const url = typeof env.DATABASE_URL === "string" ? redactUrl(env.DATABASE_URL) : "";
        // One line naming the cause; Drizzle's "Failed query: <SQL>" says nothing about it.
        logger.error(
          "isolate start-up failed",
          database
            ? { database: url, cause: database.kind, error: redact(database.reason) }
            : { error: redact(error instanceof Error ? error.message : String(error)) },
        );
        return startupFailure(request, env, error, redact);
      }
      return ready.fetch(request, env, ctx);
    },
    /** The cron trigger (wrangler.toml `[triggers]`) drains the job queue (§7) for a bounded time. */
    async scheduled(_event, env, ctx) {
      const logger = createLogger(env.LOG_LEVEL === "silent" ? "silent" : "info");
      let queue;
      try {
        const services = servicesOf(await appFor(env, logger));
        queue = services.tasks;
        // Retention on every run, queue or not: with nothing due it is two indexed reads.
        ctx.waitUntil(
          pruneExpired(services.db, services.config.retention, { budgetMs: PRUNE_BUDGET_MS }).then(
            (pruned) =>
              pruned.changes || pruned.jobs
                ? logger.info("cron pruned expired records", { ...pruned })
                : undefined,
            (e) =>
              logger.error("cron retention failed", { error: String((e as Error)?.message ?? e) }),
          ),
        );
        // Plugins' periodic work (the schema trash purge) runs on every cron run too.
        for (const task of services.periodic)
          ctx.waitUntil(
            task.run().catch((e) =>
              logger.error(`cron ${task.name} failed`, {
                error: String((e as Error)?.message ?? e),
              }),
            ),
          );
      } catch {
        logger.error("isolate start-up failed; the cron run did no jobs");
        return;
      }
      if (!queue) return;
      ctx.waitUntil(beat(queue, "workerd"));
      ctx.waitUntil(
        drainQueue(queue, { budgetMs: CRON_BUDGET_MS }).then(
          (ran) => logger.info("cron drained the job queue", { ran }),
          (e) =>
            logger.error("cron queue drain failed", { error: String((e as Error)?.message ?? e) }),
        ),
      );
    },
  };
}

/** Each cron run works the queue this long at most (the next run takes over after a minute). */
const CRON_BUDGET_MS = 50_000;
/** Retention's share of a cron run; what is left is deleted by the next runs. */
const PRUNE_BUDGET_MS = 5_000;

export default createWorker();
