/**
 * Declarative host models: a table plus field specs become a `Resource` (validation,
 * serialisation with nested relations and tags, filters, ordering, search) and a `ModelInfo`.
 */
import { nameableTagsOf, tagNotFound } from "./tag-scope";
import {
  and,
  eq,
  getTableColumns,
  getTableName,
  sql,
  type SQL,
  type SQLWrapper,
} from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { requestFilters } from "../changes/request-filters";
import { takeRestoreId } from "../changes/restore-id";
import {
  objectTypes as objectTypesTable,
  taggedItems,
  tags as tagsTable,
  tagObjectTypes,
} from "../../db/schema";
import { ErrorCollector, ValidationError } from "../errors";
import {
  MAX_JSON_CHARS,
  MAX_LONGTEXT_CHARS,
  MAX_TAGS_PER_VALUE,
  TOO_MANY_TAGS_MESSAGE,
} from "../limits";
import {
  type FilterCheck,
  jsonFilter,
  toInstant,
  type FilterSpec,
  type ListSpec,
} from "../rest/query";
import type {
  ApiRecord,
  LoadPlan,
  FieldDescription,
  ReadContext,
  Resource,
  WriteContext,
} from "../rest/resource";
import type { ModelInfo } from "./registry";
import { outsideTransaction } from "../../db/client";
import { Prebuilt } from "../../db/driver-internals";
import { inJsonList, unionAll } from "../../db/d1-limits";
import { jsonKey } from "../../db/json-key";
import { namedExpressions } from "../../db/wide-select";
import { label as otLabel, type ObjectTypeRow, spellingOf } from "../object-types";
import { type SlotKey, Slots, slotKey } from "../slots";
import { editStamp } from "../../db/schema/common";
import { naturalize } from "../../db/natural";
import { viewableRefs } from "../auth/restrict";
import { keepUnseen, writerSight } from "../auth/type-sight";
import { stageable, stagedWrites } from "./staged";
import type { ModelOpenApi } from "../json-schema";
import type { StagedModelHook } from "./staged";
import { CUSTOM_FIELDS_KEY, customFieldsError } from "./custom-fields";

type FieldType =
  | "string"
  | "text"
  | "slug"
  | "integer"
  /** A fixed-point number (NetBox's `DecimalField`): stored REAL, answered as a JSON number. */
  | "decimal"
  | "boolean"
  | "choice"
  | "fk"
  | "datetime"
  | "json"
  | "color"
  | "password"
  | "m2m"
  | "object_types"
  /** An object type id column, read as `{id, app_label, model}`. */
  | "object_type_ref"
  /** A JSON list of object type ids, read as a list of `{id, app_label, model}`. */
  | "object_type_refs";

export interface FieldSpec {
  name: string;
  type: FieldType;
  column?: SQLiteColumn;
  required?: boolean;
  nullable?: boolean;
  maxLength?: number;
  choices?: readonly (readonly [string, string])[];
  /** `app_label.model` of the target (fk, m2m). */
  related?: string;
  /**
   * An fk target with a slug: `?<name>=<slug>` filters by it, as NetBox's filter sets do (with
   * `<name>_id` by id; decision 0200).
   */
  relatedSlug?: { table: SQLiteTable & { id: SQLiteColumn }; slug: SQLiteColumn };
  /** Link table for m2m / object_types: `own` points at this model, `other` at the target. */
  link?: { table: SQLiteTable; own: SQLiteColumn; other: SQLiteColumn };
  readOnly?: boolean;
  writeOnly?: boolean;
  search?: boolean;
  brief?: boolean;
  /** `decimal`: NetBox's digits (in all, after the point) and the range Host holds it to. */
  decimal?: { maxDigits: number; places: number; min: number; max: number };
  /** Extra check on a converted value; returns an error message or null. */
  check?: (value: unknown) => string | null;
  /**
   * Object type fields: the field names types whatever the caller holds on them, as the model's
   * own view permission decides (custom object type definitions, decision 0129); without it, a
   * caller sees and names only the types they may see (decision 0187).
   */
  namesAnyType?: boolean;
}

export interface ModelSpec {
  appLabel: string;
  model: string;
  verboseName: string;
  /** API path below `/api/`, e.g. `dcim/sites`. */
  path: string;
  table: SQLiteTable & { id: SQLiteColumn };
  fields: FieldSpec[];
  display: (row: Record<string, any>) => string;
  tags?: boolean;
  /**
   * False for a model whose objects no write changes (log-like and read-only models): its list
   * has no `created_by_request` / `updated_by_request` / `modified_by_request` filters.
   */
  changeLogged?: false;
  /** NetBox's primary models carry `custom_fields` (always `{}` here: decision 0200). */
  customFields?: boolean;
  defaultOrdering?: string[];
  /** Cross-field validation after per-field conversion; `existing` on updates. */
  validate?: (
    ctx: WriteContext,
    values: Record<string, unknown>,
    existing: Record<string, any> | null,
    errors: ErrorCollector,
  ) => Promise<void>;
  /**
   * `validate` neither reads nor writes the database (it checks and fills `values` only): staged
   * writes run it too, and the model's writes stay one read and one atomic batch.
   */
  validateReadsNothing?: boolean;
  /** `decorate` reads nothing (it derives keys from the rows): staged writes run it too. */
  decorateReadsNothing?: boolean;
  /**
   * Fk fields `validate` fills with the acting user (a webhook's or event rule's owner): a staged
   * write reads that user's nested form in its read phase.
   */
  writerFields?: string[];
  /**
   * What `validate`, `afterWrite` and `decorate` read, staged (decision 0092): the model's reads
   * join a staged write's read phase, and the answer checks, decorates and guards from them.
   * A model with it stages its creates and updates though it has those hooks.
   */
  stage?: StagedModelHook;
  /** Runs after insert/update with the final row id. */
  afterWrite?: (ctx: WriteContext, id: number, input: ApiRecord, created: boolean) => Promise<void>;
  /** Adds or rewrites keys of serialised records. */
  decorate?: (ctx: ReadContext, rows: Record<string, any>[], records: ApiRecord[]) => Promise<void>;
  /**
   * What `decorate` reads, as one statement for a load's one read (decision 0143): the objects'
   * ids are SQL (a page) or one id; `decorated` decorates from that statement's answer.
   */
  decoratePlan?: (
    ctx: ReadContext,
    ids: SQL | number,
  ) => {
    /** One statement (`decorated` takes its answer), or several (it takes their answers). */
    statement: LoadPlan["statements"][number] | LoadPlan["statements"];
    decorated: (
      answer: unknown,
    ) => (rows: Record<string, any>[], records: ApiRecord[]) => Promise<void>;
  };
  /** What the OpenAPI document cannot read from `fields` (keys `decorate` adds, wider inputs). */
  openapi?: ModelOpenApi;
  /** Orders `field` naturally ("Site 2" before "Site 10") through a stored key column. */
  naturalOrdering?: { field: string; column: SQLiteColumn };
  /**
   * Fills stored columns computed from a write's values (keys as the table's), for the fields it
   * sets: a prefix's and an address's numbers for the network filters (`inventory.ts`).
   */
  derive?: (values: Record<string, unknown>) => void;
}

/** Fields every record carries and writes may echo back; they are ignored on input. */
const READ_ONLY_KEYS = new Set(["id", "url", "display", "display_url", "created", "last_updated"]);

const SLUG_RE = /^[-a-zA-Z0-9_]+$/;
const COLOR_RE = /^[0-9a-f]{6}$/;

export interface DefinedModel {
  spec: ModelSpec;
  resource: Resource;
  info: ModelInfo;
  /** Rows to records as `load` answers them (a staged write's records before its batch). */
  serialize: Serialize;
}

export function recordUrl(baseUrl: string, path: string, id: number) {
  return `${baseUrl}/api/${path}/${id}/`;
}

/**
 * `?tag=<slug>` and `?tag_id=<id>` over objects of one type, given by object type id when the
 * model knows it (custom objects) or by app label and model: as NetBox's TagFilter and TagIDFilter
 * (`conjoined`), several are objects holding all of them; `__n` holds none of them.
 */
export function tagFilters(
  id: SQLWrapper,
  type: { objectTypeId: number | null } | { appLabel: string; model: string },
): { tag: FilterSpec; tag_id: FilterSpec } {
  return { tag: tagFilterBy("slug", id, type), tag_id: tagFilterBy("id", id, type) };
}

