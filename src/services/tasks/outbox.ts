/**
 * The transactional outbox of the job queue (§7, docs/decisions/0037-tasks-outbox.md): a job is a
 * `jobs` row plus an `outbox` row, written in the caller's transaction; after commit the relay
 * hands the message to the tasks Redis within a small bound and marks the row relayed. Rows
 * Redis did not take wait for the next relay pass; jobs Redis lost later are queued again by
 * the sweep.
 */
import {
  and,
  asc,
  eq,
  gt,
  inArray,
  isNotNull,
  isNull,
  lt,
  lte,
  or,
  sql,
  type SQL,
} from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { type Executor, type Orm, weighStatement } from "../../db/client";
import { inJsonList } from "../../db/d1-limits";
import { Prebuilt } from "../../db/driver-internals";
import { jobs, outbox } from "../../db/schema";
import { nowIso } from "../../db/schema/common";
import type { Database } from "../../db/client";
import type { Logger } from "../logger";
import type { RedisClient } from "../redis-types";
import { messageText, parseMessage } from "./message";

/** What the relay uses of its {@link TaskQueue} (`queue.ts`; named here so neither file imports the other in a circle). */
export interface RelayQueue {
  readonly db: Database;
  readonly redis: RedisClient;
  readonly logger: Logger;
  readonly keys: {
    readonly ready: string;
    readonly readyInternal: string;
    readonly processing: string;
    readonly inflight: string;
    readonly delayed: string;
  };
  readonly visibilityTimeoutMs: number;
  /** The ready list (lane) jobs of this name wait on. */
  readyKey(name: string): string;
}

/**
 * How long a relay waits for the tasks Redis to take a batch of messages. Beyond it the rows
 * stay in the outbox for the next pass. Requests never wait for it at all on Bun (the relay
 * after commit is fire-and-forget); `enqueue` outside a transaction waits at most this long.
 */
const RELAY_TIMEOUT_MS = 100;
/** After a relay failure, relays right after commit are skipped this long (the loop retries). */
const COOLDOWN_MS = 1_000;
/** Rows per LPUSH and per relay statement. */
const RELAY_BATCH = 100;
/** The sweep does not read Redis lists longer than this (it waits until they are shorter). */
const SWEEP_LIST_LIMIT = 20_000;
/** Request ids with outbox rows waiting for their request's `waitUntil` (Workers). */
const DEFERRED_LIMIT = 1_000;

/** Tuning of the relay and the sweep; part of `TaskQueueOptions`. */
export interface OutboxOptions {
  /** Bound on one hand-over to Redis; default {@link RELAY_TIMEOUT_MS}. */
  relayTimeoutMs?: number;
  /**
   * After commit: `now` relays at once, fire-and-forget (Bun); `deferred` keeps the rows for the
   * request's `waitUntil` (Workers: work started outside a request's context is cancelled).
   */
  afterCommit?: "now" | "deferred";
  /** A live job missing from every queue list this long after its relay is queued again; default 10 s. */
  sweepGraceMs?: number;
}

/** What `stage` needs of a write batch (`core/rest/write-batch.ts`). */
interface StagedBatch {
  add(item: BatchItem<"sqlite">, then?: (result: unknown) => void): void;
}

/** What to run, for {@link OutboxRelay.record}. */
export interface OutboxJob {
  name: string;
  payload: unknown;
  maxAttempts: number;
  userId: number | null;
  objectTypeId?: number | null;
  objectId?: number | null;
}

/** An outbox row as the relay needs it. */
export interface OutboxRow {
  id: number;
  jobId: number;
  name: string;
  payload: unknown;
  maxAttempts: number;
  userId: number | null;
  key: string;
}

const errorText = (e: unknown) => String((e as Error)?.message ?? e).slice(0, 500);

// Built once per ORM, run on it or inside its transactions (`Prebuilt`, decision 0104).
const insertJob = new Prebuilt<Array<{ id: number }>>((db) =>
  db
    .insert(jobs)
    .values({
      name: sql.placeholder("name"),
      status: "pending",
      created: sql.placeholder("created"),
      objectTypeId: sql.placeholder("objectTypeId"),
      objectId: sql.placeholder("objectId"),
      userId: sql.placeholder("userId"),
    })
    .returning({ id: jobs.id }),
);

