/**
 * Which unique keys a refused write clashes on (decision 0146): SQLite names only the first index
 * that failed, NetBox every clashing field. Read on failure only, in one read, from the rows as
 * they were written; a clash is named as "already exists", whoever's the other row is.
 */
import { and, type Column, eq, getTableColumns, type SQL, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { getTableConfig, type SQLiteTable } from "drizzle-orm/sqlite-core";
import type { FieldErrors } from "../errors";
import { ValidationError } from "../errors";

/** A unique key: its columns (by the row's property), and its answer when a row clashes on it. */
export interface UniqueKey {
  columns: Array<{ key: string; column: Column }>;
  answer: Record<string, string[]>;
}

/** A row a refused write wrote: its id (null for a create), its values, the properties it set. */
export interface WrittenRow {
  id: number | null;
  values: Record<string, unknown>;
  /** An update's set properties: a key none of them is in cannot clash (it held before). */
  touched?: ReadonlySet<string>;
}

type Read = BatchItem<"sqlite">;

/** The table's plain unique indexes (a partial one has a condition this does not read). */
export function tableUniqueKeys(
  table: SQLiteTable,
  answer: (fields: string[]) => Record<string, string[]>,
  fieldOf: (column: string) => string,
): UniqueKey[] {
  const byColumn = new Map(Object.entries(getTableColumns(table)).map(([k, c]) => [c, k]));
  const keys: UniqueKey[] = [];
  for (const index of getTableConfig(table).indexes) {
    const { unique, where, columns } = index.config;
    if (!unique || where) continue;
    const cols = columns.map((c) => ({ key: byColumn.get(c as Column)!, column: c as Column }));
    if (cols.some((c) => c.key === undefined)) continue;
    keys.push({ columns: cols, answer: answer(cols.map((c) => fieldOf(c.column.name))) });
  }
  return keys;
}

/**
 * The answer of a refused write explained by `explainer`'s one read (`read`), or null when it
 * finds no clash.
 */
export async function explainClashes(
  explainer: ReturnType<typeof clashExplainer>,
  read: (reads: Read[]) => Promise<unknown[]>,
): Promise<ValidationError | null> {
  return explainer.answer(explainer.reads.length ? await read(explainer.reads) : []);
}

/**
 * The columns of the unique index SQLite says refused the write (`e`), or null when `e` is no
 * such refusal. D1 appends the result code to the message; it is no column.
 */
function uniqueFailureColumns(e: unknown): string[] | null {
  let cur: unknown = e;
  for (let depth = 0; cur && depth < 4; depth++) {
    const m = (cur as { message?: unknown }).message;
    const hit = typeof m === "string" ? /UNIQUE constraint failed: ([^:]+)/i.exec(m) : null;
    if (hit) return hit[1]!.split(",").map((c) => c.trim().split(".").pop()!.replace(/"/g, ""));
    cur = (cur as { cause?: unknown }).cause;
  }
  return null;
}

/**
 * Whether SQLite's refusal (`e`) was one of `keys`: a primary key's (a restore putting back an id
 * taken meanwhile) or a partial key's is answered as before, not explained.
 */
export function refusedByKeyOf(keys: UniqueKey[], e: unknown): boolean {
  const columns = uniqueFailureColumns(e)?.join(",");
  return keys.some((k) => k.columns.map((c) => c.column.name).join(",") === columns);
}

/** The key's values in `row`, or null where one is NULL (SQLite's NULLs never clash). */
const keyValues = (key: UniqueKey, row: WrittenRow) => {
  const values = key.columns.map((c) => row.values[c.key]);
  return values.some((v) => v === null || v === undefined) ? null : values;
};

const applies = (key: UniqueKey, row: WrittenRow) =>
  !row.touched || key.columns.some((c) => row.touched!.has(c.key));

/**
 * The clash explanation of a refused write of `rows`: the statements of its one read (a row per
 * (row, key) asked, at most one each), and the answer from their results, or null when no
 * clash is found (the other row went meanwhile: the caller keeps SQLite's answer). A row clashes
 * with another stored row holding its key's values, or with an earlier row of the same write.
 */
export function clashExplainer(
  orm: { select: (...a: any[]) => any },
  table: SQLiteTable & { id: Column },
  keys: UniqueKey[],
  rows: WrittenRow[],
  bulk: boolean,
): { keys: UniqueKey[]; reads: Read[]; answer(results: unknown[]): ValidationError | null } {
  const asked: Array<{ row: number; key: number }> = [];
  const reads: Read[] = [];
  for (const [r, row] of rows.entries())
    for (const [k, key] of keys.entries()) {
      const values = applies(key, row) ? keyValues(key, row) : null;
      if (!values) continue;
      const same: SQL[] = key.columns.map((c, i) => eq(c.column, values[i]));
      if (row.id !== null) same.push(sql`${table.id} <> ${row.id}`);
      asked.push({ row: r, key: k });
      reads.push(
        orm
          .select({ id: table.id })
          .from(table)
          .where(and(...same))
          .limit(1),
      );
    }
  return {
    keys,
    reads,
    answer(results) {
      const clashes = rows.map(() => new Set<number>());
      for (const [i, { row, key }] of asked.entries())
        if ((results[i] as unknown[]).length) clashes[row]!.add(key);
      earlierClashes(keys, rows, clashes);
      const errors = clashes.map((ks) => mergedAnswers([...ks].map((k) => keys[k]!.answer)));
      if (!errors.some((e) => Object.keys(e).length)) return null;
      return new ValidationError(bulk ? errors : errors[0]!);
    },
  };
}

/** Adds the keys on which a row takes the values an earlier row of the same write took. */
function earlierClashes(keys: UniqueKey[], rows: WrittenRow[], clashes: Set<number>[]) {
  for (const [k, key] of keys.entries()) {
    const taken = new Map<string, number | null>();
    for (const [r, row] of rows.entries()) {
      const values = applies(key, row) ? keyValues(key, row) : null;
      if (!values) continue;
      const text = JSON.stringify(values.map((v) => (typeof v === "bigint" ? String(v) : v)));
      // the same row updated twice in one write is no clash with itself
      if (taken.has(text) && (row.id === null || taken.get(text) !== row.id)) clashes[r]!.add(k);
      taken.set(text, row.id);
    }
  }
}

/** The answers of several keys as one, each message once per field. */
function mergedAnswers(answers: Array<Record<string, string[]>>): FieldErrors {
  const out: Record<string, string[]> = {};
  for (const a of answers)
    for (const [field, messages] of Object.entries(a))
      for (const m of messages) if (!(out[field] ??= []).includes(m)) out[field]!.push(m);
  return out;
}
