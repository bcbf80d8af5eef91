/**
 * Bun entry: settings from the environment, a local Redis stack when none is configured, the
 * libSQL file (migrated, WAL), Redis and cache, then `createApp` behind `Bun.serve`.
 * SIGINT/SIGTERM drain (`drain.ts`): /readyz fails at once, every request already received is
 * answered, then everything this process started stops.
 */
import { basename, dirname } from "node:path";
import { createApp, servicesOf } from "./app";
import { ConfigError, loadConfig, redactUrl, unknownSettings, type Config } from "./config";
import { openDatabase } from "./db/local";
import { runMigrations } from "./migrations";
import { databaseIdentity, storedIdentity } from "./db/identity";
import { checkMarker, remembersDatabase, vanishedDatabase } from "./db/marker";
import { describeDatabaseError } from "./db/connection-errors";
import { createCache } from "./services/cache";
import { createResilientCache } from "./services/cache/resilient";
import { createLogger, type Logger } from "./services/logger";
import { createRedactor, secretsOf } from "./services/redact";
import { createRedisClients } from "./services/redis-factory";
import { retentionTask } from "./services/tasks/retention";
import { startPeriodic, startWorker } from "./services/tasks/worker";
import { startLocalRedisStack, type LocalRedisStack } from "./services/local-redis";
import { idleCollector } from "./idle-gc";
import { DRAIN_TIMEOUT_MS, drainer } from "./drain";
import { loadGraphqlEngine } from "./graphql/routes";
import { markDraining } from "./core/lifecycle";

/** After the drain's bound: closing Redis clients and the database, before the backstop exits. */
const EXIT_GRACE_MS = 5_000;

/** `HOST_LOCAL_REDIS`: on (default) or off. Read here because only `npm start` has a local stack. */
function localRedisEnabled(raw: string | undefined): boolean {
  const value = (raw ?? "").trim().toLowerCase();
  if (["", "on", "true", "1", "yes"].includes(value)) return true;
  if (["off", "false", "0", "no"].includes(value)) return false;
  throw new ConfigError("HOST_LOCAL_REDIS", "must be on or off");
}

/** The data folder: the local database file's folder (`file:data/host.db` → `data`), else `data`. */
function localDataDir(databaseUrl: string): string {
  const path = /^file:/i.test(databaseUrl) ? databaseUrl.slice(5).split("?")[0]! : "";
  return path && path !== ":memory:" ? dirname(path) : "data";
}

/**
 * The database's name for its local Redis folder (`file:data/host.db` → `host`; a remote database
 * → `remote-<host>`), so two databases in one data folder never share a redis-server (0069).
 */
function localDatabaseName(databaseUrl: string): string {
  if (/^file:/i.test(databaseUrl)) {
    const path = databaseUrl.slice(5).split("?")[0]!;
    return path === ":memory:" ? "memory" : basename(path).replace(/\.db$/i, "") || "host";
  }
  try {
    return `remote-${new URL(databaseUrl).host}`;
  } catch {
    return "remote";
  }
}

/**
 * With neither Redis role configured, starts redis-server plus the Upstash bridge: the caching
 * role goes to redis-server directly (Bun's client), the tasks role to the bridge.
 * Returns the stack (or null) and the settings to run with.
 */
