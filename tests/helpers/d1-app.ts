/**
 * The real app in process over miniflare's D1, migrated by wrangler as a deploy migrates it, with
 * a superuser's token: the set-up of the D1 write tests.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import type { Database } from "../../src/db/client";
import { d1Database, type D1Binding } from "../../src/db/d1";
import { createCache } from "../../src/services/cache";
import { d1PersistDir, d1Settings, d1SuperuserToken, migrateLocalD1 } from "../../tools/d1-local";
import { BASE } from "./app";
import { startMiniflare, type WorkerdWatch } from "./workerd-watch";

export interface D1App {
  app: Awaited<ReturnType<typeof createApp>>;
  binding: D1Binding;
  /** miniflare's workerd: its pid, and how it ended if it ended before `stop`. */
  workerd: WorkerdWatch;
  /** One request as the superuser (or with `token`); the answer's status and parsed body. */
  json(
    method: string,
    path: string,
    body?: unknown,
    token?: string,
  ): Promise<{ status: number; body: any }>;
  /** A POST that must answer 201; its body. */
  made(path: string, body: unknown): Promise<any>;
  stop(): Promise<void>;
}

/**
 * Starts it on a fresh directory named after `name`; `wrap` may watch the database, or make
 * another one over the binding (to watch the statements it prepares); `env` adds settings.
 */
export async function startD1App(
  name: string,
  wrap: (db: Database, binding: D1Binding) => Database = (db) => db,
  env: Record<string, string> = {},
): Promise<D1App> {
  const dir = mkdtempSync(join(tmpdir(), `host-${name}-`));
  await migrateLocalD1(dir);
  const d1 = d1Settings();
  const { mf, workerd, stop } = await startMiniflare(name, {
    modules: true,
    script: "export default { fetch() { return new Response('') } }",
    d1Databases: { [d1.binding]: d1.databaseId },
    d1Persist: d1PersistDir(dir),
  });
  const binding = (await mf.getD1Database(d1.binding)) as unknown as D1Binding;
  const config = loadConfig(
    // errors only: a 500 in a D1 test then says why (miniflare's workerd is a process of its own)
    { ...env, LOG_LEVEL: "error", DATABASE_URL: `file:${join(dir, "unused.db")}` },
    "bun",
  );
  const app = await createApp({
    config,
    db: wrap(d1Database(binding), binding),
    cache: createCache("memory", {}),
  });
  const token = await d1SuperuserToken(binding, "admin");
  const json = async (method: string, path: string, body?: unknown, as = token) => {
    const res = await app.request(BASE + path, {
      method,
      headers: { authorization: `Token ${as}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    // a 500 for want of the database names why, not "Internal server error."
    const gone = workerd.ended();
    if (gone && res.status >= 500) throw new Error(`${method} ${path}: ${res.status}: ${gone}`);
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
  return {
    app,
    binding,
    workerd,
    json,
    async made(path, body) {
      const r = await json("POST", path, body);
      if (r.status !== 201) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    },
    async stop() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The statement texts a D1 binding prepares: `wrap` the binding an app is given, and `sent` answers
 * what one piece of work had prepared (sorted, each text once).
 */
export function statementRecorder() {
  let recorded: Set<string> | null = null;
  return {
    wrap(binding: D1Binding): D1Binding {
      return new Proxy(binding, {
        get(target, key) {
          if (key === "prepare")
            return (text: string) => {
              recorded?.add(text);
              return target.prepare(text);
            };
          const value = Reflect.get(target, key, target) as unknown;
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    },
    async sent<T>(work: () => Promise<T>): Promise<{ answer: T; texts: string[] }> {
      const texts = new Set<string>();
      recorded = texts;
      try {
        return { answer: await work(), texts: [...texts].sort() };
      } finally {
        recorded = null;
      }
    },
  };
}
