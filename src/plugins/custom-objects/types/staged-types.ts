/**
 * `custom-object-types/` writes as one read phase and one atomic batch (decision 0108): the row,
 * its object type, its tags, its table's DDL and the change record; `unique_together` and
 * `checks` as their indexes and triggers in the same batch (0119). Lists of updates and deletes
 * and creates likewise, in order (0142).
 */
import { objectNotFound } from "../../../core/rest/bulk-found";
import { and, eq, sql } from "drizzle-orm";
import { customObjectTypes, objectTypes, taggedItems, tags } from "../../../db/schema";
import { nestedTag } from "../../../core/models/define";
import { resolveTagRows, stageTagLookup, type TagRow } from "../../../core/models/staged";
import { isWriteConflict, type Orm, WriteConflictError } from "../../../db/client";
import { nowIso } from "../../../db/schema/common";
import { type FieldErrors, ValidationError } from "../../../core/errors";
import type { StagedChange } from "../../../core/changes/record";
import type {
  ApiRecord,
  StagedHook,
  StagedOptions,
  StagedUpdate,
  StagedWrites,
  StagedWritten,
  WriteContext,
} from "../../../core/context";
import { nextStamp, type ReadPhase, WriteBatch } from "../../../core/rest/write-batch";
import { guardTypeCount, refuseTypesPast, typeCountQuery } from "./type-limit";
import { APP_LABEL, COT_MODEL } from "../constants";
import {
  createCotTableStatements,
  dropCotTableStatements,
  localContextColumnStatement,
} from "../ddl";
import type { CotRegistry, CotRow } from "../objects/models";
import type { FieldRow } from "../objects/values";
import { conditionalOf, mergedTogether } from "../schema/constraints";
import { normalizeTogether } from "../schema/unique-together";
import { stagedTypeConstraints } from "../schema/constraints-api";
import { countsWithheldFor, protectedRefusal } from "../schema/access";
import { cotModel, fieldModel } from "./api";
import { nameableTags } from "../../../core/models/tag-scope";
import { knownChoiceSets } from "./staged-fields";
import { validateCot, type CotDraft } from "./definitions";
import {
  addStatements,
  admissionReads,
  batchError,
  bumpType,
  explainLimited,
  perItem,
  refuseRepeat,
  stageChangeList,
  guardAdmitted,
  type Limits,
  limitsOf,
  deleteTypeRow,
  dropTypeRows,
  firstNext,
  idTaken,
  messages,
  nextIdQuery,
  objectTypeQuery,
  phaseWithRules,
  runWithHooks,
  slugTaken,
  stageHooks,
  takenQuery,
  typeReads,
  inboundFieldsQuery,
  withRetry,
} from "./staged";

/** The type's own tags as nested records, read in the phase (`load` would read them apart). */
export async function typeTags(ctx: WriteContext, phase: ReadPhase, id: number) {
  const { id: typeId } = await ctx.services.objectTypes.ensure(APP_LABEL, COT_MODEL);
  const rows = phase.add(
    ctx.services.db.orm
      .select({ id: tags.id, name: tags.name, slug: tags.slug, color: tags.color })
      .from(taggedItems)
      .innerJoin(tags, eq(tags.id, taggedItems.tagId))
      .where(and(eq(taggedItems.objectTypeId, typeId), eq(taggedItems.objectId, id)))
      .orderBy(tags.name),
  );
  return () => rows().map((t) => nestedTag(ctx.baseUrl, t));
}

/** The tags an input names, looked up in the phase; null from `resolve` when it names none. */
async function inputTags(
  ctx: WriteContext,
  phase: ReadPhase,
  input: ApiRecord,
  heldBy: number | null,
) {
  const { id: typeId } = await ctx.services.objectTypes.ensure(APP_LABEL, COT_MODEL);
  const nameable = await nameableTags(ctx, sql`t.id`, typeId, heldBy);
  const found = stageTagLookup(ctx, phase, [input], nameable);
  return {
    typeId,
    resolve(): TagRow[] | null {
      if (input.tags === undefined) return null;
      const r = resolveTagRows(input.tags, found(), typeId, `${APP_LABEL}.${COT_MODEL}`);
      if ("error" in r) throw new ValidationError({ tags: [r.error] });
      return [...r.tags].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    },
  };
}

