/**
 * What a change log page names — each record's object type and its object's nested form — read
 * by one statement beside the page's rows, in the list's one read (decision 0143).
 */
import { getTableName, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { objectChanges, objectTypes } from "../../db/schema";
import type { ApiRecord, ModelInfo, ReadContext, Resource, Services } from "../context";
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

/**
 * The models the page's names plan in the read being built on `ctx`, by type id: another
 * statement of that read (a job's object's view, `core/jobs/model.ts`) takes the same models
 * under the same guards. Set anew each time the read is built (a stale guard rebuilds it).
 */
export const plannedInRead = (ctx: ReadContext) => plannedIn.get(ctx);
const plannedIn = new WeakMap<ReadContext, Map<number, ModelInfo>>();

/** The models of the object types named lately whose form a read can carry, by type id. */
function plannedModels(ctx: ReadContext): Map<number, ModelInfo> {
  const planned = new Map<number, ModelInfo>();
  for (const [id, label] of named(ctx.services)) {
    const info = plannedModel(ctx, id, label);
    if (info) planned.set(id, info);
  }
  plannedIn.set(ctx, planned);
  return planned;
}

/** The nested form of the object `id` names, as a scalar subquery (null: the model has none). */
function formOf(info: ModelInfo, id: SQL): SQL | null {
  const nested = info.nestedSql;
  if (nested?.selectOne) return nested.selectOne(id);
  // a correlated page of one row, where the model states its form only by a subquery of ids
  return nested?.selectIn ? sql`(SELECT j FROM (${nested.selectIn(id)}))` : null;
}

/** A table whose rows name an object by type and id (the change log, jobs). */
export interface NamingTable {
  table: SQLiteTable;
  /** Its rows' id, object type id and object id columns. */
  id: SQLiteColumn;
  type: SQLiteColumn;
  object: SQLiteColumn;
}

const CHANGES: NamingTable = {
  table: objectChanges,
  id: objectChanges.id,
  type: objectChanges.changedObjectTypeId,
  object: objectChanges.changedObjectId,
};

/** The column as `"table"."column"`, for correlated subqueries. */
const qualified = (on: NamingTable, column: SQLiteColumn) =>
  sql.raw(`"${getTableName(on.table)}"."${column.name}"`);

/**
 * The statement (one row per record of `ids`): its type as `[id, app_label, model]` and its
 * object's nested form as JSON (its user's rides in the rows' own plan: `core/models/define.ts`).
 * `finish` keeps what it read for the rest of the load.
 */
function pageNames(ctx: ReadContext, ids: SQL | number, on: NamingTable = CHANGES) {
  const planned = plannedModels(ctx);
  const type = qualified(on, on.type);
  const branches = [...planned].map(
    ([id, info]) => sql`WHEN ${id} THEN ${formOf(info, qualified(on, on.object))}`,
  );
  const form = branches.length ? sql`CASE ${type} ${sql.join(branches, sql` `)} END` : sql`NULL`;
  const where = typeof ids === "number" ? sql`${ids}` : ids;
  const statement = ctx.db.all<PageName>(
    sql`SELECT ${on.id} AS id, ${type} AS t, (SELECT json_array(${objectTypes.id}, ${objectTypes.appLabel}, ${objectTypes.model}) FROM ${objectTypes} WHERE ${objectTypes.id} = ${type}) AS ot, ${form} AS o FROM ${on.table} WHERE ${on.id} IN (${where})`,
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

/** `resource.loadPlan` with `pageNames` beside the rows, in the same read. */
export function withPageNames(resource: Resource, on: NamingTable = CHANGES) {
  const rowsPlan = resource.loadPlan!;
  resource.loadPlan = (ctx, ids) => {
    const names = pageNames(ctx, ids, on);
    const rows = rowsPlan(ctx, ids);
    return {
      statements: [names.statement, ...rows.statements],
      finish: (answers, order, known) =>
        names.finish(answers[0], () => rows.finish(answers.slice(1), order, known)),
    };
  };
}

type PageName = { id: number; t: number; ot: string | null; o: string | null };

function keep(ctx: ReadContext, planned: Map<number, ModelInfo>, rows: PageName[]) {
  const types = new Map<number, ObjectTypeRow>();
  const absent = new Set<number>();
  const forms = new Map<number, Map<number, ApiRecord>>();
  for (const id of planned.keys()) forms.set(id, new Map());
  for (const row of rows) {
    if (row.ot) {
      const [id, appLabel, model] = JSON.parse(row.ot) as [number, string, string];
      types.set(id, { id, appLabel, model });
    } else if (row.t != null) absent.add(Number(row.t));
    const info = planned.get(row.t);
    addForm(ctx, info, row.o, forms.get(row.t));
  }
  remember(ctx.services, [...types.values()]);
  const scratch = (ctx.scratch ??= new Slots());
  keepReadTypes(scratch, types, absent);
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
