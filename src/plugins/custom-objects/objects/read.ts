/**
 * Reading objects of a custom object type: the row query (tags and host-model nested forms
 * ride along), prepared once per ORM, and serialisation with nested references.
 */
import type { InValue } from "@libsql/client";
import { eq, getTableColumns, Placeholder, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { outsideTransaction, type Executor } from "../../../db/client";
import { d1StatementBytes, inJsonList } from "../../../db/d1-limits";
import { foldWide, type FoldedSelect, namedExpressions } from "../../../db/wide-select";
import { Prebuilt } from "../../../db/driver-internals";
import { loadTags, nestedTag } from "../../../core/models/define";
import type { ModelInfo } from "../../../core/models/registry";
import { label as otLabel } from "../../../core/object-types";
import type { ApiRecord, LoadPlan, ReadContext } from "../../../core/rest/resource";
import { LOCAL_CONTEXT_COLUMN, ident, linkTableName, tableName, valueColumn } from "../ddl";
import { boundedDisplay, displayText, renderExpression } from "./display";
import { MAX_DISPLAY_CHARS } from "../../../core/limits";
import type { FieldRow } from "../field-types";
import { FormsCache, type FormsRead } from "./forms-cache";
import { hasOwner, ownerReader } from "./owner";
import { instanceUrl, nestedCot, relatedInfos, verboseName, type Shape } from "./shape";
import {
  linksColumn,
  plannableFields,
  type PlannedTargets,
  plannedColumns,
  plannedForms,
  plannedLabels,
  planTargets,
  type Nested,
} from "./planned";

export type { Nested };

export interface Reader {
  display: (row: Record<string, any>) => string;
  /**
   * `known`: nested forms of related objects already read, by type id and id (not read again);
   * `learned`: receives the forms this call had to read; `labels`: object types' labels known
   * already, by id (a polymorphic value's `object_type`; the others are read).
   */
  serialize: (
    ctx: ReadContext,
    rows: Record<string, any>[],
    known?: Nested,
    learned?: Nested,
    labels?: ReadonlyMap<number, string>,
  ) => Promise<ApiRecord[]>;
  load: (ctx: ReadContext, ids: number[]) => Promise<ApiRecord[]>;
  loadPlan: (ctx: ReadContext, ids: SQL | number) => LoadPlan;
  /**
   * The row query's select list (a create's RETURNING clause uses it too), folded past D1's
   * columns (`foldWide`): `serialize` unfolds the rows it gives.
   */
  rowColumns: Record<string, SQLiteColumn | SQL>;
}

export function reader(shape: Shape): Reader {
  const display = displayOf(shape);
  const queries = rowQueries(shape);
  const serializeRows = serializer(shape, display);
  // rows of `rowColumns` (a RETURNING clause's) come folded when the type is wide
  const { folded, unfold } = queries.rowFold;
  const serialize: Reader["serialize"] = folded
    ? (ctx, rows, ...rest) => serializeRows(ctx, rows.map(unfold), ...rest)
    : serializeRows;
  const load = loader(shape, queries, serialize);
  const loadPlan = planLoader(shape, queries.rawColumns, serialize);
  return { display, serialize, load, loadPlan, rowColumns: queries.rowColumns };
}

/**
 * An object's `display`: the display expression, else the primary field, else "<Type> <id>";
 * at most `MAX_DISPLAY_CHARS` (decision 0196).
 */
function displayOf(shape: Shape): Reader["display"] {
  const shown = fullDisplayOf(shape);
  return (row) => boundedDisplay(shown(row));
}

function fullDisplayOf(shape: Shape): Reader["display"] {
  const { cot, moduleOf, storage, primary, primaryLabel, expression, byName } = shape;
  return (row: Record<string, any>) => {
    if (expression) {
      const field = (name: string) => {
        const f = byName.get(name);
        return f && storage(f) === "column" && name in row
          ? displayText(moduleOf.get(f)!.decode(row[name]))
          : "";
      };
      const rendered = renderExpression(expression, field, MAX_DISPLAY_CHARS);
      if (rendered) return rendered;
    }
    if (primaryLabel && typeof row.__label === "string" && row.__label) return row.__label;
    if (primary) {
      const v =
        storage(primary) === "reference"
          ? row[valueColumn(primary)!]
          : moduleOf.get(primary)!.decode(row[primary.name]);
      if (v !== null && v !== undefined && v !== "")
        return typeof v === "object" ? JSON.stringify(v) : String(v);
    }
    return `${verboseName(cot)} ${row.id}`;
  };
}

/** Per field, what serialising a row needs, worked out once per shape. */
function fieldPlan(shape: Shape) {
  return shape.fields.map((f) => {
    const m = shape.moduleOf.get(f)!;
    return {
      f,
      kind: m.storage,
      m,
      idKey: `${f.name}_id`,
      typeKey: `${f.name}_type`,
      parts: (m.parts ?? []).map((part) => [part, `${f.name}_${part}`] as const),
      // a companion's key is its column's name (url's `<name>_title`)
      companions: (m.companions ?? []).map((c) => [c, `${f.name}_${c.suffix}`] as const),
    };
  });
}

type FieldPlan = ReturnType<typeof fieldPlan>;
type LinksByField = Map<number, Map<number, { typeId: number; id: number }[]>>;
type RefOf = (f: FieldRow, typeId: number, id: number) => ApiRecord;

type LinkRow = { source_id: number; target_type: number | null; target_id: number };

/** Whether every row carries `key` (a column that rode along with the rows). */
function everyHas(rows: Record<string, any>[], key: string): boolean {
  for (const r of rows) if (!(key in r)) return false;
  return true;
}

/** The nested forms that rode inline on the rows for reference field `f` (`__n_<name>`), by id. */
function inlineForms(ctx: ReadContext, shape: Shape, f: FieldRow, rows: Record<string, any>[]) {
  const info = shape.embedded.get(f.relatedObjectTypeId!)!;
  const idKey = `${f.name}_id`;
  const formKey = `__n_${f.name}`;
  const byId = new Map<number, ApiRecord>();
  for (const r of rows) {
    const id = r[idKey];
    const json = r[formKey];
    if (id != null && json && !byId.has(id))
      byId.set(id, info.nestedSql!.build(ctx, id, JSON.parse(json)));
  }
  return byId;
}

/** Multiobject field `f`'s links from the rows: ridden along (`loadPlan`), or read now. */
async function linkRowsOf(
  ctx: ReadContext,
  shape: Shape,
  f: FieldRow,
  rows: Record<string, any>[],
): Promise<LinkRow[]> {
  const key = `__l_${f.name}`;
  if (everyHas(rows, key))
    return rows.flatMap((r) =>
      (JSON.parse(r[key] ?? "[]") as [number | null, number][]).map(([type, id]) => ({
        source_id: r.id as number,
        target_type: type,
        target_id: id,
      })),
    );
  const lt = ident(linkTableName(shape.cot.id, f.id));
  return (await ctx.db.all(
    sql`SELECT source_id, target_type, target_id FROM ${lt} WHERE source_id IN (${sql.join(
      rows.map((r) => sql`${r.id as number}`),
      sql`, `,
    )}) ORDER BY source_id, position, target_id`,
  )) as LinkRow[];
}

/**
 * Every reference the rows make: the ids to fetch nested forms for (`wanted`, by type), each
 * multiobject field's links by source, and the forms that rode inline on the rows. The field
 * loop holds no closure over its field: the engine would keep a scope per field per call.
 */
async function gatherReferences(
  shape: Shape,
  ctx: ReadContext,
  rows: Record<string, any>[],
  known: Nested | undefined,
) {
  const { fields, storage } = shape;
  const wanted = new Map<number, Set<number>>();
  const want = (typeId: number | null | undefined, id: number | null | undefined) => {
    if (typeId == null || id == null || known?.get(typeId)?.has(id)) return;
    (wanted.get(typeId) ?? wanted.set(typeId, new Set()).get(typeId)!).add(id);
  };
  const links: LinksByField = new Map();
  const inline = new Map<string, Map<number, ApiRecord>>();
  for (const f of fields) {
    const kind = storage(f);
    if (kind === "reference" && everyHas(rows, `__n_${f.name}`)) {
      inline.set(f.name, inlineForms(ctx, shape, f, rows));
    } else if (kind === "reference") {
      const idKey = `${f.name}_id`;
      const typeKey = `${f.name}_type`;
      for (const r of rows) want(f.isPolymorphic ? r[typeKey] : f.relatedObjectTypeId, r[idKey]);
    } else if (kind === "links") {
      const bySource = new Map<number, { typeId: number; id: number }[]>();
      for (const l of await linkRowsOf(ctx, shape, f, rows)) {
        const typeId = l.target_type ?? f.relatedObjectTypeId!;
        want(typeId, l.target_id);
        (bySource.get(l.source_id) ?? bySource.set(l.source_id, []).get(l.source_id)!).push({
          typeId,
          id: l.target_id,
        });
      }
      links.set(f.id, bySource);
    }
  }
  return { wanted, links, inline };
}

/** The labels (`app_label.model`) of object types `ids`: those of `known`, the others read. */
async function typeLabels(
  ctx: ReadContext,
  ids: number[],
  known: ReadonlyMap<number, string> | undefined,
): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  const unknown = ids.filter((id) => {
    const label = known?.get(id);
    if (label !== undefined) out.set(id, label);
    return label === undefined;
  });
  if (unknown.length)
    for (const [id, ot] of await ctx.services.objectTypes.byIds(unknown, ctx.db))
      out.set(id, otLabel(ot));
  return out;
}