async function withLocalRedis(
  config: Config,
  logger: Logger,
): Promise<{ config: Config; stack: LocalRedisStack | null; down?: string }> {
  if (
    !localRedisEnabled(process.env.HOST_LOCAL_REDIS) ||
    config.redis.caching ||
    config.redis.tasks
  )
    return { config, stack: null };
  let stack: LocalRedisStack | null;
  try {
    stack = await startLocalRedisStack({
      dataDir: localDataDir(config.database.url),
      database: localDatabaseName(config.database.url),
    });
  } catch (e) {
    const error = String((e as Error)?.message ?? e).slice(0, 300);
    // Events are still written to the outbox; they are delivered once a tasks Redis is there.
    logger.error(
      "local redis-server did not start; the Redis health checks fail and event deliveries wait in the outbox",
      { error },
    );
    return { config, stack: null, down: `the local redis-server did not start (${error})` };
  }
  if (!stack) {
    logger.warn(
      "redis-server is not on PATH, so there is no local Redis: the Redis health checks will report unavailable " +
        "(install redis-server, or set REDIS_CACHING_URL and REDIS_TASKS_URL; HOST_LOCAL_REDIS=off silences this)",
    );
    return { config, stack: null, down: "redis-server is not on PATH" };
  }
  // The caching role (token and cache look-ups on every request) talks RESP to redis-server through
  // Bun's native client: no loopback HTTP round trip through the bridge per look-up (decision 0043).
  // The tasks role stays on the bridge, which a local Workers dev process (tools/dev-worker.ts) shares.
  const env = {
    ...process.env,
    REDIS_CACHING_URL: stack.redisUrl,
    REDIS_TASKS_URL: stack.url,
    REDIS_TASKS_TOKEN: stack.token,
  };
  logger.info("local redis started", {
    redis: stack.redisUrl,
    bridge: stack.url,
    caching: stack.redisUrl,
    tasks: stack.url,
  });
  return { config: loadConfig(env, "bun"), stack };
}

/** A start-up failure whose message is the one line to print (no stack trace). */
class StartupError extends Error {}

const portInUse = (host: string, port: number) =>
  `cannot start: port ${port} on ${host} is already in use (stop what listens there, or set PORT)`;

/** Fails with one line when something already listens on the port (0 = any port, never busy). */
async function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  try {
    Bun.listen({ hostname: host, port, socket: { data() {} } }).stop(true);
  } catch (e) {
    if ((e as { code?: string })?.code === "EADDRINUSE")
      throw new StartupError(portInUse(host, port));
    throw e;
  }
}

/** The path of a local database file (`file:data/host.db` → `data/host.db`), else null. */
function localFile(url: string): string | null {
  if (!/^file:/i.test(url)) return null;
  const path = url.replace(/^file:(\/\/)?/i, "").split("?")[0]!;
  return path && path !== ":memory:" ? path : null;
}

/**
 * Opens and migrates the database; a connection failure is one line naming its cause. A local
 * file that vanished, or another database in its place, stops start-up (`db/marker.ts`).
 */
async function openMigrated(config: Config) {
  let db: Awaited<ReturnType<typeof openDatabase>> | undefined;
  const file = localFile(config.database.url);
  const gone = file && vanishedDatabase(file);
  if (gone) throw new StartupError(`cannot start: ${gone}`);
  try {
    db = await openDatabase(config.database.url, config.database.authToken, {
      readPool: config.database.readPool,
      cacheMb: config.database.cacheMb,
      remoteTimeoutMs: config.database.timeoutMs,
    });
    // a folder that remembers its database refuses any other before migrating writes to it
    if (file && remembersDatabase(file)) {
      const foreign = checkMarker(file, (await storedIdentity(db.orm)) ?? "none (never migrated)");
      if (foreign) throw new StartupError(`cannot start: ${foreign}`);
    }
    await runMigrations(db);
    const other = file && checkMarker(file, await databaseIdentity(db.orm));
    if (other) throw new StartupError(`cannot start: ${other}`);
    return db;
  } catch (e) {
    await db?.close().catch(() => undefined);
    const cause = describeDatabaseError(e, config.database.url, config.database.authToken);
    if (cause) throw new StartupError(`cannot start: ${cause}`);
    throw e;
  }
}

