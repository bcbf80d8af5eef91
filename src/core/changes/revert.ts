/**
 * `POST /api/core/object-changes/<id>/revert/` (decision 0088): puts an object back as it was
 * before one change, as a new write by the caller through the same REST write paths (and so the
 * same permissions, constraints, validation and change record) as their PATCH, POST or DELETE.
 */
import { and, asc, desc, eq, gt, sql, type SQL } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { Hono } from "hono";
import { objectChanges, tags as tagsTable } from "../../db/schema";
import { requirePermission } from "../auth/permissions";
import { typeSight, withholdTypes } from "../auth/type-sight";
import {
  type AdmittedQuery,
  hideUnviewable,
  objectRequirement,
  restrictWhere,
} from "../auth/restrict";
import { addGuard, foldsCredentials, isStaleCredentials, readFolded } from "../fresh-read";
import type { Ctx, HonoEnv } from "../context";
import { ApiError, notFound, ValidationError } from "../errors";
import { MAX_REVERT_REVIEW_BYTES } from "../limits";
import { parseBool } from "../rest/query";
import { describeRoute } from "../validate";
import {
  answering,
  createChecked,
  deleteWithHooks,
  ensureExists,
  inStagedWrite,
  inTransaction,
  readContext,
  updateChecked,
  withWriteJudgement,
} from "../rest/handlers";
import type { ApiRecord, ReadContext, Resource, WriteContext } from "../rest/resource";
import type { StagedOptions, StagedWritten } from "../context";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { type AfterScope, afterScope, requireInsideAfter } from "./after-scope";
import { objectChangeModel } from "./model";
import { PlanReads, ridingReads } from "./plan-reads";
import { type ObjectRef, type RecordProof, type RecordProven, recordProof } from "./record-proof";
import { setRestoreId } from "./restore-id";
import { stagedRecord, watchStaged } from "./preview";
import type { Slots } from "../slots";
import {
  type ChangeProof,
  type ChangeRow,
  changeRead,
  forgetChange,
  NOT_REVERTABLE,
  rememberChanges,
  sameChange,
  seenChange,
} from "./seen";

/**
 * Record keys no write sets (a custom object's record names its type; `_context` is derived;
 * `custom_fields` is always `{}`, decision 0200).
 */
const META = new Set([
  "id",
  "url",
  "display",
  "display_url",
  "created",
  "last_updated",
  "custom_object_type",
  "_context",
  "custom_fields",
]);
/**
 * Record keys derived from the object's own fields: a revert putting back every field its record
 * changed leaves them as the record's prechange shows them (its type unchanged since, 0160).
 */
const DERIVED = new Set(["display", "_context"]);
/** Keys a write takes beyond the described fields (where the model has them). */
const UNDESCRIBED = ["tags", "owner", "local_context_data"];
/** Rounds of a forced revert that drop the fields a write refused and try the rest again. */
const FORCE_ROUNDS = 4;

type Reason =
  | "later_change"
  | "unique"
  | "invalid"
  | "target_gone"
  | "fields_changed"
  | "object_gone"
  | "object_exists";

/** What stands in the way of reverting a field (or the whole object, `field: null`). */
interface Conflict {
  reason: Reason;
  field: string | null;
  detail: string;
  /** Later change records that touched the field. */
  changes?: number[];
}
/** Conflicts no `force` can step over: there is nothing to write the fields to. */
const HARD: ReadonlySet<Reason> = new Set(["object_gone", "object_exists"]);

interface Plan {
  /** `update`: the fields put back; `create`: the whole record put back; `delete`: nothing. */
  action: "update" | "create" | "delete";
  input: ApiRecord;
  current: ApiRecord | null;
  conflicts: Conflict[];
  /** A change record of the object came after the one reverted. */
  changedSince?: boolean;
}

/** A value as compared: nested objects by type and id, choices by value, objects key-sorted. */
function comparable(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(comparable);
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (typeof o.id === "number") return `${String(o.object_type ?? "")}#${o.id}`;
    if ("value" in o && "label" in o) return comparable(o.value);
    return Object.fromEntries(
      Object.keys(o)
        .sort()
        .map((k) => [k, comparable(o[k])]),
    );
  }
  return v;
}
const same = (a: unknown, b: unknown) =>
  JSON.stringify(comparable(a ?? null)) === JSON.stringify(comparable(b ?? null));

const snapshot = (raw: unknown): ApiRecord | null =>
  raw && typeof raw === "object" && !Array.isArray(raw) ? (raw as ApiRecord) : null;

/** An ISO 8601 UTC timestamp as the API writes `created` (bounded: the text is the record's). */
const STAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;

/**
 * A delete put back keeps the object's creation time as its record holds it (decision 0171);
 * a record without a valid one leaves the write's own stamp.
 */
function recordedCreated(row: ChangeRow): { created?: [string] } {
  const at = snapshot(row.prechangeData)?.created;
  const valid = typeof at === "string" && STAMP.test(at) && Number.isFinite(Date.parse(at));
  return valid ? { created: [at] } : {};
}

/** The fields an update record changed (its own keys, not the volatile ones). */
function changedFields(row: ChangeRow): string[] {
  const pre = snapshot(row.prechangeData) ?? {};
  const post = snapshot(row.postchangeData) ?? {};
  const keys = new Set([...Object.keys(pre), ...Object.keys(post)]);
  return [...keys].filter((k) => !META.has(k) && !same(pre[k], post[k]));
}

/** What the record's read saw of what came after the record (decisions 0139, 0160). */
interface SeenSince {
  /** The object's latest change record (the record's own id: none came since). */
  latest: number;
  /** A change record of the object's run-time type (a custom object type) came since. */
  typeChanged: boolean;
}

/**
 * The change record `id` if the caller may view it (decision 0064), else 404; with the id of the
 * object's latest change record as that read saw it (read by the record's type and id, so in the
 * same read): a revert starting from it knows whether the object changed since (decision 0139),
 * and whether its type did (0160).
 */
async function visibleChange(
  c: Ctx,
  id: number,
  proof: RecordProof | null,
): Promise<{ row: ChangeRow; since: SeenSince; proven: RecordProven | null }> {
  await requirePermission(c, "view", objectChangeModel.resource);
  const ctx = readContext(c);
  const missing = "No object change with this id.";
  // the caller's token guard rides in this first read (decision 0089): nothing is answered from
  // it before the permission checks, which the guard's answer confirms (`foldsCredentials`)
  const query = ctx.db.select().from(objectChanges).where(eq(objectChanges.id, id));
  const of = (column: string) =>
    sql.raw(`(SELECT r."${column}" FROM "object_changes" r WHERE r."id" = `);
  const typeChanged = ctx.services.models.typeChangedSince(
    sql`${of("changed_object_type_id")}${id})`,
    id,
  );
  const latest = ctx.db
    .select({
      id: sql<number | null>`max(${objectChanges.id})`,
      typeChanged: typeChanged ?? sql<number>`0`,
    })
    .from(objectChanges)
    .where(
      and(
        eq(objectChanges.changedObjectTypeId, sql`${of("changed_object_type_id")}${id})`),
        eq(objectChanges.changedObjectId, sql`${of("changed_object_id")}${id})`),
      ),
    );
  // whether the caller may view the record rides in the same read
  const scope: AdmittedQuery[] = [];
  let scopeRows: unknown[] = [];
  const viewable = await changeViewable(c, id, (q) => {
    const at = scope.push(q) - 1;
    return () => scopeRows[at];
  });
  const proofCount = proof?.statements.length ?? 0;
  const [rows, last, ...rest] = (await readFolded(c, [
    query as never,
    latest as never,
    ...(proof?.statements ?? []),
    ...scope,
  ])) as [ChangeRow[], Array<{ id: number | null; typeChanged: unknown }>, ...unknown[]];
  const proofs = rest.slice(0, proofCount);
  scopeRows = rest.slice(proofCount);
  viewable();
  const row = rows[0];
  if (!row) throw notFound(missing);
  rememberChanges(c.get("services"), [row]); // a retry of the revert reads once (decision 0118)
  const proven = proof ? proof.proven(proofs) : null;
  const since = { latest: Number(last[0]?.id ?? row.id), typeChanged: !!last[0]?.typeChanged };
  return { row, since, proven };
}

