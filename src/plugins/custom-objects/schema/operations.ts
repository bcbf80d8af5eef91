/**
 * Schema operations on custom object types: each changes the records and the COT's table
 * together, inside the caller's transaction, and bumps `shape_version` so every registry
 * (in this process or another) rebuilds the model. REST endpoints and schema apply share them.
 */
import type { InValue } from "@libsql/client";
import { and, eq, getTableColumns, or, sql } from "drizzle-orm";
import type { Executor } from "../../../db/client";
import { inJsonList } from "../../../db/d1-limits";
import { executePositional } from "../../../db/driver-internals";
import {
  customObjectTypeFields,
  customObjectTypes,
  objectTypes,
  taggedItems,
} from "../../../db/schema";
import { nowIso } from "../../../db/schema/common";
import { ApiError, ValidationError } from "../../../core/errors";
import { countsWithheld, protectedRefusal } from "./access";
import type { WriteContext } from "../../../core/rest/resource";
import { APP_LABEL } from "../constants";
import {
  addFieldStorage,
  addPendingStorage,
  type PendingStorage,
  countUnconvertible,
  createCotTable,
  dropCotTable,
  dropFieldStorage,
  fieldColumns,
  refreshFieldIndexes,
  renameFieldStorage,
  retypeFieldStorage,
  tableName,
} from "../ddl";
import type { CotDraft, FieldDraft } from "../types/definitions";
import type { CotRow } from "../objects/models";
import { encodeScalar, isLossless, retypeConverter, type FieldRow } from "../objects/values";
import { fieldType } from "../field-types";
import {
  indexRedefinition,
  readIndexSchemas,
  syncSearchIndex,
  type IndexRedefinition,
} from "../search/search-index";
import { scheduleSearchFlush } from "../search/flush";
import { withinTypeLimit } from "../types/type-limit";

/**
 * A fresh random version token: a counter could repeat after a rolled-back change (5→6 rolled
 * back, then another 5→6), and a registry would then keep a model of the wrong shape.
 */
export const newShapeVersion = () => 1 + Math.floor(Math.random() * 2 ** 52);

async function bump(ctx: WriteContext, cotId: number) {
  // The full-text index follows the fields (decisions 0050, 0056); a rebuilt one is indexed after the commit.
  if (await syncSearchIndex(ctx.db, cotId))
    ctx.onCommit?.(async () => scheduleSearchFlush(ctx.services, cotId));
  await ctx.db
    .update(customObjectTypes)
    .set({ shapeVersion: newShapeVersion(), lastUpdated: nowIso() })
    .where(eq(customObjectTypes.id, cotId));
}

/**
 * Creates a COT; with `table: false` the caller creates the table later (`createCotTable`), with
 * `capped: false` it counts the types against `MAX_CUSTOM_OBJECT_TYPES` itself (an apply, once its
 * removals are done too).
 */
export async function createCot(
  ctx: WriteContext,
  draft: CotDraft,
  options: { table?: boolean; capped?: boolean } = {},
): Promise<CotRow> {
  const [existingOt] = await ctx.db
    .select()
    .from(objectTypes)
    .where(and(eq(objectTypes.appLabel, APP_LABEL), eq(objectTypes.model, draft.slug)));
  if (existingOt)
    throw new ValidationError({
      slug: [`The object type ${APP_LABEL}.${draft.slug} is already taken.`],
    });
  const [ot] = await ctx.db
    .insert(objectTypes)
    .values({ appLabel: APP_LABEL, model: draft.slug })
    .returning();
  const [cot] = await ctx.db
    .insert(customObjectTypes)
    .values({ ...draft, objectTypeId: ot!.id })
    .returning();
  if (options.capped !== false)
    await withinTypeLimit(ctx.db, ctx.services.config.maxCustomObjectTypes);
  if (options.table !== false) await createCotTable(ctx.db, cot!.id);
  return cot!;
}

/** Updates attributes; a slug change moves the object type's `model` (its id stays). */
export async function updateCot(ctx: WriteContext, cot: CotRow, draft: CotDraft): Promise<void> {
  if (draft.slug !== cot.slug && cot.objectTypeId) {
    const [taken] = await ctx.db
      .select()
      .from(objectTypes)
      .where(and(eq(objectTypes.appLabel, APP_LABEL), eq(objectTypes.model, draft.slug)));
    if (taken)
      throw new ValidationError({
        slug: [`The object type ${APP_LABEL}.${draft.slug} is already taken.`],
      });
    await ctx.db
      .update(objectTypes)
      .set({ model: draft.slug })
      .where(eq(objectTypes.id, cot.objectTypeId));
  }
  await ctx.db
    .update(customObjectTypes)
    .set({ ...draft, shapeVersion: newShapeVersion(), lastUpdated: nowIso() })
    .where(eq(customObjectTypes.id, cot.id));
}

