/**
 * The schema trash (decision 0051): a field or type removed by a schema apply keeps its data for
 * `SCHEMA_TRASH_DAYS`. Its records move to `custom_object_trash`; its storage is renamed out of
 * the API's way (columns `trash__<entry>_<n>` stay in the type's table, tables become
 * `trash__<entry>_…`), so a restore renames it back and re-inserts the records with their ids
 * (ids are AUTOINCREMENT, never handed out again). Purging drops the renamed storage.
 */
import { yieldToEventLoop } from "../../../services/tasks/retention";
import { and, asc, eq, lte, sql } from "drizzle-orm";
import type { Database, Executor } from "../../../db/client";
import {
  customObjectTrash,
  customObjectTypeFields,
  customObjectTypes,
  objectTypes,
  taggedItems,
} from "../../../db/schema";
import { nowIso } from "../../../db/schema/common";
import { ApiError } from "../../../core/errors";
import { protectedRefusal } from "./access";
import type { WriteContext } from "../../../core/rest/resource";
import { APP_LABEL } from "../constants";
import {
  addMissingColumns,
  fieldColumns,
  hasLinkTable,
  ident,
  linkTableName,
  tableName,
} from "../ddl";
import type { CotRow } from "../objects/models";
import { newShapeVersion } from "./operations";
import type { FieldRow } from "../objects/values";
import { countRows, countValues } from "./impact";
import { dropSearchIndex, syncSearchIndex } from "../search/search-index";
import { scheduleSearchFlush } from "../search/flush";
import { purgeEntryStaged } from "./trash-staged";
import { reverseNameTaken } from "../types/staged";
import { withinTypeLimit } from "../types/type-limit";

export const DAY_MS = 86_400_000;
export type TrashRow = typeof customObjectTrash.$inferSelect;

export const trashName = (entry: number, part: string) => `trash__${Math.trunc(entry)}_${part}`;
const rename = (db: Executor, from: string, to: string) =>
  db.run(sql`ALTER TABLE ${ident(from)} RENAME TO ${ident(to)}`);

async function newEntry(
  ctx: WriteContext,
  values: Omit<typeof customObjectTrash.$inferInsert, "removed" | "expires" | "storage">,
  days: number,
): Promise<number> {
  const now = Date.now();
  const [row] = await ctx.db
    .insert(customObjectTrash)
    .values({
      ...values,
      storage: { columns: [], tables: [] },
      removed: new Date(now).toISOString(),
      expires: new Date(now + days * DAY_MS).toISOString(),
    })
    .returning({ id: customObjectTrash.id });
  return row!.id;
}

async function bump(ctx: WriteContext, cotId: number) {
  await ctx.db
    .update(customObjectTypes)
    .set({ shapeVersion: newShapeVersion(), lastUpdated: nowIso() })
    .where(eq(customObjectTypes.id, cotId));
  // the full-text index follows the fields (decisions 0050, 0056); a rebuilt one is indexed after the commit
  if (await syncSearchIndex(ctx.db, cotId))
    ctx.onCommit?.(async () => scheduleSearchFlush(ctx.services, cotId));
}

/** Moves a field to the trash: its record into the entry, its columns (or link table) renamed. */
export async function trashField(
  ctx: WriteContext,
  cot: CotRow,
  field: FieldRow,
  days: number,
): Promise<number> {
  const rows = await countValues(ctx.db, cot.id, field);
  const entry = await newEntry(
    ctx,
    {
      kind: "field",
      customObjectTypeId: cot.id,
      slug: cot.slug,
      name: field.name,
      record: { field },
      rows,
    },
    days,
  );
  const storage: TrashRow["storage"] = { columns: [], tables: [] };
  // the full-text index's triggers name the columns: it goes first and is rebuilt by `bump`
  await dropSearchIndex(ctx.db, cot.id);
  if (hasLinkTable(field)) {
    const to = trashName(entry, "links");
    await rename(ctx.db, linkTableName(cot.id, field.id), to);
    storage.tables.push([linkTableName(cot.id, field.id), to]);
  } else {
    for (const [i, col] of fieldColumns(field).entries()) {
      const to = trashName(entry, String(i));
      await ctx.db.run(
        sql`ALTER TABLE ${ident(tableName(cot.id))} RENAME COLUMN ${ident(col)} TO ${ident(to)}`,
      );
      storage.columns.push([col, to]);
    }
  }
  await ctx.db.update(customObjectTrash).set({ storage }).where(eq(customObjectTrash.id, entry));
  await ctx.db.delete(customObjectTypeFields).where(eq(customObjectTypeFields.id, field.id));
  await bump(ctx, cot.id);
  return entry;
}

