/**
 * The database side of a schema document: COTs by slug with their fields, written in document
 * vocabulary (related types as `app/model`, choice sets by name) so the two compare directly.
 */
import { yieldWhenDue } from "../../../turns";
import { and, asc, gt, inArray, sql } from "drizzle-orm";
import {
  choiceSets,
  customObjectTypeFields,
  customObjectTypes,
  objectTypes as otTable,
} from "../../../db/schema";
import { outsideTransaction, type Database, type Executor } from "../../../db/client";
import { readsCostRoundTrip } from "../../../db/policy";
import type { ObjectTypeRegistry, ObjectTypeRow } from "../../../core/object-types";
import type { CotRow } from "../objects/models";
import type { FieldRow } from "../objects/values";
import type { FieldEntry, TypeEntry } from "./document";
import { FIELD_DEFAULTS } from "../types/field-definition";
import { FIELD_TYPE_MODULES } from "../field-types";

/** Field attributes a document may state, with the value an omitted key means (defined once). */
const FIELD_ATTR_DEFAULTS = FIELD_DEFAULTS;
export type CanonicalField = {
  id: number;
  name: string;
  type: string;
} & typeof FIELD_ATTR_DEFAULTS;

export const COT_ATTR_DEFAULTS = {
  verbose_name: "",
  verbose_name_plural: "",
  description: "",
  version: "",
  group_name: "",
};
export type CotAttrs = { name: string } & typeof COT_ATTR_DEFAULTS;

/** `custom_objects`/`custom-objects` → `custom-objects` (the document spelling). */
function relatedRef(appLabel: string, model: string): string {
  return `${appLabel === "custom_objects" ? "custom-objects" : appLabel}/${model}`;
}
function normalizeRef(ref: string): string {
  const [app, model] = ref.split("/") as [string, string];
  return relatedRef(app === "custom_objects" ? "custom_objects" : app, model);
}

export function canonicalFromEntry(f: FieldEntry): CanonicalField {
  const out = { ...FIELD_ATTR_DEFAULTS, id: f.id, name: f.name, type: f.type } as CanonicalField;
  for (const key of Object.keys(FIELD_ATTR_DEFAULTS) as (keyof typeof FIELD_ATTR_DEFAULTS)[]) {
    const value = (f as Record<string, unknown>)[key];
    if (value !== undefined) (out as any)[key] = value;
  }
  if (out.related_object_type) out.related_object_type = normalizeRef(out.related_object_type);
  out.related_object_types = [...new Set(out.related_object_types.map(normalizeRef))].sort();
  if (out.default === undefined) out.default = null;
  return out;
}

export function cotAttrsFromEntry(t: TypeEntry): CotAttrs {
  return {
    name: t.name,
    verbose_name: t.verbose_name ?? "",
    verbose_name_plural: t.verbose_name_plural ?? "",
    description: t.description ?? "",
    version: t.version ?? "",
    group_name: t.group_name ?? "",
  };
}

export interface Tombstone {
  id: number;
  name?: string;
  type?: string;
}

export interface DbType {
  cot: CotRow;
  attrs: CotAttrs;
  fields: FieldRow[];
  canonical: Map<number, CanonicalField>;
  tombstones: Tombstone[];
}

function tombstonesOf(cot: CotRow): Tombstone[] {
  const removed = (cot.schemaDocument as { removed_fields?: unknown } | null)?.removed_fields;
  return Array.isArray(removed)
    ? removed.filter(
        (r): r is Tombstone =>
          !!r && typeof r === "object" && typeof (r as Tombstone).id === "number",
      )
    : [];
}

/**
 * The COT rows with these slugs (all when null), their fields and the names of the choice sets
 * those use. Outside a transaction and given `database`, one `read` (one round trip): fields and
 * choice sets are selected through the slugs, not through ids read first. In a transaction (an
 * apply, which must see its own writes), one query after another on `db`.
 */
/** The reads of `loadDbTypes` (types, their fields, the choice sets those use), for one read. */
export function typeRowQueries(db: Executor, slugs: string[] | null) {
  const bySlug = slugs === null ? undefined : inArray(customObjectTypes.slug, slugs);
  const cotIds = db.select({ id: customObjectTypes.id }).from(customObjectTypes).where(bySlug);
  const cotsQ = db.select().from(customObjectTypes).where(bySlug);
  const fieldsQ = db
    .select()
    .from(customObjectTypeFields)
    .where(inArray(customObjectTypeFields.customObjectTypeId, cotIds))
    .orderBy(sql`${customObjectTypeFields.schemaId}`);
  const setsQ = db
    .select({ id: choiceSets.id, name: choiceSets.name })
    .from(choiceSets)
    .where(
      inArray(
        choiceSets.id,
        db
          .select({ id: customObjectTypeFields.choiceSetId })
          .from(customObjectTypeFields)
          .where(inArray(customObjectTypeFields.customObjectTypeId, cotIds)),
      ),
    );
  return [cotsQ, fieldsQ, setsQ] as const;
}

