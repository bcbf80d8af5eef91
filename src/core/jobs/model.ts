/** `/api/core/jobs/`: background jobs and their outcome, read-only (§7). */
import { jobs } from "../../db/schema";
import { JOB_STATUSES } from "../../services/tasks/queue";
import { nestedObjects, readOnlyWithoutTimestamps } from "../changes/model";
import { defineModel } from "../models/define";
import { withPageNames } from "../changes/list-reads";
import { orNull, ref } from "../json-schema";
import { label as otLabel } from "../object-types";
import { objectTypeFilters } from "../rest/object-type-filters";

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