/**
 * The model the record is about, or 409 when it is gone (a removed custom object type). A
 * custom object type's model comes from the plugin's cache where it is there, its guard riding
 * in the request's next read (decision 0118); otherwise it is read.
 */
async function targetOf(c: Ctx, ctx: ReadContext, row: ChangeRow): Promise<Resource> {
  const cached = ctx.services.models.cachedByObjectType(row.changedObjectTypeId);
  if (cached?.info.resource) addGuard(c, cached.guard);
  const known = cached?.info.resource ? cached : await readTarget(ctx, row);
  const resource = known?.info.resource;
  if (!known || !resource)
    throw conflictError([
      { reason: "fields_changed", field: null, detail: "The object's type no longer exists." },
    ]);
  if (NOT_REVERTABLE.has(known.label))
    throw ApiError.detail(
      400,
      `Changes to ${resource.verboseName} objects cannot be reverted.`,
      "not_revertable",
    );
  return resource;
}

async function readTarget(ctx: ReadContext, row: ChangeRow) {
  const ot = (await ctx.services.objectTypes.byIds([row.changedObjectTypeId], ctx.db)).get(
    row.changedObjectTypeId,
  );
  const info = ot ? await ctx.services.models.get(ot.appLabel, ot.model, ctx) : null;
  return ot && info ? { label: `${ot.appLabel}.${ot.model}`, info } : null;
}

function conflictError(conflicts: Conflict[]): ApiError {
  return ApiError.detail(
    409,
    `This change cannot be reverted: ${conflicts.map((x) => x.detail).join(" ")}`,
    "revert_conflict",
    { conflicts },
  );
}

/** A later change record of the object the revert's plan reads (decision 0193). */
interface LaterChange {
  id: number;
  action: string;
  /** Whether it changed `field`; null where the later records were past the review limit. */
  touched: (field: string) => boolean | null;
}

/** `r`'s own value of `field` (a snapshot's keys are the record's fields). */
const valueAt = (r: ApiRecord | null, field: string) =>
  r && Object.hasOwn(r, field) ? r[field] : undefined;

/**
 * Later change records of the same object, in order. `review`: with their snapshots, where all of
 * them together hold at most `MAX_REVERT_REVIEW_BYTES` (decision 0193), to name the records that
 * touched a field; past it none comes. Their size is summed in the same statement from the rows'
 * headers (`octet_length` reads no value), so a long, heavy history is neither read nor parsed.
 */
function laterChanges(reads: PlanReads, row: ChangeRow, review: boolean) {
  const total = sql`(SELECT coalesce(sum(coalesce(octet_length(l."prechange_data"), 0) + coalesce(octet_length(l."postchange_data"), 0)), 0) FROM "object_changes" l WHERE l."changed_object_type_id" = ${row.changedObjectTypeId} AND l."changed_object_id" = ${row.changedObjectId} AND l."id" > ${row.id})`;
  const within = sql`${total} <= ${MAX_REVERT_REVIEW_BYTES}`;
  const snapshots = {
    pre: sql<string | null>`CASE WHEN ${within} THEN ${objectChanges.prechangeData} END`,
    post: sql<string | null>`CASE WHEN ${within} THEN ${objectChanges.postchangeData} END`,
    reviewed: sql<number>`${within}`,
  };
  const rows = reads.add(
    reads.ctx.db
      .select({
        id: objectChanges.id,
        action: objectChanges.action,
        ...(review ? snapshots : {}),
      })
      .from(objectChanges)
      .where(
        and(
          eq(objectChanges.changedObjectTypeId, row.changedObjectTypeId),
          eq(objectChanges.changedObjectId, row.changedObjectId),
          gt(objectChanges.id, row.id),
        ),
      )
      .orderBy(asc(objectChanges.id)),
  );
  return (): LaterChange[] =>
    rows().map((r) => {
      const { pre, post, reviewed } = r as {
        pre?: string | null;
        post?: string | null;
        reviewed?: unknown;
      };
      let parsed: [ApiRecord | null, ApiRecord | null] | null = null;
      const touched = (field: string) => {
        if (!review || !Number(reviewed)) return null;
        parsed ??= [pre, post].map((text) => (text ? snapshot(JSON.parse(text)) : null)) as [
          ApiRecord | null,
          ApiRecord | null,
        ];
        return !same(valueAt(parsed[0], field), valueAt(parsed[1], field));
      };
      return { id: r.id, action: r.action, touched };
    });
}

/** An update's field changed since the record: the later records that touched it, where known. */
function changedAgain(field: string, later: LaterChange[]): Conflict {
  const touched = later.map((l) => ({ id: l.id, touched: l.touched(field) }));
  if (touched.some((l) => l.touched === null))
    return {
      reason: "later_change",
      field,
      detail: `"${field}" was changed again since (its later change records, more than ${MAX_REVERT_REVIEW_BYTES} bytes, were not reviewed).`,
    };
  const changes = touched.filter((l) => l.touched).map((l) => l.id);
  return {
    reason: "later_change",
    field,
    detail: `"${field}" was changed again since${changes.length ? ` (change ${changes.join(", ")})` : ""}.`,
    changes,
  };
}

/** The own fields of the model's records now, when the model describes them. */
const ownFields = (resource: Resource): Set<string> | null =>
  resource.describe ? new Set([...resource.describe.map((d) => d.name), ...UNDESCRIBED]) : null;

/** An update put back: each changed field to its value before, unless changed again since. */
async function planUpdate(reads: PlanReads, resource: Resource, row: ChangeRow): Promise<Plan> {
  const pre = snapshot(row.prechangeData) ?? {};
  const post = snapshot(row.postchangeData) ?? {};
  const fields = changedFields(row);
  const loaded = reads.load(resource, row.changedObjectId);
  const laterRead = laterChanges(reads, row, true);
  const targetsRead = await Promise.all(
    fields.map((f) => existingTargets(reads, resource, f, pre[f])),
  );
  await reads.run();
  const current = await loaded();
  const later = laterRead();
  if (!current) return { ...gone(row), changedSince: later.length > 0 };
  const targets = targetsRead.map((read) => read());
  const conflicts: Conflict[] = [];
  const input: ApiRecord = {};
  for (const [i, field] of fields.entries()) {
    if (!(field in current) || !(field in pre)) {
      conflicts.push({
        reason: "fields_changed",
        field,
        detail: `The field "${field}" is no longer a field of this type.`,
      });
      continue;
    }
    if (!same(current[field], post[field])) {
      conflicts.push(changedAgain(field, later));
      continue;
    }
    const kept = targets[i]!;
    if (kept.missing.length) conflicts.push(targetGone(field, kept.missing));
    input[field] = kept.value;
  }
  return { action: "update", input, current, conflicts, changedSince: later.length > 0 };
}

const gone = (row: ChangeRow): Plan => ({
  action: "update",
  input: {},
  current: null,
  conflicts: [
    {
      reason: "object_gone",
      field: null,
      detail: `The object (id ${row.changedObjectId}) no longer exists.`,
    },
  ],
});

/** A delete put back: the object with its id, tags and the links whose targets still exist. */
async function planRestore(reads: PlanReads, resource: Resource, row: ChangeRow): Promise<Plan> {
  const pre = snapshot(row.prechangeData) ?? {};
  const own = ownFields(resource);
  const fields = Object.keys(pre).filter((f) => !META.has(f));
  const loaded = reads.load(resource, row.changedObjectId);
  const targetsRead = await Promise.all(
    fields.map((f) => (own && !own.has(f) ? null : existingTargets(reads, resource, f, pre[f]))),
  );
  await reads.run();
  const current = await loaded();
  const targets = targetsRead.map((read) => read?.());
  if (current)
    return {
      action: "create",
      input: {},
      current,
      conflicts: [
        {
          reason: "object_exists",
          field: null,
          detail: `An object with id ${row.changedObjectId} exists again.`,
        },
      ],
    };
  const conflicts: Conflict[] = [];
  const input: ApiRecord = {};
  for (const [i, field] of fields.entries()) {
    const kept = targets[i];
    if (!kept) {
      conflicts.push({
        reason: "fields_changed",
        field,
        detail: `The field "${field}" is no longer a field of this type.`,
      });
      continue;
    }
    if (kept.missing.length) conflicts.push(targetGone(field, kept.missing));
    input[field] = kept.value;
  }
  return { action: "create", input, current: null, conflicts };
}

