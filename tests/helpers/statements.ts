/** Counts the SQL statements a piece of work sends to a database's client (execute and batch items). */
import type { Database } from "../../src/db/client";

export async function countStatements(db: Database, fn: () => Promise<unknown>): Promise<number> {
  let n = 0;
  const c = db.client as any;
  const orig = { execute: c.execute, batch: c.batch };
  c.execute = (...a: unknown[]) => (n++, orig.execute.apply(c, a));
  c.batch = (stmts: unknown[], mode?: unknown) => ((n += stmts.length), orig.batch.call(c, stmts, mode));
  try {
    await fn();
  } finally {
    Object.assign(c, orig);
  }
  return n;
}