/** The tag id values of `param`: whole numbers, or 400. */
function tagIds(param: string, values: string[]): number[] {
  return values.map((v) => {
    const n = /^\d{1,15}$/.test(v.trim()) ? Number(v.trim()) : null;
    if (n === null) throw new ValidationError({ [param]: ["Enter a tag id (a whole number)."] });
    return n;
  });
}

function tagFilterBy(
  key: "slug" | "id",
  id: SQLWrapper,
  type: { objectTypeId: number | null } | { appLabel: string; model: string },
  /** The caller's view condition over the tags table (`heldTo`); undefined: every tag. */
  view?: SQL,
): FilterSpec {
  const ofType =
    "objectTypeId" in type
      ? sql`FROM tagged_items ti JOIN tags t ON t.id = ti.tag_id WHERE ti.object_type_id = ${type.objectTypeId}`
      : sql`FROM tagged_items ti JOIN tags t ON t.id = ti.tag_id JOIN object_types ot ON ot.id = ti.object_type_id WHERE ot.app_label = ${type.appLabel} AND ot.model = ${type.model}`;
  // the inner `tags` is unaliased: the view's columns name it, never the outer `t`
  const visible = view
    ? sql` AND t.id IN (SELECT ${tagsTable.id} FROM ${tagsTable} WHERE ${view})`
    : sql``;
  const name = key === "slug" ? "tag" : "tag_id";
  const tagged = (param: string, raw: string[]) => {
    const values: Array<string | number> = [
      ...new Set<string | number>(key === "slug" ? raw : tagIds(param, raw)),
    ];
    // the values are one JSON list: one bound value, one text for any number (decision 0188)
    const holders = sql`${ofType}${visible} AND ${inJsonList(key === "slug" ? sql`t.slug` : sql`t.id`, values)}`;
    return { values, holders, among: sql`(SELECT ti.object_id ${holders})` };
  };
  return {
    kind: key === "slug" ? "string" : "number",
    expr: id,
    lookups: ["exact", "n"],
    // any of them (a constraint's or GraphQL's `in`), or none of them
    build: (lookup, raw) => {
      const { among } = tagged(lookup === "n" ? `${name}__n` : name, raw);
      return lookup === "n" ? sql`NOT (${id} IN ${among})` : sql`${id} IN ${among}`;
    },
    // a query string's several: the objects holding every one (a hidden tag: held by none seen)
    conjoined: (raw) => {
      const { values, holders } = tagged(name, raw);
      return sql`${id} IN (SELECT ti.object_id ${holders} GROUP BY ti.object_id HAVING COUNT(DISTINCT ti.tag_id) = ${values.length})`;
    },
    heldTo: { labels: ["extras.tag"], within: ([v]) => tagFilterBy(key, id, type, v) },
    known: (param, raw) => knownTags(key, param, raw, view),
  };
}

/**
 * NetBox's `TagFilter` / `TagIDFilter` are model choice filters: a value naming no tag is a 400
 * keyed by the parameter, not an empty list. A tag outside the caller's view (`view`) names
 * nothing to them (decision 0178): the same 400 as a missing one.
 */
function knownTags(key: "slug" | "id", param: string, raw: string[], view?: SQL): FilterCheck {
  const values = key === "slug" ? raw : tagIds(param, raw);
  const column = key === "slug" ? tagsTable.slug : tagsTable.id;
  const visible = view ? sql` AND ${view}` : sql``;
  return {
    statement: sql`SELECT ${column} AS v FROM ${tagsTable} WHERE ${inJsonList(column, values)}${visible}`,
    judge: (rows) => {
      const found = new Set((rows as { v: unknown }[]).map((r) => String(r.v)));
      const missing = values.find((v) => !found.has(String(v)));
      if (missing !== undefined)
        throw new ValidationError({
          [param]: [`Select a valid choice. ${missing} is not one of the available choices.`],
        });
    },
  };
}

/**
 * `?<fk>=<slug>`: the rows whose fk target has one of the slugs, among the targets the caller may
 * view (`view`, its condition over the target's table; a hidden one matches as a missing one).
 */
function relatedSlugFilter(
  fk: SQLiteColumn,
  target: NonNullable<FieldSpec["relatedSlug"]>,
  label: string,
  view?: SQL,
): FilterSpec {
  const visible = view ? sql` AND ${view}` : sql``;
  return {
    kind: "string",
    expr: fk,
    lookups: ["exact", "n"],
    build: (lookup, values) => {
      // the slugs are one JSON list: one bound value, one text for any number (decision 0188)
      const matched = sql`${fk} IN (SELECT ${target.table.id} FROM ${target.table} WHERE ${inJsonList(target.slug, values)}${visible})`;
      return lookup === "n" ? sql`(${fk} IS NULL OR NOT ${matched})` : matched;
    },
    heldTo: { labels: [label], within: ([v]) => relatedSlugFilter(fk, target, label, v) },
  };
}

/** Builds resource + model info from a spec. */
export function defineModel(spec: ModelSpec): DefinedModel {
  const m = modelParts(spec);
  const serialize = serializer(m);
  const { convertInput, writeLinks } = inputConverter(m);
  const { table } = m;
  const resource: Resource = {
    appLabel: spec.appLabel,
    model: spec.model,
    verboseName: spec.verboseName,
    table,
    list: listSpec(spec, m.scalar),
    briefFields: ["id", "url", "display", ...spec.fields.filter((f) => f.brief).map((f) => f.name)],
    ...loaders(m, serialize),
    async create(ctx, input) {
      const { values, links, tagIds } = await convertInput(ctx, input, null, false);
      // a reverted delete puts the object back under its old id (decision 0088)
      const restoreId = takeRestoreId(ctx, spec.appLabel, spec.model);
      const [row] = (await ctx.db
        .insert(table)
        .values((restoreId === undefined ? values : { ...values, id: restoreId }) as any)
        .returning({ id: table.id })) as { id: number }[];
      await writeLinks(ctx, row!.id, links, tagIds);
      await spec.afterWrite?.(ctx, row!.id, input, true);
      return row!.id;
    },
    async update(ctx, id, input, partial) {
      const [existing] = (await ctx.db.select().from(table).where(eq(table.id, id))) as Record<
        string,
        any
      >[];
      const { values, links, tagIds } = await convertInput(ctx, input, existing!, partial);
      await ctx.db
        .update(table)
        .set({ ...values, lastUpdated: editStamp() } as any)
        .where(eq(table.id, id));
      await writeLinks(ctx, id, links, tagIds);
      await spec.afterWrite?.(ctx, id, input, false);
    },
    async delete(ctx, id) {
      await ctx.db.delete(table).where(eq(table.id, id));
    },
    fieldForColumn(column) {
      const f = m.scalar.find((x) => x.column!.name === column);
      return f ? f.name : column;
    },
    describe: spec.fields.filter((f) => !f.writeOnly).map(describeField),
    typeFields: spec.fields.filter(heldToSight).map((f) => f.name),
    tagged: !!spec.tags,
    relations: spec.fields
      .filter((f) => (f.type === "fk" || f.type === "m2m") && f.related && !f.writeOnly)
      .map((f) => ({
        name: f.name,
        target: f.related!,
        many: f.type === "m2m",
        expr: f.type === "fk" ? f.column : undefined,
        targetsOf: f.type === "m2m" && f.link ? linkedIds(f.link) : undefined,
      })),
  };

  // deletes need no conversion: every model stages them; creates and updates where no hook runs
  const staged = stagedWrites({
    spec,
    table,
    resource,
    keyOf: m.keyOf,
    // the staged writer checks foreign keys itself; other types read nothing
    convertValue: (ctx, f, raw) => convertValue(ctx, f as FieldSpec, raw, async () => false),
    serialize,
    objectTypeId: m.objectTypeId,
    nestedTag,
  });
  resource.staged = stageable(spec) ? staged : { delete: staged.delete };
  return { spec, resource, info: modelInfo(m, resource), serialize };
}

/** An object type field whose types the caller sees only as far as they may (decision 0187). */
const heldToSight = (f: FieldSpec) =>
  (f.type === "object_types" || f.type === "object_type_ref" || f.type === "object_type_refs") &&
  !f.namesAnyType &&
  !f.writeOnly;