/** Fetches the wanted nested forms (once per target type); gives how to nest one reference. */
async function nestedReferences(
  ctx: ReadContext,
  wanted: Map<number, Set<number>>,
  known: Nested | undefined,
  learned: Nested | undefined,
  fields: FieldRow[],
  labels: ReadonlyMap<number, string> | undefined,
): Promise<RefOf> {
  const infos = await relatedInfos(ctx, [...wanted.keys()]);
  // Every related type's nested forms in one statement where the models allow it.
  const groups = [...wanted]
    .filter(([typeId]) => infos.has(typeId))
    .map(([typeId, idSet]) => [infos.get(typeId)!, [...idSet]] as [ModelInfo, number[]]);
  const byInfo = await ctx.services.models.nestedMany(ctx, groups);
  const nested: Nested = new Map();
  for (const typeId of wanted.keys())
    nested.set(typeId, byInfo.get(infos.get(typeId)!) ?? new Map());
  if (learned) for (const [typeId, forms] of nested) learned.set(typeId, forms);
  // object types label polymorphic references only: a type without them reads none
  const ots = fields.some((f) => f.isPolymorphic)
    ? await typeLabels(ctx, [...new Set([...wanted.keys(), ...(known?.keys() ?? [])])], labels)
    : new Map<number, string>();
  return (f: FieldRow, typeId: number, id: number): ApiRecord => {
    const n = nested.get(typeId)?.get(id) ?? known?.get(typeId)?.get(id) ?? { id };
    if (!f.isPolymorphic) return n;
    // `_content_type` is upstream's spelling of the same label (client scripts read it).
    const label = ots.get(typeId) ?? typeId;
    return { object_type: label, _content_type: label, ...n };
  };
}

