/**
 * Removals through the schema trash as statements of one atomic batch (decision 0120): a field or
 * type moved to the trash (or purged) by a batched apply. Entry ids are read ahead, so the
 * storage's trash names are known before the batch; counts and records ride in it.
 */
import { and, eq, sql } from "drizzle-orm";
import {
  type Database,
  guardChanged,
  isWriteConflict,
  type Orm,
  type Queries,
} from "../../../db/client";
import { nowIso } from "../../../db/schema/common";
import { ApiError } from "../../../core/errors";
import type { StagedChange } from "../../../core/changes/record";
import { stageChanges } from "../../../core/changes/record";
import type { WriteContext } from "../../../core/context";
import { stageRules } from "../../../core/events/dispatch";
import { nextStamp, ReadPhase, WriteBatch } from "../../../core/rest/write-batch";
import { APP_LABEL, COT_MODEL, FIELD_MODEL } from "../constants";
import {
  customObjectTrash,
  customObjectTypeFields,
  customObjectTypes,
  objectTypes,
  taggedItems,
} from "../../../db/schema";
import {
  dropCotTableStatements,
  dropFieldStorageStatements,
  fieldColumns,
  fieldColumnTypes,
  hasLinkTable,
  ident,
  linkTableName,
  tableName,
} from "../ddl";
import type { CotRow } from "../objects/models";
import type { FieldRow } from "../objects/values";
import { dropIndexStatements } from "../search/search-index";
import {
  addStatements,
  bumpType,
  deleteTypeRow,
  guardAdmitted,
  messages,
  objectTypeQuery,
  reverseNameTaken,
  takenQuery,
  typeReads,
} from "../types/staged";
import { cotModel, fieldModel } from "../types/api";
import { typeRecord, typeTags } from "../types/staged-types";
import { fieldRecord, stageSearchIndex } from "../types/staged-fields";
import { newShapeVersion } from "./operations";
import { rowsCountSql, valuesCountSql } from "./impact";
import { DAY_MS, restoredReverseNameTaken, trashName, type TrashRow } from "./trash";
import { admittedById, restoreExplainer, typeLimits } from "./staged-limits";
import { countTypes, guardTypeCount, refuseTypesPast, typeCountQuery } from "../types/type-limit";

type EntryValues = Omit<typeof customObjectTrash.$inferInsert, "removed" | "expires" | "rows">;

/** The entry's row, its `rows` counted in the batch (before its storage is renamed). */
function insertEntry(
  batch: WriteBatch,
  orm: Orm,
  values: EntryValues,
  rows: ReturnType<typeof sql>,
  days: number,
) {
  const now = Date.now();
  batch.add(
    orm.insert(customObjectTrash).values({
      ...values,
      rows,
      removed: new Date(now).toISOString(),
      expires: new Date(now + days * DAY_MS).toISOString(),
    }),
  );
}

const renameTable = (from: string, to: string) =>
  sql`ALTER TABLE ${ident(from)} RENAME TO ${ident(to)}`;

/** A field row's DELETE, guarded on the stamp read (a field changed meanwhile: 409). */
function deleteFieldRow(batch: WriteBatch, orm: Orm, field: FieldRow) {
  batch.add(
    orm
      .delete(customObjectTypeFields)
      .where(
        and(
          eq(customObjectTypeFields.id, field.id),
          eq(customObjectTypeFields.lastUpdated, field.lastUpdated),
        ),
      ),
  );
  batch.add(guardChanged(orm));
}

/**
 * A field removed by an apply: to trash entry `entry` (its columns or link table renamed, as
 * `trashField` does) or, with `entry` null, dropped (`removeField`). Answers whether the type's
 * search index was dropped (its triggers name the columns; the caller builds it anew).
 */
