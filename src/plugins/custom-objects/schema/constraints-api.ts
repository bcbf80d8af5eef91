/**
 * The REST type API's side of conditional constraints (decision 0087): `unique_together` with
 * partial keys among its lists, `checks`, and the fields they read following renames.
 */
import { eq, type SQL } from "drizzle-orm";
import type { Executor } from "../../../db/client";
import { customObjectTypeFields, customObjectTypes } from "../../../db/schema";
import { ValidationError } from "../../../core/errors";
import type { CotRow } from "../objects/models";
import type { FieldRow } from "../objects/values";
import { stableJson } from "./state";
import {
  asConditionalError,
  checkConditional,
  conditionalOf,
  conditionalStatements,
  conditionalViolation,
  dropConditional,
  readsField,
  rebuildConditional,
  renameInConditional,
  splitTogether,
  type Conditional,
} from "./constraints";
import {
  checkUniqueTogether,
  normalizeTogether,
  setsOfFields,
  setUniqueTogether,
  togetherStatements,
  togetherViolation,
} from "./unique-together";

const fieldsOf = (db: Executor, cotId: number) =>
  db
    .select()
    .from(customObjectTypeFields)
    .where(eq(customObjectTypeFields.customObjectTypeId, cotId)) as Promise<FieldRow[]>;

async function store(db: Executor, cotId: number, c: Conditional) {
  await db
    .update(customObjectTypes)
    .set({ conditionalConstraints: c })
    .where(eq(customObjectTypes.id, cotId));
}

/**
 * A type write's `unique_together` and `checks` (either may be absent): plain keys as before,
 * partial keys and checks checked against the fields, stored and built when they change. Rows
 * that break one are counted in the 400 unless the count is `withheld` (decision 0183).
 */
export async function setTypeConstraints(
  db: Executor,
  cot: CotRow | null,
  cotId: number,
  together: unknown,
  checks: unknown,
  withheld: boolean,
): Promise<void> {
  const fields = cot ? await fieldsOf(db, cotId) : [];
  const split = together === undefined ? null : splitTogether(together);
  if (split) {
    const sets = checkUniqueTogether(split.plain, fields);
    if (stableJson(sets) !== stableJson(normalizeTogether(cot?.uniqueTogether)))
      await setUniqueTogether(db, cotId, sets, withheld);
  }
  const have = cot ? conditionalOf(cot) : { unique: [], checks: [] };
  const { conditional, errors } = checkConditional(
    split ? split.partial : have.unique,
    checks === undefined ? have.checks : checks,
    fields,
  );
  if (Object.keys(errors).length) throw new ValidationError(errors);
  if (stableJson(conditional) === stableJson(have)) return;
  await store(db, cotId, conditional);
  await rebuildConditional(db, cotId, fields, conditional, withheld);
}

/** A type write's keys and checks for one atomic batch (the staged writer, decision 0119). */
export interface StagedConstraints {
  /** The row's new `uniqueTogether` and `conditionalConstraints`, those that change. */
  set: Partial<Pick<CotRow, "uniqueTogether" | "conditionalConstraints">>;
  /** Indexes and triggers replaced, the checks proven over the existing rows. */
  statements: SQL[];
  /** After a failed batch: the 400 `setTypeConstraints` answers when rows break a key or check. */
  explain(db: Executor): Promise<ValidationError | null>;
}

/**
 * `setTypeConstraints` as statements: the same checks and refusals, against the fields the
 * write's read phase read (`cot` null: a create, which has none). Existing rows that break a
 * key or check fail the batch; `explain` then counts them as the transaction path does.
 */
export async function stagedTypeConstraints(
  db: Executor,
  cot: CotRow | null,
  fields: FieldRow[],
  together: unknown,
  checks: unknown,
  withheld: boolean,
): Promise<StagedConstraints> {
  const cotId = cot?.id ?? 0;
  const split = together === undefined ? null : splitTogether(together);
  const haveSets = normalizeTogether(cot?.uniqueTogether);
  const sets = split ? checkUniqueTogether(split.plain, fields) : haveSets;
  const setsChange = stableJson(sets) !== stableJson(haveSets);
  const setRows = setsOfFields(sets, fields);
  const have = cot ? conditionalOf(cot) : { unique: [], checks: [] };
  const { conditional, errors } = checkConditional(
    split ? split.partial : have.unique,
    checks === undefined ? have.checks : checks,
    fields,
  );
  if (Object.keys(errors).length) {
    // the transaction path stores the plain keys (counting their clashes) before these checks
    const clash = setsChange && cot ? await togetherViolation(db, cotId, setRows, withheld) : null;
    throw clash ?? new ValidationError(errors);
  }
  const conditionalChange = stableJson(conditional) !== stableJson(have);
  const out: StagedConstraints = { set: {}, statements: [], explain: async () => null };
  if (setsChange) {
    out.set.uniqueTogether = sets;
    out.statements.push(...togetherStatements(cotId, haveSets.length, setRows));
  }
  if (conditionalChange) {
    out.set.conditionalConstraints = conditional;
    try {
      out.statements.push(...conditionalStatements(cotId, have, fields, conditional));
    } catch (e) {
      throw asConditionalError(e);
    }
  }
  out.explain = async (reader) =>
    (setsChange ? await togetherViolation(reader, cotId, setRows, withheld) : null) ??
    (conditionalChange
      ? await conditionalViolation(reader, cotId, fields, conditional, withheld)
      : null);
  return out;
}

/**
 * Around a field's rename or retype: the constraints reading it are dropped first (SQLite will
 * not move a column an index or trigger reads) and rebuilt after, following a new name (rows
 * that break one counted in the 400 unless the count is `withheld`, decision 0183).
 */
export async function aroundFieldChange(
  db: Executor,
  cot: CotRow,
  field: FieldRow,
  next: { name: string; type: string },
  change: () => Promise<unknown>,
  withheld: boolean,
): Promise<void> {
  const have = conditionalOf(cot);
  const moves =
    readsField(have, field.name) && (next.name !== field.name || next.type !== field.type);
  if (!moves) {
    await change();
    return;
  }
  await dropConditional(db, cot.id);
  await change();
  const want = next.name === field.name ? have : renameInConditional(have, field.name, next.name);
  await store(db, cot.id, want);
  await rebuildConditional(db, cot.id, await fieldsOf(db, cot.id), want, withheld);
}

/** A field a conditional constraint reads cannot be removed until the constraint is changed. */
export function refuseRemovingRead(cot: CotRow, field: FieldRow): void {
  if (readsField(conditionalOf(cot), field.name))
    throw new ValidationError({
      name: [
        `"${field.name}" is read by a conditional unique key or check of this type; change those first.`,
      ],
    });
}