/**
 * Sets each field's value on `rec` (references nested, value parts spread as `<name>_<part>`,
 * companions as `<name>_<suffix>`); puts the values of flat fields, which the record shows only
 * as their parts, in `flatValues` (given when the type shows a `_context`).
 */
function setFieldValues(
  rec: ApiRecord,
  row: Record<string, any>,
  plan: FieldPlan,
  refs: { links: LinksByField; inline: Map<string, Map<number, ApiRecord>> },
  ref: RefOf,
  flatValues: Map<string, unknown> | null,
): void {
  const { links, inline } = refs;
  for (const { f, kind, m, idKey, typeKey, parts, companions } of plan) {
    if (kind === "reference") {
      const id = row[idKey];
      const typeId = f.isPolymorphic ? row[typeKey] : f.relatedObjectTypeId;
      const known = inline.get(f.name);
      rec[f.name] =
        id == null || typeId == null
          ? null
          : known
            ? (known.get(id) ?? { id })
            : ref(f, typeId, id);
    } else if (kind === "links") {
      rec[f.name] = linkedRefs(f, links.get(f.id)!.get(row.id), ref);
    } else {
      const value = m.decode(row[f.name]);
      // A flat field (coordinates) reads only as its parts, as upstream's does.
      if (m.flat) flatValues?.set(f.name, value);
      else rec[f.name] = value;
      for (const [part, key] of parts)
        rec[key] =
          value && typeof value === "object"
            ? ((value as Record<string, unknown>)[part] ?? null)
            : null;
      for (const [c, key] of companions) rec[key] = c.decode(row[key]);
    }
  }
}

