/**
 * What the staged type and field writers share (decision 0108): ids read ahead, the reads of a
 * type, its guarded new shape, change records, retries of a lost race, and the transaction path
 * for what they do not stage.
 */
import { objectNotFound } from "../../../core/rest/bulk-found";
import { and, eq, or, sql, type SQL } from "drizzle-orm";
import type { Orm, Queries } from "../../../db/client";
import { guardChanged, isWriteConflict } from "../../../db/client";
import {
  customObjectTypeFields,
  customObjectTypes,
  objectTypes,
  taggedItems,
} from "../../../db/schema";
import { ApiError, forbidden, notFound, ValidationError } from "../../../core/errors";
import { restrictWhere } from "../../../core/auth/restrict";
import { stageChanges, type StagedChange } from "../../../core/changes/record";
import { stageRules, type StagedRules } from "../../../core/events/dispatch";
import { mapConstraintError } from "../../../core/rest/constraints";
import { outsideConstraints } from "../../../core/models/batch-failure";
import {
  eachItem,
  gatherItemErrors,
  updateChecked,
  writeTransaction,
} from "../../../core/rest/handlers";
import { nextStamp, ReadPhase, type WriteBatch } from "../../../core/rest/write-batch";
import type {
  ApiRecord,
  Resource,
  StagedHook,
  StagedOptions,
  StagedUpdate,
  StagedWritten,
  WriteContext,
} from "../../../core/context";
import { APP_LABEL } from "../constants";
import type { CotRow } from "../objects/models";
import type { FieldRow } from "../objects/values";
import { indexPartNames } from "../search/search-index";

/** Ids a batch takes that SQLite has not given yet: read first, a clash retried (`withRetry`). */
export function nextIdQuery(orm: Orm, table: string) {
  if (!/^[a-z_]+$/.test(table)) throw new Error(`nextIdQuery: ${table}`);
  // AUTOINCREMENT's next id: past the largest ever given (`sqlite_sequence`), not just the largest left
  return orm.all<{ next: number }>(
    sql`SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = ${table}), 0), coalesce((SELECT max(id) FROM ${sql.raw(`"${table}"`)}), 0)) + 1 AS next`,
  );
}

export const firstNext = (rows: Array<{ next: number }>) => Number(rows[0]?.next ?? 1);

/** The read of a type's search index schema (`readIndexSchema`), for a read phase. */
export function indexSchemaQuery(orm: Orm, cotId: number | SQL) {
  // a type named by SQL: each name is built in the statement (`co_<id>` and the part's suffix)
  const names =
    typeof cotId === "number"
      ? indexPartNames(cotId).map((n) => sql`${n}`)
      : indexPartNames(0).map((n) => sql`'co_' || ${cotId} || ${n.slice("co_0".length)}`);
  return orm.all<{ name: string; sql: string }>(
    sql`SELECT name, sql FROM sqlite_master WHERE name IN (${sql.join(names, sql`, `)})`,
  );
}

export const asSchema = (rows: Array<{ name: string; sql: string }>) =>
  new Map(rows.map((r) => [r.name, r.sql]));

/** A read phase with the event rules of the model written. */
export function phaseWithRules(ctx: WriteContext, model: string) {
  const phase = new ReadPhase();
  const rules = stageRules(ctx, phase, { appLabel: APP_LABEL, model });
  return { phase, rules };
}

/** Adds raw or built SQL statements to a batch. */
export function addStatements(batch: WriteBatch, orm: Orm, statements: Array<SQL | string>) {
  for (const s of statements) batch.add(orm.run(typeof s === "string" ? sql.raw(s) : s));
}

/** The change record of one write, with its outbox rows. */
export function stageChange(
  ctx: WriteContext,
  batch: WriteBatch,
  resource: Resource,
  rules: StagedRules,
  change: StagedChange,
) {
  return stageChangeList(ctx, batch, resource, rules, [change]);
}

/** The change records of a list's writes, in order (one statement, their outbox rows). */
export async function stageChangeList(
  ctx: WriteContext,
  batch: WriteBatch,
  resource: Resource,
  rules: StagedRules,
  changes: StagedChange[],
) {
  const objectTypeId =
    resource.objectTypeId ??
    (await ctx.services.objectTypes.ensure(resource.appLabel, resource.model)).id;
  return stageChanges(ctx, batch, resource, objectTypeId, rules, changes);
}

/**
 * A list's items planned in order (decision 0142): one object's errors as they are; a list's
 * field errors gathered per item (as `eachItem` answers them), anything else thrown at once.
 */