async function main() {
  let stack: LocalRedisStack | null = null;
  let started: { url: string; authToken?: string; close(): Promise<void> } | null = null;
  const exit = async (code: number): Promise<never> => {
    await stack?.stop();
    process.exit(code);
  };
  try {
    let config = loadConfig(process.env, "bun");
    const logger = createLogger(config.logLevel);
    const unknown = unknownSettings(process.env);
    if (unknown.length) logger.warn(`unknown settings ignored: ${unknown.join(", ")}`);
    // Before anything starts: a busy port or an unreachable database is one line, nothing else.
    await assertPortFree(config.host, config.port);
    const db = await openMigrated(config);
    started = { ...config.database, close: () => db.close() };
    let down: string | undefined;
    ({ config, stack, down } = await withLocalRedis(config, logger));
    const redact = createRedactor(secretsOf(config));

    const redis = await createRedisClients(config);
    let cache = createCache(config.cacheBackend, { db, redis: redis.caching });
    // A Redis outage must cost the cache, not the requests.
    if (cache.backend === "redis") cache = createResilientCache(cache, { logger, redact });
    const redisDown = down ? { caching: down, tasks: down } : undefined;
    const app = await createApp({ config, db, cache, redis, logger, redisDown });
    // GraphQL's modules are evaluated now, not in the first query's stretch (decision 0217)
    await loadGraphqlEngine();
    // a full collection when requests pause, so a burst's heap is not the next one's floor (0060)
    const idle = idleCollector(app.fetch);
    const drain = drainer(idle.fetch);
    let server: ReturnType<typeof Bun.serve>;
    try {
      server = Bun.serve({
        hostname: config.host,
        port: config.port,
        // Let the app answer oversized bodies itself (413 JSON); Bun's own cap is a backstop.
        maxRequestBodySize: Math.max(config.maxBodyBytes * 2, 8 * 1024 * 1024),
        fetch: drain.fetch,
      });
    } catch (e) {
      if ((e as { code?: string })?.code === "EADDRINUSE")
        throw new StartupError(portInUse(config.host, config.port));
      throw e;
    }
    // TASK_WORKER=inline: this process also works the job queue (§7), once it serves.
    const queue = servicesOf(app).tasks;
    // Retention (hourly) runs in the task worker; without a tasks Redis, on its own.
    const retention = retentionTask(db, config.retention);
    const periodic = [retention, ...servicesOf(app).periodic];
    const worker =
      config.taskWorker === "inline" && queue ? startWorker(queue, { logger, periodic }) : null;
    const pruner =
      config.taskWorker === "inline" && !queue ? startPeriodic(periodic, logger) : null;

    let stopping = false;
    const shutdown = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      // From here /readyz answers 503; requests already received are all answered (0080).
      markDraining(servicesOf(app));
      logger.info("shutting down", { signal, drainTimeoutMs: DRAIN_TIMEOUT_MS });
      // A backstop: whatever hangs, the process is gone shortly after the drain's bound.
      setTimeout(() => process.exit(1), DRAIN_TIMEOUT_MS + EXIT_GRACE_MS).unref();
      const [drained] = await Promise.all([
        drain.drain(server),
        worker?.stop(DRAIN_TIMEOUT_MS),
        pruner?.stop(DRAIN_TIMEOUT_MS),
      ]);
      if (!drained) logger.warn("drain timed out; open connections were closed");
      idle.stop();
      await Promise.allSettled([redis.caching?.close(), redis.tasks?.close()]);
      await db.close();
      await exit(0);
    };
    process.on("SIGINT", () => void shutdown("SIGINT"));
    process.on("SIGTERM", () => void shutdown("SIGTERM"));
    // Logged once the handlers are in: a signal sent on seeing this line finds them.
    logger.info("listening", {
      url: `http://${server.hostname}:${server.port}/`,
      database: redactUrl(config.database.url),
      plugins: config.plugins,
    });
  } catch (e) {
    if (e instanceof ConfigError || e instanceof StartupError) {
      console.error(e.message);
      await exit(1);
    }
    // A database failure after the database opened (read-only, damaged, full): one line, and
    // nothing this process started is left running.
    const cause = started && describeDatabaseError(e, started.url, started.authToken);
    if (cause) {
      console.error(`cannot start: ${cause}`);
      await started?.close().catch(() => undefined);
      await exit(1);
    }
    await stack?.stop();
    throw e;
  }
}

await main();