const targetGone = (field: string, missing: string[]): Conflict => ({
  reason: "target_gone",
  field,
  detail: `"${field}" pointed at ${missing.join(", ")}, which no longer exist${missing.length > 1 ? "" : "s"}.`,
});

type Nested = { id: number; object_type?: unknown };
const isNested = (v: unknown): v is Nested =>
  !!v && typeof v === "object" && !Array.isArray(v) && typeof (v as Nested).id === "number";

/**
 * A relation's value with the targets that no longer exist left out (a single one becomes
 * null), and those missing named, once `reads` has run. Values of other fields come as they are.
 */
async function existingTargets(
  reads: PlanReads,
  resource: Resource,
  field: string,
  value: unknown,
): Promise<() => { value: unknown; missing: string[] }> {
  const rel = resource.relations?.find((r) => r.name === field);
  const isTags = field === "tags" && resource.tagged;
  if ((!rel && !isTags) || value === null || value === undefined)
    return () => ({ value, missing: [] });
  const items = Array.isArray(value) ? value : [value];
  const labelOf = async (item: Nested) =>
    isTags
      ? "extras.tag"
      : rel!.polymorphic
        ? String(item.object_type ?? "")
        : (rel!.target ?? (await labelOfType(reads.ctx, rel!.targetTypeId)));
  const asked = await Promise.all(
    items.map(
      async (item): Promise<{ item: unknown; label: string | null; found: () => boolean }> => {
        if (!isNested(item)) return { item, label: null, found: () => true };
        const label = await labelOf(item);
        return { item, label, found: label ? await exists(reads, label, item.id) : () => false };
      },
    ),
  );
  return () => {
    const missing: string[] = [];
    const kept: unknown[] = [];
    for (const { item, label, found } of asked) {
      if (found()) kept.push(item);
      else missing.push(`${label ?? "an object"} ${(item as Nested).id}`);
    }
    return { value: Array.isArray(value) ? kept : (kept[0] ?? null), missing };
  };
}

async function labelOfType(ctx: ReadContext, typeId: number | undefined): Promise<string | null> {
  if (typeId === undefined) return null;
  const ot = (await ctx.services.objectTypes.byIds([typeId], ctx.db)).get(typeId);
  return ot ? `${ot.appLabel}.${ot.model}` : null;
}

/** Whether object `id` of `label` exists, once `reads` has run (its table read where known). */
async function exists(reads: PlanReads, label: string, id: number): Promise<() => boolean> {
  const db = reads.ctx.db;
  if (label === "extras.tag") {
    const rows = reads.add(
      db.select({ id: tagsTable.id }).from(tagsTable).where(eq(tagsTable.id, id)),
    );
    return () => rows().length > 0;
  }
  const [app, model] = label.split(".") as [string, string];
  const info = await reads.ctx.services.models.get(app, model, reads.ctx);
  if (!info) return () => false;
  const table = info.resource?.table as (SQLiteTable & { id?: SQLiteColumn }) | undefined;
  if (table?.id) {
    const rows = reads.add(db.select({ id: table.id }).from(table).where(eq(table.id, id)));
    return () => rows().length > 0;
  }
  const nested = reads.defer(() => info.nested(reads.ctx, [id]));
  return () => nested().has(id);
}

/** A create taken back: the object deleted, unless it changed since. */
async function planRemove(reads: PlanReads, resource: Resource, row: ChangeRow): Promise<Plan> {
  const loaded = reads.load(resource, row.changedObjectId);
  const changes = laterChanges(reads, row, false);
  await reads.run();
  const current = await loaded();
  if (!current) return { ...gone(row), action: "delete" };
  const later = changes().filter((l) => l.action === "update");
  const conflicts: Conflict[] = later.length
    ? [
        {
          reason: "later_change",
          field: null,
          detail: `The object was changed since it was created (change ${later.map((l) => l.id).join(", ")}).`,
          changes: later.map((l) => l.id),
        },
      ]
    : [];
  return { action: "delete", input: {}, current, conflicts };
}

/** The plan, its reads made through `reads` (together, or one by one in a transaction). */
function planOf(reads: PlanReads, resource: Resource, row: ChangeRow): Promise<Plan> {
  if (row.action === "update") return planUpdate(reads, resource, row);
  if (row.action === "delete") return planRestore(reads, resource, row);
  return planRemove(reads, resource, row);
}

/** The caller must hold the permission of the write the revert makes (403 before anything). */
const WRITE_PERMISSION = { update: "change", create: "add", delete: "delete" } as const;

type RevertOptions = {
  force: boolean;
  dryRun: boolean;
  dropped: Conflict[];
  /** The record as remembered, until the revert's one read has proven it (decision 0118). */
  proof: ChangeProof | null;
  /** What the reverted record's read saw came since, where it was read; null otherwise (0139). */
  since: SeenSince | null;
  /**
   * The write built from the record alone failed in its batch, the object unchanged when the
   * record was read: a change record of the object now came during the revert (decision 0139).
   */
  raced?: boolean;
};

/**
 * Requests whose write built from the record alone was refused by its batch (or whose batch found
 * a cache stale, the route running again): a change record of the object now is a race lost.
 */
const readFreeRefused = new WeakSet<Ctx>();

/** What a revert answers when the object changed between its read and its batch. */
const changedDuring = () =>
  conflictError([
    { reason: "later_change", field: null, detail: "The object changed during the revert." },
  ]);

/** A revert of a remembered record that cannot go on before the record is proven. */
class Unproven extends Error {}
const requireProven = (opts: RevertOptions) => {
  if (opts.proof && !opts.proof.proven) throw new Unproven();
};

/**
 * The plan for what the caller may do now: 403/404 on an object they may not change (or
 * delete), 409 on what stands in the way (unless forced), the fields a write refused left out.
 */
async function checkedPlan(
  reads: PlanReads,
  auth: WriteContext["auth"],
  resource: Resource,
  row: ChangeRow,
  opts: RevertOptions,
): Promise<{ plan: Plan; conflicts: Conflict[]; after: AfterScope | null }> {
  const ctx = reads.ctx;
  // a dry run sends no batch to hold the object it would leave to the constraints: judged here
  const after = opts.dryRun ? await dryRunScope(reads, auth, resource, row, opts) : null;
  // an object the caller may view but not change (or delete) is a 403, one they may not view a
  // 404: asked in the plan's read, judged where the object is there to judge
  const allowed =
    row.action === "delete"
      ? null
      : await objectRequirement(
          ctx,
          auth,
          row.action === "update" ? "change" : "delete",
          resource,
          row.changedObjectId,
          (query) => reads.add(query),
        );
  const plan = await planOf(reads, resource, row);
  if (plan.current && plan.action !== "create") allowed?.();
  // unchanged when the record was read, changed before the batch: the race the batch lost
  if (opts.raced && plan.changedSince) throw changedDuring();
  for (const d of opts.dropped) if (d.field) delete plan.input[d.field];
  const conflicts = [...plan.conflicts, ...opts.dropped];
  if (conflicts.some((x) => HARD.has(x.reason)) || (conflicts.length && !opts.force))
    throw conflictError(conflicts);
  return { plan, conflicts, after };
}

/** A dry run's check of the object its write would leave, riding in the plan's read. */
function dryRunScope(
  reads: PlanReads,
  auth: WriteContext["auth"],
  resource: Resource,
  row: ChangeRow,
  opts: RevertOptions,
): Promise<AfterScope> | null {
  const input = row.action === "create" ? null : inputOf(resource, row);
  if (!input) return null;
  for (const d of opts.dropped) if (d.field) delete input[d.field];
  const action = row.action === "update" ? "change" : "add";
  return afterScope(reads, auth, resource, action, row.changedObjectId, input);
}

/** A dry run refused as its write's batch would be: the object it leaves outside the constraints. */
async function dryRunInside(
  c: Ctx,
  resource: Resource,
  row: ChangeRow,
  { plan, after }: { plan: Plan; after: AfterScope | null },
): Promise<void> {
  if (!after || (plan.action === "update" && !Object.keys(plan.input).length)) return;
  const reads = () => new PlanReads(readContext(c), (queries) => readFolded(c, queries));
  const same = sameInput(after.input, plan.input);
  await requireInsideAfter(
    reads,
    c.get("auth"),
    resource,
    row.changedObjectId,
    plan.input,
    after,
    same,
  );
}