export async function perItem<I, T>(
  bulk: boolean,
  items: I[],
  step: (item: I, index: number) => Promise<T>,
): Promise<T[]> {
  if (!bulk && items.length === 1) return [await step(items[0]!, 0)];
  return gatherItemErrors(items, step);
}

/** A list naming one row twice: refused (a list writes each row once, decision 0142). */
export function refuseRepeat(seen: Set<number>, id: number) {
  if (seen.has(id))
    throw new ValidationError({ id: [`Object ${id} is named more than once in this list.`] });
  seen.add(id);
}

/** A failed batch as its answer (a guard: 409; a unique index: 400 on its field). */
export function batchError(e: unknown, resource: Resource): unknown {
  return mapConstraintError(e, resource) ?? e;
}

/**
 * A batch refused by the one-field-per-reverse-name index (decision 0156): another write took a
 * reverse relation name on the same related type after this one's read checked it was free.
 * `withRetry` runs the write again; its read check then answers the 400 naming the holder.
 */
export function reverseNameTaken(e: unknown): boolean {
  return /UNIQUE constraint failed: custom_object_type_fields\.related_object_type_id, custom_object_type_fields\.related_name\b/.test(
    messages(e),
  );
}

/** A lost race for an id read in advance: another write took it first. */
export function idTaken(e: unknown): boolean {
  const text = messages(e);
  return (
    /UNIQUE constraint failed: (custom_object_types|custom_object_type_fields|object_types|custom_object_trash)\.id\b/.test(
      text,
    ) || /table "?co_\d+(_f\d+_links)?"? already exists/.test(text)
  );
}

export function messages(e: unknown): string {
  let text = "";
  for (
    let err = e as { message?: unknown; cause?: unknown } | undefined, depth = 0;
    err && depth < 4;
    err = err.cause as typeof err, depth++
  )
    text += ` ${String(err.message ?? "")}`;
  return text;
}

/** What a staged create or apply runs again for: an id, a type or a reverse name lost meanwhile. */
const lostRace = (e: unknown) => idTaken(e) || isWriteConflict(e) || reverseNameTaken(e);

/**
 * Runs a staged create again (read, checks and batch) when an id it read in advance was taken
 * meanwhile, its type changed since its read (another field added), or a reverse name it checked
 * was taken (decision 0156): nothing was written, and the next attempt checks against what won.
 * `again` narrows what is run again (an update: a reverse name only; its lost stamp is a 409).
 * After five (four others won meanwhile), 409.
 */
export async function withRetry<T>(
  ctx: WriteContext,
  work: (ctx: WriteContext) => Promise<T>,
  again: (e: unknown) => boolean = lostRace,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    // a failed attempt's follow-ups (its outbox rows) are dropped with it
    const tasks: Array<() => Promise<void>> = [];
    try {
      const result = await work({ ...ctx, onCommit: (task) => tasks.push(task) });
      for (const task of tasks) ctx.onCommit?.(task);
      return result;
    } catch (e) {
      if (!again(e)) throw e;
      if (attempt >= 5)
        throw ApiError.detail(
          409,
          "Another write took the same id at the same moment; retry the request.",
          "write_conflict",
        );
    }
  }
}

/** Who writes and why, for a transaction of its own (not the staged write's `db` or read phase). */
const metaOf = ({ auth, requestId, baseUrl, params }: WriteContext) => ({
  auth,
  requestId,
  baseUrl,
  params,
});

/** Updates in one transaction (`If-Match` checked on the row as it reads it). */
export async function updateInTransaction(
  ctx: WriteContext,
  items: StagedUpdate[],
  partial: boolean,
  options: StagedOptions,
): Promise<StagedWritten[]> {
  const r = options.resource;
  const step = async (tx: WriteContext, item: ApiRecord) => {
    const id = item.id as number;
    const [current] = await r.load(tx, [id]);
    if (!current) throw objectNotFound(r.verboseName, id);
    options.precondition?.((current.last_updated as string) ?? null);
    const { id: _drop, ...input } = item;
    return updateChecked(tx, r, id, input, partial);
  };
  const listed = items.map((i) => ({ ...i.input, id: i.id }));
  // a list answers field errors per item; one object answers them as they are
  const written = await writeTransaction(ctx.services, metaOf(ctx), r, (tx) =>
    options.bulk ? eachItem(listed, (item) => step(tx, item)) : Promise.all([step(tx, listed[0]!)]),
  );
  return loadedRecords(ctx, r, written);
}

async function loadedRecords(
  ctx: WriteContext,
  r: Resource,
  written: Array<{ id: number; record: ApiRecord | null }>,
): Promise<StagedWritten[]> {
  const out: StagedWritten[] = [];
  for (const w of written) {
    const record = w.record ?? (await r.load(ctx, [w.id]))[0];
    if (record) out.push({ id: w.id, record });
  }
  return out;
}