export function stageFieldRemoval(
  batch: WriteBatch,
  orm: Orm,
  cot: CotRow,
  field: FieldRow,
  trash: { entry: number; days: number } | null,
): boolean {
  if (!trash) {
    const dropsIndex = !hasLinkTable(field);
    if (dropsIndex) addStatements(batch, orm, dropIndexStatements(cot.id));
    addStatements(batch, orm, dropFieldStorageStatements(cot.id, field));
    deleteFieldRow(batch, orm, field);
    return dropsIndex;
  }
  const { entry } = trash;
  const storage: TrashRow["storage"] = { columns: [], tables: [] };
  const moves = [];
  if (hasLinkTable(field)) {
    const [from, to] = [linkTableName(cot.id, field.id), trashName(entry, "links")];
    storage.tables.push([from, to]);
    moves.push(renameTable(from, to));
  } else {
    const t = ident(tableName(cot.id));
    for (const [i, col] of fieldColumns(field).entries()) {
      const to = trashName(entry, String(i));
      storage.columns.push([col, to]);
      moves.push(sql`ALTER TABLE ${t} RENAME COLUMN ${ident(col)} TO ${ident(to)}`);
    }
  }
  const values = {
    id: entry,
    kind: "field" as const,
    customObjectTypeId: cot.id,
    slug: cot.slug,
    name: field.name,
    record: { field },
    storage,
  };
  insertEntry(batch, orm, values, valuesCountSql(cot.id, field), trash.days);
  addStatements(batch, orm, [...dropIndexStatements(cot.id), ...moves]);
  deleteFieldRow(batch, orm, field);
  return true;
}

/** What a removed type's entry keeps besides its rows: read in the apply's read phase. */
export interface GoingType {
  cot: CotRow;
  fields: FieldRow[];
  objectType: typeof objectTypes.$inferSelect | null;
  tags: Array<typeof taggedItems.$inferSelect>;
}

/**
 * A whole type removed by an apply (`removeType`): its table and link tables renamed into trash
 * entry `entry` (or dropped, `entry` null); its rows, fields, object type and its objects' tags
 * gone, guarded: the type changed or its objects' tags changed since the read → 409.
 */
export function stageTypeRemoval(
  batch: WriteBatch,
  orm: Orm,
  going: GoingType,
  trash: { entry: number; days: number } | null,
) {
  const { cot, fields, objectType, tags } = going;
  if (!trash) addStatements(batch, orm, dropCotTableStatements(cot.id, fields));
  else {
    const { entry } = trash;
    const storage: TrashRow["storage"] = { columns: [], tables: [] };
    for (const f of fields.filter(hasLinkTable))
      storage.tables.push([linkTableName(cot.id, f.id), trashName(entry, `f${f.id}`)]);
    storage.tables.push([tableName(cot.id), trashName(entry, "co")]);
    const values = {
      id: entry,
      kind: "type" as const,
      customObjectTypeId: cot.id,
      slug: cot.slug,
      name: cot.name,
      record: { cot, fields, objectType, tags },
      storage,
    };
    insertEntry(batch, orm, values, rowsCountSql(cot.id), trash.days);
    addStatements(batch, orm, [
      ...dropIndexStatements(cot.id),
      ...storage.tables.map(([from, to]) => renameTable(from, to)),
    ]);
  }
  batch.add(
    orm.delete(customObjectTypeFields).where(eq(customObjectTypeFields.customObjectTypeId, cot.id)),
  );
  deleteTypeRow(batch, orm, cot);
  if (!cot.objectTypeId) return;
  // the entry keeps the tags read: one added or removed since fails the batch
  const held = tags
    .map((t) => [t.objectId, t.tagId] as const)
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .map(([o, t]) => `${o}:${t}`)
    .join(",");
  batch.add(
    orm.run(
      sql`INSERT INTO write_guard (ok) VALUES ((SELECT group_concat(k) FROM (SELECT CAST(object_id AS INTEGER) || ':' || CAST(tag_id AS INTEGER) AS k FROM ${taggedItems} WHERE object_type_id = ${cot.objectTypeId} ORDER BY object_id, tag_id)) IS ${held || null})`,
    ),
  );
  batch.add(orm.delete(taggedItems).where(eq(taggedItems.objectTypeId, cot.objectTypeId)));
  batch.add(orm.delete(objectTypes).where(eq(objectTypes.id, cot.objectTypeId)));
}

/**
 * After every removal of the batch: no field points at a removed type any more (one made since
 * the read fails the batch, 409), as `removeType` refuses to leave one dangling.
 */