/** Fields of other COTs that point at this COT's objects. */
async function inboundFields(ctx: WriteContext, cot: CotRow): Promise<FieldRow[]> {
  if (!cot.objectTypeId) return [];
  const rows = await ctx.db
    .select()
    .from(customObjectTypeFields)
    .where(
      or(
        eq(customObjectTypeFields.relatedObjectTypeId, cot.objectTypeId),
        sql`EXISTS (SELECT 1 FROM json_each(${customObjectTypeFields.relatedObjectTypeIds}) je WHERE je.value = ${cot.objectTypeId})`,
      ),
    );
  return rows.filter((f) => f.customObjectTypeId !== cot.id);
}

/** Drops the table, the fields, tags on its objects and its object type. */
export async function deleteCot(ctx: WriteContext, cot: CotRow): Promise<void> {
  const inbound = await inboundFields(ctx, cot);
  if (inbound.length)
    throw await protectedRefusal(
      ctx,
      cot.slug,
      inbound.map((f) => ({ name: f.name, cotId: f.customObjectTypeId })),
      "delete",
    );
  const fields = await ctx.db
    .select()
    .from(customObjectTypeFields)
    .where(eq(customObjectTypeFields.customObjectTypeId, cot.id));
  await dropCotTable(ctx.db, cot.id, fields);
  await ctx.db
    .delete(customObjectTypeFields)
    .where(eq(customObjectTypeFields.customObjectTypeId, cot.id));
  await ctx.db.delete(customObjectTypes).where(eq(customObjectTypes.id, cot.id));
  if (cot.objectTypeId) {
    await ctx.db.delete(taggedItems).where(eq(taggedItems.objectTypeId, cot.objectTypeId));
    await ctx.db.delete(objectTypes).where(eq(objectTypes.id, cot.objectTypeId));
  }
}

/** Encodes a field default for filling existing rows (scalars only). */
export function encodedDefault(f: FieldDraft): unknown {
  if (f.default === null || f.default === undefined || !fieldType(f.type).takesDefault)
    return undefined;
  const r = encodeScalar(f as FieldRow, f.default, null);
  return "error" in r ? undefined : r.value;
}

/** Adds a field record and its storage (`storage: false` when the table is created afterwards). */
export async function addField(
  ctx: WriteContext,
  cot: CotRow,
  draft: FieldDraft,
  schemaId?: number,
  options: { storage?: boolean } = {},
): Promise<FieldRow> {
  const [fresh] = await ctx.db
    .select({ next: customObjectTypes.nextSchemaId })
    .from(customObjectTypes)
    .where(eq(customObjectTypes.id, cot.id));
  const next = fresh!.next;
  const assigned = schemaId ?? next;
  const [field] = await ctx.db
    .insert(customObjectTypeFields)
    .values({ ...draft, customObjectTypeId: cot.id, schemaId: assigned })
    .returning();
  await ctx.db
    .update(customObjectTypes)
    .set({ nextSchemaId: Math.max(next, assigned + 1) })
    .where(eq(customObjectTypes.id, cot.id));
  if (options.storage !== false) {
    try {
      await addFieldStorage(
        ctx.db,
        cot.id,
        { ...field!, type: field!.type },
        encodedDefault(draft),
      );
    } catch (e) {
      throw uniqueIndexError(e, draft.name) ?? e;
    }
  }
  await bump(ctx, cot.id);
  return field!;
}

/**
 * A multi-row INSERT into the field table with positional arguments, and each row's values for
 * it (Drizzle's own column encoders: booleans as 0/1, JSON columns as text). Built once per row
 * count: the statement text never changes, so the driver keeps it prepared, and Drizzle's
 * multi-row insert builder cost about 60 µs a row.
 */
let bulkInsert: { valuesSql: (rows: number) => string; list: (row: FieldRow) => InValue[] } | null =
  null;
function bulkFieldInsert() {
  if (bulkInsert) return bulkInsert;
  const columns = Object.entries(getTableColumns(customObjectTypeFields)).filter(
    ([key]) => key !== "id",
  );
  for (const [, c] of columns)
    if (!/^[a-z_]+$/.test(c.name)) throw new Error(`unexpected column name ${c.name}`);
  const names = columns.map(([, c]) => `"${c.name}"`).join(", ");
  const byCount = new Map<number, string>();
  const one = `(${columns.map(() => "?").join(", ")})`;
  return (bulkInsert = {
    // Bound values, one row each: about 2.5× faster than json_each, which parses each row once a column.
    valuesSql: (n) =>
      byCount.get(n) ??
      byCount
        .set(
          n,
          `INSERT INTO "custom_object_type_fields" (${names}) VALUES ${Array.from({ length: n }, () => one).join(", ")} RETURNING "id", "schema_id"`,
        )
        .get(n)!,
    list: (row) =>
      columns.map(([key, c]) => {
        const v = (row as unknown as Record<string, unknown>)[key];
        return (v === null || v === undefined ? null : c.mapToDriverValue(v)) as InValue;
      }),
  });
}

