/**
 * The job queue on `REDIS['tasks']` (§7): a `jobs` row per job (the status of record) and a
 * message on Redis lists. Reliable take (LMOVE ready → processing, lease deadline in a sorted
 * set, heartbeats while running, a reaper for expired leases), retries with exponential
 * backoff (a delayed sorted set) and a dead-letter list. See docs/decisions/0018-tasks-queue.md.
 */
import { and, eq, inArray, type SQL, sql } from "drizzle-orm";
import type { Database, Executor, Queries } from "../../db/client";
import { jobs } from "../../db/schema";
import { nowIso } from "../../db/schema/common";
import type { Logger } from "../logger";
import type { RedisClient } from "../redis-types";
import { nonce, parseMessage, type Message } from "./message";
import {
  OutboxRelay,
  stageOutbox,
  type OutboxJob,
  type OutboxOptions,
  type OutboxRow,
} from "./outbox";

/** Tuning of a {@link TaskQueue}; every value has a production default. */
export interface TaskQueueOptions extends OutboxOptions {
  /** Key prefix on the tasks Redis; default `host:tasks`. */
  prefix?: string;
  /** A job whose worker sent no heartbeat for this long is taken back; default 60 s. */
  visibilityTimeoutMs?: number;
  /** Attempts before a job is given up (status failed, message dead-lettered); default 5. */
  maxAttempts?: number;
  /** Delay before the first retry; doubles per attempt; default 2 s. */
  backoffBaseMs?: number;
  /** Longest delay between attempts; default 5 min. */
  backoffMaxMs?: number;
  /** Dead letters kept (newest first); older ones are dropped; default 1000. */
  deadLetterLimit?: number;
}

export type JobStatus = "pending" | "running" | "completed" | "errored" | "failed";

export const JOB_STATUSES: ReadonlyArray<readonly [JobStatus, string]> = [
  ["pending", "Pending"],
  ["running", "Running"],
  ["completed", "Completed"],
  ["errored", "Errored"],
  ["failed", "Failed"],
];

/** What a handler learns about the job it runs. */
interface RunningJob {
  id: number;
  name: string;
  /** 1 on the first run. */
  attempt: number;
  maxAttempts: number;
  userId: number | null;
  /** The same for every attempt and every copy of this job (its outbox row's key). */
  idempotencyKey: string;
}

/**
 * What a handler resolves with when its own write already recorded the job completed, in the
 * same atomic batch (decision 0172): the queue then writes nothing more.
 */
export const JOB_RECORDED = Symbol("host.job-recorded");

/**
 * What a handler resolves with when its own write found the job no longer at its attempt (taken
 * back by the reaper and run again elsewhere) and so wrote nothing: this copy records nothing
 * either; the live copy does (decision 0189).
 */
export const JOB_SUPERSEDED = Symbol("host.job-superseded");

/**
 * The SQL that records a job completed with `data` (SQL giving its JSON text), for a handler's own
 * write (`JOB_RECORDED`): it changes nothing unless the job is live at `job.attempt`, as the
 * queue's own final writes (`#finish`); the write guards on that (`guardChanged`, or RETURNING).
 */
export function completedJobSql(job: { id: number; attempt: number }, data: SQL): SQL {
  return sql`UPDATE ${jobs} SET "status" = 'completed', "completed" = ${nowIso()}, "error" = '', "data" = ${data} WHERE "id" = ${job.id} AND "attempts" = ${job.attempt} AND "status" IN ('running', 'pending')`;
}

/** Runs one job; the resolved value becomes the job's `data`. Throwing retries it. */
export type JobHandler = ((payload: any, job: RunningJob) => Promise<unknown>) & {
  /**
   * The job's `data` while it runs (what it is doing), written by its claim: the job shows it
   * from the moment it is `running`, at no round trip of its own (decision 0189). Undefined:
   * `data` is left as it is.
   */
  claimData?(payload: any): unknown;
};

/**
 * A failure that retrying cannot fix (a 4xx of the work itself): the job ends `errored` at
 * once, with `data` (e.g. the error body) kept.
 */
export class PermanentJobError extends Error {
  constructor(
    message: string,
    readonly data: unknown = null,
  ) {
    super(message);
    this.name = "PermanentJobError";
  }
}

/**
 * Not now, and not a failure: the job goes back (the same attempt, no attempt used) and is
 * offered again after `delayMs` (a webhook whose receiver already has its share of slots).
 */
