/**
 * The one diff engine behind schema/preview and schema/apply (§5.1): COTs match by slug,
 * fields by `schema_id`. It reads the database (to count values a type change would lose)
 * but never writes.
 */
import { yieldWhenDue } from "../../../turns";
import { eq, sql, type SQL } from "drizzle-orm";
import type { Executor } from "../../../db/client";
import { choiceSets, customObjectTypeFields, customObjectTypes } from "../../../db/schema";
import type { FieldRow } from "../objects/values";
import type { ObjectTypeRegistry } from "../../../core/object-types";
import { fieldColumns, tooWide } from "../ddl";
import { fieldType, isFieldType } from "../field-types";
import { normalizeTogether } from "./unique-together";
import { conditionalOf, mergedTogether, plainTogether, wantedConditional } from "./constraints";
import { countAdded, diffConditional } from "./constraints-apply";
import {
  countDuplicates,
  countEmpty,
  duplicatesCountSql,
  countLinksOutside,
  countLossy,
  countOutsideChoices,
  countRows,
  countValues,
  type DestructiveChange,
  type Gate,
  gated,
} from "./impact";
import type { SchemaDocument, SchemaError, TypeEntry } from "./document";
import { typeChangeRefused } from "../types/field-definition";
import {
  COT_ATTR_DEFAULTS,
  canonicalFromEntry,
  cotAttrsFromEntry,
  entryFromCanonical,
  loadDbTypes,
  sameValue,
  type CanonicalField,
  type DbType,
} from "./state";

interface FieldChange {
  op: "add" | "alter" | "remove";
  schema_id: number;
  db_name: string;
  schema_def: Record<string, unknown>;
  changed_attrs?: Record<string, [unknown, unknown]>;
  /** True when the change is gated: a removal, or one that loses or rejects data on live rows. */
  destructive: boolean;
}

export interface TypeDiff {
  slug: string;
  name: string;
  is_new: boolean;
  /** Set on a type the document removes (`removed_types`). */
  removed?: boolean;
  has_changes: boolean;
  has_destructive_changes: boolean;
  cot_changes: Record<string, [unknown, unknown]>;
  field_changes: FieldChange[];
  /** Every change that loses or rejects data, counted against live rows (gated in apply). */
  destructive_changes: DestructiveChange[];
  warnings: string[];
}

export interface DiffResult {
  diffs: TypeDiff[];
  /** Problems only the database can reveal (an id reused, a name taken); 400 invalid_schema. */
  errors: SchemaError[];
  db: Map<string, DbType>;
  /** Changes to existing choice sets (`choice_sets`) that drop values still stored. */
  choice_set_changes: DestructiveChange[];
}

/** What the diff needs to look up besides the types: choice sets and object types. */
export type ChoiceSetRow = typeof choiceSets.$inferSelect;

export interface DiffLookups {
  /** Choice values of a set by name (the document's own sets first), null when unknown. */
  choices(name: string): Promise<string[] | null>;
  /** A choice set's row by name as the database has it (the document's changes not applied). */
  choiceSet(name: string): Promise<ChoiceSetRow | undefined>;
  /** Object type id of an `app/model` reference, null when unknown. */
  objectTypeId(ref: string): Promise<number | null>;
  /** Removal counts read ahead (a batched apply's read phase): undefined ones are counted here. */
  counted?: PrefetchedCounts;
  /**
   * True for a type whose objects the caller may not all view: its gates still count every row,
   * but say no number (decision 0181). None: every count is shown.
   */
  withheld?(slug: string): boolean;
}

/**
 * Counts a batched apply read ahead (decisions 0120, 0126): what a removal takes, by field id
 * and by type id; the rows a key or check the document adds would refuse, by type id and the
 * key's name (`addedTogether`, `addedConditional`); what a retype loses. Undefined: not read.
 */
