/**
 * The health check's audience and cache settings in real workerd (the contract suite runs with
 * the defaults): `details: authenticated` shows anonymous probes the verdict only and a token
 * every check; `cache_seconds` hands out one result per window, marked with its age.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { requestInit } from "../helpers/contract";
import {
  startRemoteDatabase,
  startWorker,
  type RemoteDatabase,
  type RunningWorker,
} from "../helpers/worker";

setDefaultTimeout(30_000);

const HEALTH = "/plugins/host_healthcheck_plugin/healthcheck/";
let db: RemoteDatabase;
let worker: RunningWorker;
let token: string;

beforeAll(async () => {
  db = await startRemoteDatabase();
  token = await db.superuserToken("health-admin");
  worker = await startWorker({
    bindings: {
      DATABASE_URL: db.url,
      CACHE_BACKEND: "kv",
      PLUGINS_CONFIG: JSON.stringify({
        host_healthcheck_plugin: {
          checks: ["health_check.Database", "health_check.cache.backends.CacheBackend"],
          details: "authenticated",
          cache_seconds: 30,
          groups: { core: ["Database"] },
        },
      }),
    },
  });
});
afterAll(async () => {
  await worker?.stop();
  await db?.stop();
});

const get = async (path: string, opts: { token?: string; accept?: string } = {}) => {
  const res = await worker.fetch(
    path,
    requestInit("GET", {
      token: opts.token,
      headers: { accept: opts.accept ?? "application/json" },
    }),
  );
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    text,
    body: text.startsWith("{") ? JSON.parse(text) : text,
  };
};

describe("health check settings on Workers", () => {
  test("details: authenticated — anonymous probes get the verdict only, a token sees every check", async () => {
    const anon = await get(HEALTH);
    expect(anon.status).toBe(200);
    expect(anon.body).toEqual({ status: "working" });
    const withToken = await get(HEALTH, { token });
    expect(withToken.status).toBe(200);
    expect(withToken.body.checks.Database).toBe("working");
    const group = await get(`${HEALTH}core/`, { token });
    expect(Object.keys(group.body.checks)).toEqual(["Database"]);
  });

  test("cache_seconds: a second probe within the window gets the same result, marked with its age", async () => {
    // How the age grows with time is tests/healthcheck/cache.test.ts's (on a clock it moves).
    const first = await get(HEALTH, { token, accept: "application/health+json" });
    const second = await get(HEALTH, { token, accept: "application/health+json" });
    expect(second.status).toBe(200);
    expect(second.headers.get("age")).toMatch(/^\d+$/);
    const time = (b: any) => b.checks.Database?.[0]?.time;
    expect(time(second.body)).toBe(time(first.body));
  });
});