const insertOutbox = new Prebuilt<Array<{ id: number }>>((db) =>
  db
    .insert(outbox)
    .values({
      created: sql.placeholder("created"),
      jobId: sql.placeholder("jobId"),
      name: sql.placeholder("name"),
      // bound as given (JSON text): the column's encoder would stringify the placeholder's value again
      payload: sql`${sql.placeholder("payload")}`,
      maxAttempts: sql.placeholder("maxAttempts"),
      userId: sql.placeholder("userId"),
      key: sql.placeholder("key"),
    })
    .returning({ id: outbox.id }),
);

const markRelayed = new Prebuilt<unknown>((db) =>
  db
    .update(outbox)
    .set({ relayed: sql`${sql.placeholder("at")}` })
    .where(and(inJsonList(outbox.id, sql.placeholder("ids")), isNull(outbox.relayed))),
);

/** Messages grouped by the ready list of their job's lane (one LPUSH per lane). */
function byLane(
  queue: RelayQueue,
  messages: Array<{ name: string; text: string }>,
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const m of messages) {
    const key = queue.readyKey(m.name);
    out.set(key, [...(out.get(key) ?? []), m.text]);
  }
  return out;
}

/**
 * Writes a job (`pending`) and its outbox row on `db` (the caller's transaction; `orm` is the
 * database's ORM, for the prepared statements). Needs no queue: rows written while no tasks
 * Redis exists wait in the outbox and are relayed by sequence once one is there (issue 30).
 */
export async function recordOutbox(db: Executor, orm: Orm, job: OutboxJob): Promise<OutboxRow> {
  const created = nowIso();
  const [jobRow] = await insertJob.with(
    db,
    {
      name: job.name,
      created,
      objectTypeId: job.objectTypeId ?? null,
      objectId: job.objectId ?? null,
      userId: job.userId,
    },
    orm,
  );
  const key = crypto.randomUUID();
  const row = {
    jobId: jobRow!.id,
    name: job.name,
    payload: job.payload ?? null,
    maxAttempts: job.maxAttempts,
    userId: job.userId,
    key,
  };
  const [out] = await insertOutbox.with(
    db,
    { ...row, created, payload: JSON.stringify(row.payload) },
    orm,
  );
  return { id: out!.id, ...row };
}

/**
 * `recordOutbox` as two statements of an atomic write batch (decision 0071): the job, then its
 * outbox row, whose payload is SQL (it may name a change record the same batch writes). Needs no
 * queue, like `recordOutbox`. `done` receives the row once the batch has committed.
 */
export function stageOutbox(
  batch: StagedBatch,
  orm: Orm,
  job: OutboxJob,
  payload: SQL,
  done: (row: OutboxRow) => void,
): void {
  const created = nowIso();
  const key = crypto.randomUUID();
  batch.add(
    orm.insert(jobs).values({
      name: job.name,
      status: "pending",
      created,
      objectTypeId: job.objectTypeId ?? null,
      objectId: job.objectId ?? null,
      userId: job.userId,
    }),
  );
  batch.add(
    orm
      .insert(outbox)
      .values({
        created,
        jobId: sql`last_insert_rowid()`,
        name: job.name,
        payload: sql`${payload}`,
        maxAttempts: job.maxAttempts,
        userId: job.userId,
        key,
      })
      .returning({ id: outbox.id, jobId: outbox.jobId, payload: outbox.payload }),
    (rows) => {
      const [r] = rows as Array<{ id: number; jobId: number; payload: unknown }>;
      done({
        id: r!.id,
        jobId: r!.jobId,
        name: job.name,
        payload: r!.payload,
        maxAttempts: job.maxAttempts,
        userId: job.userId,
        key,
      });
    },
  );
}

/**
 * A random version-4 UUID made by SQLite, one per row (the key `stageOutbox` makes with
 * `crypto.randomUUID()`): SQLite's `randomblob` draws from its own cryptographic generator.
 */
const UUID_SQL = sql.raw(
  `lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' || substr('89ab', 1 + (random() & 3), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))`,
);

/** Outbox rows a batch wrote one after another: ids `first` to `last` (AUTOINCREMENT, one lock). */
export interface OutboxRange {
  first: number;
  last: number;
}

/** What a set of staged jobs shares: all but the object and the payload. */
export type OutboxSetJob = Omit<OutboxJob, "payload" | "objectId">;

