/** The shared HTTP contract against the Bun app in process (`makeTestApp`), Redis through the Upstash bridge. */
import { setDefaultTimeout } from "bun:test";
import { servicesOf } from "../../src/app";
import { lastHeartbeat } from "../../src/services/tasks/heartbeat";
import { startWorker } from "../../src/services/tasks/worker";
import { CONTRACT_HEALTH_SETTINGS, contractSuite, requestInit } from "../helpers/contract";
import { BASE, makeTestApp } from "../helpers/app";
import { startRedisStack } from "../helpers/redis-bridge";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { createCache } from "../../src/services/cache";
import { createUpstashRedis } from "../../src/services/redis";
import { waitFor } from "../helpers/wait";

// Real workerd, wrangler and redis-server processes: more room than bun's 5 s default
// (this bun does not apply bunfig's [test] timeout).
setDefaultTimeout(30_000);

const MAX_BODY_BYTES = 4096;

contractSuite("bun (in process)", async () => {
  const stack = await startRedisStack();
  try {
    const { url, token } = stack.bridge;
    const caching = createUpstashRedis({ url, token }, { timeoutMs: 2_000 });
    const tasks = createUpstashRedis({ url, token }, { timeoutMs: 2_000 });
    const t = await makeTestApp(
      {
        MAX_BODY_BYTES: String(MAX_BODY_BYTES),
        REDIS_CACHING_URL: url,
        REDIS_CACHING_TOKEN: token,
        REDIS_TASKS_URL: url,
        REDIS_TASKS_TOKEN: token,
        PLUGINS_CONFIG: JSON.stringify({ host_healthcheck_plugin: CONTRACT_HEALTH_SETTINGS }),
      },
      { redis: { caching, tasks }, cache: createCache("redis", { redis: caching }) },
    );
    return {
      runtime: "bun",
      base: BASE,
      maxBodyBytes: MAX_BODY_BYTES,
      request: async (method, path, opts) => t.app.request(BASE + path, requestInit(method, opts)),
      async superuserToken(username) {
        await createUser(t.deps.db.orm, { username, isSuperuser: true });
        return (await issueToken(t.deps.db.orm, { username })).key;
      },
      async workerTick() {
        // The worker loop `npm start` / `npm run worker` runs, until it has beaten once.
        const queue = servicesOf(t.app).tasks!;
        const worker = startWorker(queue, { idleMs: 20, maintainEveryMs: 50 });
        try {
          await waitFor(() => lastHeartbeat(queue), { message: "the worker's first heartbeat" });
        } finally {
          await worker.stop(2_000);
        }
      },
      redis: { token, stop: () => stack.stop() },
      async close() {
        await t.close();
        await stack.stop();
      },
    };
  } catch (e) {
    await stack.stop();
    throw e;
  }
});
