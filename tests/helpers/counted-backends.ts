/**
 * One app per backend — a local file, a remote libSQL server (the Hrana tool, as Turso is
 * reached) and miniflare's D1 — each counting the interactive transactions it opens, for tests
 * that run one scenario on all three and hold D1's writes to one batch.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { servicesOf } from "../../src/app";
import type { Database } from "../../src/db/client";
import { startHranaServer, type HranaServer } from "../../tools/hrana-server";
import { makeTestApp } from "./app";
import { startD1App } from "./d1-app";

export interface Backend {
  json(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** Runs one statement straight on the database (rows made in bulk). */
  run(text: string): Promise<void>;
  transactions: () => number;
  /** The app's database (to hold its next write: `holdNextWrite`). */
  db: Database;
  stop(): Promise<void>;
}

/** Counts the transactions `db` opens (D1 has none: each would answer 501). */
function counting(db: Database, count: () => void): Database {
  const base = db.transaction.bind(db);
  return Object.assign(db, {
    transaction: ((work: never) => {
      count();
      return base(work);
    }) as Database["transaction"],
  });
}

async function libsqlBackend(name: string, where: "local" | "remote"): Promise<Backend> {
  let hrana: HranaServer | undefined;
  let dir: string | undefined;
  if (where === "remote") {
    dir = mkdtempSync(join(tmpdir(), `host-${name}-`));
    hrana = await startHranaServer({ path: join(dir, "remote.db"), port: 0 });
  }
  const t = await makeTestApp(hrana ? { DATABASE_URL: hrana.url } : {});
  let n = 0;
  const db = counting(servicesOf(t.app).db, () => n++);
  return {
    json: (method, path, body) => t.json(method, path, { body }),
    run: async (text) => {
      await db.execute({ sql: text, args: [] } as never);
    },
    transactions: () => n,
    // the app's own database object: its writes go through it (services may wrap it)
    db: t.deps.db,
    async stop() {
      await t.close();
      await hrana?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function d1Backend(name: string): Promise<Backend> {
  let n = 0;
  const d1 = await startD1App(name, (db) => counting(db, () => n++));
  return {
    json: d1.json,
    run: async (text) => {
      await d1.binding.prepare(text).bind().all();
    },
    transactions: () => n,
    db: servicesOf(d1.app).db,
    stop: d1.stop,
  };
}

/** The three backends' starters, by name; `name` names their directories. */
export const countedBackends = (name: string) => ({
  local: () => libsqlBackend(name, "local"),
  remote: () => libsqlBackend(name, "remote"),
  d1: () => d1Backend(name),
});
