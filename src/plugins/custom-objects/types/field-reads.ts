/**
 * What a REST field write's checks read, read ahead in the write's one read phase (issue 28 item
 * 2): the object types its inputs name, the fields holding the reverse names it asks for, which
 * of the named custom object types the caller may view, the choice sets named, and the reference
 * graph the cycle check walks. `validateField` and `refuseCycle` answer from these as from their
 * own reads; the records from the object types and choice sets read.
 */
import { and, eq, or, sql, type SQL } from "drizzle-orm";
import type { Executor, Orm } from "../../../db/client";
import { inJsonList } from "../../../db/d1-limits";
import {
  choiceSets,
  customObjectTypeFields,
  customObjectTypes,
  objectTypes,
} from "../../../db/schema";
import { recordUrl } from "../../../core/models/define";
import { refViewWhere, viewableColumn } from "../../../core/auth/restrict";
import { keepReadTypes, type ObjectTypeRow, spellingOf } from "../../../core/object-types";
import type { ApiRecord, WriteContext } from "../../../core/context";
import type { ReadPhase } from "../../../core/rest/write-batch";
import { APP_LABEL } from "../constants";
import { fieldType, isFieldType } from "../field-types";
import { viewLimit } from "../schema/staged-limits";
import { upstreamSpellings } from "./definitions";

/** A field holding a reverse name, and its type (what `checkRelatedName` reads). */
interface ReverseHolder {
  id: number;
  name: string;
  relatedObjectTypeId: number | null;
  relatedName: string;
  cotId: number;
  cot: string;
}

/** The types and their references the cycle check walks (what `refuseCycle` reads). */
export interface ReferenceGraph {
  cots: Array<{ id: number; slug: string; objectTypeId: number | null }>;
  fields: Array<{ cotId: number; one: number | null; many: number[] | null }>;
}

/**
 * The reads answered, and what they cover: a lookup they do not cover (a name or spelling not
 * among those asked for) is read by the check itself, as before.
 */
export interface FieldsAhead {
  /** Object types named by the inputs (and those the updated fields point at), as read. */
  types: ObjectTypeRow[];
  holders: ReverseHolder[];
  /** The reverse names `holders` covers; the stored names of fields `storedOf` names too. */
  names: Set<string>;
  storedOf: Set<number>;
  /** Slugs of the named custom object types the caller may view; null: they may view all. */
  viewable: Set<string> | null;
  /** Choice sets named by id or name, and those of the updated fields. */
  sets: ChoiceSetRead;
  graph?: ReferenceGraph;
}

/** The model a field's `choice_set` names: the writer names only those they may view (0194). */
export const CHOICE_SET = ["extras", "customfieldchoiceset"] as const;

/** Choice sets read ahead, and how an input named them (what it covers). */
export interface ChoiceSetRead {
  rows: Array<{
    id: number;
    name: string;
    description: string;
    extraChoices: [string, string][];
    /** Whether the writer may view the set, so name it in a definition (decision 0194). */
    viewable: number;
  }>;
  ids: Set<number>;
  names: Set<string>;
}

/** A choice set's nested form, as a field's record carries it. */
export const nestedChoiceSet = (
  ctx: Pick<WriteContext, "baseUrl">,
  id: number,
  set: { name: string; description: string },
): ApiRecord => ({
  id,
  url: recordUrl(ctx.baseUrl, "extras/custom-field-choice-sets", id),
  display: set.name,
  name: set.name,
  description: set.description,
});

/**
 * The choice set `raw` names (an id, a name as the API stores it: trimmed, `{id}`) among those
 * read ahead: the row, null when the read shows none, undefined when it did not look.
 */
export function choiceSetAhead(sets: ChoiceSetRead, raw: unknown) {
  const spelled = choiceSetSpelling(raw);
  if (spelled === null) return undefined;
  const covered = typeof spelled === "number" ? sets.ids.has(spelled) : sets.names.has(spelled);
  if (!covered) return undefined;
  return sets.rows.find((r) => (typeof spelled === "number" ? r.id : r.name) === spelled) ?? null;
}

/** The id or name a `choice_set` value spells (`resolveChoiceSet`'s lookup), or null. */
function choiceSetSpelling(raw: unknown): number | string | null {
  if (typeof raw === "string") return raw.trim();
  if (typeof raw === "number") return raw;
  const id = raw && typeof raw === "object" ? (raw as Record<string, unknown>).id : undefined;
  return typeof id === "number" ? id : null;
}

