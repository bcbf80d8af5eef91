/**
 * src/worker.ts start-up in workerd: the app is built once per isolate, a failed build answers
 * JSON without secrets (503 for a database that is down, 500 otherwise) and is retried on the
 * next request, and bad settings name the setting.
 */
import { afterEach, describe, expect, test, setDefaultTimeout } from "bun:test";
import {
  freePort,
  startRemoteDatabase,
  startWorker,
  type RemoteDatabase,
  type RunningWorker,
} from "../helpers/worker";

// Real workerd, wrangler and redis-server processes: more room than bun's 5 s default
// (this bun does not apply bunfig's [test] timeout).
setDefaultTimeout(30_000);

const DB_SECRET = "db-secret-7a1f0c9e";
const REDIS_SECRET = "redis-secret-55e0d2b1";

const running: Array<RunningWorker | RemoteDatabase> = [];
afterEach(async () => {
  for (const r of running.splice(0).reverse()) await r.stop();
});

async function worker(bindings: Record<string, string>): Promise<RunningWorker> {
  const w = await startWorker({ bindings });
  running.push(w);
  return w;
}

async function failure(
  w: RunningWorker,
  path = "/api/status/",
): Promise<{ status: number; text: string; body: any }> {
  const res = await w.fetch(path);
  const text = await res.text();
  return { status: res.status, text, body: JSON.parse(text) };
}

describe("worker start-up", () => {
  test("database unreachable → 503 database_unavailable without secrets; the next request retries and succeeds", async () => {
    const port = await freePort();
    const w = await worker({
      DATABASE_URL: `http://127.0.0.1:${port}`,
      DATABASE_AUTH_TOKEN: DB_SECRET,
    });
    for (let i = 0; i < 2; i++) {
      const r = await failure(w);
      expect(r.status).toBe(503);
      expect(r.body).toEqual({
        detail:
          "The database is unavailable: connection refused or dropped: nothing answered at that address.",
        error: "database_unavailable",
      });
      expect(r.text).not.toContain(DB_SECRET);
    }
    const db = await startRemoteDatabase({ port, authToken: DB_SECRET });
    running.push(db);
    const token = await db.superuserToken();
    const ok = await w.fetch("/api/status/", { headers: { authorization: `Token ${token}` } });
    expect(ok.status).toBe(200);
    expect((await ok.json()).runtime).toBe("workerd");
  });

  test("the app is built once per isolate: concurrent first requests share it", async () => {
    const db = await startRemoteDatabase();
    running.push(db);
    const token = await db.superuserToken();
    const w = await worker({ DATABASE_URL: db.url });
    const answers = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const res = await w.fetch("/api/status/", { headers: { authorization: `Token ${token}` } });
        expect(res.status).toBe(200);
        return ((await res.json()) as { "started-at": string })["started-at"];
      }),
    );
    const later = (await (
      await w.fetch("/api/status/", { headers: { authorization: `Token ${token}` } })
    ).json()) as { "started-at": string };
    expect(new Set([...answers, later["started-at"]]).size).toBe(1);
  });

  test("a database auth token the server refuses → 503 naming the cause, without the token", async () => {
    const db = await startRemoteDatabase({ authToken: DB_SECRET });
    running.push(db);
    const w = await worker({ DATABASE_URL: db.url, DATABASE_AUTH_TOKEN: "wrong-token-0b9c3e" });
    const r = await failure(w);
    expect(r.status).toBe(503);
    expect(r.body.error).toBe("database_unavailable");
    expect(r.body.detail).toContain("unauthorized");
    expect(r.text).not.toContain("wrong-token-0b9c3e");
  });

  const badSettings: Array<[string, Record<string, string>, string]> = [
    [
      "LOGIN_REQUIRED",
      { LOGIN_REQUIRED: "maybe" },
      "invalid setting LOGIN_REQUIRED: must be true or false",
    ],
    [
      "DATABASE_URL (a local file)",
      { DATABASE_URL: "file:data/host.db" },
      "invalid setting DATABASE_URL",
    ],
    [
      "REDIS_CACHING_URL (redis://)",
      { REDIS_CACHING_URL: `redis://:${REDIS_SECRET}@127.0.0.1:6379` },
      "invalid setting REDIS_CACHING_URL",
    ],
    ["CACHE_BACKEND", { CACHE_BACKEND: "disk" }, "invalid setting CACHE_BACKEND"],
    ["PLUGINS", { PLUGINS: "custom_objects,nope" }, "invalid setting PLUGINS"],
  ];
  for (const [name, bindings, detail] of badSettings) {
    test(`bad ${name} → 500 naming the setting, no value echoed`, async () => {
      const w = await worker({
        DATABASE_URL: "http://127.0.0.1:9",
        DATABASE_AUTH_TOKEN: DB_SECRET,
        REDIS_CACHING_TOKEN: REDIS_SECRET,
        ...bindings,
      });
      const r = await failure(w, "/api/dcim/sites/");
      expect(r.status).toBe(500);
      expect(r.body.error).toBe("startup_failed");
      expect(r.body.detail).toStartWith(detail);
      expect(r.text).not.toContain(DB_SECRET);
      expect(r.text).not.toContain(REDIS_SECRET);
    });
  }

  test("CACHE_BACKEND=kv without the CACHE binding → 500 naming CACHE_BACKEND and the binding", async () => {
    const w = await startWorker({ bindings: { DATABASE_URL: "http://127.0.0.1:9" }, kv: false });
    running.push(w);
    const r = await failure(w);
    expect(r.status).toBe(500);
    expect(r.body.detail).toStartWith("invalid setting CACHE_BACKEND");
    expect(r.body.detail).toContain("CACHE");
  });

  test("CACHE_BACKEND=redis without REDIS_CACHING_URL → 500 naming CACHE_BACKEND", async () => {
    const w = await worker({ DATABASE_URL: "http://127.0.0.1:9", CACHE_BACKEND: "redis" });
    const r = await failure(w);
    expect(r.status).toBe(500);
    expect(r.body.detail).toStartWith("invalid setting CACHE_BACKEND");
  });
});