/** What the parts of one model share: its spec, its table and the column → property key map. */
interface ModelParts {
  spec: ModelSpec;
  table: ModelSpec["table"];
  keyOf: (col: SQLiteColumn) => string;
  fieldsByName: Map<string, FieldSpec>;
  /** The fields stored in a column of the table (not link tables). */
  scalar: FieldSpec[];
  objectTypeId: (ctx: ReadContext) => Promise<number>;
}

function modelParts(spec: ModelSpec): ModelParts {
  const table = spec.table;
  const columnKeys = new Map<SQLiteColumn, string>();
  for (const [key, col] of Object.entries(getTableColumns(table)))
    columnKeys.set(col as SQLiteColumn, key);
  return {
    spec,
    table,
    keyOf: (col: SQLiteColumn) => columnKeys.get(col)!,
    fieldsByName: new Map(spec.fields.map((f) => [f.name, f])),
    scalar: spec.fields.filter((f) => f.column),
    objectTypeId: async (ctx: ReadContext) =>
      (await ctx.services.objectTypes.ensure(spec.appLabel, spec.model, ctx.db)).id,
  };
}

/** The list endpoint's filters, orderings and search columns, read from the field specs. */
function listSpec(spec: ModelSpec, scalar: FieldSpec[]): ListSpec {
  const table = spec.table;
  const filters: Record<string, FilterSpec> = { id: { kind: "number", expr: table.id } };
  const orderings: Record<string, SQLWrapper> = {
    id: table.id,
    created: (table as any).created,
    last_updated: (table as any).lastUpdated,
  };
  for (const f of scalar) {
    if (f.writeOnly) continue;
    const col = f.column!;
    const kind =
      f.type === "integer" || f.type === "fk" || f.type === "decimal"
        ? "number"
        : f.type === "boolean"
          ? "boolean"
          : f.type === "datetime"
            ? "datetime"
            : "string";
    if (f.type !== "json") {
      filters[f.type === "fk" ? `${f.name}_id` : f.name] = { kind, expr: col };
      orderings[f.name] = col;
    } else filters[f.name] = jsonFilter(col);
    if (f.type === "fk" && f.relatedSlug)
      filters[f.name] = relatedSlugFilter(col, f.relatedSlug, f.related!);
  }
  if (spec.naturalOrdering) orderings[spec.naturalOrdering.field] = spec.naturalOrdering.column;
  filters.created = { kind: "datetime", expr: (table as any).created };
  filters.last_updated = { kind: "datetime", expr: (table as any).lastUpdated };
  if (spec.changeLogged !== false)
    Object.assign(
      filters,
      requestFilters(table.id, { appLabel: spec.appLabel, model: spec.model }),
    );
  if (spec.tags) {
    Object.assign(filters, tagFilters(table.id, { appLabel: spec.appLabel, model: spec.model }));
  }
  return {
    filters,
    orderings,
    defaultOrdering: spec.defaultOrdering ?? ["id"],
    search: scalar.filter((f) => f.search).map((f) => f.column!),
    idExpr: table.id,
  };
}

type Serialize = (
  ctx: ReadContext,
  rows: Record<string, any>[],
  /** The objects' tags when `load` read them with the rows. */
  tags?: Map<unknown, ApiRecord[]>,
  /** The related objects' nested forms by field, when a staged write read them already. */
  known?: Map<string, Map<number, ApiRecord>>,
  /** Link fields' values by field then row id, when a staged write read them already. */
  knownLinks?: Map<string, Map<unknown, unknown[]>>,
  /** `decorate` from what a staged write read (`ModelSpec.stage`). */
  decorated?: (rows: Record<string, any>[], records: ApiRecord[]) => Promise<void>,
) => Promise<ApiRecord[]>;

/** Rows to API records: relations nested, links listed, tags and object type refs resolved. */
function serializer(m: ModelParts): Serialize {
  const { spec } = m;
  return async (ctx, rows, tags, known, knownLinks, decorated) => {
    if (!rows.length) return [];
    const ids = rows.map((r) => r.id as number);
    const related = known
      ? new Map<string, Map<number, ApiRecord>>(known)
      : await foreignRecords(m, ctx, rows);
    const links = knownLinks ?? (await linkedRecords(m, ctx, ids));
    const tagsOf: Map<unknown, ApiRecord[]> | null = spec.tags
      ? (tags ?? (await loadTags(ctx, await m.objectTypeId(ctx), ids)))
      : null;
    const refOf = await objectTypeRefs(m, ctx, rows);
    const records = rows.map((row) => {
      const rec = recordOf(m, ctx, row, { related, links, refOf });
      if (tagsOf) rec.tags = tagsOf.get(row.id) ?? [];
      if (spec.customFields) rec.custom_fields = {};
      rec.created = row.created;
      rec.last_updated = row.lastUpdated;
      return rec;
    });
    if (decorated) await decorated(rows, records);
    else await spec.decorate?.(ctx, rows, records);
    return records;
  };
}

/**
 * Nested forms of foreign keys a load's own read carried, by `app.model:field`: every id the
 * rows name was looked up in that read, so an id missing from it names nothing.
 */
const fkFormsRead = slotKey<Map<string, Map<number, ApiRecord>>>("fk forms read");

/** The nested forms of the objects the rows' foreign keys point at, by field name. */
async function foreignRecords(m: ModelParts, ctx: ReadContext, rows: Record<string, any>[]) {
  const related = new Map<string, Map<number, ApiRecord>>();
  const carried = ctx.scratch?.get(fkFormsRead);
  for (const f of m.spec.fields) {
    if (f.type !== "fk") continue;
    const read = carried?.get(`${m.spec.appLabel}.${m.spec.model}:${f.name}`);
    if (read) {
      related.set(f.name, read);
      continue;
    }
    const [app, model] = f.related!.split(".") as [string, string];
    const info = await ctx.services.models.get(app, model, ctx);
    const fkIds = [
      ...new Set(rows.map((r) => r[m.keyOf(f.column!)]).filter((v) => v != null)),
    ] as number[];
    related.set(f.name, info && fkIds.length ? await info.nested(ctx, fkIds) : new Map());
  }
  return related;
}

/**
 * Link fields' values a load's own read carried (decision 0143), by `app.model:field`, then
 * object id: every object of the load was looked up in that read.
 */
const linksRead = slotKey<Map<string, Map<unknown, unknown[]>>>("links read");

/** Many-to-many and object-type links: by field name, each object's nested targets or labels. */
async function linkedRecords(m: ModelParts, ctx: ReadContext, ids: number[]) {
  const links = new Map<string, Map<unknown, unknown[]>>();
  const carried = ctx.scratch?.get(linksRead);
  for (const f of m.spec.fields) {
    if (f.type !== "m2m" && f.type !== "object_types") continue;
    const read = carried?.get(`${m.spec.appLabel}.${m.spec.model}:${f.name}`);
    if (read) {
      links.set(f.name, read);
      continue;
    }
    const { table: link, own, other } = f.link!;
    const pairs = (await ctx.db
      .select({ own: own, other: other })
      .from(link)
      .where(inJsonList(own, ids))) as { own: number; other: number }[];
    const byOwn = new Map<number, unknown[]>();
    if (f.type === "object_types") {
      const ots = await ctx.services.objectTypes.byIds(
        pairs.map((p) => p.other),
        ctx.db,
      );
      for (const p of pairs) {
        const ot = ots.get(p.other);
        if (ot) (byOwn.get(p.own) ?? byOwn.set(p.own, []).get(p.own)!).push(otLabel(ot));
      }
      for (const v of byOwn.values()) (v as string[]).sort();
    } else {
      const [app, model] = f.related!.split(".") as [string, string];
      const info = await ctx.services.models.get(app, model, ctx);
      const nested = info
        ? await info.nested(ctx, [...new Set(pairs.map((p) => p.other))])
        : new Map();
      for (const p of pairs.sort((a, b) => a.other - b.other)) {
        const n = nested.get(p.other);
        if (n) (byOwn.get(p.own) ?? byOwn.set(p.own, []).get(p.own)!).push(n);
      }
    }
    links.set(f.name, byOwn);
  }
  return links;
}

type ObjectTypeRef = { id: number; app_label?: string; model?: string };

