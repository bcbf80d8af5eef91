/**
 * The shape of one custom object type as the engine sees it: its sorted fields, their type
 * modules, the Drizzle table and the host models whose nested forms ride on its row queries.
 * The other parts (list, read, write, nested) are built from it.
 */
import { sql, type SQL } from "drizzle-orm";
import { choiceSets, type customObjectTypes } from "../../../db/schema";
import {
  integer,
  real,
  sqliteTable,
  text,
  type SQLiteColumn,
  type SQLiteTable,
} from "drizzle-orm/sqlite-core";
import type { ModelInfo } from "../../../core/models/registry";
import type { ApiRecord, ReadContext } from "../../../core/rest/resource";
import { API_BASE } from "../constants";
import { OWNER_COLUMN } from "../ddl";
import { LOCAL_CONTEXT_COLUMN, fieldColumnTypes, tableName } from "../ddl";
import { expressionNames } from "./display";
import {
  fieldType,
  type Companion,
  type FieldRow,
  type FieldTypeModule,
  type Storage,
} from "../field-types";

export type CotRow = typeof customObjectTypes.$inferSelect;

export type CotTable = SQLiteTable & {
  id: SQLiteColumn;
  created: SQLiteColumn;
  lastUpdated: SQLiteColumn;
};

export const instanceUrl = (baseUrl: string, slug: string, id: number) =>
  `${baseUrl}/api/${API_BASE}/${slug}/${id}/`;
const cotUrl = (baseUrl: string, id: number) =>
  `${baseUrl}/api/${API_BASE}/custom-object-types/${id}/`;
/** Names title-cased already: every object a GET answers names its type's (bounded: cleared when full). */
const titled = new Map<string, string>();

