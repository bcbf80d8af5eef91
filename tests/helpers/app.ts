/**
 * Builds the real app over a fresh libSQL file per test file, plus small HTTP helpers.
 * No part of our stack is mocked: the app, the database and the cache are the production ones.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createApp, type AppDeps } from "../../src/app";
import { loadConfig } from "../../src/config";
import type { LibsqlDatabase } from "../../src/db/libsql";
import { openDatabase } from "../../src/db/local";
import { runMigrations } from "../../src/migrations";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { createCache } from "../../src/services/cache";

export const BASE = "http://host.test";

export interface TestApp {
  app: Awaited<ReturnType<typeof createApp>>;
  /** The app's dependencies; the database is the libSQL one `openDatabase` gives (its client visible to tests). */
  deps: AppDeps & { db: LibsqlDatabase };
  dir: string;
  dbUrl: string;
  /** A superuser's token. */
  admin: string;
  req(
    method: string,
    path: string,
    opts?: {
      token?: string | null;
      body?: unknown;
      raw?: string;
      headers?: Record<string, string>;
    },
  ): Promise<Response>;
  json<T = any>(
    method: string,
    path: string,
    opts?: { token?: string | null; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: T; res: Response }>;
  /** Creates a user and a token; `grants` are `[actions, "app_label.model"]` object permissions. */
  user(
    username: string,
    grants?: Array<[string[], string]>,
    opts?: { writeEnabled?: boolean; expires?: string | null },
  ): Promise<string>;
  close(): Promise<void>;
}

export async function makeTestApp(
  env: Record<string, string> = {},
  extra: Partial<AppDeps> = {},
): Promise<TestApp> {
  const dir = mkdtempSync(join(tmpdir(), "host-test-"));
  const dbUrl = env.DATABASE_URL ?? `file:${join(dir, "host.db")}`;
  const config = loadConfig({ LOG_LEVEL: "silent", ...env, DATABASE_URL: dbUrl }, "bun");
  const db = await openDatabase(config.database.url, config.database.authToken, {
    readPool: config.database.readPool,
    cacheMb: config.database.cacheMb,
    remoteTimeoutMs: config.database.timeoutMs,
  });
  await runMigrations(db);
  const cache =
    extra.cache ??
    (config.cacheBackend === "database"
      ? createCache("database", { db })
      : createCache("memory", {}));
  const deps = { config, db, cache, ...extra } as AppDeps & { db: LibsqlDatabase };
  const app = await createApp(deps);
  await createUser(db.orm, { username: "admin", isSuperuser: true });
  const admin = (await issueToken(db.orm, { username: "admin" })).key;

  const req: TestApp["req"] = (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    const token = opts.token === undefined ? admin : opts.token;
    if (token) headers.authorization = `Token ${token}`;
    let body: string | undefined;
    if (opts.raw !== undefined) body = opts.raw;
    else if (opts.body !== undefined) body = JSON.stringify(opts.body);
    if (body !== undefined && !headers["content-type"])
      headers["content-type"] = "application/json";
    return Promise.resolve(app.request(BASE + path, { method, headers, body }));
  };
  const t: TestApp = {
    app,
    deps,
    dir,
    dbUrl,
    admin,
    req,
    async json(method, path, opts) {
      const res = await req(method, path, opts);
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null, res };
    },
    async user(username, grants = [], opts = {}) {
      const u = await createUser(db.orm, { username });
      for (const [actions, label] of grants) {
        const r = await t.json("POST", "/api/users/permissions/", {
          body: {
            name: `${username}-${label}-${actions.join("-")}`,
            actions,
            object_types: [label],
            users: [u.id],
          },
        });
        if (r.status !== 201) throw new Error(`grant failed: ${JSON.stringify(r.body)}`);
      }
      return (
        await issueToken(db.orm, {
          username,
          writeEnabled: opts.writeEnabled,
          expires: opts.expires,
        })
      ).key;
    },
    async close() {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return t;
}

/** The id of the object type `app.model` in the test app's database (e.g. for rows made by SQL). */
export async function objectTypeIdOf(t: TestApp, app: string, model: string): Promise<number> {
  const { rows } = await t.deps.db.client.execute({
    sql: "SELECT id FROM object_types WHERE app_label = ? AND model = ?",
    args: [app, model],
  });
  return Number(rows[0]!.id);
}