/** Reads the object types the rows' `object_type_ref(s)` columns name, once for all rows. */
async function objectTypeRefs(
  m: ModelParts,
  ctx: ReadContext,
  rows: Record<string, any>[],
): Promise<(id: number) => ObjectTypeRef> {
  const refFields = m.spec.fields.filter(
    (f) => f.type === "object_type_ref" || f.type === "object_type_refs",
  );
  const refIds = refFields.flatMap((f) =>
    rows.flatMap((r) => [r[m.keyOf(f.column!)]].flat().filter((x) => typeof x === "number")),
  );
  const refs = refIds.length
    ? await ctx.services.objectTypes.byIds(refIds, ctx.db, ctx.scratch)
    : new Map();
  return (id: number) => {
    const ot = refs.get(id);
    return ot ? { id, app_label: ot.appLabel, model: ot.model } : { id };
  };
}

/** One row's record (without tags and timestamps) from what `serializer` read for all rows. */
function recordOf(
  m: ModelParts,
  ctx: ReadContext,
  row: Record<string, any>,
  read: {
    related: Map<string, Map<number, ApiRecord>>;
    links: Map<string, Map<unknown, unknown[]>>;
    refOf: (id: number) => ObjectTypeRef;
  },
): ApiRecord {
  const { spec } = m;
  const rec: ApiRecord = {
    id: row.id,
    url: recordUrl(ctx.baseUrl, spec.path, row.id),
    display: spec.display(row),
  };
  for (const f of spec.fields) {
    if (f.writeOnly) continue;
    if (f.type === "m2m" || f.type === "object_types") {
      rec[f.name] = read.links.get(f.name)!.get(row.id) ?? [];
      continue;
    }
    const value = row[m.keyOf(f.column!)];
    if (f.type === "object_type_ref") rec[f.name] = value == null ? null : read.refOf(value);
    else if (f.type === "object_type_refs")
      rec[f.name] = ((value as number[] | null) ?? []).map(read.refOf);
    else if (f.type === "fk")
      rec[f.name] = value == null ? null : (read.related.get(f.name)?.get(value) ?? { id: value });
    else if (f.type === "choice")
      rec[f.name] =
        value == null
          ? null
          : { value, label: f.choices!.find(([v]) => v === value)?.[1] ?? value };
    else rec[f.name] = value ?? null;
  }
  return rec;
}

/** The ids an m2m field's link table pairs with the objects `own`, for `Relation.targetsOf`. */
const linkedIds =
  ({ table, own: ownCol, other }: NonNullable<FieldSpec["link"]>) =>
  (own: SQL) =>
    sql`SELECT ${other} FROM ${table} WHERE ${ownCol} IN (${own})`;

/** A host model by label without a read (host models are registered at start-up). */
const hostModel = (ctx: ReadContext, label: string) => {
  const [app, model] = label.split(".") as [string, string];
  return ctx.services.models.staticModels().find((m) => m.appLabel === app && m.model === model);
};

/**
 * For `loadPlan` (decision 0143): one statement, a row per link and per object, that carries the
 * nested forms of what the objects' foreign keys point at and their link fields' values (object
 * types as labels, host models' nested forms), so the load reads nothing after its one read.
 * Fields whose targets have no SQL form are read after it, as before. Null: nothing to carry.
 */
function relationsPlan(m: ModelParts, ctx: ReadContext, ids: SQL | number, fks: boolean) {
  const table = getTableName(m.table);
  // built once a part needs it: most models' GETs carry no part (their foreign keys ride as
  // columns of the row), and a SQL object per GET was a measurable part of its CPU (0214)
  let ownSql: SQL | undefined;
  const own = () => (ownSql ??= typeof ids === "number" ? sql`${ids}` : ids);
  const parts: SQL[] = [];
  const fields: Array<{ f: FieldSpec; info?: ModelInfo }> = [];
  for (const f of m.spec.fields) {
    const k = fields.length;
    if (f.type === "fk" && fks) {
      const info = hostModel(ctx, f.related!);
      const form = info?.nestedSql?.selectOne?.(sql.raw(`"${table}"."${f.column!.name}"`));
      if (!form) continue;
      parts.push(
        sql`SELECT ${k} AS k, "${sql.raw(table)}"."id" AS own, NULL AS other, ${form} AS j FROM ${m.table} WHERE "${sql.raw(table)}"."id" IN (${own()})`,
      );
      fields.push({ f, info });
    } else if (f.type === "m2m" || f.type === "object_types") {
      const { table: link, own: ownCol, other } = f.link!;
      const linkName = getTableName(link);
      const otherCol = sql.raw(`"${linkName}"."${other.name}"`);
      const info = f.type === "m2m" ? hostModel(ctx, f.related!) : undefined;
      const form =
        f.type === "object_types"
          ? sql`(SELECT json_array(${objectTypesTable.appLabel}, ${objectTypesTable.model}) FROM ${objectTypesTable} WHERE ${objectTypesTable.id} = ${otherCol})`
          : info?.nestedSql?.selectOne?.(otherCol);
      if (!form) continue;
      parts.push(
        sql`SELECT ${k} AS k, ${sql.raw(`"${linkName}"."${ownCol.name}"`)} AS own, ${otherCol} AS other, ${form} AS j FROM ${link} WHERE ${sql.raw(`"${linkName}"."${ownCol.name}"`)} IN (${own()})`,
      );
      fields.push({ f, info });
    }
  }
  if (!parts.length) return null;
  const statement = ctx.db.all<{ k: number; own: number; other: number | null; j: string | null }>(
    unionAll(parts), // grouped within D1's five terms of a compound SELECT (decision 0161)
  );
  return {
    statement,
    /** Keeps what the statement read for `build` (the load's serialising), and only for it. */
    keep: <T>(rows: unknown, build: () => Promise<T>): Promise<T> => {
      const { forms, links } = carried(m, ctx, fields, rows as RelationRow[]);
      return withCarried(ctx, forms, links, build);
    },
  };
}

/** Runs `build` with the relations a read carried in the context's slots, then takes them out. */
async function withCarried<T>(
  ctx: ReadContext,
  forms: Map<string, Map<number, ApiRecord>>,
  links: Map<string, Map<unknown, unknown[]>>,
  build: () => Promise<T>,
): Promise<T> {
  const scratch = (ctx.scratch ??= new Slots());
  const formsBefore = scratch.get(fkFormsRead);
  const linksBefore = scratch.get(linksRead);
  // the maps as given where nothing was carried before (theirs alone: built for this call)
  scratch.set(fkFormsRead, formsBefore ? new Map([...formsBefore, ...forms]) : forms);
  scratch.set(linksRead, linksBefore ? new Map([...linksBefore, ...links]) : links);
  try {
    return await build();
  } finally {
    restore(scratch, fkFormsRead, formsBefore);
    restore(scratch, linksRead, linksBefore);
  }
}

/** Puts `value` back under `key`, or takes the key out where there was none. */
function restore<T>(scratch: Slots, key: SlotKey<T>, value: T | undefined): void {
  if (value) scratch.set(key, value);
  else scratch.delete(key);
}

/**
 * A GET's foreign keys' nested forms as columns of its row (`__fk_<field>`), where the target is
 * a host model with a SQL form: the row's one statement stays one (decision 0143).
 */
function fkColumns(m: ModelParts, ctx: ReadContext) {
  const table = getTableName(m.table);
  const columns: Record<string, SQL> = {};
  const infos = new Map<string, ModelInfo>();
  for (const f of m.spec.fields) {
    if (f.type !== "fk") continue;
    const info = hostModel(ctx, f.related!);
    const form = info?.nestedSql?.selectOne?.(sql.raw(`"${table}"."${f.column!.name}"`));
    if (!form) continue;
    columns[`__fk_${f.name}`] = form;
    infos.set(f.name, info!);
  }
  return { columns, infos };
}

/** Takes the `__fk_<field>` columns off `rows`, as `fkFormsRead` entries. */
function takeFkColumns(
  m: ModelParts,
  ctx: ReadContext,
  infos: Map<string, ModelInfo>,
  rows: Record<string, any>[],
) {
  const label = `${m.spec.appLabel}.${m.spec.model}`;
  const forms = new Map<string, Map<number, ApiRecord>>();
  for (const [name, info] of infos) {
    const byId = new Map<number, ApiRecord>();
    forms.set(`${label}:${name}`, byId);
    for (const row of rows) {
      const j = row[`__fk_${name}`];
      delete row[`__fk_${name}`];
      const columns = typeof j === "string" ? (JSON.parse(j) as Record<string, unknown>) : null;
      if (columns && typeof columns.id === "number")
        byId.set(columns.id, info.nestedSql!.build(ctx, columns.id, columns));
    }
  }
  return forms;
}