/**
 * The rows of `loadDbTypes`. Outside a transaction on a remote database, in one read (one round
 * trip); else the fields (and, for every type, the types' rows) in pages with turns between: on
 * a local file, where a statement never waits, every field of 1,000 types in one read held the
 * event loop 25–45 ms (decision 0210), their types' rows ~20 ms (0217).
 */
async function readTypeRows(db: Executor, slugs: string[] | null, database?: Database) {
  const [cotsQ, fieldsQ, setsQ] = typeRowQueries(db, slugs);
  if (database && outsideTransaction(database, db) && readsCostRoundTrip(database)) {
    const [cots, fields, sets] = await database.read([cotsQ, fieldsQ, setsQ]);
    return { cots, fields, sets };
  }
  const cots = slugs === null ? await typesInPages(db) : await cotsQ;
  if (!cots.length) return { cots, fields: [], sets: [] };
  const fields = await fieldsInPages(db, slugs);
  return { cots, fields, sets: fields.some((f) => f.choiceSetId != null) ? await setsQ : [] };
}

/**
 * Field rows read in one statement, at most (the rest in further pages): 500 of them (~40
 * columns each) cost 8–18 ms of the event loop at 1,000 types (decision 0217).
 */
const FIELD_PAGE = 250;
/** Type rows read in one statement, at most: 1,000 in one cost ~20 ms (decision 0217). */
const TYPE_PAGE = 250;

/** Rows read a page of `size` a step with turns between, each page after the last one's id. */
async function inPages<T extends { id: number }>(
  size: number,
  page: (after: number) => Promise<T[]>,
): Promise<T[]> {
  const out: T[] = [];
  for (let after = 0; ; ) {
    await yieldWhenDue();
    const rows = await page(after);
    out.push(...rows);
    if (rows.length < size) return out;
    after = rows.at(-1)!.id;
  }
}

/**
 * Every type's row, in id order (a whole table's scan order), a page a step with turns between
 * (decision 0217). Pages follow the primary key, as `fieldsInPages`' do.
 */
const typesInPages = (db: Executor): Promise<CotRow[]> =>
  inPages(TYPE_PAGE, async (after) => {
    const t = customObjectTypes;
    return (await db
      .select()
      .from(t)
      .where(gt(t.id, after))
      .orderBy(asc(t.id))
      .limit(TYPE_PAGE)) as CotRow[];
  });

/**
 * `typeRowQueries`' fields (in schema id order), a page a step with turns between: read where a
 * statement never waits (a local file), every field of 1,000 types in one statement held the
 * loop ~45 ms (decision 0210). Pages follow the primary key.
 */
async function fieldsInPages(db: Executor, slugs: string[] | null): Promise<FieldRow[]> {
  const f = customObjectTypeFields;
  const bySlug = slugs === null ? undefined : inArray(customObjectTypes.slug, slugs);
  const cotIds = db.select({ id: customObjectTypes.id }).from(customObjectTypes).where(bySlug);
  const out = await inPages(
    FIELD_PAGE,
    async (after) =>
      (await db
        .select()
        .from(f)
        .where(and(inArray(f.customObjectTypeId, cotIds), gt(f.id, after)))
        .orderBy(asc(f.id))
        .limit(FIELD_PAGE)) as FieldRow[],
  );
  return out.sort((a, b) => a.schemaId - b.schemaId || a.id - b.id);
}

/**
 * Loads the COTs with these slugs (all when `slugs` is null). Types named in `hidden` (those a
 * previewing caller may not view) are left out, as if they did not exist. With `database`, a
 * caller outside a transaction reads them in one round trip (`readTypeRows`).
 */
export async function loadDbTypes(
  db: Executor,
  objectTypes: ObjectTypeRegistry,
  slugs: string[] | null,
  hidden?: ReadonlySet<string>,
  database?: Database,
): Promise<Map<string, DbType>> {
  if (slugs !== null && !slugs.length) return new Map();
  const rows = await readTypeRows(db, slugs, database);
  return typesFromRows(rows as TypeRows, db, objectTypes, hidden);
}