/** A type's tags set to `rows` in the batch (as `setTags`), and their nested records. */
function writeTags(
  ctx: WriteContext,
  batch: WriteBatch,
  typeId: number,
  id: number,
  rows: TagRow[],
): ApiRecord[] {
  const orm = ctx.services.db.orm;
  batch.add(
    orm
      .delete(taggedItems)
      .where(and(eq(taggedItems.objectTypeId, typeId), eq(taggedItems.objectId, id))),
  );
  if (rows.length)
    batch.add(
      orm
        .insert(taggedItems)
        .values(rows.map((t) => ({ tagId: t.id, objectTypeId: typeId, objectId: id }))),
    );
  return rows.map((t) => nestedTag(ctx.baseUrl, t));
}

/** A type's record as `load` answers it, from its row, its fields' rows and its tags. */
export async function typeRecord(
  ctx: WriteContext,
  row: CotRow,
  fields: FieldRow[],
  tags?: ApiRecord[],
  choiceSets?: ReadonlyMap<number, ApiRecord>,
): Promise<ApiRecord> {
  const known = knownChoiceSets(fields, choiceSets);
  const fieldRecords = fields.length
    ? await fieldModel.serialize(ctx, fieldsInOrder(fields), undefined, known)
    : [];
  const objectType = row.objectTypeId
    ? { id: row.objectTypeId, app_label: APP_LABEL, model: row.slug }
    : null;
  const [record] = await cotModel.serialize(
    ctx,
    [row],
    tags ? new Map([[row.id, tags]]) : undefined,
    new Map(),
    new Map(),
    async (_rows, records) => {
      const rec = records[0]!;
      const conditional = conditionalOf(row);
      rec.fields = fieldRecords;
      rec.unique_together = mergedTogether(normalizeTogether(row.uniqueTogether), conditional);
      rec.checks = conditional.checks;
      rec.object_type = objectType;
    },
  );
  return record!;
}

/** The order `decorate` lists a type's fields in. */
function fieldsInOrder(fields: FieldRow[]): FieldRow[] {
  const key = (f: FieldRow) => [f.groupName, f.weight, f.name] as const;
  return [...fields].sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    return x[0] < y[0]
      ? -1
      : x[0] > y[0]
        ? 1
        : x[1] - y[1] || (x[2] < y[2] ? -1 : x[2] > y[2] ? 1 : 0);
  });
}

/**
 * Creates types, one or a list in order (decision 0142: one read phase, one batch): each its
 * row, object type, tags, table and change record, seeing the names the items before took.
 */
