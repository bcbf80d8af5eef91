/** Applies the drizzle-kit migrations in `migrations/` (Bun: read from disk). */
import { migrate } from "drizzle-orm/libsql/migrator";
import { fileURLToPath } from "node:url";
import { and, isNotNull, isNull, sql } from "drizzle-orm";
import type { Database } from "./client";
import { devices, sites } from "./schema";
import { naturalize } from "../core/models/natural";

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../migrations", import.meta.url));

export async function runMigrations(db: Database): Promise<void> {
  await migrate(db.orm, { migrationsFolder: MIGRATIONS_FOLDER });
  await backfillNaturalNames(db);
}

/**
 * Natural-ordering keys (`_name`) are computed in JavaScript, which SQL migrations cannot do:
 * rows written before the column existed get theirs here, once (later writes keep it current).
 */
async function backfillNaturalNames(db: Database): Promise<void> {
  for (const table of [sites, devices]) {
    const rows = await db.orm.select({ id: table.id, name: table.name }).from(table).where(and(isNull(table.naturalName), isNotNull(table.name)));
    if (!rows.length) continue;
    await db.orm.transaction(async (tx) => {
      // Plain SQL: the update builder would also move `last_updated`, which is about edits.
      for (const row of rows) await tx.run(sql`UPDATE ${table} SET ${sql.identifier("_name")} = ${naturalize(row.name)} WHERE ${table.id} = ${row.id}`);
    });
  }
}