/**
 * Choice sets `values` name, and those the fields of `fieldIds` hold, each with whether `view`
 * (the writer's view of choice sets; undefined: all) admits it.
 */
function choiceSetsQuery(orm: Orm, values: unknown[], fieldIds: number[], view: SQL | undefined) {
  const spelled = values.map(choiceSetSpelling);
  const ids = spelled.filter((v) => typeof v === "number");
  const names = spelled.filter((v) => typeof v === "string");
  const f = customObjectTypeFields;
  const held = sql`SELECT ${f.choiceSetId} FROM ${f} WHERE ${inJsonList(f.id, fieldIds)}`;
  return orm
    .select({
      id: choiceSets.id,
      name: choiceSets.name,
      description: choiceSets.description,
      extraChoices: choiceSets.extraChoices,
      viewable: viewableColumn(view),
    })
    .from(choiceSets)
    .where(
      or(
        inJsonList(choiceSets.id, ids),
        inJsonList(choiceSets.name, names),
        fieldIds.length ? sql`${choiceSets.id} IN (${held})` : undefined,
      ),
    );
}

/** One field write's input, and the stored field it updates. */
export interface AheadItem {
  input: Record<string, unknown>;
  fieldId?: number;
}

/** The spellings of object types an input names (`related_object_type(s)`, upstream's too). */
function spelledTargets(input: Record<string, unknown>): unknown[] {
  const ours = upstreamSpellings(input);
  const many = Array.isArray(ours.related_object_types) ? ours.related_object_types : [];
  return [ours.related_object_type, ...many];
}

/** Whether a create's input may make a relation (the cycle check then walks the graph). */
function makesRelation(input: Record<string, unknown>) {
  const type = input.type ?? "text";
  return typeof type === "string" && isFieldType(type) && fieldType(type).takes.related;
}

/** Object types by id or `app_label.model` among `spellings`, and those `fieldIds` point at. */
function typesQuery(orm: Orm, spellings: unknown[], fieldIds: number[]) {
  const ids: number[] = [];
  const labels: string[] = [];
  for (const s of spellings.map(spellingOf))
    if (s && "id" in s) ids.push(s.id);
    else if (s) labels.push(`${s.appLabel}.${s.model}`);
  const f = customObjectTypeFields;
  const pointed = sql`SELECT ${f.relatedObjectTypeId} FROM ${f} WHERE ${inJsonList(f.id, fieldIds)} UNION SELECT je.value FROM ${f}, json_each(${f.relatedObjectTypeIds}) je WHERE ${inJsonList(f.id, fieldIds)}`;
  return orm
    .select({ id: objectTypes.id, appLabel: objectTypes.appLabel, model: objectTypes.model })
    .from(objectTypes)
    .where(
      or(
        inJsonList(objectTypes.id, ids),
        inJsonList(sql`(${objectTypes.appLabel} || '.' || ${objectTypes.model})`, labels),
        fieldIds.length ? sql`${objectTypes.id} IN (${pointed})` : undefined,
      ),
    );
}

/** Fields holding any of `names`, or the stored name of a field of `fieldIds`, with their type. */
function holdersQuery(orm: Orm, names: string[], fieldIds: number[]) {
  const f = customObjectTypeFields;
  const stored = sql`SELECT ${f.relatedName} FROM ${f} WHERE ${inJsonList(f.id, fieldIds)}`;
  return orm
    .select({
      id: f.id,
      name: f.name,
      relatedObjectTypeId: f.relatedObjectTypeId,
      relatedName: f.relatedName,
      // named apart from the field's own id and name: D1's batch answers rows by column name
      cotId: sql<number>`${customObjectTypes.id}`.as("holder_cot_id"),
      cot: sql<string>`${customObjectTypes.name}`.as("holder_cot_name"),
    })
    .from(f)
    .innerJoin(customObjectTypes, eq(customObjectTypes.id, f.customObjectTypeId))
    .where(
      and(
        sql`${f.relatedName} <> ''`,
        or(inJsonList(f.relatedName, names), sql`${f.relatedName} IN (${stored})`),
      ),
    );
}