/**
 * Adds the storage of new fields of one or more COTs (`addFields`' deferred work): every new
 * column in one schema edit, then fills and indexes, then each COT's full-text index. Where the
 * index only gains columns, the same edit redefines it (`indexRedefinition`): no DDL of its own.
 */
export async function completeStorage(ctx: WriteContext, pending: PendingStorage[]) {
  if (!pending.length) return;
  // every type's index schema in one read (each read scans the whole schema)
  const stored = await readIndexSchemas(
    ctx.db,
    pending.map((p) => p.cotId),
  );
  const redefined = await indexRedefinitions(ctx.db, pending, stored);
  const edited = await addPendingStorage(ctx.db, pending, [...redefined.values()]);
  for (const { cotId } of pending) {
    const redefinition = edited ? redefined.get(cotId) : undefined;
    const read = stored.get(cotId);
    stored.delete(cotId); // stale once synced: a type listed twice reads it again
    // a redefined trigger marks nothing itself; the fills after the edit may have (its trigger)
    if (!redefinition && !(await syncSearchIndex(ctx.db, cotId, read))) continue;
    ctx.onCommit?.(async () => scheduleSearchFlush(ctx.services, cotId));
  }
}

/** The index redefinitions the column edit can carry, by type (see `indexRedefinition`). */
async function indexRedefinitions(
  db: Executor,
  pending: PendingStorage[],
  stored: Map<number, Map<string, string>>,
): Promise<Map<number, IndexRedefinition>> {
  const out = new Map<number, IndexRedefinition>();
  const ids = [...new Set(pending.map((p) => p.cotId))];
  if (ids.length !== pending.length) return out; // a type listed twice: synced one by one
  const fields = (await db.all(
    sql`SELECT custom_object_type_id AS cot, name, type FROM custom_object_type_fields WHERE ${inJsonList(sql`custom_object_type_id`, ids)} ORDER BY id`,
  )) as Array<{ cot: number; name: string; type: string }>;
  for (const { cotId, items } of pending) {
    const info = (await db.all(
      sql`SELECT name FROM pragma_table_info(${tableName(cotId)})`,
    )) as Array<{ name: string }>;
    // the columns the table will have once the edit adds the new fields'
    const added = new Set(items.flatMap(({ field }) => fieldColumns(field)));
    const present = new Set([...info.map((r) => r.name), ...added]);
    const own = fields.filter((f) => Number(f.cot) === cotId);
    const r = indexRedefinition(cotId, own, present, stored.get(cotId) ?? new Map(), added);
    if (r) out.set(cotId, r);
  }
  return out;
}

/**
 * Adds many fields to one COT at once (schema apply): one multi-row insert per few hundred
 * fields, one update of `next_schema_id` and `shape_version`, then each field's storage
 * (`storage: false` when the table is created afterwards). `onStorageError` lets the caller
 * name the field a storage failure belongs to. Same end state as `addField` once per draft.
 */