export interface PrefetchedCounts {
  values(fieldId: number): number | undefined;
  rows(cotId: number): number | undefined;
  added(cotId: number, key: string): number | undefined;
  /** Values a field's retype to `type` cannot carry, from its values read ahead. */
  lossy(fieldId: number, type: string): number | undefined;
  /** Rows a relation's retarget unlinks (`countLinksOutside`), read ahead (decision 0142). */
  links?(fieldId: number): number | undefined;
  /** The object type id an `app/model` names, when known without a read (decision 0142). */
  objectType?(ref: string): number | undefined;
}

function changedAttrs(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
): Record<string, [unknown, unknown]> {
  const out: Record<string, [unknown, unknown]> = {};
  for (const key of Object.keys(after))
    if (!sameValue(before[key], after[key])) out[key] = [before[key] ?? null, after[key] ?? null];
  return out;
}

async function diffType(
  db: Executor,
  t: TypeEntry,
  ti: number,
  existing: DbType | undefined,
  errors: SchemaError[],
  lookups: DiffLookups,
): Promise<TypeDiff> {
  const attrs = cotAttrsFromEntry(t);
  const diff: TypeDiff = {
    slug: t.slug,
    name: t.name,
    is_new: !existing,
    has_changes: false,
    has_destructive_changes: false,
    cot_changes: {},
    field_changes: [],
    destructive_changes: [],
    warnings: [],
  };
  const withheld = lookups.withheld?.(t.slug) ?? false;
  const gate: Gate = (field, reason, rows, detail) => {
    const change = gated(t.slug, withheld, { field, reason, rows }, detail);
    diff.destructive_changes.push(change);
    return change.detail;
  };
  const at = `$.types[${ti}]`;
  if (!existing) return newTypeDiff(diff, t, attrs);

  diff.cot_changes = changedAttrs(existing.attrs, attrs);
  await diffTogether(db, t, existing, diff, gate, lookups.counted);
  await diffConditional(db, t, existing, diff.cot_changes, gate, lookups.counted);
  const removedIds = new Set((t.removed_fields ?? []).map((r) => r.id));
  const keptNames = new Map<string, number>();
  for (const [schemaId, c] of existing.canonical)
    if (!removedIds.has(schemaId) && !t.fields.some((f) => f.id === schemaId))
      keptNames.set(c.name, schemaId);

  const { alters, adds } = await diffFields(db, t, at, existing, keptNames, {
    diff,
    gate,
    errors,
    lookups,
  });
  const removes = await diffRemovals(db, t, existing, removedIds, { diff, gate }, lookups.counted);
  // The type after the change: the document's fields plus those the database keeps.
  const kept = [...existing.canonical.values()].filter((c) => keptNames.has(c.name));
  const wide = tooWide(
    [...t.fields, ...kept].map((f) => ({ type: f.type, isPolymorphic: f.is_polymorphic === true })),
  );
  if (wide) errors.push({ path: `${at}.fields`, message: wide });
  diff.field_changes = [...removes, ...alters, ...adds];
  diff.has_changes = Object.keys(diff.cot_changes).length > 0 || diff.field_changes.length > 0;
  diff.has_destructive_changes = diff.destructive_changes.length > 0;
  return diff;
}

/** A type the database does not have yet: every attribute, field and key is an addition. */
function newTypeDiff(diff: TypeDiff, t: TypeEntry, attrs: Record<string, unknown>): TypeDiff {
  diff.cot_changes = changedAttrs(
    { name: null, ...Object.fromEntries(Object.keys(COT_ATTR_DEFAULTS).map((k) => [k, null])) },
    attrs,
  );
  for (const key of Object.keys(diff.cot_changes))
    if (key !== "name" && sameValue(diff.cot_changes[key]![1], "")) delete diff.cot_changes[key];
  for (const f of t.fields) diff.field_changes.push(addition(f));
  if (t.unique_together?.length)
    diff.cot_changes.unique_together = [
      [],
      mergedTogether(normalizeTogether(plainTogether(t.unique_together)), wantedConditional(t)),
    ];
  if (t.checks?.length) diff.cot_changes.checks = [[], wantedConditional(t).checks];
  diff.has_changes = true;
  return diff;
}