type RelationRow = { k: number; own: number; other: number | null; j: string | null };

/** The relation statement's rows as `fkFormsRead` and `linksRead` entries. */
function carried(
  m: ModelParts,
  ctx: ReadContext,
  fields: Array<{ f: FieldSpec; info?: ModelInfo }>,
  rows: RelationRow[],
) {
  const label = `${m.spec.appLabel}.${m.spec.model}`;
  const forms = new Map<string, Map<number, ApiRecord>>();
  const links = new Map<string, Map<unknown, unknown[]>>();
  for (const { f } of fields)
    if (f.type === "fk") forms.set(`${label}:${f.name}`, new Map());
    else links.set(`${label}:${f.name}`, new Map());
  const pairs = new Map<string, Array<{ own: number; other: number; value: unknown }>>();
  for (const row of rows) {
    const { f, info } = fields[Number(row.k)]!;
    if (typeof row.j !== "string") continue;
    const columns = JSON.parse(row.j);
    if (f.type === "fk") {
      const id = (columns as Record<string, unknown>).id;
      if (typeof id === "number")
        forms.get(`${label}:${f.name}`)!.set(id, info!.nestedSql!.build(ctx, id, columns));
      continue;
    }
    const value =
      f.type === "object_types"
        ? `${columns[0]}.${columns[1]}`
        : info!.nestedSql!.build(ctx, Number(row.other), columns);
    const list = pairs.get(f.name) ?? pairs.set(f.name, []).get(f.name)!;
    list.push({ own: Number(row.own), other: Number(row.other), value });
  }
  // in the order `linkedRecords` gives: labels sorted, nested targets by id
  for (const [name, list] of pairs) {
    const f = m.fieldsByName.get(name)!;
    const byOwn = links.get(`${label}:${name}`)!;
    if (f.type === "m2m") list.sort((a, b) => a.other - b.other);
    for (const p of list) (byOwn.get(p.own) ?? byOwn.set(p.own, []).get(p.own)!).push(p.value);
    if (f.type === "object_types") for (const v of byOwn.values()) (v as string[]).sort();
  }
  return { forms, links };
}

/** `load` and `loadPlan`: objects by id, with their tags in the same read where it can. */
function loaders(m: ModelParts, serialize: Serialize): Pick<Resource, "load" | "loadPlan"> {
  const { spec, table } = m;
  async function load(ctx: ReadContext, ids: number[]): Promise<ApiRecord[]> {
    if (!ids.length) return [];
    // the page's ids as one JSON value: one statement text for any page size (D1: 100 values)
    const rowsQuery = ctx.db.select().from(table).where(inJsonList(table.id, ids));
    let rows: Record<string, any>[];
    let tags: Map<number, ApiRecord[]> | undefined;
    if (spec.tags && outsideTransaction(ctx.services.db, ctx.db)) {
      // outside a transaction: the rows and their tags in one read (one round trip remote)
      const [found, tagRows] = await ctx.services.db.read([
        rowsQuery,
        tagsQuery(ctx.db, await m.objectTypeId(ctx), ids),
      ]);
      rows = found;
      tags = tagsByObject(ctx.baseUrl, tagRows);
    } else rows = await rowsQuery;
    const byId = new Map(rows.map((r) => [r.id as number, r]));
    return serialize(
      ctx,
      ids.map((id) => byId.get(id)).filter(Boolean) as Record<string, any>[],
      tags,
    );
  }

  // the object type's id as a subquery (its unique index): no look-up before the read
  const typeId = spec.tags
    ? sql`(SELECT ${objectTypesTable.id} FROM ${objectTypesTable} WHERE ${objectTypesTable.appLabel} = ${spec.appLabel} AND ${objectTypesTable.model} = ${spec.model})`
    : null;
  // One id (a GET): one statement, the same every time, its SQL text rendered once per ORM
  // (0098); the row's tags ride on it as JSON (0122), as a custom object's do.
  // Its foreign keys' nested forms ride on it too (0143), as the registry's host models give them.
  const one = sql`${sql.placeholder("id")}`;
  const byRegistry = new WeakMap<object, ReturnType<typeof rowByIdOf>>();
  function rowByIdOf(ctx: ReadContext) {
    const fks = fkColumns(m, ctx);
    const statement = new Prebuilt((db) =>
      db
        .select({
          ...getTableColumns(table),
          ...namedExpressions({
            ...(typeId ? { [TAGS_KEY]: tagsColumn(table, typeId) } : {}),
            ...fks.columns,
          }),
        })
        .from(table)
        .where(sql`${table.id} IN (${one})`),
    );
    return { statement, infos: fks.infos };
  }
  const rowById = (ctx: ReadContext) => {
    const key = ctx.services.models;
    return byRegistry.get(key) ?? byRegistry.set(key, rowByIdOf(ctx)).get(key)!;
  };

  /** `load` as statements for one read: the rows and their tags, the ids as SQL (decision 0085). */
  function loadPlan(ctx: ReadContext, ids: SQL | number): LoadPlan {
    const statements: LoadPlan["statements"] = [];
    const single = typeof ids === "number" ? rowById(ctx) : null;
    if (typeof ids === "number")
      statements.push(single!.statement.with(ctx.db, { id: ids }, ctx.services.db.orm));
    else {
      statements.push(ctx.db.select().from(table).where(sql`${table.id} IN (${ids})`));
      if (typeId) statements.push(tagsQueryFor(ctx.db, typeId, ids));
    }
    const relations = relationsPlan(m, ctx, ids, !single);
    if (relations) statements.push(relations.statement);
    // what `decorate` reads rides last, so the answers before it stay as they were
    const decoration = spec.decoratePlan?.(ctx, ids);
    let decorated: ReturnType<NonNullable<typeof decoration>["decorated"]> | undefined;
    const many = Array.isArray(decoration?.statement);
    const decorating = decoration ? [decoration.statement].flat() : [];
    statements.push(...decorating);
    return {
      statements,
      async finish(all, order) {
        const answers = all.slice(0, all.length - decorating.length);
        if (decoration) {
          const own = all.slice(answers.length);
          decorated = decoration.decorated(many ? own : own[0]);
        }
        if (relations)
          return relations.keep(answers.at(-1), () => rowsFinish(answers.slice(0, -1), order));
        return rowsFinish(answers, order);
      },
    };
    async function rowsFinish(answers: unknown[], order: number[]) {
      if (!single) return serializeRows(answers, order);
      const forms = takeFkColumns(m, ctx, single.infos, answers[0] as Record<string, any>[]);
      return withCarried(ctx, forms, new Map(), () => serializeRows(answers, order));
    }
    async function serializeRows(answers: unknown[], order: number[]) {
      {
        const rows = answers[0] as Record<string, any>[];
        const byId = new Map(rows.map((r) => [r.id as number, r]));
        const tags = !typeId
          ? undefined
          : typeof ids === "number"
            ? tagsFromRows(ctx.baseUrl, rows)
            : tagsByObject(ctx.baseUrl, answers[1] as Awaited<ReturnType<typeof tagsQuery>>);
        return serialize(
          ctx,
          order.map((id) => byId.get(id)).filter(Boolean) as Record<string, any>[],
          tags,
          undefined,
          undefined,
          decorated,
        );
      }
    }
  }
  return { load, loadPlan };
}

