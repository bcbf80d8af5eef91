/**
 * A second instance of Host on a test app's database: another app with caches of its own (another
 * process or isolate, as far as the caches can tell), for tests that a write through one is seen
 * by the next read through the other; and what those tests do through the first.
 */
import { expect } from "bun:test";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { openDatabase } from "../../src/db/local";
import { createCache } from "../../src/services/cache";
import type { TestApp } from "./app";

/** Instance B: an app of its own on `url` (a file, with its read pool, or a remote database). */
export async function anotherInstance(
  url: string,
): Promise<{ app: TestApp["app"]; close: () => Promise<void> }> {
  const config = loadConfig({ LOG_LEVEL: "silent", DATABASE_URL: url }, "bun");
  const db = await openDatabase(config.database.url, undefined, {
    readPool: config.database.readPool,
    cacheMb: config.database.cacheMb,
  });
  return {
    app: await createApp({ config, db, cache: createCache("memory", {}) }),
    close: () => db.close(),
  };
}

/** Deletes every token of `username` through `a`. */
export async function revokeTokensOf(a: TestApp, username: string): Promise<void> {
  const tokens = await a.json("GET", "/api/users/tokens/?limit=1000");
  const theirs = tokens.body.results.filter(
    (t: { user: { username: string } }) => t.user.username === username,
  );
  expect(theirs.length).toBeGreaterThan(0);
  for (const t of theirs)
    expect((await a.req("DELETE", `/api/users/tokens/${t.id}/`)).status).toBe(204);
}