/**
 * Many jobs of one kind as two statements of an atomic write batch (a bulk write's deliveries,
 * decision 0197): `document` is the text of a JSON array bound once per statement; its item `d`
 * gives the job's object (`objectId`) and its payload (`payload`), both SQL over `d.value`. The
 * jobs take the table's last ids in the document's order, and each outbox row names its job by
 * that order. `done` receives the rows once committed, when `returning` (a few of them);
 * otherwise the caller learns their ids from the table (`lastOutboxId`).
 */
export function stageOutboxSet(
  batch: StagedBatch,
  orm: Orm,
  job: OutboxSetJob,
  set: { document: string; count: number; objectId: SQL; payload: SQL },
  done?: (rows: OutboxRow[]) => void,
): void {
  const statements = outboxSetStatements(job, set);
  // ~100 rows of a set cost what one ordinary statement does (a local file's long writer)
  const weight = set.count / 100;
  batch.add(weighStatement(orm.run(statements.jobs), weight));
  if (!done) {
    batch.add(weighStatement(orm.run(statements.outbox), weight));
    return;
  }
  batch.add(weighStatement(orm.all(returningRows(statements.outbox)), weight), (written) =>
    done(outboxRowsOf(job, written)),
  );
}

/** A set's two statements (`stageOutboxSet`, `recordOutboxSet`): its jobs, then their outbox rows. */
function outboxSetStatements(
  job: OutboxSetJob,
  set: { document: string; count: number; objectId: SQL; payload: SQL },
): { jobs: SQL; outbox: SQL } {
  if (!Number.isSafeInteger(set.count) || set.count < 1)
    throw new Error(`outbox set: ${set.count}`);
  const created = nowIso();
  const rows = sql`FROM json_each(${set.document}) AS d ORDER BY d.key`;
  // the document's k-th job is the table's (count - 1 - k)-th from last: written out, as D1
  // binds numbers as REAL
  const jobId = sql`(SELECT max("id") FROM "jobs") - (${sql.raw(String(set.count - 1))} - d.key)`;
  return {
    jobs: sql`INSERT INTO "jobs" ("name", "status", "created", "object_type_id", "object_id", "user_id") SELECT ${job.name}, 'pending', ${created}, ${job.objectTypeId ?? null}, ${set.objectId}, ${job.userId} ${rows}`,
    outbox: sql`INSERT INTO "outbox" ("created", "job_id", "name", "payload", "max_attempts", "user_id", "key") SELECT ${created}, ${jobId}, ${job.name}, ${set.payload}, ${job.maxAttempts}, ${job.userId}, ${UUID_SQL} ${rows}`,
  };
}

const returningRows = (insert: SQL) =>
  sql`${insert} RETURNING "id" AS id, "job_id" AS jobId, "payload" AS payload, "key" AS key`;

/** The outbox rows a set's RETURNING gave, in id order, as `stageOutbox` gives one. */
function outboxRowsOf(job: OutboxSetJob, written: unknown): OutboxRow[] {
  const sorted = [...(written as Array<Omit<OutboxRow, "name" | "maxAttempts" | "userId">>)];
  sorted.sort((a, b) => a.id - b.id);
  return sorted.map((r) => ({
    ...r,
    // parsed, as the column's reader gives it to `stageOutbox` and the relay
    payload: typeof r.payload === "string" ? JSON.parse(r.payload) : r.payload,
    name: job.name,
    maxAttempts: job.maxAttempts,
    userId: job.userId,
  }));
}

/**
 * `stageOutboxSet` run now on `db`, the caller's open transaction (an interactive write's
 * deliveries, decision 0201): the same two statements, each awaited on `db` (a Drizzle query
 * built and not awaited never runs), the rows returned.
 */
export async function recordOutboxSet(
  db: Executor,
  job: OutboxSetJob,
  set: { document: string; count: number; objectId: SQL; payload: SQL },
): Promise<OutboxRow[]> {
  const statements = outboxSetStatements(job, set);
  await db.run(statements.jobs);
  return outboxRowsOf(job, await db.all(returningRows(statements.outbox)));
}

/** The outbox's last id, read in a batch right after its writes (`stageOutboxSet`). */
export const lastOutboxId = (orm: Orm) =>
  orm.all<{ last: number | null }>(sql`SELECT max("id") AS last FROM "outbox"`);

