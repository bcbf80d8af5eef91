/**
 * A select list that fits D1's 100 result columns (decision 0192): past the bound, the columns
 * at its end ride folded into a few `json_array(…)` columns and are unfolded into the row's keys.
 */
import { is, SQL, sql } from "drizzle-orm";
import { SQLiteColumn } from "drizzle-orm/sqlite-core";

/** D1's most columns in a result set (and in a table): workerd sets `SQLITE_LIMIT_COLUMN` to 100. */
export const D1_MAX_COLUMNS = 100;
/**
 * Values per folding column: D1 takes at most 127 arguments in a function call (measured on
 * miniflare's D1: `json_array` of 128 answers "too many arguments").
 */
const FOLD_ARGS = 100;

type Columns = Record<string, SQLiteColumn | SQL>;

export interface FoldedSelect<C extends Columns = Columns> {
  /** The select list to send: the given one while it fits, else its head and the folds. */
  columns: C;
  /** Whether `columns` differs from the given list (and rows need `unfold`). */
  folded: boolean;
  /** A row read with `columns` as one read with the given list (in place; a row as is while it fits). */
  unfold: (row: Record<string, any>) => Record<string, any>;
}

const asIs = (row: Record<string, any>) => row;

/** Whether a key names a folding column (`__w0`, `__w1`, …). */
const FOLD_KEY = (at: number) => `__w${at}`;

/**
 * `columns` within `D1_MAX_COLUMNS`. Unchanged while they fit (the common path: no cost); past
 * it, SQL expressions go first and then table columns from the end (never `keep`), each as
 * `quote(value)`: SQLite's literal of it, exact for NULL, an integer and a text (JSON text stays
 * text, where a JSON subtype would nest it in the array). A REAL column is never folded: JSON
 * prints 15 digits, and `quote` may miss a large one's last bit (measured), where a column is
 * exact. Where folding cannot fit them (no such select here), D1's refusal answers 400.
 */
export function foldWide<C extends Columns>(
  columns: C,
  keep: readonly string[] = ["id"],
): FoldedSelect<C> {
  const keys = Object.keys(columns);
  if (keys.length <= D1_MAX_COLUMNS) return { columns, folded: false, unfold: asIs };
  const foldable = keys.filter((k) => !keep.includes(k));
  const expressions = foldable.filter((k) => !is(columns[k], SQLiteColumn));
  const tableColumns = foldable.filter(
    (k) => is(columns[k], SQLiteColumn) && (columns[k] as SQLiteColumn).columnType !== "SQLiteReal",
  );
  const order = [...expressions, ...tableColumns.reverse()];
  let count = 0;
  while (
    count < order.length &&
    keys.length - count + Math.ceil(count / FOLD_ARGS) > D1_MAX_COLUMNS
  )
    count++;
  const folded = new Set(order.slice(0, count));
  // the folds keep the select list's order, so a fold's values come in the order of its keys
  const foldedKeys = keys.filter((k) => folded.has(k));
  const groups: string[][] = [];
  for (let at = 0; at < foldedKeys.length; at += FOLD_ARGS)
    groups.push(foldedKeys.slice(at, at + FOLD_ARGS));
  const out: Columns = {};
  for (const k of keys) if (!folded.has(k)) out[k] = columns[k]!;
  groups.forEach((group, at) => {
    out[FOLD_KEY(at)] = sql`json_array(${sql.join(
      group.map((k) => sql`quote(${columns[k]!})`),
      sql`, `,
    )})`;
  });
  return { columns: out as C, folded: true, unfold: (row) => unfoldRow(row, groups) };
}

function unfoldRow(row: Record<string, any>, groups: string[][]): Record<string, any> {
  for (let at = 0; at < groups.length; at++) {
    const key = FOLD_KEY(at);
    if (!(key in row)) continue;
    const values = JSON.parse(String(row[key])) as string[];
    const group = groups[at]!;
    for (let i = 0; i < group.length; i++) row[group[i]!] = unquote(values[i]!);
    delete row[key];
  }
  return row;
}

/**
 * The value `quote(value)` wrote: NULL, a text in single quotes (a quote doubled), or a number's
 * literal (an integer's digits, a REAL's digits enough to give it back exactly).
 */
function unquote(literal: string): unknown {
  if (literal === "NULL") return null;
  if (literal.startsWith("'")) return literal.slice(1, -1).replaceAll("''", "'");
  return Number(literal);
}

const COLUMN_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * `columns` with each SQL expression named by its key (`(…) AS "__tags"`), a table column and an
 * expression already named as they are (decision 0214). Unnamed, SQLite names an expression's
 * column by its whole text, which the answer carries back with every read: a GET's nested forms
 * and tags doubled its answer's size and its decoding cost. Rows are mapped by position, so no
 * row changes; only keys of letters, digits and underscores are written as names.
 */
export function namedExpressions<C extends Columns>(columns: C): C {
  const out: Columns = {};
  for (const [key, value] of Object.entries(columns))
    out[key] = is(value, SQL) && COLUMN_NAME.test(key) ? (value.as(key) as unknown as SQL) : value;
  return out as C;
}