/**
 * The revert's write in one transaction, for a model whose writes are not staged: the plan made
 * again on what the transaction sees, then the same write a PATCH, POST or DELETE makes there.
 */
function revertInTransaction(
  c: Ctx,
  resource: Resource,
  row: ChangeRow,
  opts: RevertOptions,
): Promise<ApiRecord> {
  return inTransaction(c, resource, async (ctx) => {
    const reads = new PlanReads(ctx, null);
    const { plan, conflicts } = await checkedPlan(reads, ctx.auth, resource, row, opts);
    const id = row.changedObjectId;
    let record: ApiRecord | null = null;
    if (plan.action === "update" && Object.keys(plan.input).length) {
      await ensureExists(ctx, resource, id, "change");
      record = (await updateChecked(ctx, resource, id, plan.input, true)).record;
    } else if (plan.action === "create") {
      setRestoreId(ctx, resource, id);
      record = (await createChecked(ctx, resource, plan.input)).record;
    } else if (plan.action === "delete") await deleteWithHooks(ctx, resource, id, "delete");
    const [written] = await writtenChange(ctx.db, row, ctx.requestId);
    return answerOf(ctx, ctx.auth, resource, row, plan, record, conflicts, written?.id ?? null);
  });
}

/** The write a revert makes: an update's is an update, a delete's a create, a create's a delete. */
const writerOf = (staged: Resource["staged"], row: ChangeRow) =>
  ({ update: staged?.update, delete: staged?.create, create: staged?.delete })[
    row.action as "update" | "delete" | "create"
  ];

/**
 * Where the model's writes are staged (decisions 0083, 0090, 0113, 0118), the revert's is too:
 * one read (the plan's reads riding in the write's read phase), then one batch. A revert the
 * change record's fields alone do not settle (a forced one leaving fields out, a plan that turned
 * out to differ) reads its plan first. Null when the write cannot be staged (it then runs in a
 * transaction).
 */
async function revertStaged(
  c: Ctx,
  resource: Resource,
  row: ChangeRow,
  opts: RevertOptions,
): Promise<ApiRecord | null> {
  const staged = resource.staged;
  const writer = writerOf(staged, row);
  const input = opts.dropped.length ? null : inputOf(resource, row);
  // a record this process did not remember, the object unchanged since: its write built from
  // the record alone (decision 0139); refused by its batch, the ordinary reads say why
  const since = opts.since;
  if (since?.latest === row.id && !opts.dryRun && input && !readFreeRefused.has(c)) {
    const done = await revertReadFree(c, resource, row, input, since.typeChanged);
    if (done) return done;
  }
  opts.raced = readFreeRefused.has(c);
  if (staged && writer && input) {
    const done = await revertInOneRead(c, staged, resource, row, opts, input);
    if (done !== REPLAN) return done;
  }
  requireProven(opts);
  if (opts.dryRun) return dryRunOfPlan(c, resource, row, opts);
  if (!staged || !writer) return null;
  const ctx = readContext(c);
  const reads = new PlanReads(ctx, (queries) => readFolded(c, queries));
  const { plan, conflicts } = await checkedPlan(reads, c.get("auth"), resource, row, opts);
  const answer = (record: ApiRecord | null, change: number | null) =>
    answerOf(ctx, c.get("auth"), resource, row, plan, record, conflicts, change);
  if (plan.action === "update" && !Object.keys(plan.input).length) return answer(null, null);
  const stamp = () => stampOf(plan);
  const written = await withChangeRead(c, resource, row, (w) =>
    stagedWrite(w, staged, resource, row, plan.action, plan.input, stamp),
  );
  if (written.result === "transaction") return null;
  const record = written.result?.record ?? null;
  return answerOf(
    withWriteJudgement(c, ctx),
    c.get("auth"),
    resource,
    row,
    plan,
    record,
    conflicts,
    written.change,
  );
}

/**
 * A dry run whose write the change record alone does not give (a forced one leaving fields out,
 * a plan that differs): the plan read first, then its write run to where its batch would be sent
 * (0162: the record it would answer, with every check it makes before).
 */
async function dryRunOfPlan(c: Ctx, resource: Resource, row: ChangeRow, opts: RevertOptions) {
  const ctx = readContext(c);
  const reads = new PlanReads(ctx, (queries) => readFolded(c, queries));
  const checked = await checkedPlan(reads, c.get("auth"), resource, row, opts);
  const { plan, conflicts } = checked;
  // the write's own checks first, then the object it leaves held to the constraints, as its batch
  const object = await plannedPreview(c, resource, row, plan);
  await dryRunInside(c, resource, row, checked);
  return answerOf(ctx, c.get("auth"), resource, row, plan, object, conflicts, null);
}

/** The object `plan`'s write would leave: its staged writer stopped before the batch. */
async function plannedPreview(c: Ctx, resource: Resource, row: ChangeRow, plan: Plan) {
  const staged = resource.staged;
  const shown =
    plan.action === "create" || (plan.action === "update" && !!Object.keys(plan.input).length);
  if (!shown) return null;
  if (!staged || !writerOf(staged, row)) return unstagedPreview(row, plan);
  const stamp = () => stampOf(plan);
  const stop = await inStagedWrite(c, (w) =>
    stagedWrite(stoppedAtBatch(w), staged, resource, row, plan.action, plan.input, stamp),
  ).then(
    () => null,
    (e) => (e instanceof DryRunStop ? e : Promise.reject(e)),
  );
  if (!stop) throw new Error("revert dry run: the write sent its batch");
  return previewOf(stop, row, plan);
}

/** The plan read found what the change record's fields alone did not foresee: plan first. */
const REPLAN = Symbol("replan");
class Replan extends Error {}
/**
 * The plan or its read refused the revert (a conflict, a stale cache): the refusal, carried past
 * the writer's own handling of errors (which would take it for its own).
 */
class PlanRefused extends Error {
  constructor(readonly refusal: unknown) {
    super("revert refused by its plan");
  }
}
/**
 * A dry run's write, stopped where its batch would be sent: nothing is written. It carries the
 * write's scratch, where the change records it staged show what it would answer (0162).
 */
class DryRunStop extends Error {
  constructor(readonly scratch: Slots) {
    super("dry run: stopped before the batch");
  }
}

/** `w` watched (`watchStaged`), its batch never sent: a dry run's write. */
function stoppedAtBatch(w: WriteContext): WriteContext {
  watchStaged(w.scratch);
  return { ...w, writeBatch: () => Promise.reject(new DryRunStop(w.scratch)) };
}

/**
 * What the dry run's stopped write would answer as the object (decision 0162): the record it
 * staged for the change record, its fields, what they derive and its stamps as that write would
 * set them; null for a delete, or an update with nothing to write (the revert answers null too).
 */
function previewOf(stop: DryRunStop, row: ChangeRow, plan: Plan): ApiRecord | null {
  if (plan.action === "delete" || (plan.action === "update" && !Object.keys(plan.input).length))
    return null;
  const record = stagedRecord(
    stop.scratch,
    row.changedObjectTypeId,
    row.changedObjectId,
    plan.action,
  );
  if (!record) throw new Error("revert dry run: the write staged no record of the object");
  return record;
}

/**
 * What the change record says the write is, before anything is read: an update's changed fields
 * to their values before; a delete's whole record (its own fields) back; a create's nothing.
 * Null when there is nothing to write.
 */
function inputOf(resource: Resource, row: ChangeRow): ApiRecord | null {
  const pre = snapshot(row.prechangeData) ?? {};
  if (row.action === "create") return {};
  if (row.action === "update") {
    const fields = changedFields(row).filter((f) => f in pre);
    return fields.length ? Object.fromEntries(fields.map((f) => [f, pre[f]])) : null;
  }
  const own = ownFields(resource);
  const fields = Object.keys(pre).filter((f) => !META.has(f) && (!own || own.has(f)));
  return Object.fromEntries(fields.map((f) => [f, pre[f]]));
}

/** Field kinds whose record value a write takes back as it is, and whose value types it has. */
const PLAIN: Record<string, (v: unknown) => boolean> = {
  string: (v) => typeof v === "string",
  integer: (v) => typeof v === "number" && Number.isInteger(v),
  boolean: (v) => typeof v === "boolean",
  date: (v) => typeof v === "string",
};