/** Each word's first letter upper-cased, the rest kept (NetBox's `title`). */
export function titleCase(s: string): string {
  let out = titled.get(s);
  if (out !== undefined) return out;
  out = s
    .split(/\s+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join(" ");
  if (titled.size >= 1000) titled.clear();
  titled.set(s, out);
  return out;
}
/** The verbose name, or the name title-cased as upstream shows it ("ctxapi" → "Ctxapi"). */
export const verboseName = (cot: CotRow) => cot.verboseName || titleCase(cot.name);

export function nestedCot(baseUrl: string, cot: CotRow): ApiRecord {
  return {
    id: cot.id,
    url: cotUrl(baseUrl, cot.id),
    display: verboseName(cot),
    name: cot.name,
    slug: cot.slug,
  };
}

function sortFields(fields: FieldRow[]): FieldRow[] {
  return [...fields].sort(
    (a, b) =>
      a.groupName.localeCompare(b.groupName) || a.weight - b.weight || a.name.localeCompare(b.name),
  );
}

/** Keys objects that an object/multiobject field may point at, by object type id. */
export async function relatedInfos(
  ctx: ReadContext,
  typeIds: number[],
): Promise<Map<number, ModelInfo>> {
  const out = new Map<number, ModelInfo>();
  const ots = await ctx.services.objectTypes.byIds(typeIds, ctx.db);
  for (const [id, ot] of ots) {
    const info = await ctx.services.models.get(ot.appLabel, ot.model, ctx);
    if (info) out.set(id, info);
  }
  return out;
}

function buildTable(cot: CotRow, fields: FieldRow[]) {
  const cols: Record<string, any> = {
    id: integer("id").primaryKey({ autoIncrement: true }),
    created: text("created").notNull(),
    lastUpdated: text("last_updated").notNull(),
  };
  for (const f of fields) {
    for (const [col, type] of fieldColumnTypes(f))
      cols[col] = type === "INTEGER" ? integer(col) : type === "REAL" ? real(col) : text(col);
  }
  if (cot.configContextEnabled) cols[LOCAL_CONTEXT_COLUMN] = text(LOCAL_CONTEXT_COLUMN);
  cols[OWNER_COLUMN] = integer(OWNER_COLUMN);
  return sqliteTable(tableName(cot.id), cols) as unknown as CotTable;
}

export interface Shape {
  cot: CotRow;
  slug: string;
  /** Fields in record order: group_name, weight, name. */
  fields: FieldRow[];
  byName: Map<string, FieldRow>;
  moduleOf: Map<FieldRow, FieldTypeModule>;
  storage: (f: FieldRow) => Storage;
  /** The field whose value names an object (`display`), if any. */
  primary: FieldRow | undefined;
  table: CotTable;
  column: (name: string) => SQLiteColumn;
  /** The type's display_expression and the column-stored fields it reads. */
  expression: string;
  expressionFields: FieldRow[];
  /** Fields shown as `_context` (upstream's context fields). */
  contextFields: FieldRow[];
  /** The fields' companions (url's link title), each with its record key and column name. */
  companions: Array<{ f: FieldRow; c: Companion; key: string }>;
  /** A select primary field's choice label, as a column of the row and nested queries. */
  primaryLabel: SQL | undefined;
  /** `primaryLabel` of the primary field's value `value` (a column of another alias). */
  labelOf: ((value: SQL) => SQL) | undefined;
  /** Host models by object type id whose nested form can ride on the row query. */
  embedded: Map<number, ModelInfo>;
  /** Object fields pointing at such host models. */
  embeddedFields: FieldRow[];
}

/**
 * @param embedded object type id → host model whose nested form can ride on the row query
 *   (host models never change shape, so the SQL can be built once with the model).
 */
export function shapeOf(
  cot: CotRow,
  rawFields: FieldRow[],
  embedded: Map<number, ModelInfo> = new Map(),
): Shape {
  const fields = sortFields(rawFields);
  const table = buildTable(cot, fields);
  const column = (name: string): SQLiteColumn => {
    const c = (table as unknown as Record<string, SQLiteColumn | undefined>)[name];
    if (!c) throw new Error(`no column ${name} in ${tableName(cot.id)}`);
    return c;
  };
  const slug = cot.slug;
  const byName = new Map(fields.map((f) => [f.name, f]));
  const moduleOf = new Map<FieldRow, FieldTypeModule>(fields.map((f) => [f, fieldType(f.type)]));
  const storage = (f: FieldRow) => moduleOf.get(f)!.storage;
  const primary = fields.find((f) => f.primary && storage(f) !== "links");
  // A select primary shows its choice's label, looked up when the row is read.
  const choiceSetId = primary?.type === "select" ? primary.choiceSetId : null;
  const labelOf =
    choiceSetId != null
      ? (value: SQL) =>
          sql`(SELECT json_extract(c.value, '$[1]') FROM ${choiceSets} cs, json_each(cs.extra_choices) c WHERE cs.id = ${choiceSetId} AND json_extract(c.value, '$[0]') = ${value} LIMIT 1)`
      : undefined;
  const primaryLabel = labelOf?.(sql`${column(primary!.name)}`);

  // Object fields pointing at host models carry their nested form in the row too.
  const embeddedFields = fields.filter(
    (f) =>
      storage(f) === "reference" &&
      !f.isPolymorphic &&
      embedded.get(f.relatedObjectTypeId!)?.nestedSql?.selectOne,
  );
  const expression = cot.displayExpression ?? "";
  const expressionFields = expressionNames(expression)
    .map((name) => byName.get(name))
    .filter((f): f is FieldRow => !!f && storage(f) === "column");
  const contextFields = fields.filter((f) => f.context);
  const companions = fields.flatMap((f) =>
    storage(f) === "column"
      ? (moduleOf.get(f)!.companions ?? []).map((c) => ({ f, c, key: `${f.name}_${c.suffix}` }))
      : [],
  );
  return {
    companions,
    cot,
    slug,
    fields,
    byName,
    moduleOf,
    storage,
    primary,
    primaryLabel,
    labelOf,
    expression,
    expressionFields,
    contextFields,
    table,
    column,
    embedded,
    embeddedFields,
  };
}
