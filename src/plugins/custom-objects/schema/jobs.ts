/**
 * `POST schema/apply/?background=true`: the same apply as a `schema.apply` job. The request
 * answers 202 with the job; the job's `data` is what the synchronous call would have answered,
 * `{status_code, …body}` (`{status_code: 200, applied, diffs}`, or the error body and code).
 */
import { and, eq } from "drizzle-orm";
import { DatabaseBusyError } from "../../../db/client";
import { jobs } from "../../../db/schema";
import { codename } from "../../../core/auth/permissions";
import { readJobCaller } from "../../../core/auth/job-caller";
import type { AuthState, Ctx, Services } from "../../../core/context";
import { ApiError } from "../../../core/errors";
import { settleBeforeWrite } from "../../../core/fresh-read";
import { baseUrlOf } from "../../../core/http";
import { readSchemaBody } from "./yaml-io";
import { recordUrl } from "../../../core/models/define";
import { stagedWrite, writeTransaction, type WriteMeta } from "../../../core/rest/handlers";
import { parseBool } from "../../../core/rest/query";
import { PermanentJobError, type JobHandler } from "../../../services/tasks/queue";
import { APP_LABEL, COT_MODEL } from "../constants";
import { readApplyRequest } from "./apply";
import { applySchemaLogged, asLongWrite } from "./change-log";
import { applyStaged } from "./apply-staged";
import { withRetry } from "../types/staged";
import { stagesSchemaWrites } from "../../../db/policy";

export const SCHEMA_APPLY_TASK = "schema.apply";

interface SchemaApplyPayload {
  body: unknown;
  /** The request's query string (`allow_destructive`, `expected_state_hash`). */
  query: string;
  base_url: string;
  request_id: string;
}

export const wantsBackground = (c: Ctx) => parseBool(c.req.query("background") ?? "false") === true;

/** Queues the apply (after the caller's permission checks) and answers 202 with the job. */
export async function enqueueSchemaApply(c: Ctx): Promise<Response> {
  const { tasks, objectTypes } = c.var.services;
  if (!tasks)
    throw ApiError.detail(
      503,
      "Background applies need the tasks Redis (REDIS_TASKS_URL); apply without background=true.",
      "tasks_unavailable",
    );
  const body = await readSchemaBody(c);
  const query = new URL(c.req.url).searchParams;
  query.delete("background");
  const baseUrl = baseUrlOf(c);
  const payload: SchemaApplyPayload = {
    body,
    query: query.toString(),
    base_url: baseUrl,
    request_id: c.var.requestId,
  };
  const cotType = await objectTypes.ensure(APP_LABEL, COT_MODEL);
  // the caller's cached token is proven before the job is queued in their name (decision 0089)
  await settleBeforeWrite(c);
  // one atomic batch (the job, its outbox row); the relay to Redis goes after the answer (0182)
  const { id } = await tasks.enqueue(SCHEMA_APPLY_TASK, payload, {
    userId: c.var.auth.user?.id ?? null,
    objectTypeId: cotType.id,
    requestId: c.var.requestId,
  });
  return c.json(
    {
      job: { id, url: recordUrl(baseUrl, "core/jobs", id) },
      status: "pending",
      detail: "The schema apply runs in the background; its job holds the outcome.",
    },
    202,
  );
}

/**
 * The caller again, as of now (user and grants in one read): a user who lost the permissions
 * meanwhile gets the 403.
 */
async function authOf(services: Services, userId: number | null): Promise<AuthState> {
  const auth = userId === null ? null : await readJobCaller(services.db, userId);
  if (!auth?.user)
    throw ApiError.detail(
      403,
      "The user who queued this apply no longer exists or is inactive.",
      "permission_denied",
    );
  const needed = ["add", "change"].map((a) => codename(APP_LABEL, a, COT_MODEL));
  const { isSuperuser, permissions } = auth.user;
  if (!isSuperuser && !needed.every((p) => permissions.has(p)))
    throw ApiError.detail(
      403,
      "You do not have permission to perform this action.",
      "permission_denied",
    );
  return auth;
}

/**
 * While the job runs, its `data` says what it is doing: `{progress: {phase: "applying", types,
 * removed_types, fields, started}}`. It is written before the apply's write transaction begins
 * (SQLite has one writer: nothing else can commit while the apply holds it); the outcome
 * replaces it when the job ends.
 */
async function recordProgress(
  services: Services,
  jobId: number,
  request: ReturnType<typeof readApplyRequest>,
) {
  const doc = request.document;
  const progress = {
    phase: "applying",
    types: doc.types.length,
    removed_types: doc.removed_types?.length ?? 0,
    fields: doc.types.reduce((n, t) => n + t.fields.length, 0),
    started: new Date().toISOString(),
  };
  await services.db.orm
    .update(jobs)
    .set({ data: { progress } })
    .where(and(eq(jobs.id, jobId), eq(jobs.status, "running")));
}

/**
 * The apply as the route runs it: off a local file, reads and one batch where the document
 * allows (decisions 0111, 0136: on D1 the transaction answered 501 into the job); else the long
 * write's transaction.
 */
async function applyInJob(
  services: Services,
  meta: WriteMeta,
  request: ReturnType<typeof readApplyRequest>,
) {
  if (stagesSchemaWrites(services.db)) {
    const staged = await stagedWrite(services, meta, (ctx) =>
      withRetry(ctx, (a) => applyStaged(a, request)),
    );
    if (staged !== "transaction") return staged;
  }
  return asLongWrite(services, () =>
    writeTransaction(services, meta, null, (ctx) => applySchemaLogged(ctx, request)),
  );
}

/** The `schema.apply` handler: refusals end the job `errored` with the refusal as its data. */
export function schemaApplyHandler(services: Services): JobHandler {
  return async (payload: SchemaApplyPayload, job) => {
    try {
      const auth = await authOf(services, job.userId);
      const params = new URLSearchParams(payload.query);
      const request = readApplyRequest(payload.body, params);
      await recordProgress(services, job.id, request);
      const meta = { auth, requestId: payload.request_id, baseUrl: payload.base_url, params };
      return { status_code: 200, ...(await applyInJob(services, meta, request)) };
    } catch (e) {
      // unexpected, or the database busy with another long write: retried (an apply is idempotent)
      if (!(e instanceof ApiError) || e instanceof DatabaseBusyError) throw e;
      const body = Array.isArray(e.body) ? { errors: e.body } : e.body;
      throw new PermanentJobError(e.message, { status_code: e.statusCode, ...body });
    }
  };
}