export class DeferJob extends Error {
  constructor(readonly delayMs: number) {
    super(`deferred for ${delayMs} ms`);
    this.name = "DeferJob";
  }
}

export interface EnqueueOptions {
  /** The object the job is about (`jobs.object_type_id`, `object_id`). */
  objectTypeId?: number | null;
  objectId?: number | null;
  userId?: number | null;
  maxAttempts?: number;
  /**
   * The caller's open transaction: the job is written in it and relayed after it commits
   * (`onCommit`, else by the relay loop). Default: its own transaction, relayed at once.
   */
  db?: Executor;
  onCommit?(task: () => Promise<void>): void;
  /**
   * Alone, for this request: relayed after its answer (`OutboxRelay.afterCommit`: at once
   * without waiting on Bun, in its `waitUntil` on Workers) instead of before it.
   */
  requestId?: string;
}

/**
 * Which ready list a job waits on, each worked by its own slots: `internal` is the app's own
 * work (schema applies), which must never wait behind deliveries to slow receivers in
 * `default` (decision 0067).
 */
export type Lane = "default" | "internal";

/** Outcome of {@link TaskQueue.runOne}: nothing ready, a job ran, or a stale duplicate was dropped. */
export type RunOutcome = "idle" | "ran" | "skipped";

const errorText = (e: unknown) => String((e as Error)?.message ?? e).slice(0, 2000);
const LIVE: JobStatus[] = ["running", "pending"];

export class TaskQueue {
  readonly keys: {
    ready: string;
    /** The `internal` lane's ready list. */
    readyInternal: string;
    processing: string;
    inflight: string;
    delayed: string;
    dead: string;
  };
  readonly visibilityTimeoutMs: number;
  readonly maxAttempts: number;
  readonly #backoffBaseMs: number;
  readonly #backoffMaxMs: number;
  readonly #deadLetterLimit: number;
  readonly #handlers = new Map<string, JobHandler>();
  readonly #lanes = new Map<string, Lane>();
  /** The transactional outbox: jobs reach Redis through it (docs/decisions/0037-tasks-outbox.md). */
  readonly outbox: OutboxRelay;
  /** When (epoch ms) this process last recorded a worker heartbeat for this queue (`heartbeat.ts`). */
  lastBeatAt: number | undefined = undefined;

  constructor(
    readonly db: Database,
    readonly redis: RedisClient,
    readonly logger: Logger,
    options: TaskQueueOptions = {},
  ) {
    const prefix = options.prefix ?? "host:tasks";
    this.keys = {
      ready: `${prefix}:ready`,
      readyInternal: `${prefix}:ready:internal`,
      processing: `${prefix}:processing`,
      inflight: `${prefix}:inflight`,
      delayed: `${prefix}:delayed`,
      dead: `${prefix}:dead`,
    };
    this.visibilityTimeoutMs = options.visibilityTimeoutMs ?? 60_000;
    this.maxAttempts = options.maxAttempts ?? 5;
    this.#backoffBaseMs = options.backoffBaseMs ?? 2_000;
    this.#backoffMaxMs = options.backoffMaxMs ?? 300_000;
    this.#deadLetterLimit = Math.max(1, Math.trunc(options.deadLetterLimit ?? 1000));
    this.outbox = new OutboxRelay(this, options);
  }

  /** Registers the handler of a job name (e.g. `webhook.deliver`) and the lane its jobs take. */
  register(name: string, handler: JobHandler, lane: Lane = "default"): void {
    this.#handlers.set(name, handler);
    this.#lanes.set(name, lane);
  }

  /** The ready list of a lane. */
  laneKey(lane: Lane): string {
    return lane === "internal" ? this.keys.readyInternal : this.keys.ready;
  }

