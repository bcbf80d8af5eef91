/**
 * The shared HTTP contract against src/worker.ts in real workerd (Miniflare) over Cloudflare D1
 * (miniflare's D1, migrated by `wrangler d1 migrations apply --local` as a deploy migrates it),
 * Workers KV and Redis through the Upstash bridge, all on loopback: the same answers as on
 * Workers + libSQL (contract-workerd.test.ts). D1 has no interactive transactions (issue 28).
 */
import { setDefaultTimeout } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { d1SuperuserToken, migrateLocalD1 } from "../../tools/d1-local";
import { CONTRACT_HEALTH_SETTINGS, contractSuite, requestInit } from "../helpers/contract";
import { startRedisStack } from "../helpers/redis-bridge";
import { startWorker } from "../helpers/worker";

// Real workerd, wrangler (its D1 migration run takes 10–30 s on a busy machine) and redis-server
// processes: more room than bun's 5 s default.
setDefaultTimeout(90_000);

const MAX_BODY_BYTES = 4096;

contractSuite(
  "workerd (Miniflare) + D1",
  async () => {
    const persistTo = mkdtempSync(join(tmpdir(), "host-d1-"));
    const removeDir = () => rmSync(persistTo, { recursive: true, force: true });
    await migrateLocalD1(persistTo);
    const stack = await startRedisStack().catch((e) => {
      removeDir();
      throw e;
    });
    const { url, token } = stack.bridge;
    try {
      const worker = await startWorker({
        name: "contract-d1",
        d1PersistTo: persistTo,
        bindings: {
          CACHE_BACKEND: "kv",
          MAX_BODY_BYTES: String(MAX_BODY_BYTES),
          REDIS_CACHING_URL: url,
          REDIS_CACHING_TOKEN: token,
          REDIS_TASKS_URL: url,
          REDIS_TASKS_TOKEN: token,
          PLUGINS_CONFIG: JSON.stringify({ host_healthcheck_plugin: CONTRACT_HEALTH_SETTINGS }),
        },
      });
      const d1 = await worker.mf.getD1Database("DB");
      return {
        runtime: "workerd",
        database: "d1",
        base: worker.url.origin,
        maxBodyBytes: MAX_BODY_BYTES,
        request: (method, path, opts) => worker.fetch(path, requestInit(method, opts)),
        superuserToken: (username) => d1SuperuserToken(d1, username),
        async workerTick() {
          const result = await (await worker.mf.getWorker("host")).scheduled({ cron: "* * * * *" });
          if (result.outcome !== "ok") throw new Error(`cron run: ${result.outcome}`);
        },
        redis: { token, stop: () => stack.stop() },
        async close() {
          await worker.stop();
          await stack.stop();
          removeDir();
        },
      };
    } catch (e) {
      await stack.stop();
      removeDir();
      throw e;
    }
  },
  { schemaApply: "batched" },
);
