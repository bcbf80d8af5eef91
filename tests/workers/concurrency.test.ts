/**
 * Many concurrent requests in one isolate: nothing shared across requests may hold a promise or
 * I/O of another request (workerd cancels those and the request hangs). Regression test for the
 * libSQL client's shared concurrency limiter (see src/worker.ts).
 */
import { afterAll, beforeAll, describe, expect, test, setDefaultTimeout } from "bun:test";
import { startRedisStack, type RedisStack } from "../helpers/redis-bridge";
import {
  startRemoteDatabase,
  startWorker,
  type RemoteDatabase,
  type RunningWorker,
} from "../helpers/worker";

// Real workerd, wrangler and redis-server processes: more room than bun's 5 s default
// (this bun does not apply bunfig's [test] timeout).
setDefaultTimeout(30_000);

const BURST = 100;
const ROUNDS = 3;
const REQUEST_TIMEOUT_MS = 10_000;

let db: RemoteDatabase;
let redis: RedisStack;
let worker: RunningWorker;
let token: string;

beforeAll(async () => {
  db = await startRemoteDatabase();
  token = await db.superuserToken();
  redis = await startRedisStack();
  const { url, token: redisToken } = redis.bridge;
  worker = await startWorker({
    bindings: {
      DATABASE_URL: db.url,
      REDIS_CACHING_URL: url,
      REDIS_CACHING_TOKEN: redisToken,
      REDIS_TASKS_URL: url,
      REDIS_TASKS_TOKEN: redisToken,
    },
  });
});
afterAll(async () => {
  await worker?.stop();
  await redis?.stop();
  await db?.stop();
});

/** Fires `BURST` requests at once, `ROUNDS` times; returns how often each status (or error) came back. */
async function bursts(
  path: string,
  headers: Record<string, string>,
): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (let round = 0; round < ROUNDS; round++) {
    const statuses = await Promise.all(
      Array.from({ length: BURST }, () =>
        worker.fetch(path, { headers, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }).then(
          async (res) => {
            await res.arrayBuffer();
            return String(res.status);
          },
          (e: Error) => e.name,
        ),
      ),
    );
    for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
  }
  return counts;
}

describe(`bursts of ${BURST} concurrent requests on one isolate`, () => {
  test("GET a site by id: every request answers 200", async () => {
    const res = await worker.fetch("/api/dcim/sites/", {
      method: "POST",
      headers: { authorization: `Token ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "Burst", slug: "burst" }),
    });
    const site = (await res.json()) as { id: number };
    expect(
      await bursts(`/api/dcim/sites/${site.id}/`, { authorization: `Token ${token}` }),
    ).toEqual({ "200": BURST * ROUNDS });
  });

  test("the health endpoint (checks shared by concurrent callers): every request answers 200", async () => {
    expect(await bursts("/plugins/host_healthcheck_plugin/healthcheck/?format=json", {})).toEqual({
      "200": BURST * ROUNDS,
    });
  });
});