const addition = (f: TypeEntry["fields"][number]): FieldChange => ({
  op: "add",
  schema_id: f.id,
  db_name: f.name,
  schema_def: f as Record<string, unknown>,
  destructive: false,
});

/**
 * The compound keys a document adds to an existing type, each with the scalar count of the rows
 * that share its values (`togetherCountSql`; null: not counted) and its name for a count read
 * ahead (`PrefetchedCounts.added`, decision 0126).
 */
export function addedTogether(t: TypeEntry, existing: DbType) {
  const haveKeys = new Set(normalizeTogether(existing.cot.uniqueTogether).map((s) => s.join(",")));
  return normalizeTogether(plainTogether(t.unique_together))
    .filter((set) => !haveKeys.has(set.join(",")))
    .map((set) => ({
      set,
      id: `together:${set.join(",")}`,
      count: togetherCountSql(t, existing, set),
    }));
}

/**
 * The rows of today a new compound key would refuse, read before the apply moves anything
 * (decision 0136): a kept field by its column, under its old name when the apply renames it; a
 * field the apply adds by its default, which every row takes alike (none: NULL, which never
 * clashes, so no row is refused). Null when a field is retyped or not the document's.
 */
function togetherCountSql(t: TypeEntry, existing: DbType, set: string[]): SQL | null {
  const columns: string[] = [];
  for (const name of set) {
    const entry = t.fields.find((e) => e.name === name);
    if (!entry) return null;
    const row = existing.fields.find((f) => f.schemaId === entry.id);
    if (!row) {
      const filled =
        entry.default != null && isFieldType(entry.type) && fieldType(entry.type).takesDefault;
      if (!filled) return sql`0`;
      continue;
    }
    const column = fieldColumns(row)[0];
    if (!column || row.type !== entry.type) return null;
    if (row.isPolymorphic !== (entry.is_polymorphic === true)) return null;
    columns.push(column);
  }
  return duplicatesCountSql(existing.cot.id, columns);
}

/** Changed compound keys; a new one over rows that share its values is gated. */
async function diffTogether(
  db: Executor,
  t: TypeEntry,
  existing: DbType,
  diff: TypeDiff,
  gate: Gate,
  counted?: PrefetchedCounts,
) {
  const wantTogether = normalizeTogether(plainTogether(t.unique_together));
  const haveTogether = normalizeTogether(existing.cot.uniqueTogether);
  if (sameValue(wantTogether, haveTogether)) return;
  diff.cot_changes.unique_together = [
    mergedTogether(haveTogether, conditionalOf(existing.cot)),
    mergedTogether(wantTogether, wantedConditional(t)),
  ];
  // a new compound key over rows that share its values cannot be built
  for (const item of addedTogether(t, existing)) {
    const dup = await countAdded(db, existing.cot.id, item, counted);
    if (dup)
      gate(
        item.set.join(","),
        "unique_over_duplicates",
        dup,
        (n) =>
          `unique_together [${item.set.join(", ")}] is added while ${n} row(s) share those values with another row; the unique index cannot be built until they differ`,
      );
  }
}