/** Whether `field` is a plain field of the model now, its two snapshots' values of its kind. */
function plainField(resource: Resource, field: string, pre: ApiRecord, post: ApiRecord): boolean {
  const kind = resource.describe?.find((d) => d.name === field)?.kind;
  const fits = kind ? PLAIN[kind] : undefined;
  if (!fits || field === "tags" || resource.relations?.some((r) => r.name === field)) return false;
  return [pre[field], post[field]].every((v) => v === null || fits(v));
}

/**
 * Whether the record's two snapshots have the model's fields as it is now, in the same order:
 * no field added, removed or renamed since (the write built from them alone would differ).
 */
function sameShape(resource: Resource, pre: ApiRecord, post: ApiRecord): boolean {
  const keys = Object.keys(post);
  const own = ownFields(resource);
  if (!own || keys.join("\u0000") !== Object.keys(pre).join("\u0000")) return false;
  return (
    keys.every((k) => META.has(k) || own.has(k)) &&
    resource.describe!.every((d) => Object.hasOwn(post, d.name))
  );
}

/**
 * A revert with no read after the record's (decision 0139): the change record says what the
 * object is now (an update's post-change state; a delete's nothing, the object as it was before),
 * and the write is built from it alone; the batch proves it (the row's stamp as the record has it
 * or its id free, the objects it shows nested without later records, the type's shape and, where
 * the record stands for the object, no change of its type since (0160), the caller's
 * constraints). Null where the record alone does not settle the write (a field not plain, a link
 * field, a shape changed since, a post-change state older than its type's last change:
 * `typeChanged`) or where the batch refused it: nothing was written, and the revert runs the
 * ordinary way, whose reads answer why (409, 403, 404 as before).
 */
function revertReadFree(
  c: Ctx,
  resource: Resource,
  row: ChangeRow,
  input: ApiRecord,
  typeChanged: boolean,
): Promise<ApiRecord | null> | null {
  if (row.action === "delete") return restoreFree(c, resource, row, input);
  if (typeChanged) return null;
  if (row.action === "update") return updateFree(c, resource, row, input);
  return removeFree(c, resource, row);
}

/** A create put back: the object deleted, as the record's post-change state shows it. */
async function removeFree(c: Ctx, resource: Resource, row: ChangeRow) {
  const assumed = resource.staged?.deleteAssumed;
  const post = snapshot(row.postchangeData);
  const stamp = post?.last_updated;
  if (!assumed || !post || typeof stamp !== "string" || !sameShape(resource, post, post))
    return null;
  const plan: Plan = { action: "delete", input: {}, current: post, conflicts: [] };
  const item = { id: row.changedObjectId, stamp, before: post };
  return writtenFree(c, resource, row, { shown: post, asRecorded: true }, plan, (w) =>
    assumed(w, item, { resource, bulk: false }),
  );
}

/**
 * An update's revert as the record alone settles it (decision 0139): the post-change state with
 * the fields (and the display, `_context`) as before, for `updateAssumed`; null where it does not
 * (a field not plain, a shape changed since).
 */
function assumedUpdate(resource: Resource, row: ChangeRow, input: ApiRecord) {
  const pre = snapshot(row.prechangeData);
  const post = snapshot(row.postchangeData);
  if (!pre || !post) return null;
  const stamp = post.last_updated;
  if (typeof stamp !== "string" || !sameShape(resource, pre, post)) return null;
  if (!Object.keys(input).every((f) => plainField(resource, f, pre, post))) return null;
  const after = (next: string) =>
    Object.fromEntries(
      Object.keys(post).map((k) => [
        k,
        k === "last_updated" ? next : Object.hasOwn(input, k) || DERIVED.has(k) ? pre[k] : post[k],
      ]),
    );
  return { id: row.changedObjectId, input, stamp, before: post, after };
}

/** An update put back: the post-change state with the fields (and what they derive) as before. */
async function updateFree(c: Ctx, resource: Resource, row: ChangeRow, input: ApiRecord) {
  const assumed = resource.staged?.updateAssumed;
  const item = assumedUpdate(resource, row, input);
  if (!assumed || !item) return null;
  const plan: Plan = { action: "update", input, current: item.before, conflicts: [] };
  return writtenFree(c, resource, row, { shown: item.before, asRecorded: true }, plan, (w) =>
    assumed(w, item, { resource, bulk: false }),
  );
}

/**
 * A dry run of an update's revert answered from the record's one read (decision 0154). That read
 * found no later change record of the object (every write that moves a row's stamp leaves one in
 * its own batch), none of the objects its post-change state nests, and its type's cached model
 * current: the object is that state. The write built from it (`updateAssumed`) runs to where its
 * batch would be sent, with every check it makes before. Null where the record does not settle
 * it, the caller's view or change is constrained (the batch would judge the row), or anything
 * refuses: the ordinary dry run then answers, its reads saying why (403, 404, 409 as before).
 */
async function dryRunOfRecord(c: Ctx, row: ChangeRow, proven: RecordProven) {
  if (row.action !== "update") return null;
  try {
    const target = await provenTarget(c, row, proven);
    const resource = target?.resource;
    const assumed = resource?.staged?.updateAssumed;
    const input = resource ? inputOf(resource, row) : null;
    const item = resource && input ? assumedUpdate(resource, row, input) : null;
    if (!target || !resource || !assumed || !input || !item) return null;
    const ctx = readContext(c);
    await requirePermission(c, "change", resource);
    for (const action of ["view", "change"] as const)
      if (await restrictWhere(ctx, c.get("auth"), action, resource)) return null;
    if (!(await shownAsRecorded(c, target, item.before, proven.later))) return null;
    const stop = await inStagedWrite(c, (w) =>
      assumed(stoppedAtBatch(w), item, { resource, bulk: false }),
    ).then(
      () => null,
      (e) => (e instanceof DryRunStop ? e : Promise.reject(e)),
    );
    if (!stop) return null;
    const plan: Plan = { action: "update", input, current: item.before, conflicts: [] };
    const object = previewOf(stop, row, plan);
    return await answerOf(ctx, c.get("auth"), resource, row, plan, object, [], null);
  } catch {
    return null; // the ordinary path answers it, in its own order
  }
}

/**
 * The record's model: a cached one the record's read proved current and unchanged since the
 * record (`typeProven`), or a host model; null otherwise.
 */
async function provenTarget(c: Ctx, row: ChangeRow, proven: RecordProven) {
  const cached = await proven.model(row.changedObjectTypeId);
  const info = cached?.info ?? staticModel(c, row.changedObjectTypeId);
  if (!info?.resource || NOT_REVERTABLE.has(`${info.appLabel}.${info.model}`)) return null;
  return { resource: info.resource, typeProven: !!cached };
}

/** The host model of object type `typeId`, where this process knows the type (no read). */
const staticModel = (c: Ctx, typeId: number | undefined) =>
  c
    .get("services")
    .models.staticModels()
    .find((m) => c.get("services").objectTypes.cached(m.appLabel, m.model)?.id === typeId);

/**
 * Whether every key `post` shows is what a load shows now, no change record of the object having
 * come since (decision 0154): null; a plain value of the field's kind (a field retyped since shows
 * another); objects of a host model or tags nested, none with a later change record (`later`, the
 * record's read); what a record shows beyond its fields (its type, a derived `_context`) only
 * where the type was proven unchanged since (`typeProven`). A relation to a custom object type
 * is not judged (its nested form follows that type's shape).
 */
async function shownAsRecorded(
  c: Ctx,
  { resource, typeProven }: { resource: Resource; typeProven: boolean },
  post: ApiRecord,
  later: ObjectRef[] | null,
): Promise<boolean> {
  if (!later) return false;
  const changed = new Set(later.map((l) => `${l.type}:${l.id}`));
  for (const [key, value] of Object.entries(post)) {
    if (value === null || value === undefined) continue;
    if (META.has(key)) {
      // a record's type and `_context` follow its type; `custom_fields` is always `{}` (0200)
      if (typeof value === "object" && !typeProven && key !== "custom_fields") return false;
      continue;
    }
    const rel = resource.relations?.find((r) => r.name === key);
    const isTags = key === "tags" && resource.tagged;
    if (!rel && !isTags) {
      if (!plainField(resource, key, post, post)) return false;
      continue;
    }
    if (rel?.polymorphic) return false;
    const types = c.get("services").objectTypes;
    const label = isTags ? "extras.tag" : rel!.target;
    const typeId = label
      ? types.cached(...(label.split(".") as [string, string]))?.id
      : rel!.targetTypeId;
    const items = [value].flat();
    if (!staticModel(c, typeId) || !items.every(isNested)) return false;
    if (items.some((v) => changed.has(`${typeId}:${(v as Nested).id}`))) return false;
  }
  return true;
}