type TypeRows = {
  cots: CotRow[];
  fields: FieldRow[];
  sets: Array<{ id: number; name: string }>;
};

/**
 * The object types the fields of every type point at (`related_object_type`, and each of
 * `related_object_types`), for the read that reads the fields: answered in the same snapshot, an
 * id absent from it names no type at that moment, however the cache stands (decision 0140). The
 * registry caches no custom object type's row (a rename moves it) and remembers no absent id
 * (one may be created, or put back from the trash, by another process): read with the fields,
 * neither costs a round trip of its own.
 */
export function pointedTypesQuery(db: Executor) {
  const f = customObjectTypeFields;
  return db
    .select({ id: otTable.id, appLabel: otTable.appLabel, model: otTable.model })
    .from(otTable)
    .where(
      sql`${otTable.id} IN (SELECT ${f.relatedObjectTypeId} FROM ${f} UNION SELECT je.value FROM ${f}, json_each(${f.relatedObjectTypeIds}) je)`,
    );
}

/** The rows of `pointedTypesQuery` by id. */
export const pointedTypes = (rows: ObjectTypeRow[]): Map<number, ObjectTypeRow> =>
  new Map(rows.map((r) => [r.id, r]));

/** The object types `ids` name: from `pointed` when the caller read them, else the registry. */
const typesNamed = (
  ids: number[],
  db: Executor,
  objectTypes: ObjectTypeRegistry,
  pointed?: Map<number, ObjectTypeRow>,
) => (pointed ? Promise.resolve(pointed) : objectTypes.byIds(ids, db));

/**
 * `loadDbTypes` from the rows of `typeRowQueries`, read by the caller; `pointed`, the rows of
 * `pointedTypesQuery` when the caller read them in the same read.
 */
export async function typesFromRows(
  rows: TypeRows,
  db: Executor,
  objectTypes: ObjectTypeRegistry,
  hidden?: ReadonlySet<string>,
  pointed?: Map<number, ObjectTypeRow>,
): Promise<Map<string, DbType>> {
  const out = new Map<string, DbType>();
  const cots = hidden?.size ? rows.cots.filter((c) => !hidden.has(c.slug)) : rows.cots;
  if (!cots.length) return out;
  const kept = new Set(cots.map((c) => c.id));
  const fields = rows.fields.filter((f) => kept.has(f.customObjectTypeId));
  const csNames = new Map(rows.sets.map((c) => [c.id, c.name]));
  const otIds = fields
    .flatMap((f) => [f.relatedObjectTypeId, ...f.relatedObjectTypeIds])
    .filter((x): x is number => x != null);
  const ots = await typesNamed(otIds, db, objectTypes, pointed);
  const ref = (id: number | null) => {
    if (id == null) return null;
    const ot = ots.get(id);
    return ot ? relatedRef(ot.appLabel, ot.model) : `unknown/${id}`;
  };
  // grouped once: filtering every field per type was quadratic in the number of types
  const byType = new Map<number, FieldRow[]>();
  for (const f of fields) {
    const list = byType.get(f.customObjectTypeId);
    if (list) list.push(f);
    else byType.set(f.customObjectTypeId, [f]);
  }
  for (const cot of cots) {
    await yieldWhenDue(); // hundreds of types: turns between them (decision 0205)
    const own = byType.get(cot.id) ?? [];
    const canonical = new Map<number, CanonicalField>();
    for (const f of own) {
      canonical.set(f.schemaId, {
        id: f.schemaId,
        name: f.name,
        type: f.type,
        label: f.label,
        description: f.description,
        primary: f.primary,
        required: f.required,
        unique: f.unique,
        default: f.default ?? null,
        choice_set: f.choiceSetId == null ? null : (csNames.get(f.choiceSetId) ?? null),
        validation_regex: f.validationRegex,
        validation_minimum: f.validationMinimum,
        validation_maximum: f.validationMaximum,
        is_polymorphic: f.isPolymorphic,
        related_object_type: ref(f.relatedObjectTypeId),
        related_object_types: f.relatedObjectTypeIds.map((id) => ref(id)!).sort(),
        related_object_filter: f.relatedObjectFilter ?? null,
        on_delete_behavior: f.onDeleteBehavior,
        group_name: f.groupName,
        search_weight: f.searchWeight,
        filter_logic: f.filterLogic,
        ui_visible: f.uiVisible,
        ui_editable: f.uiEditable,
        weight: f.weight,
        is_cloneable: f.isCloneable,
        deprecated: f.deprecated,
        deprecated_since: f.deprecatedSince,
        scheduled_removal: f.scheduledRemoval,
        context: f.context,
        related_name: f.relatedName,
      });
    }
    out.set(cot.slug, {
      cot,
      attrs: {
        name: cot.name,
        verbose_name: cot.verboseName,
        verbose_name_plural: cot.verboseNamePlural,
        description: cot.description,
        version: cot.version,
        group_name: cot.groupName,
      },
      fields: own,
      canonical,
      tombstones: tombstonesOf(cot),
    });
  }
  return out;
}