export function guardNothingPointsAt(batch: WriteBatch, orm: Orm, objectTypeId: number) {
  batch.add(
    orm.run(
      sql`INSERT INTO write_guard (ok) VALUES (NOT EXISTS (SELECT 1 FROM ${customObjectTypeFields} WHERE related_object_type_id = ${objectTypeId} OR EXISTS (SELECT 1 FROM json_each(related_object_type_ids) je WHERE je.value = ${objectTypeId})))`,
    ),
  );
}

/** The fields pointing at a type's objects (id, name, type), for a read phase. */
export function pointingFieldsQuery(orm: Orm, objectTypeId: number) {
  return orm
    .select({
      id: customObjectTypeFields.id,
      name: customObjectTypeFields.name,
      cotId: customObjectTypeFields.customObjectTypeId,
    })
    .from(customObjectTypeFields)
    .where(
      sql`${customObjectTypeFields.relatedObjectTypeId} = ${objectTypeId} OR EXISTS (SELECT 1 FROM json_each(${customObjectTypeFields.relatedObjectTypeIds}) je WHERE je.value = ${objectTypeId})`,
    );
}

const columnsQuery = (orm: Orm, table: string) =>
  orm.all<{ name: string }>(sql`SELECT name FROM pragma_table_info(${table})`);

/** The entry's DELETE, first in its batch: an entry restored or purged meanwhile fails it (409). */
function takeEntry(batch: WriteBatch, orm: Orm, id: number) {
  batch.add(orm.delete(customObjectTrash).where(eq(customObjectTrash.id, id)));
  batch.add(guardChanged(orm));
}

/**
 * `purgeEntry` as one read and one atomic batch (decision 0120): the renamed storage dropped and
 * the entry deleted. False when another write restored or purged the entry meanwhile.
 */
export async function purgeEntryStaged(db: Database, row: TrashRow): Promise<boolean> {
  const orm = db.orm;
  const table = tableName(row.customObjectTypeId);
  const [present] = row.storage.columns.length ? await db.read([columnsQuery(orm, table)]) : [[]];
  const have = new Set((present as Array<{ name: string }>).map((c) => c.name));
  const drops = [
    ...row.storage.tables.map(([, trash]) => sql`DROP TABLE IF EXISTS ${ident(trash)}`),
    ...row.storage.columns
      .filter(([, trash]) => have.has(trash))
      .map(([, trash]) => sql`ALTER TABLE ${ident(table)} DROP COLUMN ${ident(trash)}`),
  ];
  const statements = [
    orm.delete(customObjectTrash).where(eq(customObjectTrash.id, row.id)),
    guardChanged(orm),
    ...drops.map((s) => orm.run(s)),
  ];
  try {
    await db.write(statements as unknown as Queries);
    return true;
  } catch (e) {
    if (isWriteConflict(e)) return false;
    throw e;
  }
}

const restoreConflict = (detail: string) => ApiError.detail(409, detail, "restore_conflict");

/**
 * `restoreEntry` (with the route's change records) as one read and one atomic batch (decision
 * 0120); a caller whose change permission carries constraints too, the type as restored guarded
 * in the batch and a failed guard explained (0128).
 */
export async function restoreStaged(ctx: WriteContext, row: TrashRow): Promise<TrashRow> {
  // a constrained caller: the type as restored guarded in the batch (decision 0128)
  const limit = (await typeLimits(ctx))?.change;
  const orm = ctx.services.db.orm;
  const phase = new ReadPhase();
  const cotRules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: COT_MODEL });
  const fieldRules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: FIELD_MODEL });
  const batch = new WriteBatch();
  takeEntry(batch, orm, row.id);
  const staged =
    row.kind === "field"
      ? await stageFieldRestore(
          ctx,
          phase,
          batch,
          row,
          admittedById(orm, phase, row.customObjectTypeId, limit),
        )
      : await stageTypeRestore(ctx, phase, batch, row);
  const [cotOt, fieldOt] = [
    await ctx.services.objectTypes.ensure(APP_LABEL, COT_MODEL),
    await ctx.services.objectTypes.ensure(APP_LABEL, FIELD_MODEL),
  ];
  const { cot, fields, stamp } = await staged();
  await stageChanges(ctx, batch, cotModel.resource, cotOt.id, await cotRules(), [cot]);
  await stageChanges(ctx, batch, fieldModel.resource, fieldOt.id, await fieldRules(), fields);
  const explainer = limit ? restoreExplainer(orm, row, stamp) : null;
  if (limit) guardAdmitted(batch, orm, cotModel.resource, row.customObjectTypeId, limit);
  if (explainer) batch.explainWith(explainer.reads as never);
  try {
    await batch.run(ctx);
  } catch (e) {
    if (reverseNameTaken(e)) throw restoredReverseNameTaken(row);
    if (
      /UNIQUE constraint failed: (custom_object_types|object_types|custom_object_type_fields)\./.test(
        messages(e),
      )
    )
      throw restoreConflict(
        `What the entry restores (type "${row.slug}", field "${row.name}") exists again; remove or rename it first.`,
      );
    if (explainer) await explainer.explain(ctx, e);
    // a type's guard failed and no refusal explains it: lost to a create, the cap's 400 as a run
    // again would answer it (asked after the explainer: a refused caller pays no count's trip)
    if (row.kind === "type" && isWriteConflict(e)) await refuseRestorePastLimit(ctx);
    throw e;
  }
  return row;
}

