/**
 * The `Database` over a libSQL client: remote (Turso, sqld, the Hrana tool) as it is, and the base
 * the local file's implementation (`local.ts`) fills in. On a remote database `read` and `write`
 * are one `batch()` each: one HTTP request, one transaction on the server; reads issued in the
 * same turn of the event loop share theirs (`read-group.ts`).
 */
import type { Client } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { NO_FILE_HEALTH, type Database, type Orm, type Queries, type Results } from "./client";
import { readOnLibsql } from "./driver-internals";
import { groupedReads } from "./read-group";
import { asLinkError, type WriteOutcome } from "./remote-link";
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
  // A remote read is one statement where its guards fold into it, else one read-only transaction
  // where each distinct statement is sent once.
  const readBatch = (queries: Queries) =>
    kind === "remote" ? readOnLibsql(client, queries) : orm.batch(queries as never);
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
  const db: LibsqlDatabase = {
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
  return kind === "remote" ? namingLinkFailures(db) : db;
}

/** Runs `call`, its link failure (if that is what it throws) a `DatabaseLinkError` of `outcome`. */
async function linked<T>(outcome: WriteOutcome, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    throw asLinkError(e, outcome);
  }
}

/**
 * A remote database whose calls throw their link failures as `DatabaseLinkError`s (decision
 * 0202), saying whether a write may have committed: a read committed nothing; a write batch, an
 * autocommit statement or a maintenance statement may have; a transaction may have only once its
 * work is done (the failure was the COMMIT's), else the server rolls it back.
 */
function namingLinkFailures(db: LibsqlDatabase): LibsqlDatabase {
  const { read, write, execute, readRows, transaction, maintain } = db;
  db.read = ((queries: Queries) =>
    linked("none", () => read(queries))) as unknown as LibsqlDatabase["read"];
  db.readRows = (sql, args) => linked("none", () => readRows(sql, args));
  db.write = ((queries: Queries) =>
    linked("unknown", () => write(queries as never))) as unknown as LibsqlDatabase["write"];
  db.execute = (statement) => linked("unknown", () => execute(statement));
  db.maintain = (statement) => linked("unknown", () => maintain(statement));
  db.transaction = async (work) => {
    let workDone = false;
    try {
      return await transaction(async (tx) => {
        const value = await work(tx);
        workDone = true;
        return value;
      });
    } catch (e) {
      throw asLinkError(e, workDone ? "unknown" : "none");
    }
  };
  return db;
}
