/**
 * A field's type change as a read and statements for one batch (decision 0121), shared by REST
 * (`staged-fields.ts`) and the schema apply (`schema/apply-staged.ts`, decision 0126): the
 * column's values read, converted here as `retypeFieldStorage` converts them, and carried into
 * the batch as bound JSON lists of `[id, value]` pairs behind guards that they are unchanged.
 */
import { sql, type SQL } from "drizzle-orm";
import type { Orm } from "../../../db/client";
import { fieldColumns, ident, retypeFieldStatements, tableName } from "../ddl";
import type { CotRow } from "../objects/models";
import { isLossless, retypeConverter, type FieldRow } from "../objects/values";
import { conditionalOf, readsField, type Conditional } from "../schema/constraints";

/** Values a staged retype converts at most (read at once, bound as JSON in a few statements). */
const RETYPE_MAX_VALUES = 50_000;
/** Pairs per bound JSON value: D1 binds a value of at most 2 MB. */
const RETYPE_CHUNK = 5_000;

export type RetypeValues = Array<{ id: number; v: unknown }>;

/** The column's non-null values in id order, one more than a staged retype takes. */
export const retypeValuesQuery = (orm: Orm, cotId: number, field: FieldRow) => {
  const column = ident(field.name);
  return orm.all<{ id: number; v: unknown }>(
    sql`SELECT id, ${column} AS v FROM ${ident(tableName(cotId))} WHERE ${column} IS NOT NULL ORDER BY id LIMIT ${RETYPE_MAX_VALUES + 1}`,
  );
};

/** Whether the read holds every value (over `RETYPE_MAX_VALUES`, the transaction takes it). */
export const heldWhole = (read: RetypeValues) => read.length <= RETYPE_MAX_VALUES;

/**
 * Whether a retype can be staged: the field's one column stays one column, no compound key
 * holds it and no partial key or check reads it (`keys`: the type's, before and after), and it
 * keeps its name. Else the transaction takes it.
 */
export function retypeStageable(
  field: FieldRow,
  draft: { name: string; type: string },
  keys: { together: string[][]; conditional: Conditional[] },
): boolean {
  return (
    draft.name === field.name &&
    !keys.together.some((set) => set.includes(field.name)) &&
    !keys.conditional.some((c) => readsField(c, field.name)) &&
    fieldColumns(field).length === 1 &&
    fieldColumns({ ...field, type: draft.type }).length === 1
  );
}

/** A type's own keys, as `retypeStageable` takes them. */
export const keysOf = (cot: CotRow) => ({
  together: cot.uniqueTogether ?? [],
  conditional: [conditionalOf(cot)],
});

/** Values of `read` the change cannot carry (0 for a lossless change, as `countLossy`). */
export function lostValues(field: FieldRow, type: string, read: RetypeValues): number {
  if (isLossless(field.type, type)) return 0;
  const convert = retypeConverter(field.type, type);
  return read.filter((r) => {
    const value = convert(r.v);
    return value === undefined || value === null;
  }).length;
}

/**
 * The retype's statements from the values read: converted, a value lost left null (the caller
 * gated it), the read values guarded and the converted ones carried in chunks.
 */
export function retypeStatements(
  cotId: number,
  field: FieldRow,
  draft: { type: string; unique: boolean },
  read: RetypeValues,
): SQL[] {
  const convert = retypeConverter(field.type, draft.type);
  const written: Array<[number, unknown]> = [];
  for (const r of read) {
    const value = convert(r.v);
    if (value !== undefined && value !== null) written.push([Number(r.id), value]);
  }
  const chunks = <T>(list: T[]) => {
    const out: string[] = [];
    for (let i = 0; i < list.length; i += RETYPE_CHUNK)
      out.push(JSON.stringify(list.slice(i, i + RETYPE_CHUNK)));
    return out;
  };
  return retypeFieldStatements(cotId, field, draft, {
    count: read.length,
    read: chunks(read.map((r) => [Number(r.id), r.v])),
    written: chunks(written),
  });
}