/**
 * Every COT's slug with the types its relation fields point at (document spelling): what an
 * apply's reference graph needs of the types a document does not name. Relation fields only, not
 * every field of every type: with hundreds of types this read is what grew with their number.
 */
export async function loadReferences(
  db: Executor,
  objectTypes: ObjectTypeRegistry,
): Promise<Map<string, string[]>> {
  const [cotsQ, fieldsQ] = referenceQueries(db);
  const cots = await cotsQ;
  return referencesFromRows(cots, await fieldsQ, db, objectTypes);
}

/** The reads of `loadReferences`, for one read. */
export function referenceQueries(db: Executor) {
  const relationTypes = FIELD_TYPE_MODULES.filter((m) => m.takes.related).map((m) => m.name);
  const cots = db
    .select({ id: customObjectTypes.id, slug: customObjectTypes.slug })
    .from(customObjectTypes);
  const fields = db
    .select({
      cotId: customObjectTypeFields.customObjectTypeId,
      one: customObjectTypeFields.relatedObjectTypeId,
      many: customObjectTypeFields.relatedObjectTypeIds,
    })
    .from(customObjectTypeFields)
    .where(inArray(customObjectTypeFields.type, relationTypes));
  return [cots, fields] as const;
}

/** `loadReferences` from the rows of `referenceQueries`, read by the caller (`pointed`: as above). */
export async function referencesFromRows(
  cots: Array<{ id: number; slug: string }>,
  fields: Array<{ cotId: number; one: number | null; many: number[] }>,
  db: Executor,
  objectTypes: ObjectTypeRegistry,
  pointed?: Map<number, ObjectTypeRow>,
): Promise<Map<string, string[]>> {
  const ots = await typesNamed(
    fields.flatMap((f) => [f.one, ...f.many]).filter((x): x is number => x != null),
    db,
    objectTypes,
    pointed,
  );
  const slugOf = new Map(cots.map((c) => [c.id, c.slug]));
  const out = new Map<string, string[]>(cots.map((c) => [c.slug, []]));
  for (const f of fields) {
    const refs = out.get(slugOf.get(f.cotId) ?? "");
    for (const id of [f.one, ...f.many]) {
      const ot = id == null ? undefined : ots.get(id);
      if (refs && ot) refs.push(relatedRef(ot.appLabel, ot.model));
    }
  }
  return out;
}

/** A field as a document entry: `id`, `name`, `type` and every attribute not at its default. */
export function entryFromCanonical(c: CanonicalField): Record<string, unknown> {
  const out: Record<string, unknown> = { id: c.id, name: c.name, type: c.type };
  for (const [key, def] of Object.entries(FIELD_ATTR_DEFAULTS)) {
    const value = (c as Record<string, unknown>)[key];
    if (!sameValue(value, def)) out[key] = value;
  }
  return out;
}

/** Deep equality for JSON values (object key order ignored). */
export function sameValue(a: unknown, b: unknown): boolean {
  return stableJson(a ?? null) === stableJson(b ?? null);
}

/**
 * `stableJson(value)` with turns between the items of its arrays and the members of its objects
 * down to `depth` levels (decision 0210): a plan's snapshot, document and projection of 1,000
 * types were each written in one stretch. The same text.
 */
export async function stableJsonWithTurns(value: unknown, depth = 2): Promise<string> {
  if (depth <= 0 || !value || typeof value !== "object") return stableJson(value);
  const parts: string[] = [];
  if (Array.isArray(value)) {
    for (const item of value) {
      await yieldWhenDue();
      parts.push(await stableJsonWithTurns(item, depth - 1));
    }
    return `[${parts.join(",")}]`;
  }
  for (const k of Object.keys(value).sort()) {
    await yieldWhenDue();
    const member = await stableJsonWithTurns((value as Record<string, unknown>)[k], depth - 1);
    parts.push(`${JSON.stringify(k)}:${member}`);
  }
  return `{${parts.join(",")}}`;
}

export function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}