/** Fields of other types that point at this one (a type they point at cannot go). */
async function inbound(
  ctx: WriteContext,
  cot: CotRow,
  alsoGoing: Set<number>,
): Promise<FieldRow[]> {
  if (!cot.objectTypeId) return [];
  const rows = (await ctx.db
    .select()
    .from(customObjectTypeFields)
    .where(
      sql`(${customObjectTypeFields.relatedObjectTypeId} = ${cot.objectTypeId} OR EXISTS (SELECT 1 FROM json_each(${customObjectTypeFields.relatedObjectTypeIds}) je WHERE je.value = ${cot.objectTypeId}))`,
    )) as FieldRow[];
  return rows.filter(
    (f) => f.customObjectTypeId !== cot.id && !alsoGoing.has(f.customObjectTypeId),
  );
}

/**
 * Moves a whole type to the trash: the type, its fields, its object type and the tags on its
 * objects into the entry; its table and link tables renamed (their indexes go with them).
 * `purge` drops them at once instead. 409 `protected` while other types point at it.
 */
export async function removeType(
  ctx: WriteContext,
  cot: CotRow,
  options: { days: number; purge: boolean; alsoGoing: Set<number> },
): Promise<number | null> {
  const refs = await inbound(ctx, cot, options.alsoGoing);
  if (refs.length)
    throw await protectedRefusal(
      ctx,
      cot.slug,
      refs.map((f) => ({ name: f.name, cotId: f.customObjectTypeId })),
    );
  const fields = (await ctx.db
    .select()
    .from(customObjectTypeFields)
    .where(eq(customObjectTypeFields.customObjectTypeId, cot.id))) as FieldRow[];
  const [objectType] = cot.objectTypeId
    ? await ctx.db.select().from(objectTypes).where(eq(objectTypes.id, cot.objectTypeId))
    : [];
  const tags = cot.objectTypeId
    ? await ctx.db.select().from(taggedItems).where(eq(taggedItems.objectTypeId, cot.objectTypeId))
    : [];
  let entry: number | null = null;
  if (options.purge) {
    await dropSearchIndex(ctx.db, cot.id);
    for (const f of fields)
      if (hasLinkTable(f))
        await ctx.db.run(sql`DROP TABLE IF EXISTS ${ident(linkTableName(cot.id, f.id))}`);
    await ctx.db.run(sql`DROP TABLE IF EXISTS ${ident(tableName(cot.id))}`);
  } else {
    const rows = await countRows(ctx.db, cot.id);
    await dropSearchIndex(ctx.db, cot.id); // rebuilt from the rows on restore
    entry = await newEntry(
      ctx,
      {
        kind: "type",
        customObjectTypeId: cot.id,
        slug: cot.slug,
        name: cot.name,
        record: { cot, fields, objectType: objectType ?? null, tags },
        rows,
      },
      options.days,
    );
    const storage: TrashRow["storage"] = { columns: [], tables: [] };
    for (const f of fields) {
      if (!hasLinkTable(f)) continue;
      const to = trashName(entry, `f${f.id}`);
      await rename(ctx.db, linkTableName(cot.id, f.id), to);
      storage.tables.push([linkTableName(cot.id, f.id), to]);
    }
    const to = trashName(entry, "co");
    await rename(ctx.db, tableName(cot.id), to);
    storage.tables.push([tableName(cot.id), to]);
    await ctx.db.update(customObjectTrash).set({ storage }).where(eq(customObjectTrash.id, entry));
  }
  await ctx.db
    .delete(customObjectTypeFields)
    .where(eq(customObjectTypeFields.customObjectTypeId, cot.id));
  await ctx.db.delete(customObjectTypes).where(eq(customObjectTypes.id, cot.id));
  if (cot.objectTypeId) {
    await ctx.db.delete(taggedItems).where(eq(taggedItems.objectTypeId, cot.objectTypeId));
    await ctx.db.delete(objectTypes).where(eq(objectTypes.id, cot.objectTypeId));
    ctx.services.objectTypes.forget(cot.objectTypeId);
  }
  return entry;
}