/** The delete hooks' parts of a staged delete, or null when one of them cannot be staged. */
export function stageHooks(
  ctx: WriteContext,
  phase: ReadPhase,
  target: { appLabel: string; model: string; id: number },
): Array<() => Promise<StagedHook>> | null {
  const hooks = ctx.services.deleteHooks;
  if (hooks.some((h) => !h.stage)) return null;
  return hooks.map((h) => h.stage!(ctx, phase, target));
}

/** Runs a batch whose hooks may explain a failed guard (a dependant that appeared meanwhile). */
export async function runWithHooks(
  ctx: WriteContext,
  batch: WriteBatch,
  resource: Resource,
  hooks: StagedHook[],
): Promise<"transaction" | undefined> {
  try {
    await batch.run(ctx);
    return undefined;
  } catch (e) {
    for (const h of hooks) if ((await h.explain?.()) === "transaction") return "transaction";
    throw batchError(e, resource);
  }
}

/**
 * The type's row and its fields' rows (for records and the guards), as a read phase reads them;
 * `cotId` may be SQL (the type of a field named by id: no read before the phase).
 */
export function typeReads(orm: Orm, phase: ReadPhase, cotId: number | SQL) {
  const cot = phase.add(
    orm.select().from(customObjectTypes).where(sql`${customObjectTypes.id} = ${cotId}`),
  );
  const fields = phase.add(
    orm
      .select()
      .from(customObjectTypeFields)
      .where(sql`${customObjectTypeFields.customObjectTypeId} = ${cotId}`)
      .orderBy(customObjectTypeFields.id),
  );
  return {
    cot: () => (cot()[0] as CotRow | undefined) ?? null,
    fields: () => fields() as FieldRow[],
  };
}

/** The type of field `fieldId`, as SQL for `typeReads`. */
export const typeOfField = (fieldId: number) =>
  sql`(SELECT ${customObjectTypeFields.customObjectTypeId} FROM ${customObjectTypeFields} WHERE ${customObjectTypeFields.id} = ${fieldId})`;

/**
 * A type's new shape in the batch: `shape_version` and `last_updated` moved on, guarded on the
 * stamp read (a concurrent change of the type or its fields loses with 409).
 */
export function bumpType(batch: WriteBatch, orm: Orm, cot: CotRow, set: Partial<CotRow> = {}) {
  batch.add(
    orm
      .update(customObjectTypes)
      .set({
        ...set,
        shapeVersion: 1 + Math.floor(Math.random() * 2 ** 52),
        lastUpdated: set.lastUpdated ?? nextStamp(cot.lastUpdated),
      })
      .where(
        and(eq(customObjectTypes.id, cot.id), eq(customObjectTypes.lastUpdated, cot.lastUpdated)),
      ),
  );
  batch.add(guardChanged(orm));
}

/** A type's row deleted in the batch, guarded on the stamp read (a concurrent change: 409). */
export function deleteTypeRow(batch: WriteBatch, orm: Orm, cot: CotRow) {
  batch.add(
    orm
      .delete(customObjectTypes)
      .where(
        and(eq(customObjectTypes.id, cot.id), eq(customObjectTypes.lastUpdated, cot.lastUpdated)),
      ),
  );
  batch.add(guardChanged(orm));
}

/** Fields (of any type) pointing at the objects of type `cotId`, for a read phase. */
export function inboundFieldsQuery(orm: Orm, cotId: number) {
  const ot = sql`(SELECT "object_type_id" FROM "custom_object_types" WHERE "id" = ${cotId})`;
  return orm
    .select({ name: customObjectTypeFields.name, cotId: customObjectTypeFields.customObjectTypeId })
    .from(customObjectTypeFields)
    .where(
      or(
        sql`${customObjectTypeFields.relatedObjectTypeId} = ${ot}`,
        sql`EXISTS (SELECT 1 FROM json_each(${customObjectTypeFields.relatedObjectTypeIds}) je WHERE je.value = ${ot})`,
      ),
    );
}

/** Rows of the types holding a name or slug a write asks for. */
export function takenQuery(orm: Orm, input: ApiRecord) {
  const text = (v: unknown) => (typeof v === "string" ? v : "");
  return orm
    .select({
      id: customObjectTypes.id,
      name: customObjectTypes.name,
      slug: customObjectTypes.slug,
    })
    .from(customObjectTypes)
    .where(
      or(
        eq(customObjectTypes.name, text(input.name)),
        eq(customObjectTypes.slug, text(input.slug)),
      ),
    );
}

