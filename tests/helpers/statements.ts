/**
 * Counts the SQL statements a piece of work sends to a database's client (execute and batch
 * items). With `transactions`, statements inside transactions the client opens count too
 * (BEGIN and COMMIT are not statements here).
 */
import type { Database } from "../../src/db/client";

export async function countStatements(
  db: Database,
  fn: () => Promise<unknown>,
  options: { transactions?: boolean } = {},
): Promise<number> {
  let n = 0;
  const c = (db as unknown as { client: unknown }).client as any;
  const orig = { execute: c.execute, batch: c.batch, transaction: c.transaction };
  const counted = <T extends { execute: any; batch: any }>(target: T): T => {
    const execute = target.execute;
    const batch = target.batch;
    target.execute = (...a: unknown[]) => (n++, execute.apply(target, a));
    target.batch = (stmts: unknown[], mode?: unknown) => (
      (n += stmts.length), batch.call(target, stmts, mode)
    );
    return target;
  };
  counted(c);
  if (options.transactions)
    c.transaction = async (...a: unknown[]) => counted(await orig.transaction.apply(c, a));
  try {
    await fn();
  } finally {
    Object.assign(c, orig);
  }
  return n;
}