/** The document's fields against the database's: additions, and alterations with their gates. */
async function diffFields(
  db: Executor,
  t: TypeEntry,
  at: string,
  existing: DbType,
  keptNames: Map<string, number>,
  out: { diff: TypeDiff; gate: Gate; errors: SchemaError[]; lookups: DiffLookups },
): Promise<{ alters: FieldChange[]; adds: FieldChange[] }> {
  const { diff, errors } = out;
  const known = new Set([...existing.tombstones.map((r) => r.id)]);
  const alters: FieldChange[] = [];
  const adds: FieldChange[] = [];
  for (const [fi, f] of t.fields.entries()) {
    const want = canonicalFromEntry(f);
    const have = existing.canonical.get(f.id);
    if (keptNames.has(f.name)) {
      errors.push({
        path: `${at}.fields[${fi}].name`,
        message: `"${f.name}" is taken by field id ${keptNames.get(f.name)} in the database; list that id under removed_fields or rename it`,
      });
    }
    if (!have) {
      if (known.has(f.id) || f.id < existing.cot.nextSchemaId) {
        errors.push({
          path: `${at}.fields[${fi}].id`,
          message: `field id ${f.id} was used before on "${t.slug}" and cannot be reused; use ${Math.max(existing.cot.nextSchemaId, ...[...known].map((k) => k + 1))} or above`,
        });
      }
      adds.push(addition(f));
      continue;
    }
    const { id: _a, ...haveAttrs } = have;
    const { id: _b, ...wantAttrs } = want;
    const changed = changedAttrs(haveAttrs, wantAttrs);
    if (!Object.keys(changed).length) continue;
    // preview refuses what apply would (a url or coordinates field keeps its type)
    const refused = typeChangeRefused(have.type, want.type);
    if (refused) {
      errors.push({ path: `${at}.fields[${fi}].type`, message: refused });
      continue;
    }
    const row = existing.fields.find((x) => x.schemaId === f.id)!;
    const gated = diff.destructive_changes.length;
    await gateAlteration({ db, cotId: existing.cot.id, row, have, want, changed, ...out });
    const destructive = diff.destructive_changes.length > gated;
    alters.push({
      op: "alter",
      schema_id: f.id,
      db_name: have.name,
      schema_def: f as Record<string, unknown>,
      changed_attrs: changed,
      destructive,
    });
  }
  return { alters, adds };
}

/** One field's alteration, with what the gates count it against. */
interface Alteration {
  db: Executor;
  cotId: number;
  row: FieldRow;
  have: CanonicalField;
  want: CanonicalField;
  changed: Record<string, [unknown, unknown]>;
  diff: TypeDiff;
  gate: Gate;
  lookups: DiffLookups;
}

/** Gates what an alteration loses or rejects on live rows: values, empties, duplicates, links. */
async function gateAlteration(a: Alteration) {
  const { db, cotId, row, have, want, changed, gate } = a;
  if (changed.type) {
    const lost =
      a.lookups.counted?.lossy(row.id, want.type) ?? (await countLossy(db, cotId, row, want.type));
    if (lost) {
      const words = gate(
        have.name,
        "lossy_type_change",
        lost,
        (n) =>
          `changing "${have.name}" from ${have.type} to ${want.type} loses ${n} value(s) that cannot be converted; they become null`,
      );
      a.diff.warnings.push(words);
    }
  }
  // What stays in storage under the new definition (a retype keeps the column, with new values).
  const sameStorage = !changed.type;
  if (
    sameStorage &&
    want.required &&
    !have.required &&
    (want.default === null || want.default === undefined)
  ) {
    const empty = await countEmpty(db, cotId, row);
    if (empty)
      gate(
        have.name,
        "required_over_empty_rows",
        empty,
        (n) =>
          `"${have.name}" becomes required with no default while ${n} row(s) have no value; they cannot be saved until filled`,
      );
  }
  if (want.unique && (!have.unique || changed.type) && fieldType(want.type).storage !== "links") {
    const dup = sameStorage ? await countDuplicates(db, cotId, fieldColumns(row).slice(0, 1)) : 0;
    if (dup)
      gate(
        have.name,
        "unique_over_duplicates",
        dup,
        (n) =>
          `"${have.name}" becomes unique while ${n} row(s) share a value with another row; the unique index cannot be built until they differ`,
      );
  }
  if (sameStorage) await gateSameStorage(a);
}

