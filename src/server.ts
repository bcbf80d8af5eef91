/**
 * Bun entry: settings from the environment, the libSQL file (migrated, WAL), Redis and cache,
 * then `createApp` behind `Bun.serve`. SIGINT/SIGTERM let in-flight requests finish.
 */
import { createApp } from "./app";
import { ConfigError, loadConfig, redactUrl } from "./config";
import { openDatabase } from "./db/local";
import { runMigrations } from "./db/migrate";
import { createCache } from "./services/cache";
import { createLogger } from "./services/logger";
import { createRedisClients } from "./services/redis-factory";

async function main() {
  let config;
  try {
    config = loadConfig(process.env, "bun");
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message);
      process.exit(1);
    }
    throw e;
  }
  const logger = createLogger(config.logLevel);
  const db = await openDatabase(config.database.url, config.database.authToken);
  await runMigrations(db);
  const redis = await createRedisClients(config);
  const cache = createCache(config.cacheBackend, { db, redis: redis.caching });
  let app;
  try {
    app = await createApp({ config, db, cache, redis, logger });
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message);
      process.exit(1);
    }
    throw e;
  }
  const server = Bun.serve({
    hostname: config.host,
    port: config.port,
    // Let the app answer oversized bodies itself (413 JSON); Bun's own cap is a backstop.
    maxRequestBodySize: Math.max(config.maxBodyBytes * 2, 8 * 1024 * 1024),
    fetch: app.fetch,
  });
  logger.info("listening", { url: `http://${server.hostname}:${server.port}/`, database: redactUrl(config.database.url), plugins: config.plugins });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info("shutting down", { signal });
    await server.stop(false); // stop accepting; in-flight requests finish
    await Promise.allSettled([redis.caching?.close(), redis.tasks?.close()]);
    await db.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
}

await main();