/** The outbox side of a {@link TaskQueue}: recording, relaying and the lost-job sweep. */
export class OutboxRelay {
  readonly relayTimeoutMs: number;
  readonly #afterCommit: "now" | "deferred";
  readonly #graceMs: number;
  /** When the last hand-over failed (monotonic ms); 0 while Redis takes messages. */
  #failedAt = 0;
  /** The highest outbox id the previous relay pass saw; the first pass takes every row. */
  #seenUpTo = Number.MAX_SAFE_INTEGER;
  readonly #deferred = new Map<string, { rows: OutboxRow[]; ranges: OutboxRange[] }>();

  constructor(
    private readonly queue: RelayQueue,
    options: OutboxOptions = {},
  ) {
    this.relayTimeoutMs = Math.min(
      RELAY_TIMEOUT_MS,
      Math.max(1, options.relayTimeoutMs ?? RELAY_TIMEOUT_MS),
    );
    this.#afterCommit = options.afterCommit ?? "now";
    this.#graceMs = options.sweepGraceMs ?? 10_000;
  }

  /**
   * Writes the job (`pending`) and its outbox row on `db` — the caller's transaction, so they
   * commit or roll back with the change that caused them. Nothing touches Redis here.
   */
  record(db: Executor, job: OutboxJob): Promise<OutboxRow> {
    return recordOutbox(db, this.queue.db.orm, job);
  }