/** Throws the cap's 400 when one type more would now pass it (decision 0205). */
async function refuseRestorePastLimit(ctx: WriteContext) {
  const count = await countTypes(ctx.services.db.orm);
  refuseTypesPast(count, 1, 0, ctx.services.config.maxCustomObjectTypes);
}

/** A restore's change records, and the type's stamp as read when it is changed (a field's). */
type RestoreChanges = { cot: StagedChange; fields: StagedChange[]; stamp?: string };

const created = async (ctx: WriteContext, f: FieldRow): Promise<StagedChange> => ({
  action: "create",
  id: f.id,
  prechange: null,
  postchange: await fieldRecord(ctx, f),
});

/** Columns of `fields` the table lacks once the entry's storage is back (a companion added since). */
function missingColumns(
  table: string,
  present: Set<string>,
  fields: FieldRow[],
): ReturnType<typeof sql>[] {
  return fields.flatMap((f) =>
    fieldColumnTypes(f)
      .filter(([c]) => !present.has(c))
      .map(([c, type]) => sql`ALTER TABLE ${ident(table)} ADD COLUMN ${ident(c)} ${sql.raw(type)}`),
  );
}

/**
 * A field's restore: its type read (409 when gone or holding its name or schema id again), its
 * columns or link table renamed back, its row re-inserted with its id, its schema id out of the
 * type's tombstones, the type's new shape guarded on its stamp, the search index made anew.
 */
async function stageFieldRestore(
  ctx: WriteContext,
  phase: ReadPhase,
  batch: WriteBatch,
  row: TrashRow,
  admit: () => void,
): Promise<() => Promise<RestoreChanges>> {
  const orm = ctx.services.db.orm;
  const field = row.record.field as FieldRow;
  const reads = typeReads(orm, phase, row.customObjectTypeId);
  const tags = await typeTags(ctx, phase, row.customObjectTypeId);
  const columns = phase.add(columnsQuery(orm, tableName(row.customObjectTypeId)));
  await phase.run(ctx);
  // the route's check that the caller may change the field's type, first (0128)
  admit();
  const cot = reads.cot();
  if (!cot)
    throw restoreConflict(`The type of field "${field.name}" is gone; restore the type first.`);
  const fields = reads.fields();
  if (fields.some((f) => f.name === field.name || f.schemaId === field.schemaId))
    throw restoreConflict(
      `"${cot.slug}" has a field named "${field.name}" (or with its schema id) again; rename or remove it first.`,
    );
  const table = tableName(cot.id);
  const present = new Set(columns().map((c) => c.name));
  for (const [orig, trash] of row.storage.columns) if (present.delete(trash)) present.add(orig);
  addStatements(batch, orm, [
    ...dropIndexStatements(cot.id),
    ...row.storage.columns.map(
      ([orig, trash]) =>
        sql`ALTER TABLE ${ident(table)} RENAME COLUMN ${ident(trash)} TO ${ident(orig)}`,
    ),
    ...row.storage.tables.map(([orig, trash]) => renameTable(trash, orig)),
    ...(present.size ? missingColumns(table, present, [field]) : []),
  ]);
  const restored = { ...field, lastUpdated: nextStamp(field.lastUpdated) };
  batch.add(orm.insert(customObjectTypeFields).values(restored));
  const set = { schemaDocument: withoutTombstone(cot.schemaDocument, field.schemaId) };
  const afterCot = { ...cot, ...set, lastUpdated: nextStamp(cot.lastUpdated) } as CotRow;
  bumpType(batch, orm, cot, { ...set, lastUpdated: afterCot.lastUpdated } as Partial<CotRow>);
  const fieldsAfter = [...fields, restored].sort((a, b) => a.id - b.id);
  stageSearchIndex(ctx, batch, cot.id, fieldsAfter, new Map());
  return async () => ({
    cot: {
      action: "update",
      id: cot.id,
      prechange: await typeRecord(ctx, cot, fields, tags()),
      postchange: await typeRecord(ctx, afterCot, fieldsAfter, tags()),
    },
    fields: [await created(ctx, restored)],
    stamp: cot.lastUpdated,
  });
}

