/**
 * `npm run worker`: a task worker process (Bun). It builds the same app as `npm start` (so
 * every plugin's job handlers are registered) and works the queue on `REDIS['tasks']` until
 * SIGINT/SIGTERM; running jobs then get a bounded time to finish. Use with `TASK_WORKER=off`
 * on the API servers, or next to them for more throughput.
 */
import { createApp, servicesOf } from "./app";
import { ConfigError, loadConfig, redactUrl } from "./config";
import { openDatabase } from "./db/local";
import { runMigrations } from "./migrations";
import { createCache } from "./services/cache";
import { createLogger } from "./services/logger";
import { createRedisClients } from "./services/redis-factory";
import { retentionTask } from "./services/tasks/retention";
import { startWorker } from "./services/tasks/worker";

/** Jobs still running at shutdown get this long; unfinished ones are taken back after their lease. */
const STOP_TIMEOUT_MS = 10_000;

async function main() {
  let config;
  try {
    config = loadConfig(process.env, "bun");
    if (!config.redis.tasks)
      throw new ConfigError("REDIS_TASKS_URL", "is required by the task worker");
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message);
      process.exit(1);
    }
    throw e;
  }
  const logger = createLogger(config.logLevel);
  const db = await openDatabase(config.database.url, config.database.authToken, {
    remoteTimeoutMs: config.database.timeoutMs,
  });
  await runMigrations(db);
  const redis = await createRedisClients(config);
  const cache = createCache(config.cacheBackend, { db, redis: redis.caching });
  const app = await createApp({ config, db, cache, redis, logger });
  const queue = servicesOf(app).tasks!;
  const worker = startWorker(queue, {
    logger,
    periodic: [retentionTask(db, config.retention), ...servicesOf(app).periodic],
  });
  logger.info("task worker started", {
    redis: redis.tasks!.describe,
    database: redactUrl(config.database.url),
  });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info("task worker stopping", { signal });
    await worker.stop(STOP_TIMEOUT_MS);
    await Promise.allSettled([redis.caching?.close(), redis.tasks?.close()]);
    await db.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
}

await main();