/** Trash entries, newest first. */
export async function listTrash(db: Executor, slug?: string): Promise<TrashRow[]> {
  return trashQuery(db, slug);
}

/** `listTrash` as a statement, for a read of several (`freshRead`). */
export function trashQuery(db: Executor, slug?: string) {
  const q = db.select().from(customObjectTrash);
  return (slug ? q.where(eq(customObjectTrash.slug, slug)) : q).orderBy(asc(customObjectTrash.id));
}

/** An entry as answered; `rows` null where the count is withheld from the caller (0183). */
export function trashView(row: TrashRow, rowsShown: boolean) {
  const field = row.kind === "field" ? (row.record.field as FieldRow) : null;
  return {
    id: row.id,
    kind: row.kind,
    custom_object_type: { id: row.customObjectTypeId, slug: row.slug },
    name: row.name,
    ...(field
      ? { field: { id: field.id, schema_id: field.schemaId, name: field.name, type: field.type } }
      : { fields: ((row.record.fields as FieldRow[]) ?? []).map((f) => f.name) }),
    rows: rowsShown ? row.rows : null,
    removed: row.removed,
    expires: row.expires,
  };
}

const conflict = (detail: string) => ApiError.detail(409, detail, "restore_conflict");

/**
 * A restore whose field's reverse relation name another field took meanwhile (the unique index,
 * decision 0156): 409 as for a name taken again; the other field is not named (it may be hidden).
 */
export function restoredReverseNameTaken(row: Pick<TrashRow, "kind" | "slug" | "name">) {
  const what =
    row.kind === "field" ? `type "${row.slug}", field "${row.name}"` : `type "${row.slug}"`;
  return conflict(
    `What the entry restores (${what}) takes a reverse relation name another field uses now; change one of them first.`,
  );
}

/** Inserts restored field rows; a reverse name taken meanwhile is the restore's 409. */
async function insertRestoredFields(ctx: WriteContext, row: TrashRow, fields: FieldRow[]) {
  try {
    await ctx.db.insert(customObjectTypeFields).values(fields);
  } catch (e) {
    throw reverseNameTaken(e) ? restoredReverseNameTaken(row) : e;
  }
}