/**
 * A multiobject field's nested references. Its own function, not a closure in the field loop:
 * a closure there capturing the loop's field makes the engine keep a scope per field per row.
 */
function linkedRefs(f: FieldRow, links: { typeId: number; id: number }[] | undefined, ref: RefOf) {
  const out: ApiRecord[] = [];
  for (const l of links ?? []) out.push(ref(f, l.typeId, l.id));
  return out;
}

/** Upstream's `_context`: the context fields' display texts (`shownOf` each), or null. */
function contextOf(contextFields: FieldRow[], shownOf: (f: FieldRow) => unknown) {
  const parts = contextFields.map((f) => displayText(shownOf(f))).filter(Boolean);
  return parts.length ? { display: parts.join(", ") } : null;
}

/** A related object's nested form as the caller was shown it: none where it was hidden. */
const shownRef = (v: unknown) =>
  v && typeof v === "object" && typeof (v as ApiRecord).display === "string" ? v : null;

/**
 * `Resource.rederive`: `_context` again from a record whose related objects the caller may not
 * view were hidden (their nested form cut to the id): a hidden object's display shows nowhere.
 */
export function contextRederiver(shape: Shape): ((record: ApiRecord) => ApiRecord) | undefined {
  const { contextFields } = shape;
  if (!contextFields.length) return undefined;
  const plan = new Map(fieldPlan(shape).map((p) => [p.f, p]));
  const fieldValue = (rec: ApiRecord, f: FieldRow) => {
    const { kind, m, parts } = plan.get(f)!;
    if (kind === "links") return ((rec[f.name] as unknown[]) ?? []).map(shownRef);
    if (kind === "reference") return shownRef(rec[f.name]);
    if (!m.flat) return rec[f.name];
    // a flat field reads only as its parts; all empty: no value
    const value = Object.fromEntries(parts.map(([part, key]) => [part, rec[key] ?? null]));
    return Object.values(value).every((v) => v === null) ? null : value;
  };
  return (rec) =>
    "_context" in rec
      ? { ...rec, _context: contextOf(contextFields, (f) => fieldValue(rec, f)) }
      : rec;
}

