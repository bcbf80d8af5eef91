/** `/api/core/jobs/`: background jobs and their outcome, read-only (§7). */
import { jobs } from "../../db/schema";
import { JOB_STATUSES } from "../../services/tasks/queue";
import { nestedObjects, readOnlyWithoutTimestamps } from "../changes/model";
import { defineModel } from "../models/define";
import { withPageNames } from "../changes/list-reads";
import { orNull, ref } from "../json-schema";
import { label as otLabel } from "../object-types";
import { objectTypeFilters } from "../rest/object-type-filters";
import { viewableRefs } from "../auth/restrict";
import type { ApiRecord, AuthState, ReadContext } from "../context";

export const jobModel = defineModel({
  appLabel: "core",
  model: "job",
  verboseName: "job",
  path: "core/jobs",
  table: jobs,
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
 * it): outside the caller's view it keeps only the id the job stores; one query per model.
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
  const out = new Map<string, Set<number>>();
  for (const [label, ids] of byLabel) {
    const [app, model] = label.split(".") as [string, string];
    out.set(label, await viewableRefs(ctx, auth, app, model, ids));
  }
  return out;
}
