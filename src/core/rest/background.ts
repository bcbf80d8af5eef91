/**
 * NetBox 4.7's `?background=true` on bulk writes: the list request is checked (authentication,
 * permission, JSON) and queued as a `bulk.write` job; the job replays the same request through
 * the app as the same user, so it runs exactly the synchronous path (all or nothing). Its `data`
 * is `{status_code, data}`: the error body as answered, or for a success only `{id, url}` per
 * object (stricter than NetBox, which stores the records for every job viewer to read).
 */
import type { Ctx } from "../context";
import { ApiError } from "../errors";
import { baseUrlOf } from "../http";
import { settleBeforeWrite } from "../fresh-read";
import { recordUrl } from "../models/define";
import { PermanentJobError, type JobHandler } from "../../services/tasks/queue";
import { parseBool } from "./query";

export const BULK_WRITE_TASK = "bulk.write";

/**
 * Where a replayed request carries its caller: a symbol-keyed property of the Hono env, which
 * nothing outside this process can set (Bun's server object and Workers bindings never hold it).
 */
export const JOB_CALLER = Symbol("host.job-caller");

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
  const { tasks } = c.var.services;
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
    request_id: c.var.requestId,
  };
  // one atomic batch; the relay to Redis goes after the answer, as a write's outbox rows do
  const { id } = await tasks.enqueue(BULK_WRITE_TASK, payload, {
    userId: c.var.auth.user?.id ?? null,
    requestId: c.var.requestId,
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
    const res = await fetch(request, { [JOB_CALLER]: job.userId });
    const text = await res.text();
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