/** Serialises rows into API records, reading the nested forms the `known` ones lack. */
function serializer(shape: Shape, display: Reader["display"]): Reader["serialize"] {
  const { cot, slug, contextFields } = shape;
  const plan = fieldPlan(shape);
  return async (ctx, rows, known, learned, labels) => {
    if (!rows.length) return [];
    const ids = rows.map((r) => r.id as number);
    // Gather every reference, then fetch nested forms once per target type.
    const refs = await gatherReferences(shape, ctx, rows, known);
    const ref = await nestedReferences(ctx, refs.wanted, known, learned, shape.fields, labels);
    // Tags come with the rows (see `load`); rows from elsewhere fetch them here.
    const tags = rows.every((r) => "__tags" in r)
      ? tagsFromRows(ctx, rows)
      : await loadTags(ctx, cot.objectTypeId!, ids);
    const cotRef = nestedCot(ctx.baseUrl, cot);
    const ownerOf = await ownerReader(ctx, shape, rows);
    const withOwner = hasOwner(shape);
    const withContext = contextFields.length > 0;
    return rows.map((row) => {
      // one literal per key set, the keys in the answer's order: no spread objects per row
      const rec: ApiRecord = withContext
        ? {
            id: row.id,
            url: instanceUrl(ctx.baseUrl, slug, row.id),
            display: display(row),
            _context: null,
            custom_object_type: cotRef,
            created: row.created,
            last_updated: row.lastUpdated,
            tags: tags.get(row.id) ?? [],
          }
        : {
            id: row.id,
            url: instanceUrl(ctx.baseUrl, slug, row.id),
            display: display(row),
            custom_object_type: cotRef,
            created: row.created,
            last_updated: row.lastUpdated,
            tags: tags.get(row.id) ?? [],
          };
      if (withOwner) rec.owner = ownerOf(row);
      const flatValues = withContext ? new Map<string, unknown>() : null;
      setFieldValues(rec, row, plan, refs, ref, flatValues);
      if (flatValues)
        rec._context = contextOf(contextFields, (f) =>
          flatValues.has(f.name) ? flatValues.get(f.name) : rec[f.name],
        );
      if (cot.configContextEnabled) rec.local_context_data = parseJson(row[LOCAL_CONTEXT_COLUMN]);
      return rec;
    });
  };
}

/** The tags that rode on the rows as JSON (`__tags`), by object id. */
function tagsFromRows(ctx: ReadContext, rows: Record<string, any>[]) {
  return new Map(
    rows.map((r) => [
      r.id as number,
      r.__tags == null || r.__tags === "[]"
        ? []
        : (JSON.parse(r.__tags) as Parameters<typeof nestedTag>[1][]).map((t) =>
            nestedTag(ctx.baseUrl, t),
          ),
    ]),
  );
}