/** Gates for a field that keeps its storage: values outside new choices, links to an old type. */
async function gateSameStorage({ db, cotId, row, have, want, changed, gate, lookups }: Alteration) {
  if (changed.choice_set && want.choice_set) {
    const allowed = await lookups.choices(want.choice_set);
    const used = allowed ? await countOutsideChoices(db, cotId, row, allowed) : 0;
    if (used)
      gate(
        have.name,
        "choices_in_use",
        used,
        (n) =>
          `${n} row(s) of "${have.name}" hold a value that choice set "${want.choice_set}" does not offer`,
      );
  }
  if (
    fieldType(want.type).takes.related &&
    !changed.is_polymorphic &&
    (changed.related_object_type || changed.related_object_types)
  ) {
    const keep =
      want.is_polymorphic && have.is_polymorphic
        ? (await Promise.all(want.related_object_types.map((r) => lookups.objectTypeId(r)))).filter(
            (x): x is number => x !== null,
          )
        : null;
    const linked =
      lookups.counted?.links?.(row.id) ?? (await countLinksOutside(db, cotId, row, keep));
    if (linked)
      gate(
        have.name,
        "link_target_changed",
        linked,
        (n) =>
          `the related type of "${have.name}" changes while ${n} row(s) link to objects of the old one; those links are cleared`,
      );
  }
}

/** Fields listed under `removed_fields` (each gated); others missing from the document are kept. */
async function diffRemovals(
  db: Executor,
  t: TypeEntry,
  existing: DbType,
  removedIds: Set<number>,
  { diff, gate }: { diff: TypeDiff; gate: Gate },
  counted?: PrefetchedCounts,
): Promise<FieldChange[]> {
  const removes: FieldChange[] = [];
  for (const [schemaId, c] of existing.canonical) {
    if (t.fields.some((f) => f.id === schemaId)) continue;
    if (removedIds.has(schemaId)) {
      // Every removal is gated, empty or not (the seed's rule, decision 0075); the count says
      // what it would take.
      const row = existing.fields.find((x) => x.schemaId === schemaId)!;
      const values = counted?.values(row.id) ?? (await countValues(db, existing.cot.id, row));
      gate(
        c.name,
        "field_removed",
        values,
        (n) => `removing "${c.name}" takes the values of ${n} row(s)`,
      );
      removes.push({
        op: "remove",
        schema_id: schemaId,
        db_name: c.name,
        schema_def: entryFromCanonical(c),
        destructive: true,
      });
    } else {
      diff.warnings.push(
        `field "${c.name}" (id ${schemaId}) is in the database but not in the document; it is kept (list it under removed_fields to remove it)`,
      );
    }
  }
  return removes;
}

/**
 * Computes per-type diffs of a validated document against the database. Types named in
 * `hidden` are diffed as if they did not exist: nothing of them is read or counted. `loaded` is
 * the state of the document's types and removed types when the caller has read it already
 * (`loadDbTypes` with the same `hidden`).
 */