/** A delete put back under its id: the object as before, its nested objects as recorded. */
async function restoreFree(c: Ctx, resource: Resource, row: ChangeRow, input: ApiRecord) {
  const assumed = resource.staged?.createAssumed;
  const pre = snapshot(row.prechangeData);
  if (!assumed || !pre || !sameShape(resource, pre, pre)) return null;
  const plan: Plan = { action: "create", input, current: null, conflicts: [] };
  const item = { id: row.changedObjectId, input };
  // built on the type as cached now (proven by its shape guard): no snapshot stands for the object
  return writtenFree(c, resource, row, { shown: pre, asRecorded: false }, plan, (w) =>
    assumed(w, item, { resource, bulk: false, ...recordedCreated(row) }),
  );
}

/**
 * Runs a write built from the record, its batch led by the guard that the objects `shown` nests
 * are as recorded, and (`asRecorded`: the write takes `shown` for the object, its type's name and
 * what its fields derive) that the object's type has no change record since; the revert's answer,
 * or null (a refusal marks the request: `readFreeRefused`).
 */
async function writtenFree(
  c: Ctx,
  resource: Resource,
  row: ChangeRow,
  { shown, asRecorded }: { shown: ApiRecord; asRecorded: boolean },
  plan: Plan,
  write: (w: WriteContext) => Promise<StagedWritten | "deleted" | "refused" | null>,
): Promise<ApiRecord | null> {
  const nested = await nestedUnchanged(c, resource, row, shown);
  if (!nested) return null;
  const typeGuard = asRecorded ? typeUnchanged(c, resource, row) : null;
  const guards = typeGuard ? [nested.guard, typeGuard] : [nested.guard];
  const written = await withChangeRead(c, resource, row, (w) =>
    write(guardedFirst(w, guards)),
  ).catch((e) => {
    if (isStaleCredentials(e)) readFreeRefused.add(c);
    throw e;
  });
  if (written.result === "refused") readFreeRefused.add(c);
  if (!written.result || written.result === "refused") return null;
  const ctx = withWriteJudgement(c, readContext(c));
  const record = written.result === "deleted" ? null : written.result.record;
  return answerOf(ctx, c.get("auth"), resource, row, plan, record, [], written.change);
}

/** Whether `v` holds a nested object (an object with an id), at any depth. */
const holdsNested = (v: unknown): boolean =>
  isNested(v) ||
  (!!v && typeof v === "object" && Object.values(v as Record<string, unknown>).some(holdsNested));

/**
 * The guard that the objects the record's post-change state shows nested (its relations' targets,
 * its tags) are as recorded: no change record of theirs after the reverted one, so their nested
 * forms in the new record and the answer are the recorded ones (a rename, a delete leaves one).
 * Null where one of them cannot be named by its type (a polymorphic target, a nested object
 * outside the model's relations).
 */
async function nestedUnchanged(c: Ctx, resource: Resource, row: ChangeRow, post: ApiRecord) {
  const types = c.get("services").objectTypes;
  const typeOf = async (label: string) => {
    const [app, model] = label.split(".") as [string, string];
    return (await types.byLabel(app, model))?.id; // kept by the process: a read only when cold
  };
  const targets: SQL[] = [];
  const named = new Set<string>();
  const name = async (key: string, typeOfThem: () => Promise<number | undefined>) => {
    const items = [post[key]].flat().filter((v) => v !== null && v !== undefined);
    if (!items.every(isNested)) return false;
    named.add(key);
    if (!items.length) return true;
    const typeId = await typeOfThem();
    if (typeId === undefined) return false;
    const ids = items.map((v) => sql`${(v as Nested).id}`);
    targets.push(
      sql`(${objectChanges.changedObjectTypeId} = ${typeId} AND ${objectChanges.changedObjectId} IN (${sql.join(ids, sql`, `)}))`,
    );
    return true;
  };
  for (const r of resource.relations ?? []) {
    const target = r.target;
    const typeId = async () => r.targetTypeId ?? (target ? typeOf(target) : undefined);
    if (r.polymorphic || !(await name(r.name, typeId))) return null;
  }
  if (resource.tagged && !(await name("tags", () => typeOf("extras.tag")))) return null;
  if (Object.keys(post).some((k) => !named.has(k) && !META.has(k) && holdsNested(post[k])))
    return null;
  const later = targets.length
    ? sql`EXISTS (SELECT 1 FROM ${objectChanges} WHERE ${objectChanges.id} > ${row.id} AND (${sql.join(targets, sql` OR `)}))`
    : sql`0`;
  // wrapped: a statement is a thenable, which an async function's return would run
  return {
    guard: c.get("services").db.orm.run(sql`INSERT INTO write_guard (ok) SELECT NOT ${later}`),
  };
}

/**
 * The guard that the run-time type of the record's object (a custom object type) has no change
 * record after it (decision 0160): a rename, a primary flag or a context field moved since shows
 * in the type's name, the display and `_context` the record holds. Null for a host model, whose
 * records show nothing of a type that changes at run time.
 */
function typeUnchanged(c: Ctx, resource: Resource, row: ChangeRow): BatchItem<"sqlite"> | null {
  const models = c.get("services").models;
  if (models.staticModels().some((m) => m.resource === resource)) return null;
  const changed = models.typeChangedSince(sql`${row.changedObjectTypeId}`, row.id);
  return changed
    ? c.get("services").db.orm.run(sql`INSERT INTO write_guard (ok) SELECT NOT ${changed}`)
    : null;
}

/** `w` with `guards` leading its batch. */
function guardedFirst(w: WriteContext, guards: BatchItem<"sqlite">[]): WriteContext {
  return {
    ...w,
    writeBatch: async (items, explain) =>
      (await w.writeBatch!([...guards, ...items], explain)).slice(guards.length),
  };
}

/** The same fields with the same values (as compared: nested objects by type and id). */
const sameInput = (a: ApiRecord, b: ApiRecord) =>
  Object.keys(a).length === Object.keys(b).length &&
  Object.keys(a).every((k) => Object.hasOwn(b, k) && same(a[k], b[k]));

/**
 * The revert as one staged write of `input` whose read phase carries the plan's reads (decision
 * 0118): the plan is checked on what that one read saw, before the batch (a conflict: 409, a
 * plan that writes something else: `REPLAN`, nothing sent either way). The object's stamp as read
 * is the write's precondition, and the batch's guards (the primary key, unique keys, row stamps)
 * catch what changes between the read and the batch. A dry run stops where its batch would be
 * sent, after every check the write makes before it.
 */