  /** The ready list jobs of this name wait on (unregistered names: the default lane). */
  readyKey(name: string): string {
    return this.laneKey(this.#lanes.get(name) ?? "default");
  }

  handles(name: string): boolean {
    return this.#handlers.has(name);
  }

  /** Delay before attempt `attempt + 1`: base · 2^(attempt-1), capped, plus up to 20 % jitter. */
  backoffMs(attempt: number): number {
    const plain = Math.min(this.#backoffMaxMs, this.#backoffBaseMs * 2 ** Math.max(0, attempt - 1));
    return Math.round(plain * (1 + Math.random() * 0.2));
  }

  /**
   * Writes a pending job and its outbox row, then relays it. In the caller's transaction
   * (`options.db`) nothing touches Redis before the commit; on its own it waits for Redis at most
   * the relay bound (`relayTimeoutMs`), and a job Redis did not take is relayed later.
   */
  async enqueue(
    name: string,
    payload: unknown,
    options: EnqueueOptions = {},
  ): Promise<{ id: number }> {
    if (!this.#handlers.has(name)) throw new Error(`no task handler is registered as "${name}"`);
    const job = {
      name,
      payload,
      maxAttempts: options.maxAttempts ?? this.maxAttempts,
      userId: options.userId ?? null,
      objectTypeId: options.objectTypeId,
      objectId: options.objectId,
    };
    if (options.db) {
      const row = await this.outbox.record(options.db, job);
      options.onCommit?.(() => this.outbox.relayCommitted([row]));
      return { id: row.jobId };
    }
    const row = await this.#recordAlone(job);
    if (options.requestId !== undefined) this.outbox.afterCommit(options.requestId, [row]);
    else await this.outbox.relayRows([row]);
    return { id: row.jobId };
  }

  /** The job and its outbox row as one atomic write (one round trip; D1 too: decision 0092). */
  async #recordAlone(job: OutboxJob): Promise<OutboxRow> {
    const items: Queries[number][] = [];
    const after: Array<(results: readonly unknown[]) => void> = [];
    let row: OutboxRow | undefined;
    const batch = {
      add(item: Queries[number], then?: (result: unknown) => void) {
        const at = items.push(item) - 1;
        if (then) after.push((results) => then(results[at]));
      },
    };
    const payload = sql`${JSON.stringify(job.payload ?? null)}`;
    stageOutbox(
      batch,
      this.db.orm,
      job,
      payload,
      (r) => (row = { ...r, payload: job.payload ?? null }),
    );
    const results = (await this.db.write(items as unknown as Queries)) as unknown as unknown[];
    for (const then of after) then(results);
    return row!;
  }

  /**
   * Takes one message (LMOVE ready → processing), claims its row in the database and runs it.
   * The claim (`attempts` = attempt − 1 and pending) makes a duplicated message a no-op.
   */
  async runOne(lane: Lane = "default"): Promise<RunOutcome> {
    const raw = await this.redis.lmove(this.laneKey(lane), this.keys.processing, "right", "left");
    if (raw === null) return "idle";
    const lease = this.redis.zadd(this.keys.inflight, Date.now() + this.visibilityTimeoutMs, raw);
    const message = parseMessage(raw);
    if (!message) {
      await lease;
      this.logger.warn("task queue: dropping an unreadable message", { length: raw.length });
      await this.#ack(raw);
      return "skipped";
    }
    // The lease and the claim go out together; a lost ZADD is repaired by `maintain`.
    const [, claimed] = await Promise.all([
      lease,
      this.db.orm
        .update(jobs)
        .set({
          status: "running",
          started: nowIso(),
          attempts: message.attempt,
          ...this.#claimData(message),
        })
        .where(
          and(
            eq(jobs.id, message.id),
            eq(jobs.status, "pending"),
            eq(jobs.attempts, message.attempt - 1),
          ),
        )
        .returning({ id: jobs.id }),
    ]);
    if (!claimed.length) {
      // Already run or re-queued by someone else: this copy is stale.
      await this.#ack(raw);
      return "skipped";
    }
    await this.#run(raw, message);
    return "ran";
  }

  /** The `data` the claim writes (`JobHandler.claimData`); none when it has none or fails. */
  #claimData(message: Message): { data?: unknown } {
    const of = this.#handlers.get(message.name)?.claimData;
    if (!of) return {};
    try {
      const data = of(message.payload);
      return data === undefined ? {} : { data };
    } catch {
      // a payload the handler will refuse: its outcome says why
      return {};
    }
  }

  async #run(raw: string, message: Message): Promise<void> {
    const handler = this.#handlers.get(message.name);
    const heartbeat = setInterval(
      () => {
        this.redis.zadd(this.keys.inflight, Date.now() + this.visibilityTimeoutMs, raw).catch((e) =>
          this.logger.warn("task queue: heartbeat failed", {
            job: message.id,
            error: errorText(e),
          }),
        );
      },
      Math.max(50, Math.floor(this.visibilityTimeoutMs / 3)),
    );
    const job: RunningJob = {
      id: message.id,
      name: message.name,
      attempt: message.attempt,
      maxAttempts: message.max,
      userId: message.user,
      idempotencyKey: message.key ?? `host-job-${message.id}`,
    };
    try {
      if (!handler)
        throw new PermanentJobError(`no task handler is registered as "${message.name}"`);
      const data = await handler(message.payload, job);
      if (data === JOB_SUPERSEDED)
        this.logger.info(
          "task queue: a copy of a job taken back meanwhile stopped, writing nothing",
          {
            job: message.id,
            attempt: message.attempt,
          },
        );
      else if (data !== JOB_RECORDED)
        await this.#finish(message, { status: "completed", data: data ?? null, error: "" });
    } catch (e) {
      if (e instanceof DeferJob) {
        await this.#defer(message, e.delayMs);
      } else if (e instanceof PermanentJobError) {
        await this.#finish(message, {
          status: "errored",
          data: e.data ?? null,
          error: errorText(e),
        });
      } else if (message.attempt >= message.max) {
        await this.#giveUp(message, errorText(e));
      } else {
        await this.#retryLater(message, errorText(e));
      }
    } finally {
      clearInterval(heartbeat);
    }
    await this.#ack(raw);
  }

  /** Final states only move a job still at this attempt (a reaped and re-run job has moved on). */
  async #finish(message: Message, values: { status: JobStatus; data?: unknown; error: string }) {
    await this.db.orm
      .update(jobs)
      .set({ ...values, completed: nowIso() })
      .where(
        and(
          eq(jobs.id, message.id),
          eq(jobs.attempts, message.attempt),
          inArray(jobs.status, LIVE),
        ),
      );
  }

  async #retryLater(message: Message, error: string) {
    const moved = await this.db.orm
      .update(jobs)
      .set({ status: "pending", error })
      .where(
        and(
          eq(jobs.id, message.id),
          eq(jobs.attempts, message.attempt),
          inArray(jobs.status, LIVE),
        ),
      )
      .returning({ id: jobs.id });
    if (!moved.length) return;
    const next: Message = { ...message, attempt: message.attempt + 1, n: nonce() };
    await this.redis.zadd(
      this.keys.delayed,
      Date.now() + this.backoffMs(message.attempt),
      JSON.stringify(next),
    );
  }

  /** Back to pending at the attempt before this one, so the same attempt claims it again later. */
  async #defer(message: Message, delayMs: number) {
    const moved = await this.db.orm
      .update(jobs)
      .set({ status: "pending", attempts: message.attempt - 1 })
      .where(
        and(
          eq(jobs.id, message.id),
          eq(jobs.attempts, message.attempt),
          inArray(jobs.status, LIVE),
        ),
      )
      .returning({ id: jobs.id });
    if (!moved.length) return;
    await this.redis.zadd(
      this.keys.delayed,
      Date.now() + delayMs,
      JSON.stringify({ ...message, n: nonce() }),
    );
  }

  async #giveUp(message: Message, error: string) {
    const moved = await this.db.orm
      .update(jobs)
      .set({ status: "failed", error, completed: nowIso() })
      .where(
        and(
          eq(jobs.id, message.id),
          eq(jobs.attempts, message.attempt),
          inArray(jobs.status, LIVE),
        ),
      )
      .returning({ id: jobs.id });
    if (moved.length) await this.#deadLetter({ ...message, error, failed_at: nowIso() });
  }

  /** Keeps a failed job's message for inspection; the list holds the newest `deadLetterLimit`. */
  async #deadLetter(entry: Record<string, unknown>) {
    await this.redis.lpush(this.keys.dead, JSON.stringify(entry));
    await this.redis.ltrim(this.keys.dead, 0, this.#deadLetterLimit - 1);
  }

  /** Removes a finished message (one pipelined round trip on Upstash). */
  async #ack(raw: string) {
    await Promise.all([
      this.redis.lrem(this.keys.processing, 1, raw),
      this.redis.zrem(this.keys.inflight, raw),
    ]);
  }

  /**
   * Housekeeping, safe to run from several workers at once: promotes due retries, gives
   * processing entries without a lease one (a worker died between LMOVE and ZADD), and takes
   * back jobs whose lease expired (their worker died): next attempt, or failed when none is left.
   */
  async maintain(now = Date.now()): Promise<{ promoted: number; reclaimed: number }> {
    let promoted = 0;
    for (const raw of await this.redis.zrangebyscore(this.keys.delayed, "-inf", now, {
      offset: 0,
      count: 100,
    })) {
      const message = parseMessage(raw);
      // Push first (a fresh nonce), then remove: a crash in between duplicates, never loses;
      // the database claim drops the duplicate.
      if (message)
        await this.redis.lpush(
          this.readyKey(message.name),
          JSON.stringify({ ...message, n: nonce() }),
        );
      await this.redis.zrem(this.keys.delayed, raw);
      promoted++;
    }

    const leased = new Set(await this.redis.zrangebyscore(this.keys.inflight, "-inf", "+inf"));
    for (const raw of await this.redis.lrange(this.keys.processing, 0, 999)) {
      if (!leased.has(raw))
        await this.redis.zadd(this.keys.inflight, now + this.visibilityTimeoutMs, raw);
    }

    let reclaimed = 0;
    for (const raw of await this.redis.zrangebyscore(this.keys.inflight, "-inf", now, {
      offset: 0,
      count: 100,
    })) {
      const message = parseMessage(raw);
      if (message) {
        const lost = await this.db.orm
          .update(jobs)
          .set({
            status: "pending",
            error: "the worker running it stopped (visibility timeout); retrying",
          })
          .where(
            and(
              eq(jobs.id, message.id),
              eq(jobs.attempts, message.attempt),
              inArray(jobs.status, LIVE),
            ),
          )
          .returning({ id: jobs.id });
        if (lost.length) {
          reclaimed++;
          if (message.attempt >= message.max) {
            await this.db.orm
              .update(jobs)
              .set({
                status: "failed",
                error:
                  "the worker running it stopped (visibility timeout) and no attempts are left",
                completed: nowIso(),
              })
              .where(and(eq(jobs.id, message.id), eq(jobs.attempts, message.attempt)));
            await this.#deadLetter({
              ...message,
              error: "visibility timeout",
              failed_at: nowIso(),
            });
          } else {
            await this.redis.lpush(
              this.readyKey(message.name),
              JSON.stringify({ ...message, attempt: message.attempt + 1, n: nonce() }),
            );
          }
        } else {
          // Taken but never claimed (the worker died before its first database write): the
          // attempt did not happen, so the same attempt goes back.
          const [unclaimed] = await this.db.orm
            .select({ id: jobs.id })
            .from(jobs)
            .where(
              and(
                eq(jobs.id, message.id),
                eq(jobs.status, "pending"),
                eq(jobs.attempts, message.attempt - 1),
              ),
            );
          if (unclaimed) {
            reclaimed++;
            await this.redis.lpush(
              this.readyKey(message.name),
              JSON.stringify({ ...message, n: nonce() }),
            );
          }
        }
      }
      await this.#ack(raw);
    }
    return { promoted, reclaimed };
  }

  /** Messages waiting in every lane. */
  async #readyLength(): Promise<number> {
    const [main, internal] = await Promise.all([
      this.redis.llen(this.keys.ready),
      this.redis.llen(this.keys.readyInternal),
    ]);
    return main + internal;
  }

  /** List lengths, for tests, benchmarks and operators. */
  async depth(): Promise<{ ready: number; processing: number; dead: number; delayed: number }> {
    const [ready, processing, dead, delayed] = await Promise.all([
      this.#readyLength(),
      this.redis.llen(this.keys.processing),
      this.redis.llen(this.keys.dead),
      this.redis.zrangebyscore(this.keys.delayed, "-inf", "+inf").then((m) => m.length),
    ]);
    return { ready, processing, dead, delayed };
  }

  /**
   * Figures for the health check: messages waiting (`ready`) and taken (`processing`) on Redis,
   * and the pending jobs of record with the creation time of the oldest (ISO 8601, or null).
   */
  async stats(): Promise<{
    ready: number;
    processing: number;
    pending: number;
    oldestPendingCreated: string | null;
  }> {
    const [ready, processing, rows] = await Promise.all([
      this.#readyLength(),
      this.redis.llen(this.keys.processing),
      this.db.execute({
        sql: "SELECT count(*) AS pending, min(created) AS oldest FROM jobs WHERE status = 'pending'",
        args: [],
      }),
    ]);
    const row = rows.rows[0];
    return {
      ready,
      processing,
      pending: Number(row?.pending ?? 0),
      oldestPendingCreated: row?.oldest == null ? null : String(row.oldest),
    };
  }

  /** Dead-lettered messages, newest first. */
  async deadLetters(count = 100): Promise<Array<Record<string, unknown>>> {
    return (await this.redis.lrange(this.keys.dead, 0, count - 1)).map((raw) => JSON.parse(raw));
  }
}
