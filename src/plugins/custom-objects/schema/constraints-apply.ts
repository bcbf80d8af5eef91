/**
 * Schema documents' side of conditional constraints (decision 0087): preview counts the rows an
 * added partial key or check would refuse and gates them like a unique key over duplicates;
 * apply drops them before the type's columns move and builds them once the columns exist.
 */
import { eq } from "drizzle-orm";
import type { Executor } from "../../../db/client";
import { customObjectTypeFields, customObjectTypes } from "../../../db/schema";
import type { WriteContext } from "../../../core/rest/resource";
import { valueColumn } from "../ddl";
import type { FieldRow } from "../objects/values";
import {
  conditionalOf,
  countCheckViolations,
  countPartialDuplicates,
  dropConditional,
  mergedTogether,
  plainTogether,
  rebuildConditional,
  wantedConditional,
  type ConditionField,
  type Conditional,
} from "./constraints";
import type { TypeEntry } from "./document";
import type { DestructiveChange } from "./impact";
import type { DbType } from "./state";
import { stableJson } from "./state";
import { normalizeTogether } from "./unique-together";

type Gate = (
  field: string | null,
  reason: DestructiveChange["reason"],
  rows: number,
  detail: string,
) => void;

const sameConditional = (a: Conditional, b: Conditional) => stableJson(a) === stableJson(b);

/**
 * The document's fields as they read the rows of today: a kept field from its column (under
 * its old name if renamed), a new or retyped one as empty.
 */
function fieldsToday(t: TypeEntry, existing: DbType): ConditionField[] {
  return t.fields.map((f) => {
    const row = existing.fields.find((r) => r.schemaId === f.id);
    const kept = row && row.type === f.type && row.isPolymorphic === (f.is_polymorphic === true);
    return {
      name: f.name,
      type: f.type,
      isPolymorphic: f.is_polymorphic === true,
      sqlColumn: kept ? valueColumn(row) : null,
    };
  });
}

/** Preview: the changed constraints in `cot_changes`, and gates over the rows they would refuse. */
export async function diffConditional(
  db: Executor,
  t: TypeEntry,
  existing: DbType,
  cotChanges: Record<string, [unknown, unknown]>,
  gate: Gate,
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
  const fields = fieldsToday(t, existing);
  const known = (s: unknown) => [...have.unique, ...have.checks].some((h) => stableJson(h) === s);
  for (const key of want.unique) {
    if (known(stableJson(key))) continue;
    const dup = await countPartialDuplicates(db, existing.cot.id, fields, key);
    if (dup)
      gate(
        key.fields.join(","),
        "unique_over_duplicates",
        dup,
        `the partial key [${key.fields.join(", ")}] is added while ${dup} row(s) matching its condition share those values with another row; the unique index cannot be built until they differ`,
      );
  }
  for (const check of want.checks) {
    if (known(stableJson(check))) continue;
    const bad = await countCheckViolations(db, existing.cot.id, fields, check);
    if (bad)
      gate(
        check.name,
        "check_over_violations",
        bad,
        `the check "${check.name}" is added while ${bad} row(s) do not match it; it cannot hold until they do`,
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
  await rebuildConditional(ctx.db, cotId, fields, want);
}
