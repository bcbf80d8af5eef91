/**
 * The shared HTTP contract against src/worker.ts in real workerd (Miniflare), over the Hrana
 * server (libSQL over HTTP), Workers KV and Redis through the Upstash bridge, all on loopback.
 */
import { setDefaultTimeout } from "bun:test";
import { CONTRACT_HEALTH_SETTINGS, contractSuite, requestInit } from "../helpers/contract";
import { startRedisStack } from "../helpers/redis-bridge";
import { startRemoteDatabase, startWorker } from "../helpers/worker";

// Real workerd, wrangler and redis-server processes: more room than bun's 5 s default
// (this bun does not apply bunfig's [test] timeout).
setDefaultTimeout(30_000);

const MAX_BODY_BYTES = 4096;

contractSuite("workerd (Miniflare)", async () => {
  const db = await startRemoteDatabase();
  const stack = await startRedisStack().catch(async (e) => {
    await db.stop();
    throw e;
  });
  const { url, token } = stack.bridge;
  try {
    const worker = await startWorker({
      bindings: {
        DATABASE_URL: db.url,
        CACHE_BACKEND: "kv",
        MAX_BODY_BYTES: String(MAX_BODY_BYTES),
        REDIS_CACHING_URL: url,
        REDIS_CACHING_TOKEN: token,
        REDIS_TASKS_URL: url,
        REDIS_TASKS_TOKEN: token,
        PLUGINS_CONFIG: JSON.stringify({ host_healthcheck_plugin: CONTRACT_HEALTH_SETTINGS }),
      },
    });
    return {
      runtime: "workerd",
      base: worker.url.origin,
      maxBodyBytes: MAX_BODY_BYTES,
      request: (method, path, opts) => worker.fetch(path, requestInit(method, opts)),
      superuserToken: (username) => db.superuserToken(username),
      async workerTick() {
        // What the cron trigger does every minute in production.
        const result = await (await worker.mf.getWorker("host")).scheduled({ cron: "* * * * *" });
        if (result.outcome !== "ok") throw new Error(`cron run: ${result.outcome}`);
      },
      redis: { token, stop: () => stack.stop() },
      async close() {
        await worker.stop();
        await stack.stop();
        await db.stop();
      },
    };
  } catch (e) {
    await stack.stop();
    await db.stop();
    throw e;
  }
});
