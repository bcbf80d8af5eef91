/**
 * A local Cloudflare D1 database for the Worker (miniflare's D1, on disk): migrated the way a
 * deploy migrates it (`wrangler d1 migrations apply DB --env d1 --local`), and a superuser token
 * put in through Drizzle's D1 driver. Used by `npm run dev:worker -- --d1` and the D1 tests.
 */
import { drizzle } from "drizzle-orm/d1";
import { eq } from "drizzle-orm";
import { Miniflare } from "miniflare";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createUser, issueToken } from "../src/core/auth/provisioning";
import type { Executor } from "../src/db/client";
import * as schema from "../src/db/schema";

const ROOT = resolve(import.meta.dir, "..");
const MIGRATE_TIMEOUT_MS = 120_000;

/** wrangler without telemetry or network look-ups (it stays on loopback). */
export const WRANGLER_ENV = {
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_HIDE_BANNER: "true",
} as const;

/** The `d1` environment's D1 binding in wrangler.toml: its name and database id. */
export function d1Settings(): { binding: string; databaseId: string } {
  const toml = Bun.TOML.parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as {
    env?: { d1?: { d1_databases?: Array<{ binding: string; database_id: string }> } };
  };
  const db = toml.env?.d1?.d1_databases?.[0];
  if (!db) throw new Error("wrangler.toml has no [[env.d1.d1_databases]]");
  return { binding: db.binding, databaseId: db.database_id };
}

/** Where miniflare keeps D1 files under a `--persist-to` directory. */
export const d1PersistDir = (persistTo: string) => join(persistTo, "v3", "d1");

/** Applies `migrations/` to the local D1 database under `persistTo` with wrangler (idempotent). */
export async function migrateLocalD1(persistTo: string): Promise<void> {
  const { binding } = d1Settings();
  const proc = Bun.spawn(
    [
      join(ROOT, "node_modules", ".bin", "wrangler"),
      ...["d1", "migrations", "apply", binding, "--env", "d1", "--local"],
      ...["--persist-to", persistTo],
    ],
    {
      cwd: ROOT,
      env: { ...process.env, ...WRANGLER_ENV, CI: "1" }, // CI: no confirmation prompt
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  const timer = setTimeout(() => proc.kill("SIGKILL"), MIGRATE_TIMEOUT_MS);
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  if (code !== 0) throw new Error(`wrangler d1 migrations apply failed (${code}):\n${out}\n${err}`);
}

/** Drizzle's D1 driver over a binding, typed as the ORM the provisioning helpers take. */
export const d1Orm = (binding: unknown) =>
  drizzle(binding as never, { schema }) as unknown as Executor;

/** A token for superuser `username` (created when missing) in a D1 binding. */
export async function d1SuperuserToken(binding: unknown, username: string): Promise<string> {
  const orm = d1Orm(binding);
  const [found] = await orm
    .select({ id: schema.users.id })
    .from(schema.users)
    .where(eq(schema.users.username, username));
  if (!found) await createUser(orm, { username, isSuperuser: true });
  return (await issueToken(orm, { username, description: "D1 local" })).key;
}

/** Opens the local D1 database under `persistTo` briefly (no Worker) to run `work` on it. */
export async function withLocalD1<T>(
  persistTo: string,
  work: (binding: unknown) => Promise<T>,
): Promise<T> {
  const { binding, databaseId } = d1Settings();
  const mf = new Miniflare({
    modules: true,
    script: "export default { fetch() { return new Response(null, { status: 404 }); } }",
    compatibilityDate: "2026-04-20",
    d1Databases: { [binding]: databaseId },
    d1Persist: d1PersistDir(persistTo),
  });
  try {
    return await work(await mf.getD1Database(binding));
  } finally {
    await mf.dispose();
  }
}