export async function diffDocument(
  db: Executor,
  objectTypes: ObjectTypeRegistry,
  doc: SchemaDocument,
  hidden?: ReadonlySet<string>,
  lookups: DiffLookups = defaultLookups(db, objectTypes, doc),
  loaded?: Map<string, DbType>,
): Promise<DiffResult> {
  const removedSlugs = (doc.removed_types ?? []).map((r) => r.slug);
  const all =
    loaded ??
    (await loadDbTypes(
      db,
      objectTypes,
      [...doc.types.map((t) => t.slug), ...removedSlugs],
      hidden,
    ));
  const removedOnly = new Set(removedSlugs.filter((s) => !doc.types.some((t) => t.slug === s)));
  // the document's own types; removed ones join below, after their diffs
  const state = new Map([...all].filter(([slug]) => !removedOnly.has(slug)));
  const errors: SchemaError[] = [];
  const diffs: TypeDiff[] = [];
  for (const [ti, t] of doc.types.entries()) {
    await yieldWhenDue(); // a document of hundreds of types: turns between them (decision 0205)
    diffs.push(await diffType(db, t, ti, state.get(t.slug), errors, lookups));
  }
  // Types the document removes come after its own types (diffs[i] stays doc.types[i]).
  for (const r of doc.removed_types ?? []) {
    const existing = all.get(r.slug);
    if (!existing) continue; // already gone: nothing to do
    const rows = lookups.counted?.rows(existing.cot.id) ?? (await countRows(db, existing.cot.id));
    diffs.push({
      slug: r.slug,
      name: existing.cot.name,
      is_new: false,
      removed: true,
      has_changes: true,
      // A type removal is always gated, empty or not (decision 0075).
      has_destructive_changes: true,
      cot_changes: {},
      field_changes: [...existing.canonical.values()].map((c) => ({
        op: "remove" as const,
        schema_id: c.id,
        db_name: c.name,
        schema_def: entryFromCanonical(c),
        destructive: true,
      })),
      destructive_changes: [
        gated(
          r.slug,
          lookups.withheld?.(r.slug) ?? false,
          { field: null, reason: "type_removed", rows },
          (n) => `removing type "${r.slug}" takes its ${n} row(s)`,
        ),
      ],
      warnings: [],
    });
    state.set(r.slug, existing);
  }
  const choice_set_changes: DestructiveChange[] = [];
  for (const set of doc.choice_sets ?? []) {
    const current = await lookups.choiceSet(set.name);
    if (!current) continue;
    const keep = set.extra_choices.map(([value]) => value);
    if (current.extraChoices.every(([value]) => keep.includes(value))) continue;
    const users = await db
      .select()
      .from(customObjectTypeFields)
      .where(eq(customObjectTypeFields.choiceSetId, current.id));
    for (const f of users) {
      const [cot] = await db
        .select({ slug: customObjectTypes.slug })
        .from(customObjectTypes)
        .where(eq(customObjectTypes.id, f.customObjectTypeId));
      if (cot && hidden?.has(cot.slug)) continue;
      const n = await countOutsideChoices(db, f.customObjectTypeId, f as FieldRow, keep);
      if (n)
        choice_set_changes.push(
          gated(
            cot?.slug ?? String(f.customObjectTypeId),
            !cot || (lookups.withheld?.(cot.slug) ?? false),
            { field: f.name, reason: "choices_in_use", rows: n },
            (shown) => `choice set "${set.name}" drops values ${shown} row(s) of "${f.name}" hold`,
          ),
        );
    }
  }
  return { diffs, errors: errors.slice(0, 20), db: state, choice_set_changes };
}

/**
 * Choice sets and object types as the database has them. `sets`: every choice set the document
 * names, read ahead (a batched apply's first read, decision 0119); else each is read here.
 */
export function defaultLookups(
  db: Executor,
  objectTypes: ObjectTypeRegistry,
  doc?: SchemaDocument,
  sets?: readonly ChoiceSetRow[],
): DiffLookups {
  const choiceSet = async (name: string) =>
    sets
      ? sets.find((r) => r.name === name)
      : (await db.select().from(choiceSets).where(eq(choiceSets.name, name)))[0];
  return {
    choiceSet,
    choices: async (name) => {
      const own = doc?.choice_sets?.find((c) => c.name === name);
      if (own) return own.extra_choices.map(([value]) => value);
      const row = await choiceSet(name);
      return row ? row.extraChoices.map(([value]) => value) : null;
    },
    objectTypeId: async (ref) => {
      const [app, model] = ref.split("/") as [string, string];
      const ot = await objectTypes.byLabel(
        app === "custom-objects" ? "custom_objects" : app,
        model,
        db,
      );
      return ot?.id ?? null;
    },
  };
}
export type { DestructiveChange };