/** Input to column values, link targets and tag ids (validated), and writing the links. */
function inputConverter(m: ModelParts) {
  const { spec, keyOf, fieldsByName } = m;
  async function convertInput(
    ctx: WriteContext,
    input: ApiRecord,
    existing: Record<string, any> | null,
    partial: boolean,
  ) {
    const errors = new ErrorCollector();
    const values: Record<string, unknown> = {};
    const links = new Map<FieldSpec, number[]>();
    let tagIds: number[] | null = null;
    for (const key of Object.keys(input)) {
      if (key === CUSTOM_FIELDS_KEY && spec.customFields) {
        const error = customFieldsError(input[key]);
        if (error) errors.add(key, error);
      } else if (
        !fieldsByName.has(key) &&
        !READ_ONLY_KEYS.has(key) &&
        !(key === "tags" && spec.tags)
      )
        errors.add(key, "Unknown field.");
    }
    for (const f of spec.fields) {
      if (f.readOnly) continue;
      const present = Object.hasOwn(input, f.name);
      if (!present) {
        if (
          f.required &&
          (!existing || !partial) &&
          (existing == null || existing[keyOf(f.column!)] == null)
        )
          errors.add(f.name, "This field is required.");
        continue;
      }
      const raw = input[f.name];
      const result = await convertValue(ctx, f, raw, heldBy(m, ctx, f, existing));
      if (typeof result === "object" && result && "error" in result) {
        errors.add(f.name, result.error);
        continue;
      }
      if (f.type === "object_types" && existing)
        links.set(f, await withUnseenKept(ctx, f, existing.id, result.value as number[]));
      else if (f.type === "m2m" || f.type === "object_types")
        links.set(f, result.value as number[]);
      else values[keyOf(f.column!)] = result.value;
    }
    if (spec.tags && Object.hasOwn(input, "tags")) {
      const held = existing ? Number(existing.id) : null;
      const nameable = await nameableTagsOf(ctx, spec.appLabel, spec.model, held);
      const res = await resolveTags(ctx, input.tags, spec.appLabel, spec.model, nameable);
      if ("error" in res) errors.add("tags", res.error);
      else tagIds = res.ids;
    }
    if (errors.empty) await spec.validate?.(ctx, values, existing, errors);
    errors.throwIfAny();
    if (spec.naturalOrdering) {
      const source = fieldsByName.get(spec.naturalOrdering.field)?.column;
      if (source && Object.hasOwn(values, keyOf(source)))
        values[keyOf(spec.naturalOrdering.column)] = naturalize(
          values[keyOf(source)] as string | null,
        );
    }
    spec.derive?.(values);
    return { values, links, tagIds };
  }

  async function writeLinks(
    ctx: WriteContext,
    id: number,
    links: Map<FieldSpec, number[]>,
    tagIds: number[] | null,
  ) {
    for (const [f, targets] of links) {
      const { table: link, own, other } = f.link!;
      await ctx.db.delete(link).where(eq(own, id));
      if (targets.length)
        await ctx.db
          .insert(link)
          .values(
            targets.map((t) => ({ [keyOf2(link, own)]: id, [keyOf2(link, other)]: t })) as any,
          );
    }
    if (tagIds) await setTags(ctx, await m.objectTypeId(ctx), id, tagIds);
  }
  return { convertInput, writeLinks };
}

/**
 * An update's object types for link field `f`: those named, and those the object holds that the
 * writer may not see (they stay: decision 0187).
 */
async function withUnseenKept(ctx: WriteContext, f: FieldSpec, id: number, named: number[]) {
  const sight = writerSight(ctx.services, ctx.auth);
  if (sight.whole || f.namesAnyType) return named;
  const { table: link, own, other } = f.link!;
  const rows = await ctx.db.select({ id: other }).from(link).where(eq(own, id));
  const held = await ctx.services.objectTypes.byIds(
    rows.map((r) => Number(r.id)),
    ctx.db,
  );
  return keepUnseen(sight, named, [...held.values()]);
}

/**
 * Whether `existing` already references an object through `f`: such a reference may stay
 * though the writer cannot view its target (a PUT echoes it back), a new one may not.
 */
function heldBy(
  m: ModelParts,
  ctx: WriteContext,
  f: FieldSpec,
  existing: Record<string, any> | null,
) {
  if (!existing) return async () => false;
  if (f.type === "fk" || f.type === "object_type_ref")
    return async (id: number) => existing[m.keyOf(f.column!)] === id;
  if (f.type === "object_type_refs")
    return async (id: number) =>
      ((existing[m.keyOf(f.column!)] as number[] | null) ?? []).includes(id);
  let current: Promise<number[]> | null = null;
  return async (id: number) => {
    const { table: link, own, other } = f.link!;
    current ??= ctx.db
      .select({ id: other })
      .from(link)
      .where(eq(own, existing.id))
      .then((rows) => rows.map((r) => Number(r.id)));
    return (await current).includes(id);
  };
}

/** The registry's view of the model: its nested (brief) form, read by id or inside other SQL. */
function modelInfo(m: ModelParts, resource: Resource): ModelInfo {
  const { spec, table, keyOf } = m;
  const briefCols = spec.fields.filter((f) => f.brief && f.column && f.type !== "fk");
  const nestedRecord = (ctx: ReadContext, row: Record<string, any>): ApiRecord => {
    const rec: ApiRecord = {
      id: row.id,
      url: recordUrl(ctx.baseUrl, spec.path, row.id),
      display: spec.display(row),
    };
    for (const f of briefCols) {
      const v = row[keyOf(f.column!)];
      rec[f.name] =
        f.type === "choice" && v != null
          ? { value: v, label: f.choices!.find(([x]) => x === v)?.[1] ?? v }
          : (v ?? null);
    }
    return rec;
  };
  // Every column except JSON ones (nested forms never show them) and write-only ones (a password
  // hash, a webhook's secret: never answered, so never sent back by the database either).
  const writeOnly = new Set(spec.fields.filter((f) => f.writeOnly).map((f) => f.column));
  const readableColumns = Object.fromEntries(
    Object.entries(getTableColumns(table)).filter(([, col]) => !writeOnly.has(col as SQLiteColumn)),
  );
  const nestedColumns = sql.join(
    Object.entries(getTableColumns(table))
      .filter(
        ([, col]) =>
          (col as SQLiteColumn).dataType !== "json" && !writeOnly.has(col as SQLiteColumn),
      )
      .map(
        ([key, col]) =>
          sql`${jsonKey(key)}, ${sql.raw(`"${getTableName(table)}"."${(col as SQLiteColumn).name}"`)}`,
      ),
    sql`, `,
  );
  // json_object() gives booleans as 0/1; the nested form wants true/false.
  const booleanKeys = Object.entries(getTableColumns(table))
    .filter(([, col]) => (col as SQLiteColumn).dataType === "boolean")
    .map(([key]) => key);
  const info: ModelInfo = {
    appLabel: spec.appLabel,
    model: spec.model,
    verboseName: spec.verboseName,
    resource,
    async nested(ctx, ids) {
      const out = new Map<number, ApiRecord>();
      if (!ids.length) return out;
      const rows = (await ctx.db
        .select(readableColumns)
        .from(table)
        .where(inJsonList(table.id, ids))) as Record<string, any>[];
      for (const row of rows) out.set(row.id, nestedRecord(ctx, row));
      return out;
    },
    nestedSql: {
      // The ids as one JSON array: one parameter however many (a bulk names ~100 sites), so the
      // statement's text is the same for every call and cheap to build.
      select: (ids) =>
        sql`SELECT ${table.id} AS id, json_object(${nestedColumns}) AS j FROM ${table} WHERE ${inJsonList(table.id, ids)}`,
      // Qualified by hand: inside another query's select list Drizzle renders columns bare.
      selectOne: (idExpr) =>
        sql`(SELECT json_object(${nestedColumns}) FROM ${table} WHERE ${sql.raw(`"${getTableName(table)}"."id"`)} = ${idExpr})`,
      build: (ctx, _id, columns) => {
        for (const key of booleanKeys)
          if (columns[key] != null) columns[key] = columns[key] === 1 || columns[key] === true;
        return nestedRecord(ctx, columns);
      },
    },
  };
  return info;
}

/** A field's kind as readers other than REST see it (relations are described in `relations`). */
function describeField(f: FieldSpec): FieldDescription {
  switch (f.type) {
    case "integer":
      return { name: f.name, kind: "integer" };
    case "decimal":
      return { name: f.name, kind: "decimal" };
    case "boolean":
      return { name: f.name, kind: "boolean" };
    case "datetime":
      return { name: f.name, kind: "datetime" };
    case "choice":
      return { name: f.name, kind: "choice", choices: f.choices };
    case "fk":
    case "m2m":
      return { name: f.name, kind: "relation" };
    case "json":
    case "object_types":
    case "object_type_ref":
    case "object_type_refs":
      return { name: f.name, kind: "json" };
    default:
      return { name: f.name, kind: "string" };
  }
}

function keyOf2(table: SQLiteTable, col: SQLiteColumn): string {
  for (const [k, c] of Object.entries(getTableColumns(table))) if (c === col) return k;
  throw new Error(`column ${col.name} not in table`);
}