async function revertInOneRead(
  c: Ctx,
  staged: NonNullable<Resource["staged"]>,
  resource: Resource,
  row: ChangeRow,
  opts: RevertOptions,
  input: ApiRecord,
): Promise<ApiRecord | null | typeof REPLAN> {
  const ctx = readContext(c);
  const { reads, ride, handedOver } = ridingReads(ctx);
  const proof = opts.proof?.proven === false ? opts.proof : null;
  const proofRows = proof ? reads.add(proof.query) : null;
  const proofViewable = proof ? await changeViewable(c, proof.row.id, (q) => reads.add(q)) : null;
  // the plan's refusal passes the writer's own error handling unread
  const planned = checkedPlan(reads, c.get("auth"), resource, row, opts).catch((e) =>
    Promise.reject(new PlanRefused(e)),
  );
  planned.catch(() => undefined); // awaited in `withPlan`; a write that fails first leaves it
  let checked: Awaited<ReturnType<typeof checkedPlan>> | null = null;
  let read = false;
  const withPlan = async (theirs: unknown[], readThem: (all: unknown[]) => Promise<unknown[]>) => {
    if (read) return readThem(theirs);
    read = true;
    const noRead = planned.then(() => Promise.reject(new Error("revert plan made no read")));
    await Promise.race([handedOver, noRead]);
    // what the shared read refuses (a guard's cache stale) passes the writer's handling unread
    const rows = await ride(theirs, readThem).catch((e) => Promise.reject(new PlanRefused(e)));
    if (proof)
      await proven(ctx, proof, proofRows!()[0], proofViewable!).catch((e) =>
        Promise.reject(new PlanRefused(e)),
      );
    const made = await planned;
    checked = made;
    if (!sameInput(made.plan.input, input)) throw new Replan();
    return rows;
  };
  const action = { update: "update", delete: "create", create: "delete" } as const;
  const stamp = () => (checked ? stampOf(checked.plan) : null);
  try {
    const written = await withChangeRead(c, resource, row, (w) =>
      stagedWrite(
        ridingWrite(w, withPlan, opts.dryRun),
        staged,
        resource,
        row,
        action[row.action as keyof typeof action],
        input,
        stamp,
      ),
    );
    if (written.result === "transaction") return opts.dryRun ? REPLAN : null;
    const { plan, conflicts } = checked!;
    return answerOf(
      withWriteJudgement(c, ctx),
      c.get("auth"),
      resource,
      row,
      plan,
      written.result?.record ?? null,
      conflicts,
      written.change,
    );
  } catch (e) {
    // refused before its read (an input the cached model does not know): the plan says why
    if (e instanceof PlanRefused) throw e.refusal;
    if (e instanceof Replan || !read) return REPLAN;
    if (!(e instanceof DryRunStop)) throw e;
    const { plan, conflicts } = checked!;
    await dryRunInside(c, resource, row, checked!);
    const object = previewOf(e, row, plan);
    return answerOf(ctx, c.get("auth"), resource, row, plan, object, conflicts, null);
  }
}

/**
 * `w` with the plan riding in its first read phase (`withPlan`), made before the batch where the
 * writer reads nothing; a dry run stops where the batch would be sent.
 */
function ridingWrite(
  w: WriteContext,
  withPlan: (theirs: unknown[], read: (all: unknown[]) => Promise<unknown[]>) => Promise<unknown[]>,
  dryRun: boolean,
): WriteContext {
  const readAll = (all: unknown[]) => w.readPhase!(all);
  let read = false;
  if (dryRun) watchStaged(w.scratch);
  return {
    ...w,
    readPhase: (queries) => {
      read = true;
      return withPlan([...queries], readAll);
    },
    writeBatch: async (items, explain) => {
      if (!read) await withPlan([], readAll);
      if (dryRun) throw new DryRunStop(w.scratch);
      return w.writeBatch!(items, explain);
    },
  };
}

/** The object's `last_updated` as the plan read it. */
const stampOf = (plan: Plan) => (plan.current?.last_updated as string | null | undefined) ?? null;

/** The revert's write as the model's staged writer makes it, the object's stamp its precondition. */
async function stagedWrite(
  w: WriteContext,
  staged: NonNullable<Resource["staged"]>,
  resource: Resource,
  row: ChangeRow,
  action: Plan["action"],
  input: ApiRecord,
  stamp: () => string | null,
): Promise<StagedWritten | "transaction" | undefined> {
  const id = row.changedObjectId;
  const precondition = (now: string | null) => {
    if (now !== stamp())
      throw conflictError([
        { reason: "later_change", field: null, detail: "The object changed during the revert." },
      ]);
  };
  const options = { resource, bulk: false, precondition };
  try {
    if (action === "update") return (await staged.update!(w, [{ id, input }], true, options))[0];
    if (action === "create") {
      const restore = { resource, bulk: false, ids: [id] as [number], ...recordedCreated(row) };
      return (await restoreStaged(w, staged, input, restore))[0];
    }
    return (await staged.delete(w, [id], options)) === "transaction" ? "transaction" : undefined;
  } catch (e) {
    // the stamp moved between the read and the batch: the caller sent no If-Match, so no 412
    if (!(e instanceof ApiError) || e.statusCode !== 412) throw e;
    throw conflictError([
      { reason: "later_change", field: null, detail: "The object changed during the revert." },
    ]);
  }
}

/**
 * A dry run's object where the model's writes are not staged (no revertable model today): the
 * fields put back over the object (or its snapshot), what they derive left as it was.
 */
function unstagedPreview(row: ChangeRow, plan: Plan): ApiRecord | null {
  if (plan.action === "delete") return null;
  if (plan.action === "update")
    return Object.keys(plan.input).length ? { ...plan.current, ...plan.input } : null;
  const { _context: _drop, ...pre } = snapshot(row.prechangeData) ?? {};
  return { ...pre, ...plan.input, id: row.changedObjectId };
}

/** The change record a request wrote for the object since `row`. */
const writtenChange = (db: ReadContext["db"], row: ChangeRow, requestId: string) =>
  db
    .select({ id: objectChanges.id })
    .from(objectChanges)
    .where(
      and(
        eq(objectChanges.changedObjectTypeId, row.changedObjectTypeId),
        eq(objectChanges.changedObjectId, row.changedObjectId),
        gt(objectChanges.id, row.id),
        eq(objectChanges.requestId, requestId),
      ),
    )
    .orderBy(desc(objectChanges.id))
    .limit(1);

/**
 * A staged write with the read of the change record it writes riding at the end of its one
 * batch (no round trip after the commit), and what the answer's hiding asks about the object
 * (decision 0167); `change` is null when no batch ran.
 */
async function withChangeRead<T>(
  c: Ctx,
  resource: Resource,
  row: ChangeRow,
  write: (w: WriteContext) => Promise<T>,
): Promise<{ result: T; change: number | null }> {
  let change: number | null = null;
  const result = await inStagedWrite(
    c,
    (w) =>
      write({
        ...w,
        writeBatch: async (items, explain) => {
          const batch = [...items, writtenChange(w.db, row, w.requestId)];
          const results = await w.writeBatch!(batch, explain);
          const rows = results.pop() as Array<{ id: number }>;
          change = rows[0]?.id ?? null;
          return results;
        },
      }),
    answering(resource, [row.changedObjectId]),
  );
  return { result, change };
}

/**
 * A deleted object put back as a staged create under its old id (decision 0113). The id taken
 * again between the plan's read and the batch fails the batch's insert: 409 `object_exists`.
 */
async function restoreStaged(
  w: WriteContext,
  staged: NonNullable<Resource["staged"]>,
  input: ApiRecord,
  options: StagedOptions & { ids: [number] },
) {
  try {
    return await staged.create!(w, [input], options);
  } catch (e) {
    if (!idTaken(e, options.resource)) throw e;
    throw conflictError([
      {
        reason: "object_exists",
        field: null,
        detail: `An object with id ${options.ids[0]} exists again.`,
      },
    ]);
  }
}

/** The batch refused the old id: another object took it (SQLite's primary key is unique). */
const idTaken = (e: unknown, resource: Resource) =>
  e instanceof ValidationError &&
  !Array.isArray(e.fields) &&
  Object.keys(e.fields).length === 1 &&
  Object.hasOwn(e.fields, resource.fieldForColumn?.("id") ?? "id");

async function answerOf(
  ctx: ReadContext,
  auth: WriteContext["auth"],
  resource: Resource,
  row: ChangeRow,
  plan: Plan,
  record: ApiRecord | null,
  skipped: Conflict[],
  change: number | null,
): Promise<ApiRecord> {
  // Related objects the caller may not view are hidden in every record shown, as in the
  // model's own answers and the change log's snapshots (0064).
  const [from, to, object] = await hideUnviewable(ctx, auth, resource, [
    Object.fromEntries(Object.keys(plan.input).map((f) => [f, plan.current?.[f] ?? null])),
    plan.input,
    record ?? {},
  ]);
  // `to` as written: the object's own form, as the new record's postchange data holds it; the
  // input's links are brief forms as the old record kept them, their targets maybe renamed (0173)
  const shown = record ? object! : to!;
  const changes: Record<string, { from: unknown; to: unknown }> = {};
  for (const field of Object.keys(plan.input))
    changes[field] = {
      from: from![field] ?? null,
      to: (Object.hasOwn(shown, field) ? shown[field] : to![field]) ?? null,
    };
  return {
    reverted_change: row.id,
    action: plan.action,
    object_id: row.changedObjectId,
    changes,
    skipped,
    change,
    object: record ? object : null,
  };
}

