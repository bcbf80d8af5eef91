/**
 * Schema documents' side of conditional constraints (decision 0087): preview counts the rows an
 * added partial key or check would refuse and gates them like a unique key over duplicates;
 * apply drops them before the type's columns move and builds them once the columns exist.
 */
import { eq, type SQL } from "drizzle-orm";
import type { Executor } from "../../../db/client";
import { customObjectTypeFields, customObjectTypes } from "../../../db/schema";
import type { WriteContext } from "../../../core/rest/resource";
import { valueColumn } from "../ddl";
import { fieldType, isFieldType, type FieldLike } from "../field-types";
import { encodeScalar, type FieldRow } from "../objects/values";
import {
  checkViolationsSql,
  conditionalOf,
  dropConditional,
  mergedTogether,
  partialDuplicatesSql,
  plainTogether,
  rebuildConditional,
  wantedConditional,
  type ConditionField,
  type Conditional,
} from "./constraints";
import { countsWithheldFor } from "./access";
import type { TypeEntry } from "./document";
import { countScalar, type Gate } from "./impact";
import type { PrefetchedCounts } from "./diff";
import type { DbType } from "./state";
import { stableJson } from "./state";
import { normalizeTogether } from "./unique-together";

const sameConditional = (a: Conditional, b: Conditional) => stableJson(a) === stableJson(b);

/**
 * The document's fields as they read the rows of today: a kept field from its column (under
 * its old name if renamed), a retyped one as empty, a new one as its default, which the apply
 * fills into every row (decision 0142).
 */
function fieldsToday(t: TypeEntry, existing: DbType): ConditionField[] {
  return t.fields.map((f) => {
    const row = existing.fields.find((r) => r.schemaId === f.id);
    const kept = row && row.type === f.type && row.isPolymorphic === (f.is_polymorphic === true);
    const field = { name: f.name, type: f.type, isPolymorphic: f.is_polymorphic === true };
    return {
      ...field,
      sqlColumn: kept ? valueColumn(row) : null,
      sqlValue: row ? undefined : storedDefault(field, f.default),
    };
  });
}

/** A new field's default as its column stores it (as `encodedDefault` fills it), or undefined. */
function storedDefault(f: ConditionField, value: unknown): unknown {
  if (value === null || value === undefined || !isFieldType(f.type)) return undefined;
  if (!fieldType(f.type).takesDefault) return undefined;
  const r = encodeScalar(f as FieldLike, value, null);
  return "error" in r ? undefined : r.value;
}

/**
 * The partial keys and checks a document adds to an existing type, each with the scalar count
 * of the rows it would refuse (null: a key field holds no values yet) and its name for a count
 * read ahead (`PrefetchedCounts.added`, decision 0126). Throws ConstraintIssue on a condition the
 * fields do not support.
 */
export function addedConditional(t: TypeEntry, existing: DbType) {
  const have = conditionalOf(existing.cot);
  const want = wantedConditional(t);
  if (sameConditional(have, want)) return { keys: [], checks: [] };
  const fields = fieldsToday(t, existing);
  const known = (s: string) => [...have.unique, ...have.checks].some((h) => stableJson(h) === s);
  return {
    keys: want.unique
      .filter((key) => !known(stableJson(key)))
      .map((key) => ({
        key,
        id: `unique:${stableJson(key)}`,
        count: partialDuplicatesSql(existing.cot.id, fields, key),
      })),
    checks: want.checks
      .filter((check) => !known(stableJson(check)))
      .map((check) => ({
        check,
        id: `check:${stableJson(check)}`,
        count: checkViolationsSql(existing.cot.id, fields, check) as SQL | null,
      })),
  };
}

/** A count of `added…`'s: read ahead when it was, else read now. */
export const countAdded = async (
  db: Executor,
  cotId: number,
  item: { id: string; count: SQL | null },
  counted?: PrefetchedCounts,
): Promise<number> =>
  item.count ? (counted?.added(cotId, item.id) ?? (await countScalar(db, item.count))) : 0;

/** Preview: the changed constraints in `cot_changes`, and gates over the rows they would refuse. */
export async function diffConditional(
  db: Executor,
  t: TypeEntry,
  existing: DbType,
  cotChanges: Record<string, [unknown, unknown]>,
  gate: Gate,
  counted?: PrefetchedCounts,
): Promise<void> {
  const have = conditionalOf(existing.cot);
  const want = wantedConditional(t);
  if (sameConditional(have, want)) return;
  cotChanges.unique_together = [
    mergedTogether(normalizeTogether(existing.cot.uniqueTogether), have),
    mergedTogether(normalizeTogether(plainTogether(t.unique_together)), want),
  ];
  if (stableJson(have.checks) !== stableJson(want.checks))
    cotChanges.checks = [have.checks, want.checks];
  const added = addedConditional(t, existing);
  for (const item of added.keys) {
    const dup = await countAdded(db, existing.cot.id, item, counted);
    const names = item.key.fields.join(", ");
    if (dup)
      gate(
        item.key.fields.join(","),
        "unique_over_duplicates",
        dup,
        (n) =>
          `the partial key [${names}] is added while ${n} row(s) matching its condition share those values with another row; the unique index cannot be built until they differ`,
      );
  }
  for (const item of added.checks) {
    const bad = await countAdded(db, existing.cot.id, item, counted);
    if (bad)
      gate(
        item.check.name,
        "check_over_violations",
        bad,
        (n) =>
          `the check "${item.check.name}" is added while ${n} row(s) do not match it; it cannot hold until they do`,
      );
  }
}

/**
 * Apply, before any field moves: drops the type's conditional constraints when they change or
 * any field changes (SQLite will not move a column an index or trigger reads, and a table
 * rebuild that adds columns would leave them behind). Returns whether they must be built again.
 */
export async function dropConditionalFirst(
  db: Executor,
  cot: { id: number; conditionalConstraints?: Conditional | null },
  t: TypeEntry,
  fieldChanges: Array<{ op: string }>,
): Promise<boolean> {
  const changed = !sameConditional(conditionalOf(cot), wantedConditional(t));
  const moves = fieldChanges.length > 0;
  const had = conditionalOf(cot);
  if (!changed && !(moves && (had.unique.length || had.checks.length))) return false;
  await dropConditional(db, cot.id);
  return true;
}

/** Apply, once the type's columns exist: stores and builds what the document asks for. */
export async function applyConditional(ctx: WriteContext, cotId: number, t: TypeEntry) {
  const want = wantedConditional(t);
  await ctx.db
    .update(customObjectTypes)
    .set({ conditionalConstraints: want })
    .where(eq(customObjectTypes.id, cotId));
  const fields = (await ctx.db
    .select()
    .from(customObjectTypeFields)
    .where(eq(customObjectTypeFields.customObjectTypeId, cotId))) as FieldRow[];
  await rebuildConditional(ctx.db, cotId, fields, want, countsWithheldFor(ctx, t.slug));
}
