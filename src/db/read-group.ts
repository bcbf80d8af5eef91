/**
 * Reads that start in the same turn of the event loop travel to a remote database together: one
 * batch, one HTTP request, one read transaction on the server (decision 0098).
 *
 * Each read in a group was issued before the group is sent, so the server's snapshot is taken
 * after every one of them began: each still reflects every write committed before it began, as
 * if it had travelled alone. What the group saves is per request, not per statement: the HTTP
 * request, its framing and the transaction around it, on both ends. Under load (16 readers on a
 * shared CPU) that was most of the remote client's cost per read.
 */
import type { Queries } from "./client";
import { remoteFailureOf } from "./connection-errors";

/** Runs one batch: its results in order, or a rejection for the whole batch. */
type RunBatch = (queries: Queries) => Promise<readonly unknown[]>;

interface Pending {
  queries: Queries;
  resolve: (results: readonly unknown[]) => void;
  reject: (error: unknown) => void;
}

/** At most this many statements in one group's batch; the rest wait for the next group. */
const MAX_GROUP_STATEMENTS = 200;

/** Next turn of the event loop: `setImmediate` on Bun and Node, a zero timeout on workerd. */
const nextTurn: (fn: () => void) => void =
  typeof setImmediate === "function" ? (fn) => setImmediate(fn) : (fn) => setTimeout(fn, 0);

/**
 * `read` for a remote database: `alone` runs one read by itself (its own batch, or a lone query
 * without a transaction), `together` runs the statements of several reads as one batch.
 */
export function groupedReads(
  alone: RunBatch,
  together: RunBatch,
): (q: Queries) => Promise<readonly unknown[]> {
  let pending: Pending[] = [];
  let scheduled = false;

  const flush = () => {
    scheduled = false;
    let statements = 0;
    let count = 0;
    while (
      count < pending.length &&
      (count === 0 || statements + pending[count]!.queries.length <= MAX_GROUP_STATEMENTS)
    )
      statements += pending[count++]!.queries.length;
    const group = pending.slice(0, count);
    pending = pending.slice(count);
    if (pending.length) schedule();
    if (group.length === 1) settle(group[0]!, alone);
    else void sendTogether(group);
  };

  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    nextTurn(flush);
  };

  const settle = (read: Pending, run: RunBatch) => {
    try {
      run(read.queries).then(read.resolve, read.reject);
    } catch (e) {
      read.reject(e); // building a statement can throw before anything is sent
    }
  };

  const sendTogether = async (group: Pending[]) => {
    let results: readonly unknown[];
    try {
      results = await together(group.flatMap((r) => r.queries) as unknown as Queries);
    } catch (e) {
      // The database could not be reached (or answered garbage): every read of the group fails
      // as it would alone, none sent again over the failing link.
      if (remoteFailureOf(e) !== null) {
        for (const read of group) read.reject(e);
        return;
      }
      // One read's statement failed and the batch with it: each read again on its own, so only
      // the faulty one fails (and each still begins after its caller did).
      for (const read of group) settle(read, alone);
      return;
    }
    let at = 0;
    for (const read of group) {
      read.resolve(results.slice(at, at + read.queries.length));
      at += read.queries.length;
    }
  };

  return (queries) =>
    new Promise<readonly unknown[]>((resolve, reject) => {
      pending.push({ queries, resolve, reject });
      schedule();
    });
}
