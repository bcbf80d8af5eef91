/**
 * `custom-object-types/` writes as one read phase and one atomic batch (decision 0108): the row,
 * its object type, its tags, its table's DDL and the change record; `unique_together` and
 * `checks` as their indexes and triggers in the same batch (0119). Lists keep the transaction
 * path (`staged.ts` helpers run it).
 */
import { and, eq } from "drizzle-orm";
import { customObjectTypes, objectTypes, taggedItems, tags } from "../../../db/schema";
import { nestedTag } from "../../../core/models/define";
import { resolveTagRows, stageTagLookup, type TagRow } from "../../../core/models/staged";
import { isWriteConflict, type Orm } from "../../../db/client";
import { nowIso } from "../../../db/schema/common";
import { notFound, ValidationError } from "../../../core/errors";
import type {
  ApiRecord,
  StagedOptions,
  StagedUpdate,
  StagedWrites,
  StagedWritten,
  WriteContext,
} from "../../../core/context";
import { nextStamp, type ReadPhase, WriteBatch } from "../../../core/rest/write-batch";
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
import { protectedRefusal } from "../schema/access";
import { cotModel, fieldModel } from "./api";
import { knownChoiceSets } from "./staged-fields";
import { validateCot, type CotDraft } from "./definitions";
import {
  addStatements,
  admissionReads,
  batchError,
  bumpType,
  createInTransaction,
  explainLimited,
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
  stageChange,
  stageHooks,
  takenQuery,
  typeReads,
  inboundFieldsQuery,
  updateInTransaction,
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
async function inputTags(ctx: WriteContext, phase: ReadPhase, input: ApiRecord) {
  const { id: typeId } = await ctx.services.objectTypes.ensure(APP_LABEL, COT_MODEL);
  const found = stageTagLookup(ctx, phase, [input]);
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

async function createType(
  ctx: WriteContext,
  input: ApiRecord,
  options: StagedOptions,
  limits: Limits | undefined,
) {
  const orm = ctx.services.db.orm;
  const { phase, rules } = phaseWithRules(ctx, COT_MODEL);
  const taken = phase.add(takenQuery(orm, input));
  const otTaken = phase.add(objectTypeQuery(orm, input.slug));
  const nextCot = phase.add(nextIdQuery(orm, "custom_object_types"));
  const nextOt = phase.add(nextIdQuery(orm, "object_types"));
  const tagged = await inputTags(ctx, phase, input);
  const { unique_together: together, checks, ...attributes } = input;
  // checked first, as the transaction path does; a type without fields takes only empty lists
  if (together !== undefined || checks !== undefined)
    await stagedTypeConstraints(orm, null, [], together, checks);
  await phase.run(ctx);
  const draft = await validateCot(ctx, attributes, null, false, taken());
  const tagRows = tagged.resolve() ?? [];
  if (otTaken().length) throw slugTaken(draft.slug);
  const now = nowIso();
  const row = newTypeRow(firstNext(nextCot()), firstNext(nextOt()), draft, now);
  const batch = new WriteBatch();
  const record = await typeRecord(
    ctx,
    row,
    [],
    tagRows.map((t) => nestedTag(ctx.baseUrl, t)),
  );
  batch.add(
    orm.insert(objectTypes).values({ id: row.objectTypeId!, appLabel: APP_LABEL, model: row.slug }),
  );
  batch.add(orm.insert(customObjectTypes).values(row));
  addStatements(batch, orm, createCotTableStatements(row.id));
  if (row.configContextEnabled) addStatements(batch, orm, [localContextColumnStatement(row.id)]);
  if (tagRows.length) writeTags(ctx, batch, tagged.typeId, row.id, tagRows);
  const resource = options.resource;
  if (limits) guardAdmitted(batch, orm, resource, row.id, limits.act);
  const texts = await stageChange(ctx, batch, resource, await rules(), {
    action: "create",
    id: row.id,
    prechange: null,
    postchange: record,
  });
  await runCreate(ctx, batch, resource, draft.slug).catch((e) =>
    limits ? explainLimited(ctx, e, "add", []) : Promise.reject(e),
  );
  const json = texts()[0];
  return { id: row.id, record: json ? JSON.parse(json) : record, json };
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

/** The batch of a create: a name race answers as the unique index says, an id race retries. */
async function runCreate(
  ctx: WriteContext,
  batch: WriteBatch,
  resource: StagedOptions["resource"],
  slug: string,
) {
  try {
    await batch.run(ctx);
  } catch (e) {
    if (/UNIQUE constraint failed: object_types\.app_label/.test(messages(e)))
      throw slugTaken(slug);
    if (idTaken(e)) throw e; // `withRetry` runs the create again
    throw batchError(e, resource);
  }
}

async function updateType(
  ctx: WriteContext,
  registry: CotRegistry,
  item: StagedUpdate,
  partial: boolean,
  options: StagedOptions,
  limits: Limits | undefined,
): Promise<StagedWritten> {
  const orm = ctx.services.db.orm;
  const { phase, rules } = phaseWithRules(ctx, COT_MODEL);
  const reads = typeReads(orm, phase, item.id);
  const admitted = limits && admissionReads(orm, phase, options.resource, item.id, limits);
  const tagsRead = await typeTags(ctx, phase, item.id);
  const tagged = await inputTags(ctx, phase, item.input);
  const taken = phase.add(takenQuery(orm, item.input));
  const otTaken = phase.add(objectTypeQuery(orm, item.input.slug));
  await phase.run(ctx);
  const cot = reads.cot();
  if (!cot) throw notFound(`No custom object type with id ${item.id}.`);
  admitted?.();
  options.admit?.(cot);
  options.precondition?.(cot.lastUpdated);
  const { unique_together: together, checks, ...attributes } = item.input;
  const draft = await validateCot(ctx, attributes, cot, partial, taken());
  const fields = reads.fields();
  const keys =
    together !== undefined || checks !== undefined
      ? await stagedTypeConstraints(orm, cot, fields, together, checks)
      : null;
  const tagRows = tagged.resolve();
  const slugMoves = draft.slug !== cot.slug && !!cot.objectTypeId;
  if (slugMoves && otTaken().some((o) => o.id !== cot.objectTypeId)) throw slugTaken(draft.slug);
  const prechange = await typeRecord(ctx, cot, fields, tagsRead());
  const set = { ...draft, ...keys?.set, lastUpdated: nextStamp(cot.lastUpdated) };
  const after = { ...cot, ...set } as CotRow;
  const batch = new WriteBatch();
  if (slugMoves)
    batch.add(
      orm
        .update(objectTypes)
        .set({ model: draft.slug })
        .where(eq(objectTypes.id, cot.objectTypeId!)),
    );
  bumpType(batch, orm, cot, set as Partial<CotRow>);
  if (keys) addStatements(batch, orm, keys.statements);
  const tags = tagRows ? writeTags(ctx, batch, tagged.typeId, cot.id, tagRows) : tagsRead();
  if (limits) guardAdmitted(batch, orm, options.resource, cot.id, limits.act);
  const postchange = await typeRecord(ctx, after, fields, tags);
  const texts = await stageChange(ctx, batch, options.resource, await rules(), {
    action: "update",
    id: cot.id,
    prechange,
    postchange,
  });
  await runUpdate(ctx, batch, options, draft.slug, keys?.explain).catch((e) =>
    limits
      ? explainLimited(ctx, e, "change", [
          { table: customObjectTypes, id: cot.id, stamp: cot.lastUpdated },
        ])
      : Promise.reject(e),
  );
  ctx.onCommit?.(async () => {
    registry.forget(cot.id);
    if (slugMoves) ctx.services.objectTypes.forget(cot.objectTypeId!);
  });
  const json = texts()[0];
  return { id: cot.id, record: json ? JSON.parse(json) : postchange, json };
}

/**
 * An update's batch: a slug another type's object type took meanwhile is a 400 on slug; a key
 * or check the existing rows break (an index refused, a check's guard failed) is the 400 that
 * counts them (`explain`), nothing written.
 */
async function runUpdate(
  ctx: WriteContext,
  batch: WriteBatch,
  options: StagedOptions,
  slug: string,
  explain?: (db: Orm) => Promise<ValidationError | null>,
) {
  try {
    await batch.run(ctx);
  } catch (e) {
    const text = messages(e);
    if (/UNIQUE constraint failed: object_types\.app_label/.test(text)) throw slugTaken(slug);
    if (explain && (isWriteConflict(e) || /UNIQUE constraint failed: co_\d+\./.test(text))) {
      const refused = await explain(ctx.services.db.orm);
      if (refused) throw refused;
    }
    throw batchError(e, options.resource);
  }
}

/** Deletes a type: its row, fields, table, link tables, search index, objects' tags, object type. */
async function deleteType(
  ctx: WriteContext,
  registry: CotRegistry,
  id: number,
  options: StagedOptions,
  limits: Limits | undefined,
): Promise<"transaction" | undefined> {
  const orm = ctx.services.db.orm;
  const { phase, rules } = phaseWithRules(ctx, COT_MODEL);
  const reads = typeReads(orm, phase, id);
  const admitted = limits && admissionReads(orm, phase, options.resource, id, limits);
  const tagsRead = await typeTags(ctx, phase, id);
  const inbound = phase.add(inboundFieldsQuery(orm, id));
  const hookParts = stageHooks(ctx, phase, { appLabel: APP_LABEL, model: COT_MODEL, id });
  if (!hookParts) return "transaction";
  await phase.run(ctx);
  const cot = reads.cot();
  if (!cot) throw notFound(`No custom object type with id ${id}.`);
  // the row as read is one the caller may delete; the batch is guarded on its stamp
  admitted?.();
  options.admit?.(cot);
  options.precondition?.(cot.lastUpdated);
  await refuseInbound(ctx, cot, inbound());
  const fields = reads.fields();
  const prechange = await typeRecord(ctx, cot, fields, tagsRead());
  const batch = new WriteBatch();
  const hooks = [];
  for (const part of hookParts) {
    const hook = await part();
    hook.write(batch);
    hooks.push(hook);
  }
  deleteTypeRow(batch, orm, cot);
  addStatements(batch, orm, dropCotTableStatements(cot.id, fields));
  dropTypeRows(batch, orm, cot);
  await stageChange(ctx, batch, options.resource, await rules(), {
    action: "delete",
    id: cot.id,
    prechange,
    postchange: null,
  });
  const outcome = await runWithHooks(ctx, batch, options.resource, hooks);
  if (outcome === undefined)
    ctx.onCommit?.(async () => {
      registry.forget(cot.id);
      if (cot.objectTypeId) ctx.services.objectTypes.forget(cot.objectTypeId);
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
    // a caller whose permissions carry constraints stays staged (decision 0121)
    async create(ctx, inputs, options) {
      if (options.bulk || inputs.length !== 1) return createInTransaction(ctx, inputs, options);
      const limits = await limitsOf(ctx, options.resource, "add");
      return [await withRetry(ctx, (attempt) => createType(attempt, inputs[0]!, options, limits))];
    },
    async update(ctx, items, partial, options) {
      if (options.bulk || items.length !== 1)
        return updateInTransaction(ctx, items, partial, options);
      const limits = await limitsOf(ctx, options.resource, "change");
      return [await updateType(ctx, registry, items[0]!, partial, options, limits)];
    },
    async delete(ctx, ids, options) {
      if (ids.length !== 1) return "transaction";
      const limits = await limitsOf(ctx, options.resource, "delete");
      return deleteType(ctx, registry, ids[0]!, options, limits);
    },
  };
}