/** The type's schema document without the tombstone of `schemaId` (the field is live again). */
function withoutTombstone(document: unknown, schemaId: number) {
  const doc = (document ?? null) as { removed_fields?: Array<{ id: number }> } | null;
  if (!doc?.removed_fields) return doc;
  const removed = doc.removed_fields.filter((r) => r.id !== schemaId);
  const next: Record<string, unknown> = { ...doc, removed_fields: removed };
  if (!removed.length) delete next.removed_fields;
  return next;
}

/**
 * A type's restore: refused (409) while its slug, name or object type is taken again; its object
 * type, row, fields and its objects' tags re-inserted with their ids, its tables renamed back,
 * companions added since, the search index made anew.
 */
async function stageTypeRestore(
  ctx: WriteContext,
  phase: ReadPhase,
  batch: WriteBatch,
  row: TrashRow,
): Promise<() => Promise<RestoreChanges>> {
  const orm = ctx.services.db.orm;
  const { cot, fields, objectType, tags } = row.record as unknown as GoingType;
  const taken = phase.add(takenQuery(orm, { name: cot.name, slug: cot.slug }));
  const modelTaken = phase.add(objectTypeQuery(orm, cot.slug));
  const ownTags = await typeTags(ctx, phase, cot.id);
  const moved = row.storage.tables.find(([orig]) => orig === tableName(cot.id))?.[1];
  const columns = phase.add(columnsQuery(orm, moved ?? tableName(cot.id)));
  const typeCount = phase.add(typeCountQuery(orm));
  await phase.run(ctx);
  if (taken().length || modelTaken().length)
    throw restoreConflict(
      `A custom object type with slug "${cot.slug}" or name "${cot.name}" exists again; remove or rename it first.`,
    );
  // a restored type counts against the cap as a created one does (decision 0205)
  const maxTypes = ctx.services.config.maxCustomObjectTypes;
  const counted = Number(typeCount()[0]?.n ?? 0);
  refuseTypesPast(counted, 1, 0, maxTypes);
  if (objectType) batch.add(orm.insert(objectTypes).values(objectType));
  const now = nowIso();
  const back = { ...cot, shapeVersion: newShapeVersion(), lastUpdated: now } as CotRow;
  batch.add(orm.insert(customObjectTypes).values(back));
  guardTypeCount(batch, orm, maxTypes, counted);
  // a row a statement, tags 30 a statement: D1 binds at most 100 values in one
  for (const f of fields) batch.add(orm.insert(customObjectTypeFields).values(f));
  for (let i = 0; i < tags.length; i += 30)
    batch.add(orm.insert(taggedItems).values(tags.slice(i, i + 30)));
  addStatements(
    batch,
    orm,
    row.storage.tables.map(([orig, trash]) => renameTable(trash, orig)),
  );
  const present = new Set(columns().map((c) => c.name));
  if (present.size) addStatements(batch, orm, missingColumns(tableName(cot.id), present, fields));
  stageSearchIndex(ctx, batch, cot.id, fields, new Map());
  return async () => ({
    cot: {
      action: "create",
      id: cot.id,
      prechange: null,
      postchange: await typeRecord(ctx, back, fields, ownTags()),
    },
    fields: await Promise.all(fields.map((f) => created(ctx, f))),
  });
}
