/**
 * Token provisioning as an attacker meets it (issue 12 item 4): unknown users and wrong
 * passwords take the same time, and failures are limited per username and per client address
 * (429 with Retry-After, §4 shape), on the app's cache. Everything over HTTP against the real app.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app";
import { createUser } from "../../src/core/auth/provisioning";
import type { AppDeps } from "../../src/app";
import { createCache, createMemoryCache } from "../../src/services/cache";
import { makeTestApp, type TestApp } from "../helpers/app";
import { manualClock } from "../helpers/wait";

const PROVISION = "/api/users/tokens/provision/";
const PASSWORD = "correct-horse-battery";

const apps: TestApp[] = [];
async function appWith(env: Record<string, string> = {}, extra: Partial<AppDeps> = {}) {
  const t = await makeTestApp(env, extra);
  apps.push(t);
  for (const username of ["alice", "bob", "carol"])
    await createUser(t.deps.db.orm, { username, password: PASSWORD });
  return t;
}
afterAll(async () => {
  for (const t of apps) await t.close();
});

const login = (t: TestApp, username: string, password: string, from?: string) =>
  t.json("POST", PROVISION, {
    token: null,
    body: { username, password },
    headers: from ? { "x-forwarded-for": from } : {},
  });

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

describe("the same work for unknown users and wrong passwords", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await appWith({ LOGIN_FAILURES_PER_USERNAME: "1000", LOGIN_FAILURES_PER_ADDRESS: "1000" });
  });

  test("both answer the same 403; an inactive user and a user without a password too", async () => {
    await createUser(t.deps.db.orm, { username: "nopass" });
    await t.deps.db.orm.run(
      (await import("drizzle-orm")).sql`UPDATE users SET is_active = 0 WHERE username = 'carol'`,
    );
    const answers = [
      await login(t, "nobody", "x"),
      await login(t, "alice", "wrong"),
      await login(t, "carol", PASSWORD),
      await login(t, "nopass", ""),
    ];
    for (const r of answers) {
      expect(r.status).toBe(403);
      expect(r.body).toEqual({ detail: "Invalid username/password", error: "invalid_credentials" });
    }
  });

  test("median time of an unknown user is within a generous bound of a wrong password's (20 tries each)", async () => {
    const timed = async (username: string) => {
      const started = performance.now();
      const r = await login(t, username, "wrong-password");
      expect(r.status).toBe(403);
      return performance.now() - started;
    };
    await timed("alice"); // warm up (the dummy hash is made on first use)
    await timed("nobody-warm");
    const unknown: number[] = [];
    const wrong: number[] = [];
    for (let i = 0; i < 20; i++) {
      unknown.push(await timed(`nobody${i}`));
      wrong.push(await timed("alice"));
    }
    const ratio = median(unknown) / median(wrong);
    console.log(
      `login timing: unknown user median ${median(unknown).toFixed(2)} ms, wrong password median ${median(wrong).toFixed(2)} ms, ratio ${ratio.toFixed(2)}`,
    );
    expect(ratio).toBeGreaterThan(0.5);
    expect(ratio).toBeLessThan(2);
  });
});

describe("failure limits (defaults: 10 per username, 30 per address, 15 minutes)", () => {
  test("the 11th failure for one username answers 429 with Retry-After, even with the right password", async () => {
    const t = await appWith();
    for (let i = 0; i < 10; i++) expect((await login(t, "alice", `guess-${i}`)).status).toBe(403);
    const r = await login(t, "alice", PASSWORD);
    expect(r.status).toBe(429);
    expect(r.body).toEqual({
      detail: expect.stringContaining("Too many failed login attempts"),
      error: "rate_limited",
    });
    const retryAfter = Number(r.res.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(890);
    expect(retryAfter).toBeLessThanOrEqual(900);
    // other users are not blocked by alice's failures
    expect((await login(t, "bob", PASSWORD)).status).toBe(201);
  });

  test("unknown usernames count like known ones (a limit answers the same for both)", async () => {
    const t = await appWith({ LOGIN_FAILURES_PER_USERNAME: "3" });
    for (const username of ["alice", "ghost"]) {
      for (let i = 0; i < 3; i++) expect((await login(t, username, "nope")).status).toBe(403);
      expect((await login(t, username, "nope")).status).toBe(429);
    }
  });

  test("a success clears the username's failures", async () => {
    const t = await appWith({ LOGIN_FAILURES_PER_USERNAME: "3" });
    for (let i = 0; i < 2; i++) expect((await login(t, "alice", "nope")).status).toBe(403);
    expect((await login(t, "alice", PASSWORD)).status).toBe(201);
    for (let i = 0; i < 3; i++) expect((await login(t, "alice", "nope")).status).toBe(403);
    expect((await login(t, "alice", PASSWORD)).status).toBe(429);
  });

  test("per address: many usernames from one client are cut off at the address limit; other clients are not", async () => {
    const t = await appWith({ TRUSTED_PROXY_HOPS: "1", LOGIN_FAILURES_PER_ADDRESS: "5" });
    for (let i = 0; i < 5; i++)
      expect((await login(t, `spray${i}`, "nope", "203.0.113.7")).status).toBe(403);
    const blocked = await login(t, "bob", PASSWORD, "203.0.113.7");
    expect(blocked.status).toBe(429);
    expect(blocked.body.error).toBe("rate_limited");
    expect(Number(blocked.res.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await login(t, "bob", PASSWORD, "198.51.100.1")).status).toBe(201);
    // a client cannot pick its address: entries left of the trusted proxy's are ignored
    expect((await login(t, "bob", PASSWORD, "198.51.100.99, 203.0.113.7")).status).toBe(429);
  });

  test("successful logins do not use up the address limit", async () => {
    const t = await appWith({ TRUSTED_PROXY_HOPS: "1", LOGIN_FAILURES_PER_ADDRESS: "3" });
    for (let i = 0; i < 6; i++)
      expect((await login(t, "bob", PASSWORD, "192.0.2.1")).status).toBe(201);
    for (let i = 0; i < 3; i++)
      expect((await login(t, "alice", "nope", "192.0.2.1")).status).toBe(403);
    expect((await login(t, "bob", PASSWORD, "192.0.2.1")).status).toBe(429);
  });

  test("X-Forwarded-For is ignored unless TRUSTED_PROXY_HOPS says to trust it", async () => {
    const t = await appWith({ LOGIN_FAILURES_PER_ADDRESS: "3" });
    for (let i = 0; i < 3; i++)
      expect((await login(t, `spray${i}`, "nope", `192.0.2.${i}`)).status).toBe(403);
    expect((await login(t, "bob", PASSWORD, "192.0.2.200")).status).toBe(429);
  });

  test("parallel guesses cannot slip past the limit", async () => {
    const t = await appWith({ LOGIN_FAILURES_PER_USERNAME: "5" });
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => login(t, "alice", `parallel-${i}`)),
    );
    expect(answers.filter((r) => r.status === 403).length).toBe(5);
    expect(answers.filter((r) => r.status === 429).length).toBe(35);
  });

  test("the window ends: after LOGIN_FAILURE_WINDOW_SECONDS the user may try again", async () => {
    // The failure counters live in the cache for the rest of the window; its clock is ours.
    const clock = manualClock();
    const t = await appWith(
      { LOGIN_FAILURES_PER_USERNAME: "2", LOGIN_FAILURE_WINDOW_SECONDS: "60" },
      { cache: createMemoryCache({ now: clock.now }) },
    );
    for (let i = 0; i < 2; i++) expect((await login(t, "alice", "nope")).status).toBe(403);
    const r = await login(t, "alice", PASSWORD);
    expect(r.status).toBe(429);
    const retryAfter = Number(r.res.headers.get("retry-after")); // the rest of the window
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    clock.advance(60_000);
    expect((await login(t, "alice", PASSWORD)).status).toBe(201);
  });

  test("the connection's address counts when served by Bun.serve", async () => {
    const t = await appWith({ LOGIN_FAILURES_PER_ADDRESS: "2" });
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: t.app.fetch });
    try {
      const post = (username: string, password: string) =>
        fetch(`http://127.0.0.1:${server.port}${PROVISION}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ username, password }),
        });
      expect((await post("x1", "nope")).status).toBe(403);
      expect((await post("x2", "nope")).status).toBe(403);
      expect((await post("bob", PASSWORD)).status).toBe(429);
      // in-process requests have no connection: a different key ("unknown")
      expect((await login(t, "bob", PASSWORD)).status).toBe(201);
    } finally {
      server.stop(true);
    }
  });
});

describe("the limit lives on the cache", () => {
  test("two app instances sharing a database cache share the counters", async () => {
    const a = await appWith({ CACHE_BACKEND: "database", LOGIN_FAILURES_PER_USERNAME: "4" });
    const b = await createApp({ ...a.deps, cache: createCache("database", { db: a.deps.db }) });
    const viaB = (username: string, password: string) =>
      b.request(`http://host.test${PROVISION}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ username, password }),
      });
    for (let i = 0; i < 2; i++) expect((await login(a, "alice", "nope")).status).toBe(403);
    for (let i = 0; i < 2; i++) expect((await viaB("alice", "nope")).status).toBe(403);
    expect((await login(a, "alice", PASSWORD)).status).toBe(429);
    expect((await viaB("alice", PASSWORD)).status).toBe(429);
  });
});
