/**
 * The `Database` over a libSQL client: remote (Turso, sqld, the Hrana tool) as it is, and the base
 * the local file's implementation (`local.ts`) fills in. On a remote database `read` and `write`
 * are one `batch()` each: one HTTP request, one transaction on the server; reads issued in the
 * same turn of the event loop share theirs (`read-group.ts`).
 */
import type { Client } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { NO_FILE_HEALTH, type Database, type Orm, type Queries, type Results } from "./client";
import { batchOnLibsql } from "./driver-internals";
import { groupedReads } from "./read-group";
import * as schema from "./schema";

/** A `Database` whose members a local implementation may replace (the interface's are readonly). */
export type LibsqlDatabase = { -readonly [K in keyof Database]: Database[K] } & {
  /** The client under it: tests count its calls; domain code goes through the interface. */
  readonly client: Client;
};

export interface LibsqlOptions {
  /**
   * Remote reads of the same turn share one request (`read-group.ts`); default on. Off on
   * workerd, where I/O started by one request may not answer another (it cancels the promise).
   */
  groupReads?: boolean;
}

export function libsqlDatabase(
  client: Client,
  kind: "local" | "remote",
  options: LibsqlOptions = {},
): LibsqlDatabase {
  const orm: Orm = drizzle(client, { schema });
  // A remote read is one read-only transaction; each distinct statement of it is sent once.
  const readBatch = (queries: Queries) =>
    kind === "remote" ? batchOnLibsql(client, queries, "read") : orm.batch(queries as never);
  const batch = <T extends Queries>(queries: T): Promise<Results<T>> =>
    // one query needs no transaction around it: sent alone, it is one round trip all the same
    queries.length === 1
      ? (Promise.all([queries[0]]) as Promise<Results<T>>)
      : (readBatch(queries) as Promise<Results<T>>);
  // Remote: reads of the same turn share one request (read-group.ts); a local file has no request.
  const read =
    kind === "remote" && options.groupReads !== false
      ? (groupedReads(batch, readBatch) as LibsqlDatabase["read"])
      : batch;
  return {
    client,
    orm,
    reader: orm,
    kind,
    read,
    write: (queries) => orm.batch(queries as never) as never,
    async execute(statement) {
      const r = await client.execute(statement);
      return { rows: r.rows as never, rowsAffected: r.rowsAffected };
    },
    async readRows(sql, args) {
      const r = await client.execute({ sql, args });
      return { columns: r.columns, rows: r.rows.map((row) => Array.from(row)) };
    },
    transaction: (work) => orm.transaction(work),
    needTransaction: () => {},
    longWrite: (work) => work(),
    async maintain(statement) {
      return (await client.execute(statement)).rowsAffected;
    },
    changeStamp: () => null,
    fileHealth: NO_FILE_HEALTH,
    async close() {
      client.close();
    },
  };
}