type Converted = { value: unknown } | { error: string };

async function convertValue(
  ctx: WriteContext,
  f: FieldSpec,
  raw: unknown,
  held: (id: number) => Promise<boolean>,
): Promise<Converted> {
  if (raw === null) {
    if (f.type === "m2m" || f.type === "object_types") return { value: [] };
    return f.nullable ? { value: null } : { error: "This field may not be null." };
  }
  const checked = (value: unknown): Converted => {
    const msg = f.check?.(value);
    return msg ? { error: msg } : { value };
  };
  switch (f.type) {
    case "string":
    case "text":
    case "slug":
    case "color":
    case "password":
    case "datetime": {
      if (typeof raw !== "string") return { error: "Not a valid string." };
      const s = f.type === "text" ? raw : raw.trim();
      if (f.required && !s) return { error: "This field may not be blank." };
      // Long text without a length of its own has the documented cap (decision 0068).
      const max = f.maxLength ?? (f.type === "text" ? MAX_LONGTEXT_CHARS : undefined);
      if (max && s.length > max)
        return { error: `Ensure this field has no more than ${max} characters.` };
      if (f.type === "slug" && !SLUG_RE.test(s))
        return {
          error: 'Enter a valid "slug" consisting of letters, numbers, underscores or hyphens.',
        };
      if (f.type === "color" && !COLOR_RE.test(s))
        return { error: "Enter a valid hexadecimal RGB color code (six lowercase hex digits)." };
      // Stored as the instant in one form (toInstant), so filters compare instants.
      if (f.type === "datetime" && s && !toInstant(s))
        return { error: "Datetime has wrong format. Use ISO 8601." };
      if (f.type === "password")
        return { value: await (await import("../auth/passwords")).hashPassword(s) };
      return checked(f.type === "datetime" && s ? toInstant(s) : s === "" && f.nullable ? null : s);
    }
    case "integer":
      if (typeof raw !== "number" || !Number.isInteger(raw))
        return { error: "A valid integer is required." };
      return checked(raw);
    case "decimal":
      return decimalValue(f.decimal!, raw);
    case "boolean":
      if (typeof raw !== "boolean") return { error: "Must be a valid boolean." };
      return { value: raw };
    case "choice": {
      const value = typeof raw === "object" && raw && "value" in raw ? (raw as any).value : raw;
      if (typeof value !== "string" || !f.choices!.some(([v]) => v === value))
        return { error: `"${String(value)}" is not a valid choice.` };
      return { value };
    }
    case "json":
      if (JSON.stringify(raw).length > MAX_JSON_CHARS)
        return { error: `Ensure this JSON value has no more than ${MAX_JSON_CHARS} characters.` };
      return checked(raw);
    case "fk": {
      const id = typeof raw === "object" && raw && !Array.isArray(raw) ? (raw as any).id : raw;
      if (typeof id !== "number" || !Number.isInteger(id))
        return { error: "Incorrect type. Expected pk value." };
      const [app, model] = f.related!.split(".") as [string, string];
      const info = await ctx.services.models.get(app, model, ctx);
      const found = info ? await info.nested(ctx, [id]) : new Map();
      // an object the writer may not view answers as one that does not exist (decision 0064)
      const hidden = !(await viewableRefs(ctx, ctx.auth, app, model, [id])).has(id);
      if (!found.has(id) || (hidden && !(await held(id))))
        return { error: `Related object not found using the provided numeric ID: ${id}` };
      return { value: id };
    }
    case "m2m": {
      if (!Array.isArray(raw)) return { error: "Expected a list of items." };
      const ids = raw.map((x) => (typeof x === "object" && x ? (x as any).id : x));
      if (!ids.every((x) => typeof x === "number" && Number.isInteger(x)))
        return { error: "Incorrect type. Expected pk value." };
      const [app, model] = f.related!.split(".") as [string, string];
      const info = await ctx.services.models.get(app, model, ctx);
      const found = info ? await info.nested(ctx, ids) : new Map();
      const viewable = await viewableRefs(ctx, ctx.auth, app, model, ids as number[]);
      const missing: number[] = [];
      for (const id of ids as number[])
        if (!found.has(id) || (!viewable.has(id) && !(await held(id)))) missing.push(id);
      if (missing.length)
        return { error: `Related object not found using the provided numeric ID: ${missing[0]}` };
      return { value: [...new Set(ids as number[])] };
    }
    case "object_type_ref": {
      const ot = await ctx.services.objectTypes.resolve(raw, ctx.db);
      // a hidden type it holds reads as `{id}`: echoed back by that id, never by a guessed name
      const echoed = ot && spelledById(raw) && (await held(ot.id));
      return ot && (namable(ctx, f, ot) || echoed)
        ? { value: ot.id }
        : { error: `Unknown object type: ${JSON.stringify(raw)}` };
    }
    case "object_type_refs":
    case "object_types": {
      if (!Array.isArray(raw)) return { error: "Expected a list of items." };
      const ids: number[] = [];
      for (const item of raw) {
        const ot = await ctx.services.objectTypes.resolve(item, ctx.db);
        // one the writer may not see is unknown, held or not: a list never shows it to them, so
        // only a guess can name it, and a different answer for a held one would confirm the guess
        // (what it holds stays: `keepUnseen`)
        if (!ot || !namable(ctx, f, ot))
          return { error: `Unknown object type: ${JSON.stringify(item)}` };
        ids.push(ot.id);
      }
      return { value: [...new Set(ids)] };
    }
  }
}

/**
 * A decimal as NetBox's serializer takes it (DRF's `DecimalField`, decision 0215): a number, or
 * text Python's `Decimal()` reads (blanks around it, an exponent, `_` anywhere: `"1e1"`,
 * `" 12.5 "`), blank text being null; NaN and infinities refused. Then DRF's checks in its order:
 * digits in all, places, digits before the point (counted as `Decimal.as_tuple()` counts them:
 * trailing zeros too), and the model's validators (`MinValueValidator`, `MaxValueValidator`),
 * whose bounds DRF words as Python prints a `Decimal` (`90.0`).
 */
function decimalValue(d: NonNullable<FieldSpec["decimal"]>, raw: unknown): Converted {
  if (typeof raw === "string" && raw.trim() === "") return { value: null };
  if (typeof raw !== "number" && typeof raw !== "string") return { error: DECIMAL_INVALID };
  // a JSON number is read from its shortest spelling, as Python reads the float JSON gave it
  const text = typeof raw === "number" ? String(raw) : raw.trim();
  if (text.length > DECIMAL_MAX_TEXT) return { error: "String value too large." };
  const parsed = parseDecimal(text);
  if (!parsed) return { error: DECIMAL_INVALID };
  const { total, whole, places } = digitCounts(parsed);
  if (total > d.maxDigits)
    return { error: `Ensure that there are no more than ${d.maxDigits} digits in total.` };
  if (places > d.places)
    return { error: `Ensure that there are no more than ${d.places} decimal places.` };
  if (whole > d.maxDigits - d.places)
    return {
      error: `Ensure that there are no more than ${d.maxDigits - d.places} digits before the decimal point.`,
    };
  // few digits now (at most maxDigits): the number is exact enough to compare and to store
  const value = Number(`${parsed.sign}${parsed.coefficient}e${parsed.exponent}`);
  if (value < d.min)
    return { error: `Ensure this value is greater than or equal to ${pythonDecimal(d.min)}.` };
  if (value > d.max)
    return { error: `Ensure this value is less than or equal to ${pythonDecimal(d.max)}.` };
  return { value: value === 0 ? 0 : value };
}

const DECIMAL_INVALID = "A valid number is required.";
/** DRF's `DecimalField.MAX_STRING_LENGTH`. */
const DECIMAL_MAX_TEXT = 1000;
/** Python's `Decimal()` syntax (underscores dropped first); infinities and NaNs are not numbers. */
const DECIMAL_TEXT_RE = /^([+-]?)(?:(\d+)(?:\.(\d*))?|\.(\d+))(?:e([+-]?\d+))?$/i;
/** The largest exponent `Decimal()` reads (`MAX_EMAX`): past it, not a number. */
const MAX_EXPONENT_DIGITS = 18;

interface ParsedDecimal {
  sign: "" | "-";
  /** The digits, leading zeros dropped ("0" for zero), as `Decimal.as_tuple().digits`. */
  coefficient: string;
  exponent: number;
}

