/**
 * Counts the SQL statements a piece of work sends to a database's client (execute and batch
 * items). With `transactions`, statements inside transactions the client opens count too
 * (BEGIN and COMMIT are not statements here). With `ignore`, statements whose text it matches
 * are not counted (background work that may run meanwhile, such as the search flusher's).
 */
import type { Database } from "../../src/db/client";

export async function countStatements(
  db: Database,
  fn: () => Promise<unknown>,
  options: { transactions?: boolean; ignore?: RegExp } = {},
): Promise<number> {
  let n = 0;
  // A statement's text, whether sent as a string or as `{ sql, args }`.
  const counts = (stmt: unknown) =>
    !options.ignore?.test(typeof stmt === "string" ? stmt : String((stmt as any)?.sql ?? ""));
  const c = (db as unknown as { client: unknown }).client as any;
  const orig = { execute: c.execute, batch: c.batch, transaction: c.transaction };
  const counted = <T extends { execute: any; batch: any }>(target: T): T => {
    const execute = target.execute;
    const batch = target.batch;
    target.execute = (...a: unknown[]) => ((n += counts(a[0]) ? 1 : 0), execute.apply(target, a));
    target.batch = (stmts: unknown[], mode?: unknown) => (
      (n += stmts.filter(counts).length), batch.call(target, stmts, mode)
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
