/**
 * `POST schema/apply/?background=true`: the same apply as a `schema.apply` job. The request
 * answers 202 with the job; the job's `data` is what the synchronous call would have answered,
 * `{status_code, …body}` (`{status_code: 200, applied, diffs}`, or the error body and code).
 */
import { eq, sql } from "drizzle-orm";
import { DatabaseBusyError, guardChanged, isWriteConflict } from "../../../db/client";
import { jobs } from "../../../db/schema";
import { codename } from "../../../core/auth/permissions";
import { readJobCaller } from "../../../core/auth/job-caller";
import type { AuthState, Ctx, Services, WriteContext } from "../../../core/context";
import { ApiError } from "../../../core/errors";
import { settleBeforeWrite } from "../../../core/fresh-read";
import { baseUrlOf } from "../../../core/http";
import { readSchemaBody } from "./yaml-io";
import { recordUrl } from "../../../core/models/define";
import { stagedWrite, writeTransaction, type WriteMeta } from "../../../core/rest/handlers";
import { parseBool } from "../../../core/rest/query";
import {
  completedJobSql,
  JOB_RECORDED,
  JOB_SUPERSEDED,
  PermanentJobError,
  type JobHandler,
} from "../../../services/tasks/queue";
import { APP_LABEL, COT_MODEL } from "../constants";
import { readApplyRequest, readApplyRequestNow } from "./apply";
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
  const { tasks, objectTypes } = c.get("services");
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
    request_id: c.get("requestId"),
  };
  const cotType = await objectTypes.ensure(APP_LABEL, COT_MODEL);
  // the caller's cached token is proven before the job is queued in their name (decision 0089)
  await settleBeforeWrite(c);
  // one atomic batch (the job, its outbox row); the relay to Redis goes after the answer (0182)
  const { id } = await tasks.enqueue(SCHEMA_APPLY_TASK, payload, {
    userId: c.get("auth").user?.id ?? null,
    objectTypeId: cotType.id,
    requestId: c.get("requestId"),
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
 * removed_types, fields, started}}`. The queue's claim writes it (`claimData`, decision 0189), so
 * the job shows it from the moment it is `running`, before the apply's write begins (SQLite has
 * one writer: nothing else can commit while the apply holds it); the outcome replaces it.
 */
function progressOf(payload: SchemaApplyPayload) {
  const doc = readApplyRequestNow(payload.body, new URLSearchParams(payload.query)).document;
  const progress = {
    phase: "applying",
    types: doc.types.length,
    removed_types: doc.removed_types?.length ?? 0,
    fields: doc.types.reduce((n, t) => n + t.fields.length, 0),
    started: new Date().toISOString(),
  };
  return { progress };
}

/**
 * This copy of the job is no longer its attempt (the reaper took the job back and it runs again
 * elsewhere): its write rolled back, nothing applied, nothing recorded. An `ApiError` only so a
 * write transaction passes it through unmapped; no one is answered with it.
 */
class JobSuperseded extends ApiError {
  constructor() {
    super(409, { detail: "This job attempt was superseded.", error: "write_conflict" });
  }
}

type Job = Parameters<JobHandler>[1];
type Applied = Record<string, unknown>;

/**
 * The job's outcome written with the apply (decision 0189, as 0172 does for bulk writes), in the
 * batch or the transaction, on condition the job is still live at this attempt: a copy the reaper
 * re-queued applies nothing and records nothing. The outcome is `{status_code: 200, …answer}`.
 */
function outcomeOf(services: Services, job: Job) {
  const orm = services.db.orm;
  const recorded = (applied: Applied) =>
    completedJobSql(job, sql`${JSON.stringify({ status_code: 200, ...applied })}`);
  return {
    /** The batch's last statements: the outcome, and a guard that it was written. */
    inBatch: (applied: Applied) => [orm.run(recorded(applied)), guardChanged(orm)],
    /** In the apply's transaction, after it: rolls it back when the job moved on. */
    async inTransaction(ctx: WriteContext, applied: Applied) {
      const done = await ctx.db.all<{ id: number }>(sql`${recorded(applied)} RETURNING "id"`);
      if (!done.length) throw new JobSuperseded();
    },
    /**
     * A batch that failed on a guard: the job's own (superseded, stop) or the apply's (a race
     * lost, `withRetry` runs it again). Read only after such a failure.
     */
    async superseded(e: unknown): Promise<never> {
      if (isWriteConflict(e) && !(await isLive(services, job))) throw new JobSuperseded();
      throw e;
    },
  };
}

/** Whether the job is still live at this attempt (as the queue's final writes ask). */
async function isLive(services: Services, job: Job): Promise<boolean> {
  const [row] = await services.db.orm
    .select({ status: jobs.status, attempts: jobs.attempts })
    .from(jobs)
    .where(eq(jobs.id, job.id));
  return !!row && row.attempts === job.attempt && ["running", "pending"].includes(row.status);
}

/**
 * The apply as the route runs it, its outcome written with it: off a local file, reads and one
 * batch where the document allows (decisions 0111, 0136: on D1 the transaction answered 501 into
 * the job); else the long write's transaction.
 */
async function applyInJob(
  services: Services,
  meta: WriteMeta,
  request: Awaited<ReturnType<typeof readApplyRequest>>,
  outcome: ReturnType<typeof outcomeOf>,
) {
  if (stagesSchemaWrites(services.db)) {
    const staged = await stagedWrite(services, meta, (ctx) =>
      withRetry(ctx, (a) => applyStaged(a, request, outcome.inBatch).catch(outcome.superseded)),
    );
    if (staged !== "transaction") return;
  }
  await asLongWrite(services, () =>
    writeTransaction(services, meta, null, async (ctx) => {
      await outcome.inTransaction(ctx, await applySchemaLogged(ctx, request));
    }),
  );
}

/**
 * The `schema.apply` handler: the apply records its own outcome (`JOB_RECORDED`); refusals end
 * the job `errored` with the refusal as its data.
 */
export function schemaApplyHandler(services: Services): JobHandler {
  const handler = async (payload: SchemaApplyPayload, job: Job) => {
    try {
      const auth = await authOf(services, job.userId);
      const params = new URLSearchParams(payload.query);
      const request = await readApplyRequest(payload.body, params);
      const meta = { auth, requestId: payload.request_id, baseUrl: payload.base_url, params };
      await applyInJob(services, meta, request, outcomeOf(services, job));
      return JOB_RECORDED;
    } catch (e) {
      if (e instanceof JobSuperseded) return JOB_SUPERSEDED;
      // unexpected, or the database busy with another long write: retried (an apply is idempotent)
      if (!(e instanceof ApiError) || e instanceof DatabaseBusyError) throw e;
      const body = Array.isArray(e.body) ? { errors: e.body } : e.body;
      throw new PermanentJobError(e.message, { status_code: e.statusCode, ...body });
    }
  };
  return Object.assign(handler, { claimData: progressOf });
}
