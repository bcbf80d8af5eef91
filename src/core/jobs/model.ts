/** `/api/core/jobs/`: background jobs and their outcome, read-only (§7). */
import { jobs } from "../../db/schema";
import { JOB_STATUSES } from "../../services/tasks/queue";
import { nestedObjects, readOnlyWithoutTimestamps } from "../changes/model";
import { defineModel } from "../models/define";
import { plannedInRead, withPageNames } from "../changes/list-reads";
import { orNull, ref } from "../json-schema";
import { label as otLabel } from "../object-types";
import { objectTypeFilters } from "../rest/object-type-filters";
import { restrictWhere, viewableRefs } from "../auth/restrict";
import type { ApiRecord, AuthState, JudgedInRead, ReadContext } from "../context";
import { Slots, slotKey } from "../slots";
import { type SQL, sql } from "drizzle-orm";

export const jobModel = defineModel({
  appLabel: "core",
  model: "job",
  verboseName: "job",
  path: "core/jobs",
  table: jobs,
  changeLogged: false,
  defaultOrdering: ["-created", "-id"],
  display: (r) => `${r.name} #${r.id}`,
  fields: [
    { name: "name", type: "string", column: jobs.name, readOnly: true, search: true, brief: true },
    { name: "object_type", type: "object_type_ref", column: jobs.objectTypeId, readOnly: true },
    { name: "object_id", type: "integer", column: jobs.objectId, readOnly: true },
    {
      name: "status",
      type: "choice",
      column: jobs.status,
      choices: JOB_STATUSES,
      readOnly: true,
      brief: true,
    },
    { name: "started", type: "datetime", column: jobs.started, readOnly: true },
    { name: "completed", type: "datetime", column: jobs.completed, readOnly: true },
    { name: "user", type: "fk", column: jobs.userId, related: "users.user", readOnly: true },
    { name: "attempts", type: "integer", column: jobs.attempts, readOnly: true },
    { name: "data", type: "json", column: jobs.data, readOnly: true },
    { name: "error", type: "text", column: jobs.error, readOnly: true },
  ],
  openapi: {
    record: { object_type: orNull(ref("ObjectTypeLabel")), object: orNull(ref("NestedObject")) },
  },
  async decorate(ctx, rows, records) {
    const types = await ctx.services.objectTypes.byIds(
      rows.filter((r) => r.objectTypeId != null).map((r) => r.objectTypeId as number),
      ctx.db,
      ctx.scratch,
    );
    const refs = rows.filter((r) => r.objectTypeId != null && r.objectId != null);
    const nested = await nestedObjects(
      ctx,
      refs.map((r) => [r.objectTypeId as number, r.objectId as number]),
    );
    rows.forEach((row, i) => {
      const rec = records[i]!;
      const ot = row.objectTypeId != null ? types.get(row.objectTypeId) : undefined;
      rec.object_type = ot ? otLabel(ot) : null;
      rec.object =
        row.objectTypeId != null
          ? (nested.get(`${row.objectTypeId}:${row.objectId}`) ?? null)
          : null;
    });
  },
});
readOnlyWithoutTimestamps(jobModel, ["created"]);
// the page's rows and, in the same read, the objects the jobs name (decision 0143)
withPageNames(jobModel.resource, {
  table: jobs,
  id: jobs.id,
  type: jobs.objectTypeId,
  object: jobs.objectId,
});
Object.assign(jobModel.resource.list.filters, objectTypeFilters("object_type", jobs.objectTypeId));
// A job's data is what its owner's request answered (a schema apply's diffs name types and
// fields): non-superusers see only their own jobs, whatever their view permission (decision 0064).
jobModel.resource.ownerColumn = jobs.userId;

/**
 * The object a job names is hidden as a hidden relation is (its owner may since have lost view of
 * it): outside the caller's view it keeps only the id the job stores. The one-read GET and list
 * judge it in their read (`hideNestedPlan`); anything else is one query per model, after.
 */