async function createTypes(
  ctx: WriteContext,
  inputs: ApiRecord[],
  options: StagedOptions,
  limits: Limits | undefined,
): Promise<StagedWritten[]> {
  const orm = ctx.services.db.orm;
  const { phase, rules } = phaseWithRules(ctx, COT_MODEL);
  const reads: Array<Awaited<ReturnType<typeof readCreate>>> = [];
  for (const input of inputs) reads.push(await readCreate(ctx, phase, input));
  const nextCot = phase.add(nextIdQuery(orm, "custom_object_types"));
  const nextOt = phase.add(nextIdQuery(orm, "object_types"));
  const typeCount = phase.add(typeCountQuery(orm));
  // a single create's constraints are checked before its reads, as the transaction path does
  const single = !options.bulk && inputs.length === 1;
  if (single) await typeConstraints(orm, inputs[0]!);
  await phase.run(ctx);
  const maxTypes = ctx.services.config.maxCustomObjectTypes;
  const counted = Number(typeCount()[0]?.n ?? 0);
  refuseTypesPast(counted, inputs.length, 0, maxTypes);
  const batch = new WriteBatch();
  const made: CotRow[] = [];
  const ids = { cot: firstNext(nextCot()), ot: firstNext(nextOt()) };
  const now = nowIso();
  const changes = await perItem(options.bulk, inputs, async (input, i) => {
    if (!single) await typeConstraints(orm, input);
    const read = reads[i]!;
    const { unique_together: _u, checks: _c, ...attributes } = input;
    const before = made.map(({ id, name, slug }) => ({ id, name, slug }));
    const taken = [...read.taken(), ...before.filter((m) => sameName(m, input))];
    const draft = await validateCot(ctx, attributes, null, false, taken);
    const tagRows = read.tagged.resolve() ?? [];
    if (read.otTaken().length || made.some((m) => m.slug === draft.slug))
      throw slugTaken(draft.slug);
    const row = newTypeRow(ids.cot++, ids.ot++, draft, now);
    made.push(row);
    stageNewType(ctx, batch, row, read.tagged.typeId, tagRows, options, limits);
    const tagged = tagRows.map((t) => nestedTag(ctx.baseUrl, t));
    const record = await typeRecord(ctx, row, [], tagged);
    return { action: "create", id: row.id, prechange: null, postchange: record } as StagedChange;
  });
  const texts = await stageChangeList(ctx, batch, options.resource, await rules(), changes);
  guardTypeCount(batch, orm, maxTypes, counted);
  await runCreate(ctx, batch, options.resource, made).catch((e) =>
    limits ? explainLimited(ctx, e, "add", []) : Promise.reject(e),
  );
  return changes.map((c, i) => {
    const json = texts()[i];
    return { id: made[i]!.id, record: json ? JSON.parse(json) : c.postchange!, json };
  });
}

/** One new type's reads: the names and object type it would take, the tags it names. */
async function readCreate(ctx: WriteContext, phase: ReadPhase, input: ApiRecord) {
  const orm = ctx.services.db.orm;
  return {
    taken: phase.add(takenQuery(orm, input)),
    otTaken: phase.add(objectTypeQuery(orm, input.slug)),
    tagged: await inputTags(ctx, phase, input, null),
  };
}

/** Partial keys and checks a new type names: checked first (none of its fields exists yet). */
async function typeConstraints(orm: Orm, input: ApiRecord) {
  const { unique_together: together, checks } = input;
  if (together !== undefined || checks !== undefined)
    await stagedTypeConstraints(orm, null, [], together, checks, false); // no rows yet
}

const sameName = (m: { name: string; slug: string }, input: ApiRecord) =>
  m.name === input.name || m.slug === input.slug;

/** A new type's rows, table and tags in the batch. */
function stageNewType(
  ctx: WriteContext,
  batch: WriteBatch,
  row: CotRow,
  tagTypeId: number,
  tagRows: TagRow[],
  options: StagedOptions,
  limits: Limits | undefined,
) {
  const orm = ctx.services.db.orm;
  batch.add(
    orm.insert(objectTypes).values({ id: row.objectTypeId!, appLabel: APP_LABEL, model: row.slug }),
  );
  batch.add(orm.insert(customObjectTypes).values(row));
  addStatements(batch, orm, createCotTableStatements(row.id));
  if (row.configContextEnabled) addStatements(batch, orm, [localContextColumnStatement(row.id)]);
  if (tagRows.length) writeTags(ctx, batch, tagTypeId, row.id, tagRows);
  if (limits) guardAdmitted(batch, orm, options.resource, row.id, limits.act);
}

