/**
 * NetBox 4.7's `?background=true` on bulk writes: the list request is checked (authentication,
 * permission, JSON) and queued as a `bulk.write` job; the job replays the same request through
 * the app as the same user, so it runs exactly the synchronous path (all or nothing). Its `data`
 * is `{status_code, data}`: the error body as answered, or for a success only `{id, url}` per
 * object (stricter than NetBox, which stores the records for every job viewer to read).
 */
import { type SQL, sql } from "drizzle-orm";
import { guardChanged, type Orm } from "../../db/client";
import type { Ctx } from "../context";
import { ApiError } from "../errors";
import { baseUrlOf } from "../http";
import { settleBeforeWrite } from "../fresh-read";
import { recordUrl } from "../models/define";
import {
  completedJobSql,
  JOB_RECORDED,
  PermanentJobError,
  type JobHandler,
} from "../../services/tasks/queue";
import { parseBool } from "./query";

export const BULK_WRITE_TASK = "bulk.write";

/**
 * Where a replayed request carries its caller: a symbol-keyed property of the Hono env, which
 * nothing outside this process can set (Bun's server object and Workers bindings never hold it).
 */
export const JOB_CALLER = Symbol("host.job-caller");

/**
 * The job a replayed request runs for (a symbol-keyed property of the Hono env, as `JOB_CALLER`):
 * its write batch records the job's outcome with the write (decision 0172), and says so here.
 */
const JOB_RUN = Symbol("host.job-run");

interface JobRun {
  id: number;
  attempt: number;
  /** Set once a committed write batch recorded the job completed. */
  recorded: boolean;
}

/** What the job keeps of a success (`references`), for the write batch to record. */
export interface JobAnswer {
  /** The answer's status: 201 (created), 200 (updated), 204 (deleted, no data). */
  status: 201 | 200 | 204;
  /** The answered ids in answer order, known before the batch (an update's, from its body). */
  known?: number[];
  /** Else: SQL selecting the ids the batch itself allocates (a create's newest rows). */
  allocated?: SQL;
}

/**
 * The statements that record the request's job completed, for its write batch (one round trip
 * fewer than after it), or none when the request is no job's or the job is recorded already.
 * They fail the whole batch unless the job is still at this attempt and live: a copy taken back
 * by the reaper and run again elsewhere writes nothing twice. `done` marks it recorded.
 */
export function jobRecordStatements(
  c: Ctx,
  orm: Orm,
  answer: JobAnswer | null,
): { statements: ReturnType<Orm["run"]>[]; done(): void } | null {
  const run = (c.env as Record<PropertyKey, unknown> | undefined)?.[JOB_RUN] as JobRun | undefined;
  if (!run || run.recorded || !answer) return null;
  const list = new URL(c.req.url).pathname.replace(/\/?$/, "/");
  const prefix = `${baseUrlOf(c)}${list}`;
  const data = jobData(answer, prefix);
  return {
    statements: [orm.run(completedJobSql(run, data)), guardChanged(orm)],
    done: () => {
      run.recorded = true;
    },
  };
}

/** `{status_code, data}` as the job keeps it (`references`), as SQL text. */
function jobData(answer: JobAnswer, prefix: string): SQL {
  if (answer.status === 204) return sql`${JSON.stringify({ status_code: 204, data: null })}`;
  if (answer.known) {
    const refs = answer.known.map((id) => ({ id, url: `${prefix}${id}/` }));
    return sql`${JSON.stringify({ status_code: answer.status, data: refs })}`;
  }
  // the batch's new rows, oldest first (the order the answer lists them in)
  const refs = sql`SELECT json_group_array(json_object('id', "id", 'url', ${prefix} || "id" || '/')) FROM (SELECT "id" FROM "allocated" ORDER BY "id")`;
  return sql`(WITH "allocated"("id") AS (${answer.allocated}) SELECT json_object('status_code', ${sql.raw(String(answer.status))}, 'data', json((${refs}))))`;
}

interface BulkWritePayload {
  method: string;
  /** Path and query of the list request, `background` removed. */
  path: string;
  body: unknown;
  base_url: string;
  request_id: string;
}

/** True for a bulk write that asks for the background (`?background=true`). */
export function wantsBackgroundBulk(c: Ctx): boolean {
  const raw = c.req.query("background");
  return raw !== undefined && parseBool(raw) === true;
}

/** Queues the bulk write after the caller's checks; answers 202 with the job. */
export async function enqueueBulkWrite(c: Ctx, body: unknown[]): Promise<Response> {
  const { tasks } = c.get("services");
  // the caller's cached token is proven before the job is queued in their name (decision 0089)
  await settleBeforeWrite(c);
  if (c.req.header("if-match") !== undefined)
    throw ApiError.detail(
      400,
      "If-Match cannot be combined with background=true: a deferred write cannot honour it.",
      "invalid_request",
    );
  if (!tasks)
    throw ApiError.detail(
      503,
      "Background writes need the tasks Redis (REDIS_TASKS_URL); write without background=true.",
      "tasks_unavailable",
    );
  const url = new URL(c.req.url);
  url.searchParams.delete("background");
  const baseUrl = baseUrlOf(c);
  const payload: BulkWritePayload = {
    method: c.req.method,
    path: `${url.pathname}${url.search}`,
    body,
    base_url: baseUrl,
    request_id: c.get("requestId"),
  };
  // one atomic batch; the relay to Redis goes after the answer, as a write's outbox rows do
  const { id } = await tasks.enqueue(BULK_WRITE_TASK, payload, {
    userId: c.get("auth").user?.id ?? null,
    requestId: c.get("requestId"),
  });
  return c.json({ job: { id, url: recordUrl(baseUrl, "core/jobs", id), status: "pending" } }, 202);
}

/** What the job keeps of a success: `{id, url}` per object, never the records themselves. */
function references(data: unknown): unknown {
  if (!Array.isArray(data)) return null;
  return data.map((r) => ({ id: (r as { id?: unknown })?.id, url: (r as { url?: unknown })?.url }));
}

/** The `bulk.write` handler: replays the request through `app` as the job's user. */
export function bulkWriteHandler(
  fetch: (request: Request, env: Record<PropertyKey, unknown>) => Promise<Response>,
): JobHandler {
  return async (payload: BulkWritePayload, job) => {
    if (job.userId === null)
      throw new PermanentJobError("no user", { status_code: 403, data: { detail: "No user." } });
    const request = new Request(new URL(payload.path, payload.base_url), {
      method: payload.method,
      headers: { "content-type": "application/json", "x-request-id": payload.request_id },
      body: JSON.stringify(payload.body),
    });
    const run: JobRun = { id: job.id, attempt: job.attempt, recorded: false };
    const res = await fetch(request, { [JOB_CALLER]: job.userId, [JOB_RUN]: run });
    const text = await res.text();
    // the write batch recorded the job with the write: nothing left to record
    if (run.recorded) return JOB_RECORDED;
    const data = text ? (JSON.parse(text) as unknown) : null;
    // A busy database or a failure of our own: retried like any job (the write is all or nothing).
    if (res.status >= 500) throw new Error(`bulk write answered ${res.status}`);
    if (res.status >= 400)
      throw new PermanentJobError(`bulk write refused (${res.status})`, {
        status_code: res.status,
        data,
      });
    return { status_code: res.status, data: references(data) };
  };
}