/** A write's field errors as conflicts on those fields (a forced revert leaves them out). */
function refusedFields(e: ValidationError): Conflict[] {
  if (Array.isArray(e.fields)) return [];
  return Object.entries(e.fields).map(([field, messages]) => {
    const text = (messages as string[]).join(" ");
    return {
      reason: /already exists|unique set/i.test(text) ? "unique" : "invalid",
      field: field === "non_field_errors" ? null : field,
      detail: `${field === "non_field_errors" ? "" : `"${field}": `}${text}`,
    } satisfies Conflict;
  });
}

async function revert(
  c: Ctx,
  row: ChangeRow,
  resource: Resource,
  flags: Flags,
  proof: ChangeProof | null,
  since: SeenSince | null,
) {
  const { force, dryRun } = flags;
  const seen = asSeen(c, resource, row);
  row = seen.row;
  const dropped: Conflict[] = [...seen.unseen];
  for (let round = 0; ; round++) {
    try {
      const opts = { force, dryRun, dropped, proof, since };
      const staged = await revertStaged(c, resource, row, opts);
      if (staged) return staged;
      requireProven(opts);
      return await revertInTransaction(c, resource, row, opts);
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      const refused = refusedFields(e);
      // Nothing was written: the write's refusal is what stands in the way. Forced, the fields
      // it names are left out and the rest tried again; a refusal of the whole object is final.
      if (!force || round >= FORCE_ROUNDS || !refused.length || refused.some((r) => !r.field))
        throw conflictError([...dropped, ...(refused.length ? refused : [])]);
      dropped.push(...refused);
    }
  }
}

/**
 * The record as its reverter may put it back (decision 0187): the object types its snapshot names
 * that they may not see are left out. An update's revert then keeps those the object holds now (a
 * write keeps what its writer does not see); a delete's cannot put them back (the reverter may
 * not name them): a conflict on the field that names none of them (forced, the field is left out).
 */
function asSeen(
  c: Ctx,
  resource: Resource,
  row: ChangeRow,
): { row: ChangeRow; unseen: Conflict[] } {
  const pre = snapshot(row.prechangeData);
  if (!pre) return { row, unseen: [] };
  const [shown] = withholdTypes(typeSight(c.get("services"), c.get("auth")), resource, [pre]);
  if (shown === pre) return { row, unseen: [] };
  const fields = (resource.typeFields ?? []).filter((f) => shown![f] !== pre[f]);
  const unseen: Conflict[] =
    row.action === "delete"
      ? fields.map((field) => ({
          reason: "invalid",
          field,
          detail: `"${field}": names object types you may not see, which you cannot put back.`,
        }))
      : [];
  return { row: { ...row, prechangeData: shown }, unseen };
}

const flagParam = (name: string, description: string) => ({
  name,
  in: "query",
  required: false,
  description,
  schema: { type: "boolean", default: false },
});

const revertDoc = describeRoute({
  tags: ["core"],
  operationId: "core_object_changes_revert",
  summary: "Put the object back as it was before this change (a new write with its own record)",
  parameters: [
    flagParam("dry_run", "Answer what would change; write nothing."),
    flagParam("force", "Revert the fields that can be; the answer's `skipped` names the rest."),
  ],
  responses: {
    "200": {
      description: "What was (or, with dry_run, would be) written.",
      content: { "application/json": { schema: { type: "object" } } },
    },
    "400": { $ref: "#/components/responses/BadRequest" },
    "403": { $ref: "#/components/responses/Forbidden" },
    "404": { $ref: "#/components/responses/NotFound" },
    "409": { $ref: "#/components/responses/Conflict" },
  },
});

type Flags = { force: boolean; dryRun: boolean };

/** The revert of `row` once the caller may view it: its model, the write's permission, the write. */
async function revertRow(
  c: Ctx,
  row: ChangeRow,
  flags: Flags,
  proof: ChangeProof | null,
  since: SeenSince | null = null,
) {
  const resource = await targetOf(c, readContext(c), row);
  const action = row.action === "update" ? "update" : row.action === "delete" ? "create" : "delete";
  await requirePermission(c, WRITE_PERMISSION[action], resource);
  const outcome = await revert(c, row, resource, flags, proof, since);
  return { dry_run: flags.dryRun, ...outcome };
}

/**
 * The remembered record proven by the revert's one read (decision 0118): the row read now is the
 * one remembered, and the caller may view it (404 otherwise, as `visibleChange` answers), as
 * that read asked (`viewable`).
 */
async function proven(
  ctx: ReadContext,
  proof: ChangeProof,
  now: ChangeRow | undefined,
  viewable: () => void,
) {
  if (!sameChange(now, proof.row)) {
    forgetChange(ctx.services, proof.row.id);
    throw new Unproven();
  }
  proof.proven = true;
  viewable();
}

/**
 * Whether the caller may view change record `id` (decision 0064; 404 otherwise), asked as
 * statements of the read `add` rides in. Its view names the objects of each type the caller
 * views within constraints: a custom object type's model from its plugin's cache, the guard
 * proving it current riding in that read as well (decision 0118), so nothing is read before.
 */
function changeViewable(c: Ctx, id: number, add: (query: AdmittedQuery) => () => unknown) {
  const ctx: ReadContext = { ...readContext(c), guard: (g) => addGuard(c, g) };
  const missing = "No object change with this id.";
  return objectRequirement(
    ctx,
    c.get("auth"),
    "view",
    objectChangeModel.resource,
    id,
    add,
    missing,
  );
}

/**
 * A revert of a record this app read lately (`seen.ts`): its model is known before any read, so
 * the record's own read rides in the write's one read as its proof — one read and one batch in
 * all. Null when not remembered, or when it stopped before the proof (a refusal then is answered
 * the ordinary way, in the ordinary order: 404 before 403, 400 or 409).
 */
async function revertSeen(c: Ctx, id: number) {
  const row = seenChange(c.get("services"), id);
  const dryRun = parseBool(c.req.query("dry_run") ?? "false");
  const force = parseBool(c.req.query("force") ?? "false");
  if (!row || dryRun === null || force === null) return null;
  const proof: ChangeProof = { query: changeRead(readContext(c), id), row, proven: false };
  try {
    await requirePermission(c, "view", objectChangeModel.resource);
    return await revertRow(c, row, { dryRun, force }, proof);
  } catch (e) {
    if (proof.proven || isStaleCredentials(e)) throw e;
    return null;
  }
}

export function mountRevertRoute(api: Hono<HonoEnv>) {
  api.post(
    "/core/object-changes/:id/revert",
    revertDoc,
    foldsCredentials(async (c: Ctx) => {
      try {
        return await revertRoute(c);
      } catch (e) {
        // the write built from the record was refused and its guards' settling asked for this
        // run again (the run `foldsCredentials` grants): a cache the ordinary path then finds
        // stale (a related object's form) is given the run it would have had
        if (!isStaleCredentials(e) || !readFreeRefused.has(c) || rerun.has(c)) throw e;
        rerun.add(c);
        return revertRoute(c);
      }
    }),
  );
}

/** Requests run again after their read-free write was refused (once). */
const rerun = new WeakSet<Ctx>();

/** The revert route's one run. */
async function revertRoute(c: Ctx) {
  const raw = c.req.param("id") ?? "";
  if (!/^\d{1,15}$/.test(raw)) throw notFound("No object change with this id.");
  const seen = await revertSeen(c, Number(raw));
  if (seen) return c.json(seen);
  // a dry run's proof of the record rides in the record's read (decision 0154)
  const asked = parseBool(c.req.query("dry_run") ?? "false");
  const proof = asked ? recordProof(readContext(c), Number(raw)) : null;
  const { row, since, proven } = await visibleChange(c, Number(raw), proof);
  const flag = (name: string) => {
    const value = parseBool(c.req.query(name) ?? "false");
    if (value === null) throw new ValidationError({ [name]: ["Enter true or false."] });
    return value;
  };
  const dryRun = flag("dry_run");
  const force = flag("force");
  const fromRecord =
    proven && since.latest === row.id ? await dryRunOfRecord(c, row, proven) : null;
  if (fromRecord) return c.json({ dry_run: true, ...fromRecord });
  return c.json(await revertRow(c, row, { dryRun, force }, null, since));
}
