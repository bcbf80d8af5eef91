/**
 * The database's identity: a random id made once, inside the database, at its first migration
 * or first start (decision 0069). State kept outside the database — cache keys, the task queue on
 * Redis — is namespaced by it, so two databases sharing one Redis never see each other's tokens,
 * cache entries or jobs. Plain SQL (`randomblob`), so it is made alike on files, Turso and D1.
 */
import { sql } from "drizzle-orm";
import type { Orm } from "./client";

const TABLE = "host_database_identity";

async function read(orm: Orm): Promise<string | null> {
  const rows = (await orm.all(sql.raw(`SELECT "identity" FROM "${TABLE}" WHERE "id" = 1`))) as {
    identity: string;
  }[];
  return rows[0]?.identity ?? null;
}

/** Makes the identity when the database has none yet; keeps the one it has. */
export async function ensureDatabaseIdentity(orm: Orm): Promise<string> {
  await orm.run(
    sql.raw(
      `CREATE TABLE IF NOT EXISTS "${TABLE}" ("id" INTEGER PRIMARY KEY CHECK ("id" = 1), "identity" TEXT NOT NULL)`,
    ),
  );
  await orm.run(
    sql.raw(
      `INSERT OR IGNORE INTO "${TABLE}" ("id", "identity") VALUES (1, lower(hex(randomblob(16))))`,
    ),
  );
  const identity = await read(orm);
  if (!identity) throw new Error("the database identity could not be made");
  return identity;
}

/** The identity the database holds, read without writing: null when it has none (or no table). */
export async function storedIdentity(orm: Orm): Promise<string | null> {
  try {
    return await read(orm);
  } catch {
    return null; // no table yet: a database this code never migrated
  }
}

/** The database's identity: one read when migrations made it, else made now. */
export async function databaseIdentity(orm: Orm): Promise<string> {
  return (await storedIdentity(orm)) ?? ensureDatabaseIdentity(orm);
}