/** The object type row `custom_objects.<slug>`, if taken. */
export function objectTypeQuery(orm: Orm, slug: unknown) {
  return orm
    .select({ id: objectTypes.id })
    .from(objectTypes)
    .where(
      and(
        eq(objectTypes.appLabel, APP_LABEL),
        eq(objectTypes.model, typeof slug === "string" ? slug : ""),
      ),
    );
}

export const slugTaken = (slug: string) =>
  new ValidationError({ slug: [`The object type ${APP_LABEL}.${slug} is already taken.`] });

/** A type's objects' tags and its object type, removed with it. */
export function dropTypeRows(batch: WriteBatch, orm: Orm, cot: CotRow) {
  batch.add(
    orm.delete(customObjectTypeFields).where(eq(customObjectTypeFields.customObjectTypeId, cot.id)),
  );
  if (cot.objectTypeId) {
    batch.add(orm.delete(taggedItems).where(eq(taggedItems.objectTypeId, cot.objectTypeId)));
    batch.add(orm.delete(objectTypes).where(eq(objectTypes.id, cot.objectTypeId)));
  }
}

/** A caller's constraints on one action, and on viewing (undefined: unconstrained). */
export interface Limits {
  act: SQL;
  view: SQL | undefined;
}

/**
 * The caller's constraints on `action` for `resource` (decision 0121): undefined when none. A
 * constrained write stays staged: the row as it is read in the read phase (`admissionReads`),
 * the row as the batch leaves it guarded in the batch (`guardAdmitted`).
 */
export async function limitsOf(
  ctx: WriteContext,
  resource: Resource,
  action: "add" | "change" | "delete",
): Promise<Limits | undefined> {
  const act = await restrictWhere(ctx, ctx.auth, action, resource);
  if (!act) return undefined;
  return { act, view: await restrictWhere(ctx, ctx.auth, "view", resource) };
}

const rowWhere = (resource: Resource, id: number | SQL, where: SQL) =>
  and(sql`${resource.list.idExpr} = ${id}`, where);

/**
 * Whether the caller may act on row `id` as read, in a read phase; the getter refuses as
 * `requireObject` does (403 when they may view it, else 404) and is a no-op when they may act.
 */
export function admissionReads(
  orm: Orm,
  phase: ReadPhase,
  resource: Resource,
  id: number | SQL,
  limits: Limits,
) {
  const read = (where: SQL) =>
    phase.add(
      orm
        .select({ id: sql<number>`${resource.list.idExpr}` })
        .from(resource.table)
        .where(rowWhere(resource, id, where)),
    );
  const act = read(limits.act);
  const view = limits.view ? read(limits.view) : null;
  return () => {
    if (act().length) return;
    if (view === null || view().length) throw forbidden();
    // outside their view: exactly as a row that is not there (a list's write names it as
    // missing, decision 0200), not a bare 404 that tells a hidden id from a missing one (0213)
    throw typeof id === "number" ? objectNotFound(resource.verboseName, id) : notFound();
  };
}

/** A guard that row `id`, as the batch leaves it, is one the caller may act on (`where`). */
export function guardAdmitted(
  batch: WriteBatch,
  orm: Orm,
  resource: Resource,
  id: number | SQL,
  where: SQL,
) {
  const n = orm
    .select({ n: sql<number>`count(*)` })
    .from(resource.table)
    .where(rowWhere(resource, id, where));
  batch.add(orm.run(sql`INSERT INTO write_guard (ok) SELECT (${n}) = 1`));
}

/**
 * A constrained write's failed guard, explained after the fact (a read on failure only): a stamp
 * read in the read phase that moved since is the race (rethrown as it is), else the row as
 * written falls outside the caller's constraints (403).
 */
export async function explainLimited(
  ctx: WriteContext,
  e: unknown,
  action: "add" | "change",
  stamps: Array<{
    table: typeof customObjectTypes | typeof customObjectTypeFields;
    id: number;
    stamp: string;
  }>,
): Promise<never> {
  if (!isWriteConflict(e)) throw e;
  const orm = ctx.services.db.orm;
  const reads = stamps.map((s) =>
    orm.select({ stamp: s.table.lastUpdated }).from(s.table).where(eq(s.table.id, s.id)),
  );
  const now = reads.length
    ? ((await ctx.services.db.read(reads as unknown as Queries)) as unknown as Array<
        Array<{ stamp: string }>
      >)
    : [];
  if (stamps.some((s, i) => now[i]?.[0]?.stamp !== s.stamp)) throw e;
  throw outsideConstraints(action);
}