function parseDecimal(text: string): ParsedDecimal | null {
  const m = DECIMAL_TEXT_RE.exec(text.replaceAll("_", ""));
  if (!m) return null;
  const [, sign, int = "", frac = "", onlyFrac = "", exp = "0"] = m;
  const expDigits = exp.replace(/^[+-]?0*/, "");
  if (expDigits.length > MAX_EXPONENT_DIGITS) return null;
  const fraction = onlyFrac || frac;
  return {
    sign: sign === "-" ? "-" : "",
    coefficient: (int + fraction).replace(/^0+(?=\d)/, ""),
    exponent: Number(exp) - fraction.length,
  };
}

/** DRF's `validate_precision` counts: digits in all, before the point, and places. */
function digitCounts({ coefficient, exponent }: ParsedDecimal) {
  const n = coefficient.length;
  if (exponent >= 0) return { total: n + exponent, whole: n + exponent, places: 0 };
  if (n > -exponent) return { total: n, whole: n + exponent, places: -exponent };
  return { total: -exponent, whole: 0, places: -exponent };
}

/** A bound as Python prints `Decimal("90.0")`: a whole number keeps one place. */
const pythonDecimal = (n: number) => (Number.isInteger(n) ? n.toFixed(1) : String(n));

/** Whether an object type is spelled by its id (a number, or `{id}` alone, as a hidden one reads). */
const spelledById = (raw: unknown) => {
  const spelled = spellingOf(raw);
  return !!spelled && "id" in spelled;
};

/** Whether the writer may name `type` in `f`: one they may not see does not exist to them (0187). */
const namable = (ctx: WriteContext, f: Pick<FieldSpec, "namesAnyType">, type: ObjectTypeRow) =>
  !!f.namesAnyType || writerSight(ctx.services, ctx.auth).sees(type);

// ---- tags: generic (object_type, object_id) assignments -------------------------------------

export function nestedTag(
  baseUrl: string,
  t: { id: number; name: string; slug: string; color: string },
): ApiRecord {
  return {
    id: t.id,
    url: recordUrl(baseUrl, "extras/tags", t.id),
    display: t.name,
    name: t.name,
    slug: t.slug,
    color: t.color,
  };
}

/** The tags of objects of one type, as a query (`loadTags` runs it; `load` batches it). */
function tagsQuery(db: ReadContext["db"], objectTypeId: number, ids: number[]) {
  return db
    .select({
      objectId: taggedItems.objectId,
      id: tagsTable.id,
      name: tagsTable.name,
      slug: tagsTable.slug,
      color: tagsTable.color,
    })
    .from(taggedItems)
    .innerJoin(tagsTable, eq(tagsTable.id, taggedItems.tagId))
    .where(and(eq(taggedItems.objectTypeId, objectTypeId), inJsonList(taggedItems.objectId, ids)))
    .orderBy(tagsTable.name);
}

/** `tagsQuery` with the object ids as SQL (a list or a subquery). */
function tagsQueryFor(db: ReadContext["db"], objectTypeId: SQL, ids: SQL) {
  return db
    .select({
      objectId: taggedItems.objectId,
      id: tagsTable.id,
      name: tagsTable.name,
      slug: tagsTable.slug,
      color: tagsTable.color,
    })
    .from(taggedItems)
    .innerJoin(tagsTable, eq(tagsTable.id, taggedItems.tagId))
    .where(
      sql`${taggedItems.objectTypeId} = ${objectTypeId} AND ${taggedItems.objectId} IN (${ids})`,
    )
    .orderBy(tagsTable.name);
}

/** The key a row's tags ride under as JSON (`tagsColumn`); taken off the row when read. */
const TAGS_KEY = "__tags";

/** A row's tags as one JSON array (sorted by name, as `tagsQuery`), for a select list. */
function tagsColumn(table: SQLiteTable, objectTypeId: SQL): SQL<string | null> {
  const own = sql.raw(`"${getTableName(table)}"."id"`);
  return sql<
    string | null
  >`(SELECT json_group_array(json(x.j)) FROM (SELECT json_object('id', t.id, 'name', t.name, 'slug', t.slug, 'color', t.color) AS j FROM tagged_items ti JOIN tags t ON t.id = ti.tag_id WHERE ti.object_type_id = ${objectTypeId} AND ti.object_id = ${own} ORDER BY t.name) x)`;
}

/** The tags that rode on `rows` (`tagsColumn`) by object id; each row loses its `__tags`. */
function tagsFromRows(baseUrl: string, rows: Record<string, any>[]): Map<number, ApiRecord[]> {
  const out = new Map<number, ApiRecord[]>();
  for (const row of rows) {
    const json = row[TAGS_KEY] as string | null;
    delete row[TAGS_KEY];
    const tags =
      json && json !== "[]" ? (JSON.parse(json) as Parameters<typeof nestedTag>[1][]) : [];
    out.set(
      row.id,
      tags.map((t) => nestedTag(baseUrl, t)),
    );
  }
  return out;
}

/** `tagsQuery`'s rows by object id, as nested tags. */
function tagsByObject(
  baseUrl: string,
  rows: Awaited<ReturnType<typeof tagsQuery>>,
): Map<number, ApiRecord[]> {
  const out = new Map<number, ApiRecord[]>();
  for (const r of rows)
    (out.get(r.objectId) ?? out.set(r.objectId, []).get(r.objectId)!).push(nestedTag(baseUrl, r));
  return out;
}

export async function loadTags(
  ctx: ReadContext,
  objectTypeId: number,
  ids: number[],
): Promise<Map<number, ApiRecord[]>> {
  if (!ids.length) return new Map();
  return tagsByObject(ctx.baseUrl, await tagsQuery(ctx.db, objectTypeId, ids));
}

/** Resolves tag references (ids, `{id}`, `{name}`, `{slug}`) and checks each tag's scope. */
export async function resolveTags(
  ctx: WriteContext,
  raw: unknown,
  appLabel: string,
  model: string,
  /** Over the tags table's id: the tags the caller may name (others are not found). */
  nameable?: SQL,
): Promise<{ ids: number[] } | { error: string }> {
  if (raw === null) return { ids: [] };
  if (!Array.isArray(raw)) return { error: "Expected a list of tags." };
  if (raw.length > MAX_TAGS_PER_VALUE) return { error: TOO_MANY_TAGS_MESSAGE };
  const ids: number[] = [];
  for (const item of raw) {
    let where;
    if (typeof item === "number" && Number.isInteger(item)) where = eq(tagsTable.id, item);
    else if (item && typeof item === "object" && typeof (item as any).id === "number")
      where = eq(tagsTable.id, (item as any).id);
    else if (item && typeof item === "object" && typeof (item as any).slug === "string")
      where = eq(tagsTable.slug, (item as any).slug);
    else if (item && typeof item === "object" && typeof (item as any).name === "string")
      where = eq(tagsTable.name, (item as any).name);
    else if (typeof item === "string") where = eq(tagsTable.slug, item);
    else return { error: `Invalid tag reference: ${JSON.stringify(item)}` };
    const [tag] = await ctx.db
      .select()
      .from(tagsTable)
      .where(nameable ? and(where, nameable) : where)
      .limit(1);
    if (!tag) return { error: tagNotFound(item) };
    const scope = await ctx.db
      .select({ id: tagObjectTypes.objectTypeId })
      .from(tagObjectTypes)
      .where(eq(tagObjectTypes.tagId, tag.id));
    if (scope.length) {
      const ot = await ctx.services.objectTypes.byLabel(appLabel, model, ctx.db);
      if (!ot || !scope.some((s) => s.id === ot.id))
        return { error: `Tag "${tag.name}" cannot be applied to ${appLabel}.${model} objects.` };
    }
    ids.push(tag.id);
  }
  return { ids: [...new Set(ids)] };
}

export async function setTags(
  ctx: WriteContext,
  objectTypeId: number,
  objectId: number,
  tagIds: number[],
) {
  await ctx.db
    .delete(taggedItems)
    .where(and(eq(taggedItems.objectTypeId, objectTypeId), eq(taggedItems.objectId, objectId)));
  if (tagIds.length)
    await ctx.db
      .insert(taggedItems)
      .values(tagIds.map((tagId) => ({ tagId, objectTypeId, objectId })));
}
