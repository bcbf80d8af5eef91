/**
 * Keeps every statement sent to Cloudflare D1 within D1's per-statement limits (decisions 0125,
 * 0161): at most 100 bound values, 100,000 bytes of SQL, expressions 100 deep and five terms in a
 * compound SELECT. A list for `IN (…)` travels as one JSON value (`inJsonList`); past 100 values a
 * statement carries the excess as SQL literals; what cannot fit answers 400 naming the limit, never
 * a 500.
 */
import { is, Placeholder, sql, type SQL, type SQLWrapper } from "drizzle-orm";
import { ApiError } from "../api-error";

/** D1's most bound values in one statement ("Maximum bound parameters per query"). */
export const D1_MAX_BOUND_VALUES = 100;
/** D1's longest statement, in bytes of SQL text ("Maximum SQL statement length"). */
const D1_MAX_STATEMENT_BYTES = 100_000;

/**
 * Rows per multi-row INSERT of `valuesPerRow` bound values each, so that one statement stays
 * within D1's bound values on every backend: a bulk's rows travel as several statements of the
 * one batch (one round trip, one transaction) and its values stay bound, however long they are.
 */
export function rowsPerStatement(valuesPerRow: number): number {
  return Math.max(1, Math.floor(D1_MAX_BOUND_VALUES / Math.max(1, valuesPerRow)));
}

/**
 * `a OR b OR …` as a balanced tree: SQLite parses a chain of n terms n levels deep, and D1 refuses
 * an expression deeper than 100 ("Expression tree is too large"); halves nest log₂ n deep.
 */
export function anyOf(terms: readonly SQL[]): SQL {
  return balanced(terms, sql` OR `);
}

/** `a + b + …` as a balanced tree (see `anyOf`): a sum over a wide table's columns. */
export function sumOf(terms: readonly SQL[]): SQL {
  return balanced(terms, sql` + `);
}

/** `a AND b AND …` as a balanced tree (see `anyOf`). */
export function allOf(terms: readonly SQL[]): SQL {
  return balanced(terms, sql` AND `);
}

/**
 * A list bound as ONE value, the text of its JSON array (or a placeholder later bound to that
 * text), read back as rows by `json_each`.
 */
type JsonList = readonly unknown[] | Placeholder;

/**
 * `SELECT value FROM json_each(?)`: the rows of `list`, for `IN (…)` or a union with other ids.
 * The list is one bound value however long, so a statement stays within D1's 100 bound values
 * (a bulk names hundreds of ids), and the statement's text is the same for every length, so one
 * prepared or cached statement serves them all. `value` is typed as JSON has it: a number is an
 * INTEGER (or REAL), a string TEXT, and a null is NULL, which `IN` never matches. `json_each` over
 * a stored column, or over bound pairs or objects, is another thing and stays written out where
 * it is used (`tests/repo/json-lists.test.ts` lists those uses).
 */
export function jsonListRows(list: JsonList): SQL {
  return sql`SELECT value FROM json_each(${is(list, Placeholder) ? list : JSON.stringify(list)})`;
}

/** `expr IN (SELECT value FROM json_each(?))`: whether `expr` is one of `list` (`jsonListRows`). */
export function inJsonList(expr: SQLWrapper, list: JsonList): SQL {
  return sql`${expr} IN (${jsonListRows(list)})`;
}

/** Ids a statement names as bound values at most; more ride as one JSON value (`inIds`). */
const INLINE_IDS = 50;

/**
 * `expr IN (…)` over `ids`: each bound when few, else one JSON value (`inJsonList`), so that a
 * bulk's thousands of ids cost one value and a statement the same for every length (0184).
 */
export function inIds(expr: SQLWrapper, ids: readonly number[]): SQL {
  if (ids.length > INLINE_IDS) return inJsonList(expr, ids);
  if (!ids.length) return sql`0`;
  return sql`${expr} IN (${sql.join(
    ids.map((id) => sql`${id}`),
    sql`, `,
  )})`;
}

/** The SQL list of `ids` for `IN (…)`: written out bound when few, else `jsonListRows`. */
export function idsList(ids: readonly number[]): SQL {
  if (ids.length > INLINE_IDS) return jsonListRows(ids);
  return sql.join(
    ids.map((id) => sql`${id}`),
    sql`, `,
  );
}

/**
 * D1's most terms in one compound SELECT: workerd sets `SQLITE_LIMIT_COMPOUND_SELECT` to 5 (plain
 * SQLite allows 500), for UNION, UNION ALL, INTERSECT and EXCEPT alike, in a subquery or a CTE
 * too; a multi-row VALUES is exempt (measured on miniflare's D1, decision 0161).
 */
export const D1_MAX_COMPOUND_TERMS = 5;