/** The row query's columns and its prepared and positional forms (one row, a page, a lean page). */
function rowQueries(shape: Shape) {
  const { cot, table, primaryLabel, embedded, embeddedFields } = shape;
  // The row query carries each object's tags as a JSON list, saving a statement per read.
  // (The outer id is spelled out: Drizzle renders a column unqualified in a select list.)
  const tagsColumn = sql<string>`(SELECT json_group_array(json(x.j)) FROM (SELECT json_object('id', t.id, 'name', t.name, 'slug', t.slug, 'color', t.color) AS j FROM tagged_items ti JOIN tags t ON t.id = ti.tag_id WHERE ti.object_type_id = ${cot.objectTypeId} AND ti.object_id = ${ident(tableName(cot.id))}.id ORDER BY t.name) x)`;
  const rawColumns: Record<string, SQLiteColumn | SQL> = {
    ...getTableColumns(table),
    __tags: tagsColumn,
  };
  if (primaryLabel) rawColumns.__label = primaryLabel;
  for (const f of embeddedFields) {
    const info = embedded.get(f.relatedObjectTypeId!)!;
    rawColumns[`__n_${f.name}`] =
      sql`${info.nestedSql!.selectOne!(sql`${ident(tableName(cot.id))}.${ident(`${f.name}_id`)}`)}`;
  }
  // a wide type's columns past D1's 100 ride folded (decision 0192); a narrow one's as they are
  const rowFold = foldWide(rawColumns);
  // named after folding: a fold quotes the expressions it takes, which a name would break
  const rowColumns = namedExpressions(rowFold.columns);
  // Reads reuse two prepared queries per ORM: one object (get by id), and any number of them
  // (a page) with the ids passed as one JSON array — still a primary-key lookup per id.
  const oneRow = (db: Executor) =>
    db
      .select(rowColumns)
      .from(table)
      .where(eq(table.id, sql.placeholder("id")));
  const pageOf = (columns: typeof rowColumns) => (db: Executor) =>
    db
      .select(columns)
      .from(table)
      .where(inJsonList(table.id, sql.placeholder("ids")));
  const manyRows = pageOf(rowColumns);
  const loadOne = new Prebuilt<unknown>((orm) => oneRow(orm));
  const loadMany = new Prebuilt<unknown>((orm) => manyRows(orm));

  // The selection's keys in the order Drizzle lists its columns (the select list's order), so a
  // row is read by position: Drizzle's own mapping copies each row twice more (a list page is
  // 50 rows of ~27 values), and these columns need none of its conversions (plain integer, real
  // and text columns, and SQL expressions without a decoder).
  const byPosition =
    (keys: string[]) =>
    (values: ArrayLike<unknown>): Record<string, any> => {
      const row: Record<string, any> = {};
      for (let i = 0; i < keys.length; i++) row[keys[i]!] = values[i];
      return row;
    };
  const fullRow = unfolding(rowFold, byPosition(Object.keys(rowColumns)));

  // A page read from the pool leaves the related objects' nested forms out of its rows: they come
  // from the forms cache (`forms-cache.ts`), read once while the database is unchanged.
  const leanFold = foldWide(
    Object.fromEntries(Object.entries(rawColumns).filter(([key]) => !key.startsWith("__n_"))),
  );
  const leanRow = unfolding(leanFold, byPosition(Object.keys(leanFold.columns)));
  const leanRows = pageOf(leanFold.columns);

  return {
    rawColumns,
    rowColumns,
    rowFold,
    oneRow,
    manyRows,
    leanRows,
    loadOne,
    loadMany,
    fullRow,
    leanRow,
  };
}

type RowQueries = ReturnType<typeof rowQueries>;
type Columns = Record<string, SQLiteColumn | SQL>;

/** `read`, its rows unfolded when the select list was folded. */
function unfolding(
  { folded, unfold }: FoldedSelect,
  read: (values: ArrayLike<unknown>) => Record<string, any>,
) {
  return folded ? (values: ArrayLike<unknown>) => unfold(read(values)) : read;
}

/** `load`: objects by id, with the related objects' nested forms from the forms cache. */
function loader(shape: Shape, queries: RowQueries, serialize: Reader["serialize"]): Reader["load"] {
  const { embeddedFields } = shape;
  const { oneRow, manyRows, leanRows, loadOne, loadMany, fullRow, leanRow } = queries;
  // The queries as text, for the read pool's plain rows (`Database.readRows`).
  let compiled: { one: Compiled; many: Compiled; lean: Compiled } | null = null;
  const formsCache = new FormsCache();

  return async function load(ctx: ReadContext, ids: number[]): Promise<ApiRecord[]> {
    if (!ids.length) return [];
    const orm = ctx.services.db.orm;
    const db = ctx.services.db;
    let values: ArrayLike<unknown>[];
    let cache: FormsRead | null = null;
    let stale = false;
    if (outsideTransaction(db, ctx.db)) {
      // outside a transaction: straight from the pool as arrays, no Row objects in between
      compiled ??= {
        one: compile(oneRow(orm)),
        many: compile(manyRows(orm)),
        lean: compile(leanRows(orm)),
      };
      if (ids.length > 1 && embeddedFields.length)
        cache = formsCache.open(ctx.services, ctx.baseUrl);
      const [q, bind] =
        ids.length === 1
          ? [compiled.one, { id: ids[0]! }]
          : [cache ? compiled.lean : compiled.many, { ids: JSON.stringify(ids) }];
      values = (await db.readRows(q.sql, fill(q.params, bind))).rows;
      // a commit in between: the rows are newer than the cached forms, which are not used then
      if (cache && !cache.fresh()) stale = true;
    } else {
      values = (
        ids.length === 1
          ? await loadOne.values(ctx.db, { id: ids[0]! }, orm)
          : await loadMany.values(ctx.db, { ids: JSON.stringify(ids) }, orm)
      ) as ArrayLike<unknown>[];
    }
    const rows = values.map(cache ? leanRow : fullRow);
    const byId = new Map(rows.map((r) => [r.id as number, r]));
    const ordered = ids.map((id) => byId.get(id)).filter(Boolean) as Record<string, any>[];
    // no cache, or a stale one (lean rows then read every form afresh)
    if (!cache || stale) return serialize(ctx, ordered);
    const learned: Nested = new Map();
    const records = await serialize(ctx, ordered, cache.forms, learned);
    cache.keep(learned);
    return records;
  };
}

