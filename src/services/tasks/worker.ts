/**
 * Task worker loops over a {@link TaskQueue}: `startWorker` runs until stopped (`npm run worker`,
 * or inline in `npm start`); `drainQueue` works for a bounded time (the Workers cron trigger).
 */
import type { Logger } from "../logger";
import type { TaskQueue } from "./queue";
import { beat } from "./heartbeat";

export interface WorkerOptions {
  /** Jobs run at the same time; default 4 (webhooks wait on the network, not the CPU). */
  concurrency?: number;
  /** Pause after finding the queue empty; default 250 ms. */
  idleMs?: number;
  /** How often expired leases and due retries are looked at; default 1 s. */
  maintainEveryMs?: number;
  logger?: Logger;
}

export interface TaskWorker {
  /** Stops taking jobs and waits (at most `timeoutMs`) for running ones to finish. */
  stop(timeoutMs?: number): Promise<void>;
  /** Settles when every loop has ended. */
  readonly done: Promise<void>;
}

const errorText = (e: unknown) => String((e as Error)?.message ?? e);

/** After a failure the loops pause this long, doubling up to {@link MAX_ERROR_PAUSE_MS}. */
const ERROR_PAUSE_MS = 500;
const MAX_ERROR_PAUSE_MS = 10_000;

/**
 * Starts the worker loops. They survive Redis and database outages: the first failure is
 * logged (once, not per poll), the loops back off, and the recovery is logged.
 */
export function startWorker(queue: TaskQueue, options: WorkerOptions = {}): TaskWorker {
  const logger = options.logger ?? queue.logger;
  const idleMs = options.idleMs ?? 250;
  const maintainEveryMs = options.maintainEveryMs ?? 1_000;
  let stopping = false;
  let wake: () => void = () => {};
  const stopped = new Promise<void>((resolve) => (wake = resolve));
  const pause = (ms: number) => delay(ms, stopped);
  let failures = 0;
  const failed = (what: string, e: unknown) => {
    if (failures++ === 0) logger.warn(`task worker: ${what} failed; retrying with backoff`, { error: errorText(e) });
    return Math.min(MAX_ERROR_PAUSE_MS, ERROR_PAUSE_MS * 2 ** Math.min(failures - 1, 10));
  };
  const succeeded = () => {
    if (failures) logger.info("task worker: the queue is reachable again", { failures });
    failures = 0;
  };

  const slot = async () => {
    while (!stopping) {
      try {
        const outcome = await queue.runOne();
        succeeded();
        if (outcome === "idle") await pause(idleMs);
      } catch (e) {
        await pause(failed("taking a job", e));
      }
    }
  };
  const housekeeping = async () => {
    while (!stopping) {
      try {
        await queue.maintain();
        void beat(queue, "bun");
        succeeded();
        await pause(maintainEveryMs);
      } catch (e) {
        await pause(Math.max(maintainEveryMs, failed("queue maintenance", e)));
      }
    }
  };

  const done = Promise.all([housekeeping(), ...Array.from({ length: Math.max(1, options.concurrency ?? 4) }, slot)]).then(() => undefined);
  return {
    done,
    async stop(timeoutMs = 10_000) {
      stopping = true;
      wake();
      await delay(timeoutMs, done);
    },
  };
}

/**
 * Works until the queue is empty or `budgetMs` is spent (a cron invocation). Returns how many
 * jobs ran. Housekeeping runs first, so retries that fell due and lost jobs are picked up.
 */
export async function drainQueue(queue: TaskQueue, options: { budgetMs?: number; concurrency?: number } = {}): Promise<number> {
  const deadline = Date.now() + (options.budgetMs ?? 25_000);
  await queue.maintain();
  let ran = 0;
  const slot = async () => {
    while (Date.now() < deadline) {
      const outcome = await queue.runOne();
      if (outcome === "idle") return;
      if (outcome === "ran") ran++;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.concurrency ?? 4) }, slot));
  return ran;
}

/** Waits `ms`, or less when `until` settles first (setTimeout: this also runs on Workers). */
function delay(ms: number, until: Promise<void>): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    void until.then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