  /**
   * Called once the transaction that recorded `rows` has committed: relays them now,
   * fire-and-forget (the request does not wait), or keeps them for {@link takeDeferred}.
   */
  afterCommit(requestId: string, rows: OutboxRow[], ranges: OutboxRange[] = []): void {
    if (!rows.length && !ranges.length) return;
    if (this.#afterCommit === "now") {
      void this.#relayCommitted(rows, ranges);
      return;
    }
    if (this.#deferred.size >= DEFERRED_LIMIT) this.#deferred.clear(); // the relay loop or cron picks them up
    const kept = this.#deferred.get(requestId) ?? { rows: [], ranges: [] };
    this.#deferred.set(requestId, {
      rows: [...kept.rows, ...rows],
      ranges: [...kept.ranges, ...ranges],
    });
  }

  /** `rows`, then the rows of `ranges` read from the outbox a page at a time. */
  async #relayCommitted(rows: OutboxRow[], ranges: OutboxRange[]): Promise<void> {
    await this.relayRows(rows);
    for (const range of ranges) await this.relayRange(range);
  }

  /**
   * Relays committed rows where no request's `waitUntil` is at hand (a job's own writes): Bun
   * does not wait for it; Workers wait (at most the bound), since unawaited work may be cancelled.
   */
  relayCommitted(rows: OutboxRow[]): Promise<void> {
    const relay = this.relayRows(rows);
    return this.#afterCommit === "now" ? Promise.resolve() : relay;
  }

  /** The relay of rows a request committed, to hand to its `waitUntil` (Workers); null when none. */
  takeDeferred(requestId: string): (() => Promise<void>) | null {
    const kept = this.#deferred.get(requestId);
    if (!kept) return null;
    this.#deferred.delete(requestId);
    return () => this.#relayCommitted(kept.rows, kept.ranges);
  }

  /**
   * Hands the committed rows `range` to Redis, a page of `RELAY_BATCH` at a time read from the
   * outbox (a bulk write's thousands of deliveries are never all in memory), for at most
   * `budgetMs`; what is left, or what Redis did not take, waits for the relay loop. Never throws.
   */
  async relayRange(range: OutboxRange, budgetMs = 2_000): Promise<void> {
    const started = performance.now();
    let after = range.first - 1;
    while (after < range.last && performance.now() - started <= budgetMs) {
      if (this.#failedAt && performance.now() - this.#failedAt < COOLDOWN_MS) return;
      let rows: OutboxRow[];
      try {
        rows = await this.#page(after, range.last);
      } catch (e) {
        this.queue.logger.warn("outbox: could not read rows to relay", { error: errorText(e) });
        return;
      }
      if (!rows.length) return;
      await this.relayRows(rows);
      after = rows.at(-1)!.id;
    }
  }

  /** Up to `RELAY_BATCH` rows not yet relayed, after id `after` and up to `last`, in id order. */
  #page(after: number, last: number): Promise<OutboxRow[]> {
    return this.queue.db.orm
      .select({
        id: outbox.id,
        jobId: outbox.jobId,
        name: outbox.name,
        payload: outbox.payload,
        maxAttempts: outbox.maxAttempts,
        userId: outbox.userId,
        key: outbox.key,
      })
      .from(outbox)
      .where(and(isNull(outbox.relayed), gt(outbox.id, after), lte(outbox.id, last)))
      .orderBy(asc(outbox.id))
      .limit(RELAY_BATCH);
  }

  /**
   * Hands `rows` to Redis within the bound and marks them relayed. Never throws: rows Redis did
   * not take stay in the outbox. Skipped for a short while after a failure, so an outage does
   * not pile up one pending Redis call per write.
   */
  async relayRows(rows: OutboxRow[]): Promise<void> {
    if (!rows.length || (this.#failedAt && performance.now() - this.#failedAt < COOLDOWN_MS))
      return;
    try {
      await this.#push(rows);
    } catch (e) {
      this.#failed(e);
      return;
    }
    try {
      await this.#markRelayed(rows);
    } catch (e) {
      // Relayed but not marked: the loop relays it again and the claim drops the duplicate.
      this.queue.logger.warn("outbox: could not mark rows relayed", { error: errorText(e) });
    }
  }

  /**
   * The relay loop's pass (task worker, Workers cron): rows still waiting, in sequence (id)
   * order, in batches, for at most `budgetMs`. By default a pass takes the rows that were
   * already in the outbox at the previous pass (the first pass of a process: all of them), so a
   * row just committed is left to the relay right after its commit; `all` takes every row. No
   * stored time is compared: a clock step delays nothing (issue 30, decision 0078). Throws when
   * Redis does not take a batch (the caller backs off); the rows stay for the next pass.
   * Returns how many rows were relayed.
   */
  async relayPending(options: { all?: boolean; budgetMs?: number } = {}): Promise<number> {
    const started = performance.now();
    const budgetMs = options.budgetMs ?? 2_000;
    const db = this.queue.db.orm;
    const upTo = options.all ? Number.MAX_SAFE_INTEGER : this.#seenUpTo;
    // What this pass sees now is what the next pass may take.
    const [top] = await db.select({ id: sql<number | null>`max(${outbox.id})` }).from(outbox);
    this.#seenUpTo = Number(top?.id ?? 0);
    let relayed = 0;
    let after = 0;
    for (;;) {
      const rows = await this.#page(after, upTo);
      if (!rows.length) break;
      try {
        await this.#push(rows);
      } catch (e) {
        this.#failed(e);
        await db
          .update(outbox)
          .set({ tries: sql`${outbox.tries} + 1`, error: errorText(e) })
          .where(
            inArray(
              outbox.id,
              rows.map((r) => r.id),
            ),
          );
        throw e;
      }
      await this.#markRelayed(rows);
      relayed += rows.length;
      after = rows.at(-1)!.id;
      if (rows.length < RELAY_BATCH || performance.now() - started > budgetMs) break;
    }
    return relayed;
  }

  /**
   * Queues again the jobs Redis lost (a restart without data, a flush): live jobs whose message
   * is in none of the queue's lists `sweepGraceMs` after their relay. A `pending` job gets its
   * next attempt; a `running` one whose worker has not renewed a lease for a visibility timeout
   * goes back to `pending` first (like an expired lease). A copy that was not really lost is
   * dropped by the claim, so a wrong guess costs a no-op message, never a second run.
   */
  async sweepLost(now = Date.now()): Promise<{ requeued: number; failed: number }> {
    const db = this.queue.db.orm;
    const relayedBefore = new Date(now - this.#graceMs).toISOString();
    const relayedAfter = new Date(now + this.#graceMs).toISOString();
    const candidates = await db
      .select({
        id: jobs.id,
        status: jobs.status,
        attempts: jobs.attempts,
        started: jobs.started,
        name: outbox.name,
        payload: outbox.payload,
        maxAttempts: outbox.maxAttempts,
        userId: outbox.userId,
        key: outbox.key,
      })
      .from(jobs)
      .innerJoin(outbox, eq(outbox.jobId, jobs.id))
      .where(
        and(
          inArray(jobs.status, ["pending", "running"]),
          isNotNull(outbox.relayed),
          // relayed "in the future" means the clock stepped back since: old enough, not young
          or(lt(outbox.relayed, relayedBefore), gt(outbox.relayed, relayedAfter)),
        ),
      )
      .orderBy(asc(jobs.id))
      .limit(500);
    if (!candidates.length) return { requeued: 0, failed: 0 };

    const { redis, keys } = this.queue;
    const [readyLength, internalLength, processingLength] = await Promise.all([
      redis.llen(keys.ready),
      redis.llen(keys.readyInternal),
      redis.llen(keys.processing),
    ]);
    if (readyLength + internalLength > SWEEP_LIST_LIMIT || processingLength > SWEEP_LIST_LIMIT)
      return { requeued: 0, failed: 0 };
    // Processing before inflight and delayed: a message moves processing → delayed (ZADD, then
    // LREM), so reading in this order sees it at least once.
    const processing = await redis.lrange(keys.processing, 0, -1);
    const [inflight, delayed, ready, readyInternal] = await Promise.all([
      redis.zrangebyscore(keys.inflight, "-inf", "+inf"),
      redis.zrangebyscore(keys.delayed, "-inf", "+inf"),
      redis.lrange(keys.ready, 0, -1),
      redis.lrange(keys.readyInternal, 0, -1),
    ]);
    const present = new Set<number>();
    for (const raw of [...processing, ...inflight, ...delayed, ...ready, ...readyInternal]) {
      const m = parseMessage(raw);
      if (m) present.add(m.id);
    }

    const messages: Array<{ name: string; text: string }> = [];
    let failed = 0;
    const staleStart = new Date(now - this.queue.visibilityTimeoutMs).toISOString();
    for (const job of candidates) {
      if (present.has(job.id)) continue;
      if (job.status === "running") {
        if (job.started && job.started > staleStart) continue; // its worker may still renew the lease
        const back = await db
          .update(jobs)
          .set({ status: "pending", error: "the tasks Redis lost this job while it ran; retrying" })
          .where(
            and(eq(jobs.id, job.id), eq(jobs.status, "running"), eq(jobs.attempts, job.attempts)),
          )
          .returning({ id: jobs.id });
        if (!back.length) continue;
      }
      if (job.attempts >= job.maxAttempts) {
        const gone = await db
          .update(jobs)
          .set({
            status: "failed",
            error: "the tasks Redis lost this job and no attempts are left",
            completed: nowIso(),
          })
          .where(
            and(eq(jobs.id, job.id), eq(jobs.status, "pending"), eq(jobs.attempts, job.attempts)),
          )
          .returning({ id: jobs.id });
        failed += gone.length;
        continue;
      }
      messages.push({
        name: job.name,
        text: messageText({
          id: job.id,
          name: job.name,
          attempt: job.attempts + 1,
          max: job.maxAttempts,
          payload: job.payload,
          user: job.userId,
          key: job.key,
        }),
      });
    }
    if (messages.length) {
      await Promise.all(
        [...byLane(this.queue, messages)].map(([key, texts]) => redis.lpush(key, ...texts)),
      );
      this.queue.logger.warn("task queue: re-queued jobs the tasks Redis had lost", {
        jobs: messages.length,
      });
    }
    return { requeued: messages.length, failed };
  }

  /** One LPUSH of the rows' first messages, bounded by `relayTimeoutMs`. */
  async #push(rows: OutboxRow[]): Promise<void> {
    const messages = rows.map((r) => ({
      name: r.name,
      text: messageText({
        id: r.jobId,
        name: r.name,
        attempt: 1,
        max: r.maxAttempts,
        payload: r.payload,
        user: r.userId,
        key: r.key,
      }),
    }));
    const push = Promise.all(
      [...byLane(this.queue, messages)].map(([key, texts]) =>
        this.queue.redis.lpush(key, ...texts),
      ),
    );
    push.catch(() => undefined); // may settle after the bound; a late success only duplicates (the claim drops it)
    let timer: ReturnType<typeof setTimeout> | undefined;
    const bound = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(`the tasks Redis did not take the message within ${this.relayTimeoutMs} ms`),
          ),
        this.relayTimeoutMs,
      );
    });
    try {
      await Promise.race([push, bound]);
    } finally {
      clearTimeout(timer);
    }
    if (this.#failedAt) this.queue.logger.info("outbox: the tasks Redis takes messages again");
    this.#failedAt = 0;
  }

  #failed(e: unknown) {
    if (!this.#failedAt)
      this.queue.logger.warn(
        "outbox: the tasks Redis did not take messages; they stay in the outbox and are retried",
        { error: errorText(e) },
      );
    this.#failedAt = performance.now();
  }

  async #markRelayed(rows: OutboxRow[]) {
    await markRelayed.with(this.queue.db.orm, {
      at: nowIso(),
      ids: JSON.stringify(rows.map((r) => r.id)),
    });
  }
}