/**
 * `loadPlan`, with each multiobject field's links (and their forms) riding on the rows; where the
 * context takes guards, the forms of other custom types' and polymorphic fields' objects too.
 */
function planLoader(
  shape: Shape,
  rawColumns: RowQueries["rawColumns"],
  serialize: Reader["serialize"],
): Reader["loadPlan"] {
  const { fields, table, storage, embedded } = shape;
  // For `loadPlan`: each multiobject field's links ride on the row as a JSON list of
  // [target type, target id, nested form] (the form where its host model has a SQL form).
  const linkFields = fields.filter((f) => storage(f) === "links");
  const rawPlanColumns: Record<string, SQLiteColumn | SQL> = { ...rawColumns };
  for (const f of linkFields) {
    const info = f.isPolymorphic ? undefined : embedded.get(f.relatedObjectTypeId!);
    const form = info?.nestedSql?.selectOne?.(sql`l.target_id`) ?? null;
    rawPlanColumns[`__l_${f.name}`] = linksColumn(shape, f, form);
  }
  // a multiobject field adds a column: a type of many folds them past D1's 100 (decision 0192)
  const planFold = foldWide(rawPlanColumns);
  const planColumns = namedExpressions(planFold.columns); // named after folding, as `rowColumns`
  const plannable = plannableFields(shape);
  const choose = planChooser(
    shape,
    { rawColumns, rawPlanColumns, planFold },
    linkFields,
    plannable,
  );

  /** The nested forms that rode on the rows' links, by object type and id. */
  function linkedForms(ctx: ReadContext, rows: Record<string, any>[]): Nested {
    const known: Nested = new Map();
    for (const f of linkFields) {
      const info = f.isPolymorphic ? undefined : embedded.get(f.relatedObjectTypeId!);
      if (!info?.nestedSql) continue;
      const forms = known.get(f.relatedObjectTypeId!) ?? new Map<number, ApiRecord>();
      known.set(f.relatedObjectTypeId!, forms);
      for (const r of rows)
        for (const [, id, columns] of JSON.parse(r[`__l_${f.name}`] ?? "[]") as [
          unknown,
          number,
          Record<string, unknown> | null,
        ][])
          if (columns && !forms.has(id)) forms.set(id, info.nestedSql.build(ctx, id, columns));
    }
    return known;
  }

  /**
   * `load` as one statement for a caller's read (decision 0085): tags, embedded forms and
   * multiobject links (with their forms) ride on the rows.
   */
  // One id (a GET): the same statement every time, its SQL text rendered once per ORM (0098).
  const byId = new Prebuilt((db) =>
    db
      .select(planColumns)
      .from(table)
      .where(sql`${table.id} IN (${sql.placeholder("id")})`),
  );

  return function loadPlan(ctx: ReadContext, ids: SQL | number): LoadPlan {
    const { fold, planned } = choose(ctx);
    const statement =
      fold !== planFold
        ? ctx.db.select(fold.columns).from(table).where(sql`${table.id} IN (${ids})`)
        : typeof ids === "number"
          ? byId.with(ctx.db, { id: ids }, ctx.services.db.orm)
          : ctx.db.select(planColumns).from(table).where(sql`${table.id} IN (${ids})`);
    return {
      statements: [statement],
      finish(answers, order, known) {
        const answered = answers[0] as Record<string, any>[];
        const rows = fold.folded ? answered.map(fold.unfold) : answered;
        const byId = new Map(rows.map((r) => [r.id as number, r]));
        const ordered = order.map((id) => byId.get(id)).filter(Boolean) as typeof rows;
        const forms = linkFields.length ? linkedForms(ctx, ordered) : new Map();
        let labels: Map<number, string> | undefined;
        if (planned?.size) {
          plannedForms(ctx, shape, plannable, planned, ordered, forms);
          labels = plannedLabels(planned);
        }
        if (!known)
          return serialize(ctx, ordered, forms.size ? forms : undefined, undefined, labels);
        const merged: Nested = new Map(known);
        for (const [typeId, byType] of forms)
          merged.set(typeId, new Map([...(known.get(typeId) ?? []), ...byType]));
        return serialize(ctx, ordered, merged, undefined, labels);
      },
    };
  };
}