export function newTypeRow(id: number, objectTypeId: number, draft: CotDraft, now: string): CotRow {
  return {
    ...draft,
    id,
    objectTypeId,
    nextSchemaId: 1,
    shapeVersion: 1 + Math.floor(Math.random() * 2 ** 52),
    uniqueTogether: [],
    conditionalConstraints: { unique: [], checks: [] },
    displayExpression: draft.displayExpression ?? "",
    configContextEnabled: draft.configContextEnabled ?? false,
    created: now,
    lastUpdated: now,
  } as CotRow;
}

/**
 * The batch of a create: a name race answers as the unique index says (a list, not knowing
 * which item lost, runs again and answers per item), an id race retries.
 */
async function runCreate(
  ctx: WriteContext,
  batch: WriteBatch,
  resource: StagedOptions["resource"],
  made: CotRow[],
) {
  try {
    await batch.run(ctx);
  } catch (e) {
    if (/UNIQUE constraint failed: object_types\.app_label/.test(messages(e))) {
      if (made.length === 1) throw slugTaken(made[0]!.slug);
      throw new WriteConflictError(); // `withRetry` runs the list again
    }
    if (idTaken(e)) throw e; // `withRetry` runs the create again
    throw batchError(e, resource);
  }
}

/** One type's update as read in the shared read phase. */
async function readTypeUpdate(
  ctx: WriteContext,
  phase: ReadPhase,
  item: StagedUpdate,
  options: StagedOptions,
  limits: Limits | undefined,
) {
  const orm = ctx.services.db.orm;
  return {
    item,
    reads: typeReads(orm, phase, item.id),
    admitted: limits && admissionReads(orm, phase, options.resource, item.id, limits),
    tagsRead: await typeTags(ctx, phase, item.id),
    tagged: await inputTags(ctx, phase, item.input, item.id),
    taken: phase.add(takenQuery(orm, item.input)),
    otTaken: phase.add(objectTypeQuery(orm, item.input.slug)),
  };
}

type TypeUpdateRead = Awaited<ReturnType<typeof readTypeUpdate>>;

/** One type's update staged in the batch: its checks, statements and change. */
async function planTypeUpdate(
  ctx: WriteContext,
  batch: WriteBatch,
  read: TypeUpdateRead,
  partial: boolean,
  options: StagedOptions,
  limits: Limits | undefined,
) {
  const orm = ctx.services.db.orm;
  const { item } = read;
  const cot = read.reads.cot();
  if (!cot) throw objectNotFound("custom object type", item.id);
  read.admitted?.();
  options.admit?.(cot);
  options.precondition?.(cot.lastUpdated);
  const { unique_together: together, checks, ...attributes } = item.input;
  const draft = await validateCot(ctx, attributes, cot, partial, read.taken());
  const fields = read.reads.fields();
  const keys =
    together !== undefined || checks !== undefined
      ? await stagedTypeConstraints(
          orm,
          cot,
          fields,
          together,
          checks,
          countsWithheldFor(ctx, cot.slug),
        )
      : null;
  const tagRows = read.tagged.resolve();
  const slugMoves = draft.slug !== cot.slug && !!cot.objectTypeId;
  if (slugMoves && read.otTaken().some((o) => o.id !== cot.objectTypeId))
    throw slugTaken(draft.slug);
  const prechange = await typeRecord(ctx, cot, fields, read.tagsRead());
  const set = { ...draft, ...keys?.set, lastUpdated: nextStamp(cot.lastUpdated) };
  const after = { ...cot, ...set } as CotRow;
  if (slugMoves)
    batch.add(
      orm
        .update(objectTypes)
        .set({ model: draft.slug })
        .where(eq(objectTypes.id, cot.objectTypeId!)),
    );
  bumpType(batch, orm, cot, set as Partial<CotRow>);
  if (keys) addStatements(batch, orm, keys.statements);
  const tags = tagRows
    ? writeTags(ctx, batch, read.tagged.typeId, cot.id, tagRows)
    : read.tagsRead();
  if (limits) guardAdmitted(batch, orm, options.resource, cot.id, limits.act);
  const postchange = await typeRecord(ctx, after, fields, tags);
  const change = { action: "update" as const, id: cot.id, prechange, postchange };
  return { cot, slug: draft.slug, slugMoves, explain: keys?.explain, change };
}