export async function addFields(
  ctx: WriteContext,
  cot: CotRow,
  drafts: Array<{ draft: FieldDraft; schemaId: number }>,
  options: {
    storage?: boolean;
    atField?: <T>(index: number, fn: () => Promise<T>) => Promise<T>;
    /** Takes the storage work instead of doing it now (`completeStorage` does it later). */
    defer?: (pending: PendingStorage) => void;
  } = {},
): Promise<FieldRow[]> {
  if (!drafts.length) return [];
  const [fresh] = await ctx.db
    .select({ next: customObjectTypes.nextSchemaId })
    .from(customObjectTypes)
    .where(eq(customObjectTypes.id, cot.id));
  const next = fresh!.next;
  const now = nowIso();
  const rows: FieldRow[] = drafts.map(({ draft, schemaId }) => ({
    ...draft,
    id: 0,
    customObjectTypeId: cot.id,
    schemaId,
    created: now,
    lastUpdated: now,
  }));
  const ids = new Map<number, number>();
  // Bound values, 200 rows a statement (`executePositional`); only the ids come back.
  const bulk = bulkFieldInsert();
  const inserted: Array<{ id: number; schema_id: number }> = [];
  for (let i = 0; i < rows.length; i += 200) {
    const chunk = rows.slice(i, i + 200);
    const res = await executePositional(
      ctx.db,
      bulk.valuesSql(chunk.length),
      chunk.flatMap(bulk.list),
    );
    inserted.push(...(res.rows as unknown as Array<{ id: number; schema_id: number }>));
  }
  for (const r of inserted) ids.set(Number(r.schema_id), Number(r.id));
  // RETURNING's row order is not defined: ids are matched by schema id
  const fields = rows.map((row) => ({ ...row, id: ids.get(row.schemaId)! }));
  const highest = Math.max(...drafts.map((d) => d.schemaId));
  await ctx.db
    .update(customObjectTypes)
    .set({
      nextSchemaId: Math.max(next, highest + 1),
      shapeVersion: newShapeVersion(),
      lastUpdated: nowIso(),
    })
    .where(eq(customObjectTypes.id, cot.id));
  if (options.storage !== false) {
    const at = options.atField ?? (<T>(_: number, fn: () => Promise<T>) => fn());
    const pending: PendingStorage = {
      cotId: cot.id,
      items: fields.map((field, i) => ({
        field: { ...field, type: field.type },
        fill: encodedDefault(drafts[i]!.draft),
      })),
      at: (i, fn) =>
        at(i, async () => {
          try {
            return await fn();
          } catch (e) {
            throw uniqueIndexError(e, drafts[i]!.draft.name) ?? e;
          }
        }),
    };
    // A schema apply collects every type's new columns into one schema edit (issue 30).
    if (options.defer) options.defer(pending);
    else await completeStorage(ctx, [pending]);
  }
  return fields;
}

function uniqueIndexError(e: unknown, name: string): ApiError | null {
  const text = String((e as Error)?.message ?? "") + String((e as any)?.cause?.message ?? "");
  if (/UNIQUE constraint failed/i.test(text))
    return new ValidationError({ unique: [`Existing values of "${name}" are not unique.`] });
  return null;
}

/**
 * A type change that would lose values, asked without `allow_destructive`: 409. The values are
 * counted over every object (they are lost whoever may view them); the number is said only to a
 * caller who may view every object of the type (decision 0181).
 */
export function lossyRetype(
  ctx: WriteContext,
  cot: CotRow,
  field: FieldRow,
  type: string,
  lost: number,
) {
  const withheld = countsWithheld(ctx.auth, ctx.services.config.loginRequired)(cot.slug);
  const what = withheld ? "values that cannot be converted" : `${lost} value(s)`;
  return ApiError.detail(
    409,
    `Changing "${field.name}" from ${field.type} to ${type} would lose ${what}. Repeat with allow_destructive=true to set them to null.`,
    "destructive_changes",
    { destructive_slugs: [cot.slug] },
  );
}

export interface AlterResult {
  /** Non-null values that a type change could not carry (they become null). */
  lostValues: number;
}

/**
 * Applies a new definition to a field: rename, type change with conversion, unique/index
 * changes and record attributes. With `allowDataLoss` false a lossy type change answers 409.
 */
export async function alterField(
  ctx: WriteContext,
  cot: CotRow,
  field: FieldRow,
  draft: FieldDraft,
  allowDataLoss: boolean,
): Promise<AlterResult> {
  let current = field;
  let lostValues = 0;
  if (draft.name !== field.name) {
    await renameFieldStorage(ctx.db, cot.id, field, draft.name);
    current = { ...current, name: draft.name };
  }
  if (draft.type !== field.type) {
    const convert = retypeConverter(field.type, draft.type);
    const lost = isLossless(field.type, draft.type)
      ? 0
      : await countUnconvertible(ctx.db, cot.id, current, convert);
    if (lost && !allowDataLoss) throw lossyRetype(ctx, cot, field, draft.type, lost);
    lostValues = await retypeFieldStorage(ctx.db, cot.id, current, draft.type, convert);
    current = { ...current, type: draft.type };
  }
  if (draft.unique !== current.unique || draft.type !== field.type) {
    try {
      await refreshFieldIndexes(ctx.db, cot.id, { ...current, unique: draft.unique });
    } catch (e) {
      throw uniqueIndexError(e, draft.name) ?? e;
    }
  }
  await ctx.db
    .update(customObjectTypeFields)
    .set({ ...draft, lastUpdated: nowIso() })
    .where(eq(customObjectTypeFields.id, field.id));
  await bump(ctx, cot.id);
  return { lostValues };
}

export async function removeField(ctx: WriteContext, cot: CotRow, field: FieldRow): Promise<void> {
  await dropFieldStorage(ctx.db, cot.id, field);
  await ctx.db.delete(customObjectTypeFields).where(eq(customObjectTypeFields.id, field.id));
  await bump(ctx, cot.id);
}