/** Among the custom object types `spellings` name, the slugs `where` lets the caller view. */
function viewableQuery(orm: Orm, spellings: unknown[], where: SQL) {
  const ids: number[] = [];
  const slugs: string[] = [];
  for (const s of spellings.map(spellingOf))
    if (s && "id" in s) ids.push(s.id);
    else if (s?.appLabel === APP_LABEL) slugs.push(s.model);
  const byId = sql`SELECT ${objectTypes.model} FROM ${objectTypes} WHERE ${objectTypes.appLabel} = ${APP_LABEL} AND ${inJsonList(objectTypes.id, ids)}`;
  const cot = customObjectTypes;
  return orm
    .select({ slug: cot.slug })
    .from(cot)
    .where(and(or(inJsonList(cot.slug, slugs), sql`${cot.slug} IN (${byId})`), where));
}

/** Every type (`refuseCycle`'s first read). */
export const graphCotsQuery = (orm: Executor) =>
  orm
    .select({
      id: customObjectTypes.id,
      slug: customObjectTypes.slug,
      objectTypeId: customObjectTypes.objectTypeId,
    })
    .from(customObjectTypes);

/** Every field pointing anywhere (`refuseCycle`'s second read, less the fields adding no edge). */
export function graphFieldsQuery(orm: Executor) {
  const f = customObjectTypeFields;
  return (
    orm
      .select({
        cotId: f.customObjectTypeId,
        one: f.relatedObjectTypeId,
        many: f.relatedObjectTypeIds,
      })
      .from(f)
      // a polymorphic field's ids are stored as a JSON list, "[]" when it has none
      .where(sql`${f.relatedObjectTypeId} IS NOT NULL OR ${f.relatedObjectTypeIds} <> '[]'`)
  );
}

/** The choice sets read, and the ids and names the read covers (those read and those named). */
function setsRead(rows: ChoiceSetRead["rows"], named: unknown[]): ChoiceSetRead {
  const spelled = named.map(choiceSetSpelling);
  return {
    rows,
    ids: new Set([...rows.map((r) => r.id), ...spelled.filter((v) => typeof v === "number")]),
    names: new Set(spelled.filter((v) => typeof v === "string")),
  };
}

/** The nested choice sets read ahead, by id, for the records (`fieldRecord`). */
export const nestedSets = (ctx: WriteContext, ahead: FieldsAhead) =>
  new Map(ahead.sets.rows.map((r) => [r.id, nestedChoiceSet(ctx, r.id, r)]));

/**
 * Adds the reads of `items`' checks to `phase`; the getter answers them once it has run, and
 * keeps the object types read for the write's records (`keepReadTypes`).
 */
export async function readAhead(
  ctx: WriteContext,
  phase: ReadPhase,
  items: AheadItem[],
): Promise<() => FieldsAhead> {
  const orm = ctx.services.db.orm;
  const spellings = items.flatMap((i) => spelledTargets(i.input)).filter((v) => spellingOf(v));
  const fieldIds = items.flatMap((i) => (i.fieldId === undefined ? [] : [i.fieldId]));
  const names = items.flatMap((i) =>
    typeof i.input.related_name === "string" && i.input.related_name ? [i.input.related_name] : [],
  );
  const where = spellings.length ? await viewLimit(ctx) : undefined;
  // an updated field's targets are read for its records even when the input names none
  const types =
    spellings.length || fieldIds.length ? phase.add(typesQuery(orm, spellings, fieldIds)) : null;
  const holders =
    names.length || fieldIds.length ? phase.add(holdersQuery(orm, names, fieldIds)) : null;
  const viewable = where ? phase.add(viewableQuery(orm, spellings, where)) : null;
  const named = items.flatMap((i) => (i.input.choice_set == null ? [] : [i.input.choice_set]));
  const setView = named.length ? await refViewWhere(ctx, ctx.auth, ...CHOICE_SET) : undefined;
  const sets =
    named.length || fieldIds.length
      ? phase.add(choiceSetsQuery(orm, named, fieldIds, setView))
      : null;
  const creates = items.some((i) => i.fieldId === undefined && makesRelation(i.input));
  const graph = creates
    ? { cots: phase.add(graphCotsQuery(orm)), fields: phase.add(graphFieldsQuery(orm)) }
    : null;
  return () => {
    const read = types?.() ?? [];
    if (read.length) keepReadTypes(ctx.scratch, new Map(read.map((r) => [r.id, r])));
    return {
      types: read,
      holders: holders?.() ?? [],
      names: new Set(names),
      storedOf: new Set(fieldIds),
      viewable: viewable ? new Set(viewable().map((r) => r.slug)) : null,
      sets: setsRead(sets?.() ?? [], named),
      graph: graph ? { cots: graph.cots(), fields: graph.fields() } : undefined,
    };
  };
}
