/**
 * What a change log page names — each record's object type and its object's nested form — read
 * by one statement beside the page's rows, in the list's one read (decision 0143).
 */
import { sql, type SQL } from "drizzle-orm";
import { objectChanges, objectTypes } from "../../db/schema";
import type { ApiRecord, ModelInfo, ReadContext, Services } from "../context";
import { keepReadTypes, type ObjectTypeRow } from "../object-types";
import { Slots, slotKey } from "../slots";

/**
 * Nested forms the statement carried, by object type id, then object id (a planned type lacking
 * an id: that object is gone), for `nestedObjects` while the page's records are built only.
 */
const FORMS_READ = slotKey<Map<number, Map<number, ApiRecord>>>("changes.forms read");
/** Models proven current in the page's read, by label, for `hideNested` after it. */
const MODELS_READ = slotKey<Map<string, ModelInfo>>("changes.models read");

export const formsRead = (ctx: ReadContext) => ctx.scratch?.get(FORMS_READ);
export const modelsRead = (ctx: ReadContext) => ctx.scratch?.get(MODELS_READ);

/** Object types the log named lately, by id (bounded): the next page plans its forms for them. */
const NAMED = slotKey<Map<number, string>>("changes.types named lately");
const NAMED_MAX = 256;
const named = (services: Services) => services.state.ensure(NAMED, () => new Map());

function remember(services: Services, rows: ObjectTypeRow[]) {
  const held = named(services);
  for (const row of rows) {
    held.delete(row.id);
    held.set(row.id, `${row.appLabel}.${row.model}`);
  }
  for (const id of held.keys()) {
    if (held.size <= NAMED_MAX) break;
    held.delete(id);
  }
}

/**
 * The model whose nested form a record of type `id` can carry: a static one, or a run-time one
 * its plugin caches, proven by a guard in this very read (only where the context takes guards).
 */
function plannedModel(ctx: ReadContext, id: number, label: string): ModelInfo | null {
  const [app, model] = label.split(".") as [string, string];
  const found = ctx.services.models
    .staticModels()
    .find((m) => m.appLabel === app && m.model === model);
  if (found) return formOf(found, sql`0`) ? found : null;
  if (!ctx.guard) return null;
  const cached = ctx.services.models.cachedByObjectType(id);
  if (!cached || !formOf(cached.info, sql`0`)) return null;
  ctx.guard(cached.guard);
  return cached.info;
}

/** The nested form of the object `id` names, as a scalar subquery (null: the model has none). */
function formOf(info: ModelInfo, id: SQL): SQL | null {
  const nested = info.nestedSql;
  if (nested?.selectOne) return nested.selectOne(id);
  // a correlated page of one row, where the model states its form only by a subquery of ids
  return nested?.selectIn ? sql`(SELECT j FROM (${nested.selectIn(id)}))` : null;
}

const col = (name: string) => sql.raw(`"object_changes"."${name}"`);

/**
 * The statement (one row per record of `ids`): its type as `[id, app_label, model]` and its
 * object's nested form as JSON (its user's rides in the rows' own plan: `core/models/define.ts`). `finish` keeps what it read for the rest of the load.
 */
export function pageNames(ctx: ReadContext, ids: SQL | number) {
  const planned = new Map<number, ModelInfo>();
  for (const [id, label] of named(ctx.services)) {
    const info = plannedModel(ctx, id, label);
    if (info) planned.set(id, info);
  }
  const branches = [...planned].map(
    ([id, info]) => sql`WHEN ${id} THEN ${formOf(info, col("changed_object_id"))}`,
  );
  const form = branches.length
    ? sql`CASE ${col("changed_object_type_id")} ${sql.join(branches, sql` `)} END`
    : sql`NULL`;
  const where = typeof ids === "number" ? sql`${ids}` : ids;
  const statement = ctx.db.all<PageName>(
    sql`SELECT ${objectChanges.id} AS id, ${objectChanges.changedObjectTypeId} AS t, (SELECT json_array(${objectTypes.id}, ${objectTypes.appLabel}, ${objectTypes.model}) FROM ${objectTypes} WHERE ${objectTypes.id} = ${col("changed_object_type_id")}) AS ot, ${form} AS o FROM ${objectChanges} WHERE ${objectChanges.id} IN (${where})`,
  );
  return {
    statement,
    /** Keeps what the statement read for `build` (the page's records), and only for it. */
    async finish<T>(rows: unknown, build: () => Promise<T>): Promise<T> {
      const scratch = keep(ctx, planned, rows as PageName[]);
      try {
        return await build();
      } finally {
        scratch.delete(FORMS_READ);
      }
    },
  };
}

type PageName = { id: number; t: number; ot: string | null; o: string | null };

function keep(ctx: ReadContext, planned: Map<number, ModelInfo>, rows: PageName[]) {
  const types = new Map<number, ObjectTypeRow>();
  const forms = new Map<number, Map<number, ApiRecord>>();
  for (const id of planned.keys()) forms.set(id, new Map());
  for (const row of rows) {
    if (row.ot) {
      const [id, appLabel, model] = JSON.parse(row.ot) as [number, string, string];
      types.set(id, { id, appLabel, model });
    }
    const info = planned.get(row.t);
    addForm(ctx, info, row.o, forms.get(row.t));
  }
  remember(ctx.services, [...types.values()]);
  const scratch = (ctx.scratch ??= new Slots());
  keepReadTypes(scratch, types);
  const byLabel = scratch.get(MODELS_READ) ?? scratch.set(MODELS_READ, new Map());
  for (const info of planned.values()) byLabel.set(`${info.appLabel}.${info.model}`, info);
  scratch.set(FORMS_READ, forms);
  return scratch;
}

function addForm(
  ctx: ReadContext,
  info: ModelInfo | undefined,
  json: string | null,
  into: Map<number, ApiRecord> | undefined,
) {
  if (!info || !into || typeof json !== "string") return;
  const columns = JSON.parse(json) as Record<string, unknown>;
  if (typeof columns.id === "number")
    into.set(columns.id, info.nestedSql!.build(ctx, columns.id, columns));
}
