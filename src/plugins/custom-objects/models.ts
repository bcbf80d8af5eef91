/**
 * The run-time model registry: COT + field records → a Drizzle table, a REST `Resource` and a
 * `ModelInfo`, cached per COT and rebuilt whenever the COT's `shape_version` moves. Every lookup
 * reads that version from the database (one indexed row), so two app instances or isolates
 * sharing a database never serve a stale shape.
 */
import { and, asc, eq, getTableColumns, getTableName, inArray, sql, type SQL, type SQLWrapper } from "drizzle-orm";
import { integer, real, sqliteTable, text, type SQLiteColumn, type SQLiteTable } from "drizzle-orm/sqlite-core";
import { Reusable, type Executor, type Orm } from "../../db/client";
import { choiceSets, customObjectTypeFields, customObjectTypes } from "../../db/schema";
import { nowIso } from "../../db/schema/common";
import { ApiError, ErrorCollector, ValidationError } from "../../core/errors";
import { mapConstraintError } from "../../core/rest/constraints";
import { loadTags, nestedTag, resolveTags, setTags } from "../../core/models/define";
import type { ModelInfo } from "../../core/models/registry";
import { label as otLabel } from "../../core/object-types";
import { parseFilterNumber, type FilterSpec, type ListSpec } from "../../core/rest/query";
import type { ApiRecord, FieldDescription, ReadContext, Resource, WriteContext } from "../../core/rest/resource";
import { API_BASE, APP_LABEL } from "./constants";
import { fieldColumnTypes, fieldColumns, ident, linkTableName, tableName, valueColumn } from "./ddl";
import { encodeScalar, type FieldRow } from "./values";
import { FIELD_TYPE_MODULES, fieldType, type FieldTypeModule } from "./field-types";
import { resolveRef } from "./field-types/reference";

export type CotRow = typeof customObjectTypes.$inferSelect;

/**
 * A write started from a cached model whose COT has changed (or gone) since: nothing has been
 * written yet, and `liveResource` retries with the model read inside its transaction. Should it
 * ever reach a client, it is the same retryable 409 as a read that raced a schema change.
 */
export class StaleModel extends ApiError {
  constructor() {
    super(409, { detail: "The object type changed while this request ran; retry it.", error: "schema_changed" });
  }
}

export interface CotModel {
  cot: CotRow;
  /** Fields in record order: group_name, weight, name. */
  fields: FieldRow[];
  table: CotTable;
  resource: Resource;
  info: ModelInfo;
}

export type CotTable = SQLiteTable & { id: SQLiteColumn; created: SQLiteColumn; lastUpdated: SQLiteColumn };

export const instanceUrl = (baseUrl: string, slug: string, id: number) => `${baseUrl}/api/${API_BASE}/${slug}/${id}/`;
export const cotUrl = (baseUrl: string, id: number) => `${baseUrl}/api/${API_BASE}/custom-object-types/${id}/`;
export const verboseName = (cot: CotRow) => cot.verboseName || cot.name;

export function nestedCot(baseUrl: string, cot: CotRow): ApiRecord {
  return { id: cot.id, url: cotUrl(baseUrl, cot.id), display: verboseName(cot), name: cot.name, slug: cot.slug };
}

export function sortFields(fields: FieldRow[]): FieldRow[] {
  return [...fields].sort((a, b) => a.groupName.localeCompare(b.groupName) || a.weight - b.weight || a.name.localeCompare(b.name));
}

/** Keys objects that an object/multiobject field may point at, by object type id. */
async function relatedInfos(ctx: ReadContext, typeIds: number[]): Promise<Map<number, ModelInfo>> {
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
    for (const [col, type] of fieldColumnTypes(f)) cols[col] = type === "INTEGER" ? integer(col) : type === "REAL" ? real(col) : text(col);
  }
  return sqliteTable(tableName(cot.id), cols) as unknown as CotTable;
}

/**
 * @param embedded object type id → host model whose nested form can ride on the row query
 *   (host models never change shape, so the SQL can be built once with the model).
 */
