/**
 * The one diff engine behind schema/preview and schema/apply (§5.1): COTs match by slug,
 * fields by `schema_id`. It reads the database (to count values a type change would lose)
 * but never writes.
 */
import type { Executor } from "../../../db/client";
import type { ObjectTypeRegistry } from "../../../core/object-types";
import { MAX_COLUMNS_PER_TYPE } from "../../../core/limits";
import { columnCount, countUnconvertible, tooManyColumns } from "../ddl";
import { isLossless, retypeConverter } from "../values";
import type { SchemaDocument, SchemaError, TypeEntry } from "./document";
import { COT_ATTR_DEFAULTS, canonicalFromEntry, cotAttrsFromEntry, entryFromCanonical, loadDbTypes, sameValue, type CanonicalField, type DbType } from "./state";

export interface FieldChange {
  op: "add" | "alter" | "remove";
  schema_id: number;
  db_name: string;
  schema_def: Record<string, unknown>;
  changed_attrs?: Record<string, [unknown, unknown]>;
  /** True when applying this change loses data (a removal, or a lossy type change). */
  destructive: boolean;
}

export interface TypeDiff {
  slug: string;
  name: string;
  is_new: boolean;
  has_changes: boolean;
  has_destructive_changes: boolean;
  cot_changes: Record<string, [unknown, unknown]>;
  field_changes: FieldChange[];
  warnings: string[];
}

export interface DiffResult {
  diffs: TypeDiff[];
  /** Problems only the database can reveal (an id reused, a name taken); 400 invalid_schema. */
  errors: SchemaError[];
  db: Map<string, DbType>;
}

function changedAttrs(before: Record<string, unknown>, after: Record<string, unknown>): Record<string, [unknown, unknown]> {
  const out: Record<string, [unknown, unknown]> = {};
  for (const key of Object.keys(after)) if (!sameValue(before[key], after[key])) out[key] = [before[key] ?? null, after[key] ?? null];
  return out;
}

async function diffType(db: Executor, t: TypeEntry, ti: number, existing: DbType | undefined, errors: SchemaError[]): Promise<TypeDiff> {
  const attrs = cotAttrsFromEntry(t);
  const diff: TypeDiff = { slug: t.slug, name: t.name, is_new: !existing, has_changes: false, has_destructive_changes: false, cot_changes: {}, field_changes: [], warnings: [] };
  const at = `$.types[${ti}]`;

  if (!existing) {
    diff.cot_changes = changedAttrs({ name: null, ...Object.fromEntries(Object.keys(COT_ATTR_DEFAULTS).map((k) => [k, null])) }, attrs);
    for (const key of Object.keys(diff.cot_changes)) if (key !== "name" && sameValue(diff.cot_changes[key]![1], "")) delete diff.cot_changes[key];
    for (const f of t.fields) {
      diff.field_changes.push({ op: "add", schema_id: f.id, db_name: f.name, schema_def: f as Record<string, unknown>, destructive: false });
    }
    diff.has_changes = true;
    return diff;
  }

  diff.cot_changes = changedAttrs(existing.attrs, attrs);
  const removedIds = new Set((t.removed_fields ?? []).map((r) => r.id));
  const known = new Set([...existing.tombstones.map((r) => r.id)]);
  const keptNames = new Map<string, number>();
  for (const [schemaId, c] of existing.canonical) if (!removedIds.has(schemaId) && !t.fields.some((f) => f.id === schemaId)) keptNames.set(c.name, schemaId);

  const alters: FieldChange[] = [];
  const adds: FieldChange[] = [];
  for (const [fi, f] of t.fields.entries()) {
    const want = canonicalFromEntry(f);
    const have = existing.canonical.get(f.id);
    if (keptNames.has(f.name)) {
      errors.push({ path: `${at}.fields[${fi}].name`, message: `"${f.name}" is taken by field id ${keptNames.get(f.name)} in the database; list that id under removed_fields or rename it` });
    }
    if (!have) {
      if (known.has(f.id) || f.id < existing.cot.nextSchemaId) {
        errors.push({ path: `${at}.fields[${fi}].id`, message: `field id ${f.id} was used before on "${t.slug}" and cannot be reused; use ${Math.max(existing.cot.nextSchemaId, ...[...known].map((k) => k + 1))} or above` });
      }
      adds.push({ op: "add", schema_id: f.id, db_name: f.name, schema_def: f as Record<string, unknown>, destructive: false });
      continue;
    }
    const { id: _a, ...haveAttrs } = have;
    const { id: _b, ...wantAttrs } = want;
    const changed = changedAttrs(haveAttrs, wantAttrs);
    if (!Object.keys(changed).length) continue;
    let destructive = false;
    if (changed.type) {
      const row = existing.fields.find((x) => x.schemaId === f.id)!;
      const lost = isLossless(have.type, want.type) ? 0 : await countUnconvertible(db, existing.cot.id, row, retypeConverter(have.type, want.type));
      if (lost) {
        destructive = true;
        diff.warnings.push(`changing "${have.name}" from ${have.type} to ${want.type} loses ${lost} value(s) that cannot be converted; they become null`);
      }
    }
    alters.push({ op: "alter", schema_id: f.id, db_name: have.name, schema_def: f as Record<string, unknown>, changed_attrs: changed, destructive });
  }

  const removes: FieldChange[] = [];
  for (const [schemaId, c] of existing.canonical) {
    if (t.fields.some((f) => f.id === schemaId)) continue;
    if (removedIds.has(schemaId)) {
      removes.push({ op: "remove", schema_id: schemaId, db_name: c.name, schema_def: entryFromCanonical(c), destructive: true });
    } else {
      diff.warnings.push(`field "${c.name}" (id ${schemaId}) is in the database but not in the document; it is kept (list it under removed_fields to remove it)`);
    }
  }
  // The type after the change: the document's fields plus those the database keeps.
  const kept = [...existing.canonical.values()].filter((c) => keptNames.has(c.name));
  const columns = columnCount([...t.fields, ...kept].map((f) => ({ type: f.type, isPolymorphic: f.is_polymorphic === true })));
  if (columns > MAX_COLUMNS_PER_TYPE) errors.push({ path: `${at}.fields`, message: tooManyColumns(columns) });
  diff.field_changes = [...removes, ...alters, ...adds];
  diff.has_changes = Object.keys(diff.cot_changes).length > 0 || diff.field_changes.length > 0;
  diff.has_destructive_changes = diff.field_changes.some((c) => c.destructive);
  return diff;
}

/** Computes per-type diffs of a validated document against the database. */
export async function diffDocument(db: Executor, objectTypes: ObjectTypeRegistry, doc: SchemaDocument): Promise<DiffResult> {
  const state = await loadDbTypes(db, objectTypes, doc.types.map((t) => t.slug));
  const errors: SchemaError[] = [];
  const diffs: TypeDiff[] = [];
  for (const [ti, t] of doc.types.entries()) diffs.push(await diffType(db, t, ti, state.get(t.slug), errors));
  return { diffs, errors: errors.slice(0, 20), db: state };
}

export type { CanonicalField };