/**
 * Updates types, one or a list (decision 0142: a list as one read phase and one batch, in
 * order; each type guarded on the stamp it was read with).
 */
async function updateTypes(
  ctx: WriteContext,
  registry: CotRegistry,
  items: StagedUpdate[],
  partial: boolean,
  options: StagedOptions,
  limits: Limits | undefined,
): Promise<StagedWritten[]> {
  const { phase, rules } = phaseWithRules(ctx, COT_MODEL);
  const reads: TypeUpdateRead[] = [];
  for (const item of items) reads.push(await readTypeUpdate(ctx, phase, item, options, limits));
  await phase.run(ctx);
  const batch = new WriteBatch();
  const seen = new Set<number>();
  const plans = await perItem(options.bulk, reads, (read) => {
    refuseRepeat(seen, read.item.id);
    return planTypeUpdate(ctx, batch, read, partial, options, limits);
  });
  const texts = await stageChangeList(
    ctx,
    batch,
    options.resource,
    await rules(),
    plans.map((p) => p.change),
  );
  await runUpdate(ctx, batch, options, plans).catch((e) =>
    limits
      ? explainLimited(
          ctx,
          e,
          "change",
          plans.map((p) => ({ table: customObjectTypes, id: p.cot.id, stamp: p.cot.lastUpdated })),
        )
      : Promise.reject(e),
  );
  ctx.onCommit?.(async () => {
    for (const p of plans) {
      registry.forget(p.cot.id);
      if (p.slugMoves) ctx.services.objectTypes.forget(p.cot.objectTypeId!);
    }
  });
  return plans.map((p, i) => {
    const json = texts()[i];
    return { id: p.cot.id, record: json ? JSON.parse(json) : p.change.postchange, json };
  });
}

/**
 * An update's batch: a slug another type's object type took meanwhile is a 400 on slug; a key
 * or check the existing rows break (an index refused, a check's guard failed) is the 400 that
 * counts them (`explain`; in a list, on its item), nothing written.
 */
async function runUpdate(
  ctx: WriteContext,
  batch: WriteBatch,
  options: StagedOptions,
  plans: Array<{ slug: string; slugMoves: boolean; explain?: Explain }>,
) {
  try {
    await batch.run(ctx);
  } catch (e) {
    const text = messages(e);
    if (/UNIQUE constraint failed: object_types\.app_label/.test(text))
      throw slugTaken((plans.find((p) => p.slugMoves) ?? plans[0]!).slug);
    if (isWriteConflict(e) || /UNIQUE constraint failed: co_\d+\./.test(text)) {
      for (const [i, p] of plans.entries()) {
        const refused = await p.explain?.(ctx.services.db.orm);
        if (refused) throw options.bulk ? atItem(refused, i, plans.length) : refused;
      }
    }
    throw batchError(e, options.resource);
  }
}

type Explain = (db: Orm) => Promise<ValidationError | null>;

/** A list's item's refusal as the list answers it: its errors at its place, the others empty. */
function atItem(refused: ValidationError, index: number, length: number) {
  if (Array.isArray(refused.fields)) return refused;
  const errors: FieldErrors[] = Array.from({ length }, () => ({}));
  errors[index] = refused.fields;
  return new ValidationError(errors);
}

/** One type's delete as read in the shared read phase; null hooks: not stageable. */
async function readTypeDelete(
  ctx: WriteContext,
  phase: ReadPhase,
  id: number,
  options: StagedOptions,
  limits: Limits | undefined,
) {
  const orm = ctx.services.db.orm;
  return {
    id,
    reads: typeReads(orm, phase, id),
    admitted: limits && admissionReads(orm, phase, options.resource, id, limits),
    tagsRead: await typeTags(ctx, phase, id),
    inbound: phase.add(inboundFieldsQuery(orm, id)),
    hookParts: stageHooks(ctx, phase, { appLabel: APP_LABEL, model: COT_MODEL, id }),
  };
}

