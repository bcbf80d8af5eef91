/**
 * Task worker loops over a {@link TaskQueue}: `startWorker` runs until stopped (`npm run worker`,
 * or inline in `npm start`); `drainQueue` works for a bounded time (the Workers cron trigger).
 */
import type { Logger } from "../logger";
import type { Lane, TaskQueue } from "./queue";
import { Outage } from "../outage";
import { beat } from "./heartbeat";

export interface WorkerOptions {
  /** Jobs of the default lane run at the same time; default 4 (webhooks wait on the network, not the CPU). */
  concurrency?: number;
  /**
   * Slots of the `internal` lane (schema applies), on top of `concurrency`; default 1. They
   * take only internal jobs, so a slow webhook receiver never delays them (decision 0067).
   */
  internalConcurrency?: number;
  /** Pause after finding the queue empty; default 250 ms. */
  idleMs?: number;
  /** How often expired leases and due retries are looked at; default 1 s. */
  maintainEveryMs?: number;
  /** Pause of the outbox relay loop when nothing waits; default 500 ms. */
  relayEveryMs?: number;
  /** How often jobs Redis lost are looked for (`OutboxRelay.sweepLost`); default 10 s. */
  sweepEveryMs?: number;
  /** Other recurring work of the worker process (retention), each in its own loop. */
  periodic?: PeriodicTask[];
  logger?: Logger;
  /** Monotonic milliseconds for the outage log's once-a-minute (tests pass a clock they hold). */
  now?: () => number;
}

/** Work the worker repeats every `everyMs` (first run at start). Failures are logged and retried next time. */
export interface PeriodicTask {
  name: string;
  everyMs: number;
  run(): Promise<unknown>;
}

export interface TaskWorker {
  /** Stops taking jobs and waits (at most `timeoutMs`) for running ones to finish. */
  stop(timeoutMs?: number): Promise<void>;
  /** Settles when every loop has ended. */
  readonly done: Promise<void>;
}

/** After a failure the loops pause this long, doubling up to {@link MAX_ERROR_PAUSE_MS}. */
const ERROR_PAUSE_MS = 500;
const MAX_ERROR_PAUSE_MS = 10_000;
/** The relay retries sooner: each try costs at most the relay bound, and deliveries wait on it. */
const MAX_RELAY_PAUSE_MS = 2_000;

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
  // One outage for the slots and housekeeping: they fail together (Redis or the database down).
  const outage = new Outage({
    name: "task worker",
    logger,
    baseMs: ERROR_PAUSE_MS,
    maxMs: MAX_ERROR_PAUSE_MS,
    now: options.now,
  });
  const failed = (what: string, e: unknown) => outage.failed(e, what);
  const succeeded = () => outage.succeeded();

  const slot = async (lane: Lane) => {
    while (!stopping) {
      try {
        const outcome = await queue.runOne(lane);
        succeeded();
        if (outcome === "idle") await pause(idleMs);
      } catch (e) {
        await pause(failed("taking a job", e));
      }
    }
  };
  const sweepEveryMs = options.sweepEveryMs ?? 10_000;
  let sweptAt = Number.NEGATIVE_INFINITY;
  const housekeeping = async () => {
    while (!stopping) {
      try {
        await queue.maintain();
        void beat(queue, "bun");
        // monotonic: a clock step must not stop (or hurry) the sweep
        if (performance.now() - sweptAt >= sweepEveryMs) {
          await queue.outbox.sweepLost();
          sweptAt = performance.now();
        }
        succeeded();
        await pause(maintainEveryMs);
      } catch (e) {
        await pause(Math.max(maintainEveryMs, failed("queue maintenance", e)));
      }
    }
  };
  // The outbox relay: rows the relay after commit could not hand over (Redis down or frozen).
  const relayEveryMs = options.relayEveryMs ?? 500;
  const relayOutage = new Outage({
    name: "outbox relay",
    logger,
    baseMs: relayEveryMs,
    maxMs: Math.max(relayEveryMs, MAX_RELAY_PAUSE_MS),
    now: options.now,
  });
  const relay = async () => {
    while (!stopping) {
      try {
        const relayed = await queue.outbox.relayPending();
        relayOutage.succeeded();
        if (!relayed) await pause(relayEveryMs);
      } catch (e) {
        // a database outage is said here; a Redis one the outbox says too (once per outage)
        await pause(relayOutage.failed(e));
      }
    }
  };
  const periodic = startPeriodic(options.periodic ?? [], logger, options.now);

  const loops = [
    housekeeping(),
    relay(),
    periodic.done,
    ...slots(options.concurrency ?? 4, "default", slot),
    ...slots(options.internalConcurrency ?? 1, "internal", slot),
  ];
  const done = Promise.all(loops).then(() => undefined);
  return {
    done,
    async stop(timeoutMs = 10_000) {
      stopping = true;
      wake();
      void periodic.stop(timeoutMs);
      await delay(timeoutMs, done);
    },
  };
}

/**
 * Runs each task now and then every `everyMs` until stopped (the worker's retention; `npm start`
 * without a tasks Redis runs it alone). A failure is retried on the next run and logged at most
 * once a minute per task (`now`: the clock of that minute), its recovery once.
 */
export function startPeriodic(
  tasks: PeriodicTask[],
  logger: Logger,
  now?: () => number,
): TaskWorker {
  let stopping = false;
  let wake: () => void = () => {};
  const stopped = new Promise<void>((resolve) => (wake = resolve));
  const loop = async (task: PeriodicTask) => {
    // the run's own period is the pause: an hourly task is not tried more often when it fails
    const outage = new Outage({
      name: `task worker: ${task.name}`,
      logger,
      baseMs: task.everyMs,
      maxMs: task.everyMs,
      now,
    });
    while (!stopping) {
      try {
        await task.run();
        outage.succeeded();
      } catch (e) {
        outage.failed(e);
      }
      await delay(task.everyMs, stopped);
    }
  };
  const done = Promise.all(tasks.map(loop)).then(() => undefined);
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
 * jobs ran. The outbox is relayed and housekeeping runs first, so jobs whose relay failed,
 * retries that fell due and jobs Redis lost are picked up; the outbox is relayed again when the
 * queue runs dry (jobs may write changes that call webhooks).
 */
export async function drainQueue(
  queue: TaskQueue,
  options: { budgetMs?: number; concurrency?: number } = {},
): Promise<number> {
  const deadline = Date.now() + (options.budgetMs ?? 25_000);
  await queue.outbox.relayPending({ all: true, budgetMs: options.budgetMs });
  await queue.maintain();
  await queue.outbox.sweepLost();
  let ran = 0;
  const slot = async (lane: Lane) => {
    while (Date.now() < deadline) {
      const outcome = await queue.runOne(lane);
      if (outcome === "idle") return;
      if (outcome === "ran") ran++;
    }
  };
  do {
    await Promise.all([
      ...slots(options.concurrency ?? 4, "default", slot),
      ...slots(1, "internal", slot),
    ]);
  } while (
    Date.now() < deadline &&
    (await queue.outbox.relayPending({ all: true, budgetMs: deadline - Date.now() })) > 0
  );
  return ran;
}

/** `count` (at least 1) loops of `run` on `lane`. */
function slots(count: number, lane: Lane, run: (lane: Lane) => Promise<void>): Promise<void>[] {
  return Array.from({ length: Math.max(1, count) }, () => run(lane));
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