/**
 * `a UNION ALL b UNION ALL …` of any number of SELECTs (the same columns) that D1 accepts: past
 * five terms they go in at most five groups, each read as `SELECT * FROM (group)` and grouped
 * again while longer, so no compound has more than five terms (log₅ n levels).
 * The rows are those of the flat union, in its order, on every backend.
 */
export function unionAll(terms: readonly SQL[]): SQL {
  return compound(terms, sql` UNION ALL `);
}

/** `a UNION b UNION …` (duplicates dropped) the same way: a union of unions is the same set. */
export function union(terms: readonly SQL[]): SQL {
  return compound(terms, sql` UNION `);
}

function compound(terms: readonly SQL[], operator: SQL): SQL {
  if (terms.length === 0) throw new Error("compound: no terms");
  if (terms.length <= D1_MAX_COMPOUND_TERMS) return sql.join([...terms], operator);
  const size = Math.ceil(terms.length / D1_MAX_COMPOUND_TERMS);
  const groups: SQL[] = [];
  for (let at = 0; at < terms.length; at += size)
    groups.push(sql`SELECT * FROM (${compound(terms.slice(at, at + size), operator)})`);
  return sql.join(groups, operator);
}

function balanced(terms: readonly SQL[], operator: SQL): SQL {
  if (terms.length === 0) throw new Error("balanced: no terms");
  if (terms.length === 1) return sql`(${terms[0]!})`;
  const half = Math.ceil(terms.length / 2);
  return sql`(${balanced(terms.slice(0, half), operator)}${operator}${balanced(terms.slice(half), operator)})`;
}

/** A statement that would pass one of D1's per-statement limits: 400, naming the limit. */
export class StatementTooLargeError extends ApiError {
  constructor(what: string) {
    super(400, {
      // the limits are D1's, kept on every backend: the answer names none (decision 0184)
      detail: `The request needs a database statement larger than this server takes: ${what}. Send fewer or smaller objects per request.`,
      error: "statement_too_large",
    });
  }
}

/**
 * A table past the database's columns (D1 holds 100 in a table, `D1_MAX_COLUMNS`): 400 when a
 * custom object type's field is defined, not a 500, nor a type whose reads fail (decision 0192).
 */
export class TableTooWideError extends ApiError {
  constructor() {
    super(400, {
      detail:
        "This database holds at most 100 columns in a table, and a custom object type keeps its fields in one: this change would make more (a field takes one column, a polymorphic object or url field two, a multiobject field none).",
      error: "too_many_columns",
    });
  }
}

/** What the database says when a statement passes one of its size limits, and that limit. */
const REFUSED_AS_TOO_LARGE: Array<[RegExp, string]> = [
  [/too many columns in result set/i, "more than 100 columns in a result"],
  [/too many SQL variables/i, `more than ${D1_MAX_BOUND_VALUES} bound values`],
  [/Expression tree is too large/i, "an expression nested more than 100 deep"],
  [/too many terms in compound SELECT/i, "too many terms in a compound SELECT"],
  [/string or blob too big|SQLITE_TOOBIG|statement too long/i, "a statement or value too long"],
];

/**
 * The 400 for a database error that refused a statement as too large (wrapped by Drizzle or not),
 * or null: a limit this module did not foresee still answers as one, not as a 500.
 */
export function statementTooLargeOf(
  error: unknown,
): StatementTooLargeError | TableTooWideError | null {
  let err = error as { message?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; err && depth < 4; depth++, err = err.cause as typeof err) {
    const message = String(err.message ?? "");
    if (/too many columns on /i.test(message)) return new TableTooWideError();
    for (const [pattern, what] of REFUSED_AS_TOO_LARGE)
      if (pattern.test(message)) return new StatementTooLargeError(what);
  }
  return null;
}

/**
 * Where the SQL has its `?` placeholders, by character offset; null when it uses any other kind
 * (`?NNN`, `:name`, `@name`, `$name`), which this module leaves alone. Quoted text, quoted
 * identifiers and comments are skipped: a `?` there is not a placeholder.
 */
