/**
 * Retention (docs/decisions/0038-tasks-retention.md): change records older than
 * `CHANGELOG_RETENTION_DAYS`, finished jobs older than `JOB_RETENTION_DAYS` (0 keeps them),
 * and outbox rows whose job has finished. Deleted in small batches, with a turn of the event loop
 * between them, so neither a write nor a probe waits long; a live job's change record stays.
 */
import type { Config } from "../../config";
import type { Database } from "../../db/client";
import type { PeriodicTask } from "./worker";

/** How often the task worker prunes (the Workers cron prunes on every run: it is cheap when nothing is due). */
export const RETENTION_EVERY_MS = 3_600_000;
/**
 * Rows per DELETE: each is a short write transaction of its own, a few milliseconds of the
 * event loop on the local driver (which runs SQLite synchronously).
 */
export const RETENTION_BATCH = 500;
const DAY_MS = 86_400_000;

export interface PruneResult {
  changes: number;
  jobs: number;
  outbox: number;
}

/**
 * A turn of the event loop between batches: an awaited statement of the local driver settles
 * as a microtask, so a loop of them never let a request (or `/livez`) in (issue 30).
 */
export const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Change records a live (pending or running) job still reads: a webhook delivery reads its
 * change record when it runs, however old the record is or the clock says it is.
 */
const NEEDED_BY_LIVE_JOBS = `SELECT json_extract(o.payload, '$.change') FROM outbox o
  JOIN jobs j ON j.id = o.job_id
  WHERE j.status IN ('pending', 'running') AND json_extract(o.payload, '$.change') IS NOT NULL`;

/**
 * Deletes what is past retention, batch by batch with a turn of the event loop between
 * batches, for at most `budgetMs` (the rest goes next time). Never deletes the change record of
 * a live job. `now` is for tests.
 */
export async function pruneExpired(
  db: Database,
  retention: Config["retention"],
  options: { now?: number; budgetMs?: number } = {},
): Promise<PruneResult> {
  const now = options.now ?? Date.now();
  const started = performance.now();
  const budgetMs = options.budgetMs ?? 30_000;
  const drain = async (statement: () => ReturnType<Database["execute"]>) => {
    let total = 0;
    for (;;) {
      const { rowsAffected } = await statement();
      total += rowsAffected;
      if (rowsAffected < RETENTION_BATCH || performance.now() - started > budgetMs) return total;
      await yieldToEventLoop();
    }
  };
  const cutoff = (days: number) => new Date(now - days * DAY_MS).toISOString();
  const result: PruneResult = { changes: 0, jobs: 0, outbox: 0 };

  if (retention.changelogDays > 0) {
    const before = cutoff(retention.changelogDays);
    result.changes = await drain(() =>
      db.execute({
        sql: `DELETE FROM object_changes WHERE id IN (SELECT id FROM object_changes WHERE time < ?
                AND id NOT IN (${NEEDED_BY_LIVE_JOBS}) LIMIT ?)`,
        args: [before, RETENTION_BATCH],
      }),
    );
  }
  if (retention.jobDays > 0) {
    // Only finished jobs: a pending or running job is never pruned, however old.
    const before = cutoff(retention.jobDays);
    result.jobs = await drain(() =>
      db.execute({
        sql: "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE completed < ? AND status IN ('completed', 'errored', 'failed') LIMIT ?)",
        args: [before, RETENTION_BATCH],
      }),
    );
  }
  // An outbox row matters while its job may still need (re-)queueing; the job row keeps the outcome.
  result.outbox = await drain(() =>
    db.execute({
      sql: `DELETE FROM outbox WHERE id IN (SELECT o.id FROM outbox o WHERE NOT EXISTS
              (SELECT 1 FROM jobs j WHERE j.id = o.job_id AND j.status IN ('pending', 'running')) LIMIT ?)`,
      args: [RETENTION_BATCH],
    }),
  );
  return result;
}

/** The task worker's hourly prune. */
export function retentionTask(
  db: Database,
  retention: Config["retention"],
  everyMs = RETENTION_EVERY_MS,
): PeriodicTask {
  return { name: "retention", everyMs, run: () => pruneExpired(db, retention) };
}