export function buildModel(cot: CotRow, rawFields: FieldRow[], embedded: Map<number, ModelInfo> = new Map()): CotModel {
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

  // ---- list: filters, ordering, search -------------------------------------------------
  const filters: Record<string, FilterSpec> = {
    id: { kind: "number", expr: table.id },
    created: { kind: "datetime", expr: table.created },
    last_updated: { kind: "datetime", expr: table.lastUpdated },
    tag: {
      kind: "string",
      expr: table.id,
      lookups: ["exact", "n"],
      build: (lookup, values) => {
        const tagged = sql`${table.id} IN (SELECT ti.object_id FROM tagged_items ti JOIN tags t ON t.id = ti.tag_id WHERE ti.object_type_id = ${cot.objectTypeId} AND t.slug IN (${sql.join(values.map((v) => sql`${v}`), sql`, `)}))`;
        return lookup === "n" ? sql`NOT ${tagged}` : tagged;
      },
    },
  };
  const orderings: Record<string, SQLWrapper> = { id: table.id, created: table.created, last_updated: table.lastUpdated };
  const search: SQLWrapper[] = [];
  for (const f of fields) {
    if (f.filterLogic === "disabled") continue;
    const m = moduleOf.get(f)!;
    const own = valueColumn(f);
    const col = own ? column(own) : table.id;
    Object.assign(filters, m.filters(f, { column: col, columnNamed: column, id: table.id, linkTable: ident(linkTableName(cot.id, f.id)) }));
    if (m.orderable) orderings[f.name] = col;
    if (f.searchWeight > 0 && m.searchable) search.push(col);
  }
  const list: ListSpec = { filters, orderings, defaultOrdering: ["id"], search, idExpr: table.id };

  // ---- read --------------------------------------------------------------------------------
  const display = (row: Record<string, any>) => {
    if (primary) {
      const v = storage(primary) === "reference" ? row[valueColumn(primary)!] : moduleOf.get(primary)!.decode(row[primary.name]);
      if (v !== null && v !== undefined && v !== "") return typeof v === "object" ? JSON.stringify(v) : String(v);
    }
    return `${verboseName(cot)} ${row.id}`;
  };

  async function serialize(ctx: ReadContext, rows: Record<string, any>[]): Promise<ApiRecord[]> {
    if (!rows.length) return [];
    const ids = rows.map((r) => r.id as number);
    // Gather every reference, then fetch nested forms once per target type.
    const wanted = new Map<number, Set<number>>();
    const want = (typeId: number | null | undefined, id: number | null | undefined) => {
      if (typeId == null || id == null) return;
      (wanted.get(typeId) ?? wanted.set(typeId, new Set()).get(typeId)!).add(id);
    };
    const links = new Map<number, Map<number, { typeId: number; id: number }[]>>();
    const inline = new Map<string, Map<number, ApiRecord>>();
    for (const f of fields) {
      if (storage(f) === "reference" && rows.every((r) => `__n_${f.name}` in r)) {
        const info = embedded.get(f.relatedObjectTypeId!)!;
        const byId = new Map<number, ApiRecord>();
        for (const r of rows) {
          const id = r[`${f.name}_id`];
          const json = r[`__n_${f.name}`];
          if (id != null && json) byId.set(id, info.nestedSql!.build(ctx, id, JSON.parse(json)));
        }
        inline.set(f.name, byId);
      } else if (storage(f) === "reference") {
        for (const r of rows) want(f.isPolymorphic ? r[`${f.name}_type`] : f.relatedObjectTypeId, r[`${f.name}_id`]);
      } else if (storage(f) === "links") {
        const lt = ident(linkTableName(cot.id, f.id));
        const linkRows = (await ctx.db.all(
          sql`SELECT source_id, target_type, target_id FROM ${lt} WHERE source_id IN (${sql.join(ids.map((i) => sql`${i}`), sql`, `)}) ORDER BY source_id, position, target_id`,
        )) as { source_id: number; target_type: number | null; target_id: number }[];
        const bySource = new Map<number, { typeId: number; id: number }[]>();
        for (const l of linkRows) {
          const typeId = l.target_type ?? f.relatedObjectTypeId!;
          want(typeId, l.target_id);
          (bySource.get(l.source_id) ?? bySource.set(l.source_id, []).get(l.source_id)!).push({ typeId, id: l.target_id });
        }
        links.set(f.id, bySource);
      }
    }
    const infos = await relatedInfos(ctx, [...wanted.keys()]);
    // Every related type's nested forms in one statement where the models allow it.
    const groups = [...wanted].filter(([typeId]) => infos.has(typeId)).map(([typeId, idSet]) => [infos.get(typeId)!, [...idSet]] as [ModelInfo, number[]]);
    const byInfo = await ctx.services.models.nestedMany(ctx, groups);
    const nested = new Map<number, Map<number, ApiRecord>>();
    for (const typeId of wanted.keys()) nested.set(typeId, byInfo.get(infos.get(typeId)!) ?? new Map());
    const ots = await ctx.services.objectTypes.byIds([...wanted.keys()], ctx.db);
    const ref = (f: FieldRow, typeId: number, id: number): ApiRecord => {
      const n = nested.get(typeId)?.get(id) ?? { id };
      if (!f.isPolymorphic) return n;
      const ot = ots.get(typeId);
      return { object_type: ot ? otLabel(ot) : typeId, ...n };
    };
    // Tags come with the rows (see `load`); rows from elsewhere fetch them here.
    const tags = rows.every((r) => "__tags" in r) ? tagsFromRows(ctx, rows) : await loadTags(ctx, cot.objectTypeId!, ids);
    const cotRef = nestedCot(ctx.baseUrl, cot);
    return rows.map((row) => {
      const rec: ApiRecord = {
        id: row.id,
        url: instanceUrl(ctx.baseUrl, slug, row.id),
        display: display(row),
        custom_object_type: cotRef,
        created: row.created,
        last_updated: row.lastUpdated,
        tags: tags.get(row.id) ?? [],
      };
      for (const f of fields) {
        const kind = storage(f);
        if (kind === "reference") {
          const id = row[`${f.name}_id`];
          const typeId = f.isPolymorphic ? row[`${f.name}_type`] : f.relatedObjectTypeId;
          const known = inline.get(f.name);
          rec[f.name] = id == null || typeId == null ? null : known ? (known.get(id) ?? { id }) : ref(f, typeId, id);
        } else if (kind === "links") {
          rec[f.name] = (links.get(f.id)!.get(row.id) ?? []).map((l) => ref(f, l.typeId, l.id));
        } else {
          rec[f.name] = moduleOf.get(f)!.decode(row[f.name]);
        }
      }
      return rec;
    });
  }

  // The row query carries each object's tags as a JSON list, saving a statement per read.
  // (The outer id is spelled out: Drizzle renders a column unqualified in a select list.)
  const tagsColumn = sql<string>`(SELECT json_group_array(json(x.j)) FROM (SELECT json_object('id', t.id, 'name', t.name, 'slug', t.slug, 'color', t.color) AS j FROM tagged_items ti JOIN tags t ON t.id = ti.tag_id WHERE ti.object_type_id = ${cot.objectTypeId} AND ti.object_id = ${ident(tableName(cot.id))}.id ORDER BY t.name) x)`;
  const tagsFromRows = (ctx: ReadContext, rows: Record<string, any>[]) =>
    new Map(rows.map((r) => [r.id as number, (JSON.parse(r.__tags ?? "[]") as Parameters<typeof nestedTag>[1][]).map((t) => nestedTag(ctx.baseUrl, t))]));

  // Object fields pointing at host models carry their nested form in the row too.
  const embeddedFields = fields.filter((f) => storage(f) === "reference" && !f.isPolymorphic && embedded.get(f.relatedObjectTypeId!)?.nestedSql?.selectOne);
  const rowColumns: Record<string, SQLiteColumn | SQL> = { ...getTableColumns(table), __tags: tagsColumn };
  for (const f of embeddedFields) {
    const info = embedded.get(f.relatedObjectTypeId!)!;
    rowColumns[`__n_${f.name}`] = sql`${info.nestedSql!.selectOne!(sql`${ident(tableName(cot.id))}.${ident(`${f.name}_id`)}`)}`;
  }
  // Reads reuse two prepared queries per ORM: one object (get by id), and any number of them
  // (a page) with the ids passed as one JSON array — still a primary-key lookup per id.
  const loadOne = new Reusable((db) => db.select(rowColumns).from(table).where(eq(table.id, sql.placeholder("id"))).prepare());
  const loadMany = new Reusable((db) =>
    db
      .select(rowColumns)
      .from(table)
      .where(sql`${table.id} IN (SELECT value FROM json_each(${sql.placeholder("ids")}))`)
      .prepare(),
  );

  async function load(ctx: ReadContext, ids: number[]): Promise<ApiRecord[]> {
    if (!ids.length) return [];
    const orm = ctx.services.db.orm;
    const rows = (
      ids.length === 1 ? await loadOne.on(ctx.db, orm).all({ id: ids[0]! }) : await loadMany.on(ctx.db, orm).all({ ids: JSON.stringify(ids) })
    ) as Record<string, any>[];
    const byId = new Map(rows.map((r) => [r.id as number, r]));
    return serialize(ctx, ids.map((id) => byId.get(id)).filter(Boolean) as Record<string, any>[]);
  }

  // ---- write -------------------------------------------------------------------------------
  /**
   * One prepared statement starts every write: the COT's shape version and slug (a write that
   * began from a cached model that has gone stale stops here, before writing anything), the
   * allowed values of its choice sets, and whether the host objects named by the request's
   * object fields exist. Other references (polymorphic, multiobject, custom objects) are
   * checked by `existing_`.
   */
  const choiceSetIds = [...new Set(fields.map((f) => f.choiceSetId).filter((x): x is number => x != null))];
  const preflightColumns: Record<string, SQLiteColumn | SQL> = { v: customObjectTypes.shapeVersion, slug: customObjectTypes.slug };
  if (choiceSetIds.length) {
    preflightColumns.choices = sql<string>`(SELECT json_group_object(cs.id, json(cs.extra_choices)) FROM ${ident(getTableName(choiceSets))} cs WHERE cs.id IN (${sql.join(
      choiceSetIds.map((id) => sql`${id}`),
      sql`, `,
    )}))`;
  }
  for (const f of embeddedFields) {
    preflightColumns[`ref_${f.name}`] = sql<number>`${embedded.get(f.relatedObjectTypeId!)!.nestedSql!.selectOne!(sql`${sql.placeholder(f.name)}`)} IS NOT NULL`;
  }
  const preflightQuery = new Reusable((db) => db.select(preflightColumns).from(customObjectTypes).where(eq(customObjectTypes.id, cot.id)).prepare());

  async function preflight(ctx: WriteContext, refIds: Record<string, number | null>) {
    const [row] = (await preflightQuery.on(ctx.db, ctx.services.db.orm).all(refIds)) as Record<string, any>[];
    if (!row || row.v !== cot.shapeVersion || row.slug !== slug) throw new StaleModel();
    const choices = new Map<number, Set<string>>();
    for (const [id, pairs] of Object.entries(JSON.parse(row.choices ?? "{}") as Record<string, [string, string][]>)) {
      choices.set(Number(id), new Set(pairs.map(([v]) => v)));
    }
    return { choices, found: (field: string) => row[`ref_${field}`] === 1 };
  }
  const preflighted = new Set(embeddedFields);
  const notFoundMessage = (id: number) => `Related object not found using the provided numeric ID: ${id}`;

  /** Which of the referenced objects exist: one statement for every target type. */
  async function existing_(ctx: WriteContext, refs: { typeId: number; id: number }[], infos: Map<number, ModelInfo>): Promise<Set<string>> {
    const byType = new Map<number, number[]>();
    for (const r of refs) if (infos.has(r.typeId)) (byType.get(r.typeId) ?? byType.set(r.typeId, []).get(r.typeId)!).push(r.id);
    const groups = [...byType].map(([typeId, ids]) => [infos.get(typeId)!, ids] as [ModelInfo, number[]]);
    const found = await ctx.services.models.nestedMany(ctx, groups);
    const out = new Set<string>();
    for (const [typeId, ids] of byType) for (const id of ids) if (found.get(infos.get(typeId)!)?.has(id)) out.add(`${typeId}:${id}`);
    return out;
  }

  async function convert(ctx: WriteContext, input: ApiRecord, existing: Record<string, any> | null, partial: boolean) {
    const errors = new ErrorCollector();
    // Keyed by column names only, and without a prototype, so a missing key is never inherited.
    const values: Record<string, unknown> = Object.create(null);
    const multi = new Map<FieldRow, { typeId: number; id: number }[]>();
    let tagIds: number[] | null = null;
    const reserved = new Set(["id", "url", "display", "display_url", "created", "last_updated", "custom_object_type"]);
    for (const key of Object.keys(input)) if (!byName.has(key) && !reserved.has(key) && key !== "tags") errors.add(key, "Unknown field.");
    // The ids the request names in host-model object fields, for the preflight statement.
    const refIds: Record<string, number | null> = Object.create(null);
    for (const f of embeddedFields) {
      const raw = Object.prototype.hasOwnProperty.call(input, f.name) ? input[f.name] : existing ? undefined : f.default;
      const id = raw && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>).id : raw;
      refIds[f.name] = typeof id === "number" && Number.isInteger(id) ? id : null;
    }
    const pre = await preflight(ctx, refIds);
    const choices = pre.choices;
    const pending: { field: FieldRow; ref: { typeId: number; id: number } }[] = [];

    for (const f of fields) {
      const present = Object.hasOwn(input, f.name);
      let raw = present ? input[f.name] : undefined;
      if (!present) {
        if (existing && partial) continue;
        if (existing) {
          // PUT: keep stored values of omitted fields, but a required field must hold one.
          const own = valueColumn(f);
          const stored = own ? existing[own] : true;
          if (f.required && (stored === null || stored === undefined)) errors.add(f.name, "This field is required.");
          continue;
        }
        if (f.default !== null && f.default !== undefined) raw = f.default;
        else {
          if (f.required) errors.add(f.name, "This field is required.");
          continue;
        }
      }
      const isEmpty = raw === null || raw === "" || (Array.isArray(raw) && raw.length === 0);
      if (isEmpty && f.required) {
        errors.add(f.name, raw === null ? "This field may not be null." : "This field may not be blank.");
        continue;
      }
      const kind = storage(f);
      if (kind === "reference") {
        if (raw === null) {
          values[`${f.name}_id`] = null;
          if (f.isPolymorphic) values[`${f.name}_type`] = null;
          continue;
        }
        const r = await resolveRef(ctx, f, raw);
        if ("error" in r) errors.add(f.name, r.error);
        else {
          if (!preflighted.has(f) || refIds[f.name] !== r.id) pending.push({ field: f, ref: r });
          else if (!pre.found(f.name)) errors.add(f.name, notFoundMessage(r.id));
          values[`${f.name}_id`] = r.id;
          if (f.isPolymorphic) values[`${f.name}_type`] = r.typeId;
        }
        continue;
      }
      if (kind === "links") {
        if (raw === null) {
          multi.set(f, []);
          continue;
        }
        if (!Array.isArray(raw)) {
          errors.add(f.name, "Expected a list of items.");
          continue;
        }
        const refs: { typeId: number; id: number }[] = [];
        for (const item of raw) {
          const r = await resolveRef(ctx, f, item);
          if ("error" in r) errors.add(f.name, r.error);
          else if (!refs.some((x) => x.typeId === r.typeId && x.id === r.id)) {
            pending.push({ field: f, ref: r });
            refs.push(r);
          }
        }
        multi.set(f, refs);
        continue;
      }
      const checked = encodeScalar(f, raw, f.choiceSetId ? (choices.get(f.choiceSetId) ?? new Set()) : null);
      if ("error" in checked) errors.add(f.name, checked.error);
      else values[f.name] = checked.value;
    }
    if (pending.length) {
      const infos = await relatedInfos(ctx, [...new Set(pending.map((p) => p.ref.typeId))]);
      const found = await existing_(ctx, pending.map((p) => p.ref), infos);
      for (const { field, ref } of pending) {
        if (!found.has(`${ref.typeId}:${ref.id}`)) errors.add(field.name, notFoundMessage(ref.id));
      }
    }
    if (Object.prototype.hasOwnProperty.call(input, "tags")) {
      const r = await resolveTags(ctx, input.tags, APP_LABEL, slug);
      if ("error" in r) errors.add("tags", r.error);
      else tagIds = r.ids;
    }
    // A valid write leaves unique values to the UNIQUE indexes (see `uniqueChecked`); a write
    // that fails anyway looks them up so its 400 names every problem at once.
    if (!errors.empty) {
      for (const f of fields) {
        const col = valueColumn(f);
        if (!f.unique || !col) continue;
        const v = values[col];
        if (v === undefined || v === null || errors.errors[f.name]) continue;
        const clash = await ctx.db
          .select({ id: table.id })
          .from(table)
          .where(existing ? and(eq(column(col), v), sql`${table.id} <> ${existing.id}`) : eq(column(col), v))
          .limit(1);
        if (clash.length) errors.add(f.name, `${verboseName(cot)} with this ${f.name} already exists.`);
      }
    }
    errors.throwIfAny();
    return { values, multi, tagIds };
  }

  async function writeLinks(ctx: WriteContext, id: number, multi: Map<FieldRow, { typeId: number; id: number }[]>) {
    for (const [f, refs] of multi) {
      const lt = ident(linkTableName(cot.id, f.id));
      await ctx.db.run(sql`DELETE FROM ${lt} WHERE source_id = ${id}`);
      for (const [position, r] of refs.entries()) {
        await ctx.db.run(sql`INSERT INTO ${lt} (source_id, target_type, target_id, position) VALUES (${id}, ${f.isPolymorphic ? r.typeId : null}, ${r.id}, ${position})`);
      }
    }
  }

  /**
   * A unique index refusing a value becomes a 400 on that field, thrown from inside the
   * resource so bulk requests report it per item. SQLite only undoes the failed statement,
   * so the transaction goes on and the other items are still checked.
   */
  async function uniqueChecked<T>(write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (e) {
      const mapped = mapConstraintError(e, { verboseName: verboseName(cot), fieldForColumn: (c) => fields.find((x) => fieldColumns(x).includes(c))?.name ?? c });
      throw mapped instanceof ValidationError ? mapped : e;
    }
  }

  // A create writes every column through one prepared statement whose RETURNING clause is the
  // row query's select list, so the new record needs no second read.
  const insertColumns = Object.keys(getTableColumns(table)).filter((key) => key !== "id");
  const insertQuery = new Reusable((db) =>
    db
      .insert(table)
      .values(Object.fromEntries(insertColumns.map((key) => [key, sql.placeholder(key)])) as any)
      .returning(rowColumns as any)
      .prepare(),
  );

  const resource: Resource = {
    appLabel: APP_LABEL,
    model: slug,
    objectTypeId: cot.objectTypeId ?? undefined,
    verboseName: verboseName(cot),
    table,
    list,
    briefFields: ["id", "url", "display"],
    load,
    async createLoaded(ctx, input) {
      const { values, multi, tagIds } = await convert(ctx, input, null, false);
      const now = nowIso();
      const params: Record<string, unknown> = Object.create(null);
      for (const key of insertColumns) params[key] = (Object.hasOwn(values, key) ? values[key] : null) ?? null;
      params.created = params.lastUpdated = now;
      const [row] = (await uniqueChecked(() => insertQuery.on(ctx.db, ctx.services.db.orm).all(params))) as Record<string, any>[];
      const id = row!.id as number;
      await writeLinks(ctx, id, multi);
      if (tagIds) {
        await setTags(ctx, cot.objectTypeId!, id, tagIds);
        delete row!.__tags; // read after they were set
      }
      const [record] = await serialize(ctx, [row!]);
      return { id, record: record! };
    },
    async create(ctx, input) {
      return (await resource.createLoaded!(ctx, input)).id;
    },
    async update(ctx, id, input, partial) {
      const [existing] = (await ctx.db.select().from(table).where(eq(table.id, id))) as Record<string, any>[];
      const { values, multi, tagIds } = await convert(ctx, input, existing!, partial);
      // Written by hand: Drizzle's update looks every column up in the set object, so a column
      // named like a prototype key (`constructor`, stored before such names were reserved)
      // would be "set" to the inherited function.
      const assignments = Object.keys(values).map((col) => sql`${ident(col)} = ${values[col]}`);
      assignments.push(sql`"last_updated" = ${nowIso()}`);
      await uniqueChecked(() => ctx.db.run(sql`UPDATE ${ident(tableName(cot.id))} SET ${sql.join(assignments, sql`, `)} WHERE id = ${id}`));
      await writeLinks(ctx, id, multi);
      if (tagIds) await setTags(ctx, cot.objectTypeId!, id, tagIds);
    },
    async delete(ctx, id) {
      for (const f of fields) if (storage(f) === "links") await ctx.db.run(sql`DELETE FROM ${ident(linkTableName(cot.id, f.id))} WHERE source_id = ${id}`);
      await ctx.db.delete(table).where(eq(table.id, id));
    },
    fieldForColumn(column) {
      const f = fields.find((x) => fieldColumns(x).includes(column));
      return f ? f.name : column;
    },
    describe: fields.map((f) => ({ name: f.name, kind: moduleOf.get(f)!.describeKind, choiceSetId: f.choiceSetId ?? null })),
    tagged: true,
    relations: fields
      .filter((f) => storage(f) !== "column")
      .map((f) => ({
        name: f.name,
        many: storage(f) === "links",
        polymorphic: f.isPolymorphic,
        targetTypeId: f.isPolymorphic ? undefined : (f.relatedObjectTypeId ?? undefined),
        targetTypeIds: f.isPolymorphic ? f.relatedObjectTypeIds : undefined,
        expr: storage(f) === "reference" && !f.isPolymorphic ? column(valueColumn(f)!) : undefined,
      })),
  };

  const nestedCols: Record<string, SQLiteColumn> = { id: table.id };
  if (primary) for (const c of fieldColumns(primary)) nestedCols[c] = column(c);
  const info: ModelInfo = {
    appLabel: APP_LABEL,
    model: slug,
    verboseName: verboseName(cot),
    resource,
    async nested(ctx, ids) {
      const out = new Map<number, ApiRecord>();
      if (!ids.length) return out;
      const rows = (await ctx.db.select(nestedCols).from(table).where(inArray(table.id, ids))) as Record<string, any>[];
      for (const row of rows) out.set(row.id, { id: row.id, url: instanceUrl(ctx.baseUrl, slug, row.id), display: display(row) });
      return out;
    },
    nestedSql: {
      select: (ids) =>
        sql`SELECT ${table.id} AS id, json_object(${sql.join(
          Object.entries(nestedCols).map(([k, c]) => sql`${k}, ${c}`),
          sql`, `,
        )}) AS j FROM ${table} WHERE ${inArray(table.id, ids)}`,
      build: (ctx, id, row) => ({ id, url: instanceUrl(ctx.baseUrl, slug, id), display: display(row) }),
    },
  };
  return { cot, fields, table, resource, info };
}

