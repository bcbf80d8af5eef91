/** Applies the drizzle-kit migrations in `migrations/` (Bun: read from disk). */
import { migrate } from "drizzle-orm/libsql/migrator";
import { fileURLToPath } from "node:url";
import type { Database } from "./client";

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../migrations", import.meta.url));

export async function runMigrations(db: Database): Promise<void> {
  await migrate(db.orm, { migrationsFolder: MIGRATIONS_FOLDER });
}