jobModel.resource.hideNested = async (ctx, auth, records) => {
  const byLabel = new Map<string, number[]>();
  for (const rec of records) {
    const ref = namedObject(rec);
    if (ref) (byLabel.get(ref.label) ?? byLabel.set(ref.label, []).get(ref.label)!).push(ref.id);
  }
  if (!byLabel.size) return records;
  const visible = await viewableByLabel(ctx, auth, byLabel);
  return records.map((rec) => {
    const ref = namedObject(rec);
    if (!ref || visible.get(ref.label)?.has(ref.id)) return rec;
    return { ...rec, object: { id: ref.id } };
  });
};

function namedObject(rec: ApiRecord): { label: string; id: number } | null {
  const object = rec.object as { id?: unknown } | null | undefined;
  if (typeof rec.object_type !== "string" || typeof object?.id !== "number") return null;
  return { label: rec.object_type, id: object.id };
}

async function viewableByLabel(ctx: ReadContext, auth: AuthState, byLabel: Map<string, number[]>) {
  const judged = ctx.scratch?.get(JUDGED);
  const out = new Map<string, Set<number>>();
  for (const [label, ids] of byLabel) {
    const inRead = judged?.get(label);
    const visible = new Set(ids.filter((id) => inRead?.get(id) === true));
    const unjudged = ids.filter((id) => !inRead?.has(id));
    const [app, model] = label.split(".") as [string, string];
    if (unjudged.length)
      for (const id of await viewableRefs(ctx, auth, app, model, unjudged)) visible.add(id);
    out.set(label, visible);
  }
  return out;
}

/** Objects the page's read judged (`hideNestedPlan`): label → object id → may the caller view it. */
const JUDGED = slotKey<Map<string, Map<number, boolean>>>("jobs.objects judged in the read");

/**
 * In the one-read GET and list: per job of `ids` naming a model the page's names plan, whether the
 * caller may view its object, by that model's view condition (as `viewableRefs` asks it after),
 * for the models the page's names plan in this read (`withPageNames`, built before this). A
 * user naming themselves, and models not planned, are asked after as before.
 */
jobModel.resource.hideNestedPlan = async (ctx, auth, ids) => {
  if (!auth.user || auth.user.isSuperuser) return null;
  const labels = new Map<number, string>();
  const branches: SQL[] = [];
  for (const [typeId, info] of plannedInRead(ctx) ?? []) {
    const label = `${info.appLabel}.${info.model}`;
    const target = info.resource;
    if (label === "users.user" || !target) continue;
    const where = await restrictWhere(ctx, auth, "view", target);
    const visible = where
      ? sql`${jobs.objectId} IN (SELECT ${target.list.idExpr} FROM ${target.table} WHERE ${where})`
      : sql`1`;
    branches.push(sql`WHEN ${typeId} THEN (${visible})`);
    labels.set(typeId, label);
  }
  if (!branches.length) return null;
  const pageIds = typeof ids === "number" ? sql`${ids}` : ids;
  const statement = sql`SELECT ${jobs.objectTypeId} AS t, ${jobs.objectId} AS o, CASE ${jobs.objectTypeId} ${sql.join(branches, sql` `)} END AS v FROM ${jobs} WHERE ${jobs.id} IN (${pageIds}) AND ${jobs.objectId} IS NOT NULL`;
  return { statement, proved: (c, rows) => keepJudged(c, labels, rows) } satisfies JudgedInRead;
};

function keepJudged(ctx: ReadContext, labels: Map<number, string>, rows: unknown) {
  const judged = new Map<string, Map<number, boolean>>();
  for (const row of rows as { t: number | null; o: number; v: unknown }[]) {
    const label = row.t == null ? undefined : labels.get(Number(row.t));
    if (!label) continue;
    const of = judged.get(label) ?? judged.set(label, new Map()).get(label)!;
    of.set(Number(row.o), Number(row.v) === 1);
  }
  (ctx.scratch ??= new Slots()).set(JUDGED, judged);
}
