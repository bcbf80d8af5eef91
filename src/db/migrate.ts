/**
 * Applies the drizzle-kit migrations in `migrations/` (Bun: read from disk), then the host's own
 * data steps and the steps plugins register through their contract (`HostPlugin.migrations`,
 * gathered by `src/migrations.ts`): the database layer names no plugin.
 */
import { migrate } from "drizzle-orm/libsql/migrator";
import { fileURLToPath } from "node:url";
import { and, isNotNull, isNull, sql } from "drizzle-orm";
import type { Database } from "./client";
import { ensureDatabaseIdentity } from "./identity";
import { devices, ipAddresses, prefixes, sites } from "./schema";
import { naturalize } from "./natural";
import { addressNumbers, prefixNumbers } from "../networks";

/** A step run after the SQL migrations on every start; it must be idempotent. */
export type MigrationStep = (db: Database) => Promise<void>;

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../migrations", import.meta.url));

/** The SQL migrations, the host's data steps, then `steps` (the plugins'), in order. */
export async function migrateDatabase(db: Database, steps: MigrationStep[]): Promise<void> {
  await migrate(db.orm, { migrationsFolder: MIGRATIONS_FOLDER });
  await backfillNaturalNames(db);
  await backfillNetworkNumbers(db);
  await addOwnerColumns(db);
  for (const step of steps) await step(db);
  // The random id that namespaces this database's state outside it (decision 0069).
  await ensureDatabaseIdentity(db.orm);
}

/**
 * Custom object tables (`co_<id>`, and whole types kept in the trash) made before owners get
 * their `owner__id` column here, once: they are created at run time, so no SQL migration
 * knows them. New tables are created with it (src/plugins/custom-objects/ddl.ts).
 */
async function addOwnerColumns(db: Database): Promise<void> {
  const tables = (await db.orm.all(
    sql`SELECT name FROM sqlite_master WHERE type = 'table' AND (name GLOB 'co_[0-9]*' OR name GLOB 'trash__[0-9]*')`,
  )) as { name: string }[];
  for (const { name } of tables) {
    if (!/^(co_\d+|trash__\d+_[a-z0-9_]+)$/.test(name)) continue;
    const columns = (await db.orm.all(sql`SELECT name FROM pragma_table_info(${name})`)) as {
      name: string;
    }[];
    const has = (c: string) => columns.some((col) => col.name === c);
    // Object tables only: link tables and search index tables have no timestamps.
    if (!has("last_updated") || has("owner__id")) continue;
    await db.orm.run(
      sql.raw(`ALTER TABLE "${name}" ADD COLUMN "owner__id" INTEGER REFERENCES "owners"(id)`),
    );
  }
}

/**
 * Natural-ordering keys (`_name`) are computed in JavaScript, which SQL migrations cannot do:
 * rows written before the column existed get theirs here, once (later writes keep it current).
 */
async function backfillNaturalNames(db: Database): Promise<void> {
  for (const table of [sites, devices]) {
    const rows = await db.orm
      .select({ id: table.id, name: table.name })
      .from(table)
      .where(and(isNull(table.naturalName), isNotNull(table.name)));
    if (!rows.length) continue;
    await db.orm.transaction(async (tx) => {
      // Plain SQL: the update builder would also move `last_updated`, which is about edits.
      for (const row of rows)
        await tx.run(
          sql`UPDATE ${table} SET ${sql.identifier("_name")} = ${naturalize(row.name)} WHERE ${table.id} = ${row.id}`,
        );
    });
  }
}

/** Rows a network backfill reads and writes at once (bounded memory and transaction size). */
const NETWORK_BACKFILL_BATCH = 500;

/**
 * The numbers the network filters compare (`_family`, `_mask`, …, decision 0203) are computed in
 * JavaScript too: prefixes and addresses written before the columns existed get theirs here,
 * once (family 0 marks text that is no network, so it is not read again).
 */
async function backfillNetworkNumbers(db: Database): Promise<void> {
  const jobs = [
    { table: prefixes, text: prefixes.prefix, numbers: prefixNumbers },
    { table: ipAddresses, text: ipAddresses.address, numbers: addressNumbers },
  ];
  for (const { table, text, numbers } of jobs) {
    for (;;) {
      const rows = await db.orm
        .select({ id: table.id, text })
        .from(table)
        .where(isNull(table.netFamily))
        .limit(NETWORK_BACKFILL_BATCH);
      if (!rows.length) break;
      await db.orm.transaction(async (tx) => {
        // Plain SQL, as for `_name`: a backfill is not an edit (`last_updated` stays).
        for (const row of rows) {
          const set = Object.entries(numbers(row.text)).map(
            ([key, value]) => sql`${sql.identifier(columnName(table, key))} = ${value}`,
          );
          await tx.run(
            sql`UPDATE ${table} SET ${sql.join(set, sql`, `)} WHERE ${table.id} = ${row.id}`,
          );
        }
      });
    }
  }
}

/** The SQL name of a table's column from its key (`netFamily` → `_family`). */
function columnName(table: typeof prefixes | typeof ipAddresses, key: string): string {
  return (table as unknown as Record<string, { name: string }>)[key]!.name;
}
