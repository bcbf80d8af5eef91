/**
 * Compound uniqueness (`unique_together`, decision 0051): lists of field names stored on the
 * type, each enforced by a unique index `co_<id>_ut<n>` over the fields' value columns. Shared
 * by schema apply and the REST type API.
 */
import { eq, sql, type SQL } from "drizzle-orm";
import type { Executor } from "../../../db/client";
import { customObjectTypeFields, customObjectTypes } from "../../../db/schema";
import { ValidationError } from "../../../core/errors";
import { fieldColumns, hasLinkTable, ident, tableName } from "../ddl";
import type { FieldRow } from "../objects/values";
import { countDuplicates, existingRows } from "./impact";

/** At most this many compound keys per type (index names `_ut0` … `_ut15`). */
const MAX_UNIQUE_TOGETHER = 16;
const NAME = /^[a-z0-9]+(_[a-z0-9]+)*$/;

/** unique_together in one spelling: each set sorted, the sets sorted (order carries no meaning). */
export function normalizeTogether(sets: string[][] | null | undefined): string[][] {
  return (sets ?? [])
    .map((set) => [...set].sort())
    .sort((a, b) => a.join(",").localeCompare(b.join(",")));
}

const indexName = (cotId: number, i: number) => `${tableName(cotId)}_ut${i}`;

/** The unique index of compound key `i`, over the fields of `set`. */
const togetherIndex = (cotId: number, i: number, set: FieldRow[]) =>
  sql`CREATE UNIQUE INDEX ${ident(indexName(cotId, i))} ON ${ident(tableName(cotId))} (${sql.join(
    set.map((f) => ident(fieldColumns(f)[0]!)),
    sql`, `,
  )})`;

/**
 * The statements that replace a type's compound unique indexes in one atomic batch: the `had`
 * ones dropped, `sets` built (an index over rows that share values fails the batch).
 */
export function togetherStatements(cotId: number, had: number, sets: FieldRow[][]): SQL[] {
  return [
    ...Array.from(
      { length: had },
      (_, i) => sql`DROP INDEX IF EXISTS ${ident(indexName(cotId, i))}`,
    ),
    ...sets.map((set, i) => togetherIndex(cotId, i, set)),
  ];
}

export async function dropUniqueTogether(db: Executor, cotId: number) {
  for (let i = 0; i < MAX_UNIQUE_TOGETHER; i++)
    await db.run(sql`DROP INDEX IF EXISTS ${ident(indexName(cotId, i))}`);
}

/**
 * Replaces a type's compound unique indexes. One that cannot be built (rows share the values)
 * is a 400 on `unique_together`, never a 500.
 */
export async function buildUniqueTogether(db: Executor, cotId: number, sets: FieldRow[][]) {
  await dropUniqueTogether(db, cotId);
  for (const [i, set] of sets.entries()) {
    try {
      await db.run(togetherIndex(cotId, i, set));
    } catch (e) {
      if (
        !/UNIQUE constraint failed/i.test(
          String((e as Error)?.message ?? "") +
            String((e as { cause?: Error })?.cause?.message ?? ""),
        )
      )
        throw e;
      throw new ValidationError({
        unique_together: [
          `Existing rows share values of ${set.map((f) => f.name).join(", ")}; they must make a unique set.`,
        ],
      });
    }
  }
}

/**
 * The REST spelling: checks `raw` against the type's fields and returns the normalised sets,
 * or throws a 400 on `unique_together`.
 */
export function checkUniqueTogether(raw: unknown, fields: FieldRow[]): string[][] {
  const bad = (msg: string) => new ValidationError({ unique_together: [msg] });
  if (!Array.isArray(raw)) throw bad("Expected a list of lists of field names.");
  if (raw.length > MAX_UNIQUE_TOGETHER) throw bad(`At most ${MAX_UNIQUE_TOGETHER} sets.`);
  for (const set of raw) {
    if (
      !Array.isArray(set) ||
      set.length < 2 ||
      set.length > 16 ||
      !set.every((n) => typeof n === "string" && NAME.test(n))
    )
      throw bad("Each set is a list of 2 to 16 field names.");
    if (new Set(set).size !== set.length) throw bad(`[${set.join(", ")}] names a field twice.`);
    for (const n of set as string[]) {
      const f = fields.find((x) => x.name === n);
      if (!f) throw bad(`"${n}" is not a field of this type.`);
      if (hasLinkTable(f)) throw bad(`A ${f.type} field cannot be part of unique_together.`);
    }
  }
  return normalizeTogether(raw as string[][]);
}

/**
 * The first compound key existing rows break, as the 400 naming it and counting them (every
 * row; the number is not said where it is `withheld` from the caller, decision 0183).
 */
export async function togetherViolation(
  db: Executor,
  cotId: number,
  sets: FieldRow[][],
  withheld: boolean,
): Promise<ValidationError | null> {
  for (const set of sets) {
    const dup = await countDuplicates(
      db,
      cotId,
      set.map((f) => fieldColumns(f)[0]!),
    );
    if (dup)
      return new ValidationError({
        unique_together: [
          `${existingRows(dup, withheld)} share values of ${set.map((f) => f.name).join(", ")}; they must make a unique set.`,
        ],
      });
  }
  return null;
}

/** The named sets as the fields they hold. */
export const setsOfFields = (sets: string[][], fields: FieldRow[]) =>
  sets.map((set) => set.map((n) => fields.find((f) => f.name === n)!));

/**
 * Stores and enforces `sets` on a type (REST): counts clashes first, so the 400 names them
 * (`withheld`: without their number, decision 0183).
 */
export async function setUniqueTogether(
  db: Executor,
  cotId: number,
  sets: string[][],
  withheld: boolean,
) {
  const fields = (await db
    .select()
    .from(customObjectTypeFields)
    .where(eq(customObjectTypeFields.customObjectTypeId, cotId))) as FieldRow[];
  const rows = setsOfFields(sets, fields);
  const violation = await togetherViolation(db, cotId, rows, withheld);
  if (violation) throw violation;
  await db
    .update(customObjectTypes)
    .set({ uniqueTogether: sets })
    .where(eq(customObjectTypes.id, cotId));
  await buildUniqueTogether(db, cotId, rows);
}

/** After a field rename or removal (REST): the stored sets follow, and the indexes are rebuilt. */
export async function followFieldChange(
  db: Executor,
  cotId: number,
  from: string,
  to: string | null,
) {
  const [cot] = await db
    .select({ sets: customObjectTypes.uniqueTogether })
    .from(customObjectTypes)
    .where(eq(customObjectTypes.id, cotId));
  const sets = cot?.sets ?? [];
  if (!sets.some((s) => s.includes(from))) return;
  const next = normalizeTogether(
    to === null
      ? sets.filter((s) => !s.includes(from))
      : sets.map((s) => s.map((n) => (n === from ? to : n))),
  );
  await db
    .update(customObjectTypes)
    .set({ uniqueTogether: next })
    .where(eq(customObjectTypes.id, cotId));
  if (to === null) {
    // the removed field's column goes next: its compound keys go first
    await dropUniqueTogether(db, cotId);
    const fields = (await db
      .select()
      .from(customObjectTypeFields)
      .where(eq(customObjectTypeFields.customObjectTypeId, cotId))) as FieldRow[];
    await buildUniqueTogether(
      db,
      cotId,
      next.map((set) => set.map((n) => fields.find((f) => f.name === n)!)),
    );
  }
}
