/**
 * Retention (docs/decisions/0038-tasks-retention.md): change records older than
 * `CHANGELOG_RETENTION_DAYS`, finished jobs older than `JOB_RETENTION_DAYS` (0 keeps them),
 * and outbox rows whose job has finished. Deleted in batches through `Database.maintain` (on a
 * local file off the event loop, decision 0101), each batch short enough that a writer waiting
 * for the lock does not wait long, with a turn of the event loop between them; a live job's
 * change record stays.
 */
import type { Config } from "../../config";
import type { Database } from "../../db/client";
import type { PeriodicTask } from "./worker";

/** How often the task worker prunes (the Workers cron prunes on every run: it is cheap when nothing is due). */
export const RETENTION_EVERY_MS = 3_600_000;
/** Most rows per DELETE; batches start here. */
export const RETENTION_BATCH = 500;
/** Fewest rows per DELETE, however slow the disk: progress goes on. */
const MIN_BATCH = 25;
/**
 * How long one batch may hold the write lock (a writer waits that long at most) before the next
 * one is made smaller; a batch under half of it lets the next grow back.
 */
const BATCH_TARGET_MS = 20;
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

/** Options of {@link pruneExpired}: the wall clock for cutoffs, a monotonic one for budgets. */
interface PruneOptions {
  /** The time cutoffs are computed from (ms since the epoch). */
  now?: number;
  /** Stop after this long; the rest goes next time. */
  budgetMs?: number;
  /** Milliseconds from any fixed point (performance.now by default): batch and budget times. */
  clock?: () => number;
}

/**
 * The next batch size: smaller when the last batch held the lock longer than the target,
 * larger again when it took under half of it.
 */
function nextBatchSize(size: number, tookMs: number): number {
  if (tookMs > BATCH_TARGET_MS) return Math.max(MIN_BATCH, Math.floor(size / 2));
  if (tookMs < BATCH_TARGET_MS / 2) return Math.min(RETENTION_BATCH, size * 2);
  return size;
}

/**
 * Deletes what is past retention, batch by batch with a turn of the event loop between
 * batches, for at most `budgetMs`. Never deletes the change record of a live job.
 */
export async function pruneExpired(
  db: Database,
  retention: Config["retention"],
  options: PruneOptions = {},
): Promise<PruneResult> {
  const now = options.now ?? Date.now();
  const clock = options.clock ?? (() => performance.now());
  const started = clock();
  const budgetMs = options.budgetMs ?? 30_000;
  let size = RETENTION_BATCH;
  const drain = async (sql: string, args: (limit: number) => Array<string | number>) => {
    let total = 0;
    for (;;) {
      const asked = size;
      const t0 = clock();
      const deleted = await db.maintain({ sql, args: args(asked) });
      total += deleted;
      size = nextBatchSize(asked, clock() - t0);
      if (deleted < asked || clock() - started > budgetMs) return total;
      await yieldToEventLoop();
    }
  };
  const cutoff = (days: number) => new Date(now - days * DAY_MS).toISOString();
  const result: PruneResult = { changes: 0, jobs: 0, outbox: 0 };

  if (retention.changelogDays > 0) {
    const before = cutoff(retention.changelogDays);
    result.changes = await drain(
      `DELETE FROM object_changes WHERE id IN (SELECT id FROM object_changes WHERE time < ?
         AND id NOT IN (${NEEDED_BY_LIVE_JOBS}) LIMIT ?)`,
      (limit) => [before, limit],
    );
  }
  if (retention.jobDays > 0) {
    // Only finished jobs: a pending or running job is never pruned, however old.
    const before = cutoff(retention.jobDays);
    result.jobs = await drain(
      "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE completed < ? AND status IN ('completed', 'errored', 'failed') LIMIT ?)",
      (limit) => [before, limit],
    );
  }
  // An outbox row matters while its job may still need (re-)queueing; the job row keeps the outcome.
  result.outbox = await drain(
    `DELETE FROM outbox WHERE id IN (SELECT o.id FROM outbox o WHERE NOT EXISTS
       (SELECT 1 FROM jobs j WHERE j.id = o.job_id AND j.status IN ('pending', 'running')) LIMIT ?)`,
    (limit) => [limit],
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
