/**
 * The truth about a local database file, for the Database health check (issue 30, decision
 * 0079): the file is still the one opened (not deleted or replaced), checkpoints succeed, the
 * last integrity check (`PRAGMA quick_check`, on a connection of its own, off the event loop)
 * passed. Faults noticed off the request path are logged once when they start and once when
 * they end (the watcher is `Database.fileHealth`, `file-health.ts`). `probeWrite` is the write the
 * check makes on any database.
 */
import { sql } from "drizzle-orm";
import { ApiError } from "../api-error";
import type { Database } from "./client";

/** 503 for a write while the file is deleted or replaced under the server (see `fileProblem`). */
export function databaseFileGone(): ApiError {
  return new ApiError(
    503,
    {
      detail:
        "The database file was deleted or replaced under the server; writes are refused so that none is lost. Restart the server.",
      error: "database_file_gone",
    },
    { "Retry-After": "60" },
  );
}

/**
 * One atomic write and one read in one round trip: the row of `host_health` (the table made by
 * migration 0011, decision 0123) gets the time, and `SELECT 1` reads back. Resolves to the value
 * read (1), or throws the failure.
 */
export async function probeWrite(db: Database): Promise<unknown> {
  const checked = new Date().toISOString();
  const [, read] = await db.write([
    db.orm.run(
      sql`INSERT INTO "host_health" ("id", "checked") VALUES (1, ${checked}) ON CONFLICT ("id") DO UPDATE SET "checked" = excluded."checked"`,
    ),
    db.orm.all(sql`SELECT 1 AS ok`),
  ]);
  return (read as Array<{ ok: unknown }>)[0]?.ok;
}