/**
 * Deletes types, one or a list in order (decision 0142: one read phase, one batch): each its
 * row, fields, table, link tables, search index, objects' tags and object type. A type another
 * points at is refused unless that other went earlier in the list (as one by one).
 */
async function deleteTypes(
  ctx: WriteContext,
  registry: CotRegistry,
  ids: number[],
  options: StagedOptions,
  limits: Limits | undefined,
): Promise<"transaction" | undefined> {
  const orm = ctx.services.db.orm;
  const { phase, rules } = phaseWithRules(ctx, COT_MODEL);
  const reads = [];
  for (const id of ids) reads.push(await readTypeDelete(ctx, phase, id, options, limits));
  if (reads.some((r) => !r.hookParts)) return "transaction";
  await phase.run(ctx);
  const batch = new WriteBatch();
  const hooks: StagedHook[] = [];
  const changes: StagedChange[] = [];
  const gone: CotRow[] = [];
  for (const read of reads) {
    const cot = read.reads.cot();
    // named twice: the second is not found, as it would be one by one
    if (!cot || gone.some((g) => g.id === cot.id))
      throw objectNotFound("custom object type", read.id);
    // the row as read is one the caller may delete; the batch is guarded on its stamp
    read.admitted?.();
    options.admit?.(cot);
    options.precondition?.(cot.lastUpdated);
    const left = read.inbound().filter((f) => !gone.some((g) => g.id === f.cotId));
    await refuseInbound(ctx, cot, left);
    const fields = read.reads.fields();
    const prechange = await typeRecord(ctx, cot, fields, read.tagsRead());
    for (const part of read.hookParts!) {
      const hook = await part();
      hook.write(batch);
      hooks.push(hook);
    }
    deleteTypeRow(batch, orm, cot);
    addStatements(batch, orm, dropCotTableStatements(cot.id, fields));
    dropTypeRows(batch, orm, cot);
    changes.push({ action: "delete", id: cot.id, prechange, postchange: null });
    gone.push(cot);
  }
  await stageChangeList(ctx, batch, options.resource, await rules(), changes);
  const outcome = await runWithHooks(ctx, batch, options.resource, hooks);
  if (outcome === undefined)
    ctx.onCommit?.(async () => {
      for (const cot of gone) {
        registry.forget(cot.id);
        if (cot.objectTypeId) ctx.services.objectTypes.forget(cot.objectTypeId);
      }
    });
  return outcome;
}

/** Fields of other types pointing at this one's objects: the delete is refused (as `deleteCot`). */
async function refuseInbound(
  ctx: WriteContext,
  cot: CotRow,
  inbound: Array<{ name: string; cotId: number }>,
) {
  const others = inbound.filter((f) => f.cotId !== cot.id);
  if (others.length) throw await protectedRefusal(ctx, cot.slug, others, "delete");
}

export function stagedTypeWrites(registry: CotRegistry): StagedWrites {
  return {
    // a caller whose permissions carry constraints stays staged (decision 0121); a list too, in
    // one read phase and one batch (decision 0142)
    async create(ctx, inputs, options) {
      const limits = await limitsOf(ctx, options.resource, "add");
      return withRetry(ctx, (attempt) => createTypes(attempt, inputs, options, limits));
    },
    // a list too, in one read phase and one batch (decision 0142)
    async update(ctx, items, partial, options) {
      const limits = await limitsOf(ctx, options.resource, "change");
      return updateTypes(ctx, registry, items, partial, options, limits);
    },
    async delete(ctx, ids, options) {
      const limits = await limitsOf(ctx, options.resource, "delete");
      return deleteTypes(ctx, registry, ids, options, limits);
    },
  };
}