/** Types whose fields point at objects. */
const REFERENCE_TYPES = FIELD_TYPE_MODULES.filter((m) => m.storage !== "column").map((m) => m.name);

/** Caches built models by COT id; `shape_version` in the database decides freshness. */
export class CotRegistry {
  #models = new Map<number, CotModel>();

  constructor(
    private readonly orm: Orm,
    /**
     * Host models (static shapes) by object type id, for nested forms embedded in row queries.
     * Runs on `db`: inside a write that is the open transaction, which holds the connection.
     */
    private readonly hostModels?: (objectTypeIds: number[], db: Executor) => Promise<Map<number, ModelInfo>>,
  ) {}

  /** Version lookups, prepared once (Drizzle's query building is a hot spot). */
  static #version = { id: customObjectTypes.id, shapeVersion: customObjectTypes.shapeVersion };
  #versionBySlug = new Reusable((db) => db.select(CotRegistry.#version).from(customObjectTypes).where(eq(customObjectTypes.slug, sql.placeholder("slug"))).limit(1).prepare());
  #versionById = new Reusable((db) => db.select(CotRegistry.#version).from(customObjectTypes).where(eq(customObjectTypes.id, sql.placeholder("id"))).limit(1).prepare());

  async #fresh(db: Executor, row: Pick<CotRow, "id" | "shapeVersion"> | undefined): Promise<CotModel | null> {
    if (!row) return null;
    const cached = this.#models.get(row.id);
    if (cached && cached.cot.shapeVersion === row.shapeVersion) return cached;
    const [cot] = await db.select().from(customObjectTypes).where(eq(customObjectTypes.id, row.id));
    if (!cot) return null;
    const fields = await db.select().from(customObjectTypeFields).where(eq(customObjectTypeFields.customObjectTypeId, cot.id)).orderBy(asc(customObjectTypeFields.id));
    const targets = fields.filter((f) => fieldType(f.type).storage === "reference" && !f.isPolymorphic && f.relatedObjectTypeId != null).map((f) => f.relatedObjectTypeId!);
    const model = buildModel(cot, fields, targets.length && this.hostModels ? await this.hostModels(targets, db) : new Map());
    // Only cache what was read outside a transaction's uncommitted changes (callers pass the ORM).
    this.#models.set(cot.id, model);
    return model;
  }

  async bySlug(db: Executor, slug: string): Promise<CotModel | null> {
    const [row] = await this.#versionBySlug.on(db, this.orm).all({ slug });
    return this.#fresh(db, row);
  }

  async byId(db: Executor, id: number): Promise<CotModel | null> {
    const [row] = await this.#versionById.on(db, this.orm).all({ id });
    return this.#fresh(db, row);
  }

  /**
   * Every COT's model, fresh, in id order, with a signature of their shape versions (one
   * statement when nothing changed): readers that build something from all types at once
   * (GraphQL) rebuild it when the signature moves.
   */
  async all(db: Executor): Promise<{ signature: string; models: CotModel[] }> {
    const rows = await this.#versions.on(db, this.orm).all({});
    const models: CotModel[] = [];
    for (const row of rows) {
      const model = await this.#fresh(db, row);
      if (model) models.push(model);
    }
    return { signature: rows.map((r) => `${r.id}:${r.shapeVersion}`).join(","), models };
  }

  #versions = new Reusable((db) => db.select(CotRegistry.#version).from(customObjectTypes).orderBy(asc(customObjectTypes.id)).prepare());

  /** A model this registry already holds for `slug`, without asking the database. */
  cachedBySlug(slug: string): CotModel | null {
    for (const model of this.#models.values()) if (model.cot.slug === slug) return model;
    return null;
  }

  /**
   * Every field that can point at objects of `objectTypeId` (ordered by COT, then field), with
   * its model. One prepared statement reads the fields' ids together with their COTs' shape
   * versions; the field definitions come from the models those versions validate.
   */
  async fieldsPointingAt(db: Executor, objectTypeId: number): Promise<{ field: FieldRow; model: CotModel }[]> {
    const rows = await this.#linking.on(db, this.orm).all({ ot: objectTypeId });
    const out: { field: FieldRow; model: CotModel }[] = [];
    for (const row of rows) {
      const model = await this.#fresh(db, { id: row.cotId, shapeVersion: row.shapeVersion });
      const field = model?.fields.find((f) => f.id === row.fieldId);
      if (model && field) out.push({ field, model });
    }
    return out;
  }

  #linking = new Reusable((db) => {
    const f = customObjectTypeFields;
    const t = customObjectTypes;
    const ot = sql.placeholder("ot");
    return db
      .select({ fieldId: f.id, cotId: f.customObjectTypeId, shapeVersion: t.shapeVersion })
      .from(f)
      .innerJoin(t, eq(t.id, f.customObjectTypeId))
      .where(
        sql`${f.type} IN (${sql.join(REFERENCE_TYPES.map((t) => sql`${t}`), sql`, `)}) AND (${f.relatedObjectTypeId} = ${ot} OR (${f.isPolymorphic} = 1 AND EXISTS (SELECT 1 FROM json_each(${f.relatedObjectTypeIds}) je WHERE je.value = ${ot})))`,
      )
      .orderBy(f.customObjectTypeId, f.id)
      .prepare();
  });

  forget(id: number) {
    this.#models.delete(id);
  }
}