export function placeholderOffsets(text: string): number[] | null {
  const at: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'" || c === '"' || c === "`") i = closing(text, i, c);
    else if (c === "[") i = closing(text, i, "]");
    else if (c === "-" && text[i + 1] === "-") i = lineEnd(text, i);
    else if (c === "/" && text[i + 1] === "*") i = commentEnd(text, i);
    else if (c === "?") {
      if (/[0-9]/.test(text[i + 1] ?? "")) return null;
      at.push(i);
    } else if ((c === ":" || c === "@" || c === "$") && /[A-Za-z_]/.test(text[i + 1] ?? ""))
      return null;
  }
  return at;
}

/** The offset of the quote closing the one at `start` (a doubled quote is part of the text). */
function closing(text: string, start: number, quote: string): number {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] !== quote) continue;
    if (quote !== "]" && text[i + 1] === quote) i++;
    else return i;
  }
  return text.length;
}

function lineEnd(text: string, start: number): number {
  const end = text.indexOf("\n", start);
  return end < 0 ? text.length : end;
}

function commentEnd(text: string, start: number): number {
  const end = text.indexOf("*/", start + 2);
  return end < 0 ? text.length : end + 1;
}

/**
 * A value as an SQL literal that means exactly what binding it means on D1, or null when it has
 * none here (a fraction, whose decimal text might not round-trip; text holding NUL, which ends
 * SQL text; anything else). Text is quoted with its quotes doubled: SQLite has no other escape.
 */
function sqlLiteral(value: unknown): string | null {
  if (value === null) return "NULL";
  if (typeof value === "boolean") return value ? "1" : "0";
  if (typeof value === "number") return Number.isSafeInteger(value) ? String(value) : null;
  if (typeof value === "bigint") return String(value);
  if (typeof value === "string")
    return value.includes("\0") ? null : `'${value.replaceAll("'", "''")}'`;
  if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) {
    const bytes =
      value instanceof ArrayBuffer
        ? new Uint8Array(value)
        : new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
    return `X'${Buffer.from(bytes).toString("hex")}'`;
  }
  return null;
}

/**
 * `text` and `args` as one statement D1 accepts: unchanged within the limit; past it, values from
 * the last one back become literals until at most `D1_MAX_BOUND_VALUES` stay bound. Throws
 * `StatementTooLargeError` when they cannot, or when the SQL text grows past D1's length.
 */
export function fitStatement(text: string, args: readonly unknown[]) {
  if (args.length <= D1_MAX_BOUND_VALUES) return { sql: text, args: [...args] };
  const offsets = placeholderOffsets(text);
  if (!offsets || offsets.length !== args.length)
    throw new StatementTooLargeError(`more than ${D1_MAX_BOUND_VALUES} bound values`);
  const literal: (string | null)[] = args.map(() => null);
  let bound = args.length;
  for (let i = args.length - 1; i >= 0 && bound > D1_MAX_BOUND_VALUES; i--) {
    literal[i] = sqlLiteral(args[i]);
    if (literal[i] !== null) bound--;
  }
  if (bound > D1_MAX_BOUND_VALUES)
    throw new StatementTooLargeError(`more than ${D1_MAX_BOUND_VALUES} bound values`);
  let out = "";
  let from = 0;
  offsets.forEach((offset, i) => {
    out += text.slice(from, offset) + (literal[i] ?? "?");
    from = offset + 1;
  });
  out += text.slice(from);
  if (Buffer.byteLength(out) > D1_MAX_STATEMENT_BYTES)
    throw new StatementTooLargeError(`more than ${D1_MAX_STATEMENT_BYTES} bytes of SQL`);
  return { sql: out, args: args.filter((_, i) => literal[i] === null) };
}

/**
 * The bytes of SQL D1 is sent for a compiled statement: its text, and past 100 values the
 * literals `fitStatement` writes in place of the excess (an estimate where a value has none).
 */
export function d1StatementBytes(query: { sql: string; params: readonly unknown[] }): number {
  let bytes = Buffer.byteLength(query.sql);
  if (query.params.length > D1_MAX_BOUND_VALUES)
    for (const value of query.params)
      bytes += Buffer.byteLength(sqlLiteral(value) ?? "-1.0000000000000000e+000") - 1;
  return bytes;
}

interface Preparing {
  prepare(sql: string): { bind(...args: unknown[]): unknown };
}

/**
 * The binding with every statement fitted (`fitStatement`) as it is bound: Drizzle's D1 driver,
 * batches and raw statements all prepare and bind through it. Everything else passes through.
 */
export function withinD1Limits<B extends Preparing>(binding: B): B {
  const prepare = (text: string) => {
    const statement = binding.prepare(text);
    const bind = (...args: unknown[]) => {
      if (args.length <= D1_MAX_BOUND_VALUES) return statement.bind(...args);
      const fitted = fitStatement(text, args);
      return binding.prepare(fitted.sql).bind(...fitted.args);
    };
    return new Proxy(statement, {
      get: (target, key) => (key === "bind" ? bind : own(target, key)),
    });
  };
  return new Proxy(binding, {
    get: (target, key) => (key === "prepare" ? prepare : own(target, key)),
  });
}

/** A member of `target`, its methods bound to it (a binding's methods may use private state). */
function own(target: object, key: string | symbol): unknown {
  const value = Reflect.get(target, key, target) as unknown;
  return typeof value === "function" ? value.bind(target) : value;
}
