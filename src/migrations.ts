/**
 * Migrating a database: the SQL migrations and data steps of `src/db/migrate.ts`, then each
 * built-in plugin's steps, registered through the plugin contract. Entries, tools and tests call
 * this; the database layer itself names no plugin.
 */
import type { Database } from "./db/client";
import { migrateDatabase } from "./db/migrate";
import { BUILTIN_PLUGINS } from "./plugins/registry";

export async function runMigrations(db: Database): Promise<void> {
  await migrateDatabase(
    db,
    BUILTIN_PLUGINS.flatMap((p) => p.migrations ?? []),
  );
}