/** Puts a trash entry back with its data: records re-inserted with their ids, storage renamed back. */
export async function restoreEntry(ctx: WriteContext, id: number): Promise<TrashRow> {
  const [row] = await ctx.db.select().from(customObjectTrash).where(eq(customObjectTrash.id, id));
  if (!row) throw ApiError.detail(404, "No trash entry with this id.", "not_found");
  if (row.kind === "field") {
    const field = row.record.field as FieldRow;
    const [cot] = await ctx.db
      .select()
      .from(customObjectTypes)
      .where(eq(customObjectTypes.id, row.customObjectTypeId));
    if (!cot) throw conflict(`The type of field "${field.name}" is gone; restore the type first.`);
    const [taken] = await ctx.db
      .select({ id: customObjectTypeFields.id })
      .from(customObjectTypeFields)
      .where(
        and(
          eq(customObjectTypeFields.customObjectTypeId, cot.id),
          sql`(${customObjectTypeFields.name} = ${field.name} OR ${customObjectTypeFields.schemaId} = ${field.schemaId})`,
        ),
      );
    if (taken)
      throw conflict(
        `"${cot.slug}" has a field named "${field.name}" (or with its schema id) again; rename or remove it first.`,
      );
    await dropSearchIndex(ctx.db, cot.id);
    for (const [orig, trash] of row.storage.columns)
      await ctx.db.run(
        sql`ALTER TABLE ${ident(tableName(cot.id))} RENAME COLUMN ${ident(trash)} TO ${ident(orig)}`,
      );
    for (const [orig, trash] of row.storage.tables) await rename(ctx.db, trash, orig);
    // an entry trashed before its type gained a companion column (url's title) gets it empty
    await addMissingColumns(ctx.db, cot.id, [field]);
    await insertRestoredFields(ctx, row, [{ ...field, lastUpdated: nowIso() }]);
    // the field's schema id is live again: it leaves the type's tombstones
    const doc = (cot.schemaDocument ?? null) as { removed_fields?: Array<{ id: number }> } | null;
    if (doc?.removed_fields) {
      const removed = doc.removed_fields.filter((r) => r.id !== field.schemaId);
      const next: Record<string, unknown> = { ...doc, removed_fields: removed };
      if (!removed.length) delete next.removed_fields;
      await ctx.db
        .update(customObjectTypes)
        .set({ schemaDocument: next })
        .where(eq(customObjectTypes.id, cot.id));
    }
    await bump(ctx, cot.id);
  } else {
    const { cot, fields, objectType, tags } = row.record as {
      cot: CotRow;
      fields: FieldRow[];
      objectType: typeof objectTypes.$inferSelect | null;
      tags: Array<typeof taggedItems.$inferSelect>;
    };
    const [slugTaken] = await ctx.db
      .select({ id: customObjectTypes.id })
      .from(customObjectTypes)
      .where(
        sql`${customObjectTypes.slug} = ${cot.slug} OR ${customObjectTypes.name} = ${cot.name}`,
      );
    const [modelTaken] = await ctx.db
      .select({ id: objectTypes.id })
      .from(objectTypes)
      .where(and(eq(objectTypes.appLabel, APP_LABEL), eq(objectTypes.model, cot.slug)));
    if (slugTaken || modelTaken)
      throw conflict(
        `A custom object type with slug "${cot.slug}" or name "${cot.name}" exists again; remove or rename it first.`,
      );
    if (objectType) await ctx.db.insert(objectTypes).values(objectType);
    await ctx.db
      .insert(customObjectTypes)
      .values({ ...cot, shapeVersion: newShapeVersion(), lastUpdated: nowIso() });
    // a restored type counts against the cap as a created one does (decision 0205)
    await withinTypeLimit(ctx.db, ctx.services.config.maxCustomObjectTypes);
    if (fields.length) await insertRestoredFields(ctx, row, fields);
    if (tags.length) await ctx.db.insert(taggedItems).values(tags);
    for (const [orig, trash] of row.storage.tables) await rename(ctx.db, trash, orig);
    await addMissingColumns(ctx.db, cot.id, fields);
    if (await syncSearchIndex(ctx.db, cot.id))
      ctx.onCommit?.(async () => scheduleSearchFlush(ctx.services, cot.id));
  }
  await ctx.db.delete(customObjectTrash).where(eq(customObjectTrash.id, row.id));
  return row;
}

/**
 * Purges expired entries (`now` for tests), each in its own atomic batch, for at
 * most `budgetMs`; the rest goes next time. The task worker runs it hourly, the Workers cron on
 * every run (decision 0038's schedule).
 */
export async function purgeExpiredTrash(
  db: Database,
  options: { now?: number; budgetMs?: number } = {},
): Promise<number> {
  const started = performance.now();
  const budgetMs = options.budgetMs ?? 30_000;
  const cutoff = new Date(options.now ?? Date.now()).toISOString();
  const due = await db.orm
    .select()
    .from(customObjectTrash)
    .where(lte(customObjectTrash.expires, cutoff))
    .orderBy(asc(customObjectTrash.id))
    .limit(100);
  let purged = 0;
  for (const row of due) {
    if (performance.now() - started > budgetMs) break;
    // one read and one batch an entry (decision 0120); one restored meanwhile is left alone
    if (await purgeEntryStaged(db, row)) purged++;
    await yieldToEventLoop(); // requests get their turn between entries (issue 30)
  }
  return purged;
}
