/**
 * The `Database` over Cloudflare D1 (`drizzle-orm/d1`): `read` and `write` are `db.batch()`, one
 * call and (for a write) one atomic transaction; there is no interactive transaction, so
 * `transaction` refuses (decision 0070). The Worker binds it when a D1 database is configured.
 */
import { drizzle } from "drizzle-orm/d1";
import {
  InteractiveTransactionUnsupported,
  NO_FILE_HEALTH,
  type Database,
  type Orm,
  type Queries,
  type Results,
} from "./client";
import { withinD1Limits } from "./d1-limits";
import { batchOnD1 } from "./driver-internals";
import * as schema from "./schema";

/** The parts of a D1 binding used here (the full type lives in @cloudflare/workers-types). */
export interface D1Binding {
  prepare(sql: string): {
    bind(...args: unknown[]): {
      all<T>(): Promise<{ results: T[]; meta: { changes?: number } }>;
      raw(options: { columnNames: true }): Promise<unknown[][]>;
    };
  };
  batch(statements: unknown[]): Promise<unknown[]>;
}

export function d1Database(unlimited: D1Binding): Database {
  // every statement, whoever builds it, within D1's 100 bound values (decision 0125)
  const binding = withinD1Limits(unlimited);
  // Drizzle's D1 and libSQL databases share the query builders; only `run()`'s result differs,
  // which domain code does not read (it counts with RETURNING or `execute`).
  const orm = drizzle(binding as never, { schema }) as unknown as Orm;
  const batch = <T extends Queries>(queries: T): Promise<Results<T>> =>
    batchOnD1(binding, queries) as Promise<Results<T>>;
  return {
    kind: "d1",
    orm,
    reader: orm,
    read: batch,
    write: batch,
    async execute({ sql, args }) {
      const r = await binding
        .prepare(sql)
        .bind(...args)
        .all<Record<string, unknown>>();
      return { rows: r.results, rowsAffected: r.meta.changes ?? 0 };
    },
    async readRows(sql, args) {
      const [columns, ...rows] = await binding
        .prepare(sql)
        .bind(...args)
        .raw({ columnNames: true });
      return { columns: (columns as string[]) ?? [], rows: rows as unknown[][] };
    },
    transaction: () => Promise.reject(new InteractiveTransactionUnsupported("D1")),
    needTransaction() {
      throw new InteractiveTransactionUnsupported("D1");
    },
    longWrite: (work) => work(),
    async maintain({ sql, args }) {
      const r = await binding
        .prepare(sql)
        .bind(...args)
        .all();
      return r.meta.changes ?? 0;
    },
    changeStamp: () => null,
    fileHealth: NO_FILE_HEALTH,
    async close() {},
  };
}