/**
 * `loadPlan`'s select list for a read: the links with their forms (and, where the context takes
 * guards, the planned targets' forms, decision 0165), folded past D1's columns. A wide type's
 * list whose statement would pass D1's 100,000 bytes (a form per multiobject field, some 700
 * bytes each) reads its links without forms, which `serialize` then reads apart (decision 0192).
 */
function planChooser(
  shape: Shape,
  lists: { rawColumns: Columns; rawPlanColumns: Columns; planFold: FoldedSelect },
  linkFields: FieldRow[],
  plannable: FieldRow[],
) {
  const { rawColumns, rawPlanColumns, planFold } = lists;
  const { table } = shape;
  // built when first needed: a narrow type never is
  let leanFold: FoldedSelect | undefined;
  const lean = () => ({
    fold: (leanFold ??= foldWide({
      ...rawColumns,
      ...Object.fromEntries(linkFields.map((f) => [`__l_${f.name}`, linksColumn(shape, f, null)])),
    })),
    planned: null,
  });
  // a select list within D1's columns is within its bytes too (a form is some 700 bytes)
  const fits = (ctx: ReadContext, fold: FoldedSelect) =>
    !fold.folded ||
    d1StatementBytes(ctx.db.select(fold.columns).from(table).where(sql`0`).toSQL()) <=
      WIDE_STATEMENT_BYTES;
  let formsFit: boolean | undefined;
  return (ctx: ReadContext): { fold: FoldedSelect; planned: PlannedTargets | null } => {
    formsFit ??= fits(ctx, planFold);
    if (!formsFit) return lean();
    // other types' forms under their guards (decision 0165): a statement built per read
    const planned = plannable.length && ctx.carriesForms ? planTargets(ctx, plannable) : null;
    if (!planned?.size) return { fold: planFold, planned: null };
    const fold = foldWide({ ...rawPlanColumns, ...plannedColumns(shape, plannable, planned) });
    return fits(ctx, fold) ? { fold, planned } : lean();
  };
}

/**
 * Bytes a wide read's statement may take, below D1's 100,000: the caller's id list and guards
 * ride in it too.
 */
const WIDE_STATEMENT_BYTES = 80_000;

type Compiled = { sql: string; params: unknown[] };
const compile = (query: { toSQL(): Compiled }): Compiled => query.toSQL();
/** A compiled query's parameters with its placeholders filled from `values`. */
const fill = (params: unknown[], values: Record<string, unknown>): InValue[] =>
  params.map((p) => (p instanceof Placeholder ? values[p.name] : p) as InValue);

function parseJson(text: unknown): unknown {
  if (text === null || text === undefined) return null;
  try {
    return JSON.parse(String(text));
  } catch {
    return null;
  }
}
