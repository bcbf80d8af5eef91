/**
 * Driver internals in one place (issue 28 item 6): the few spots where Host reads a field of
 * Drizzle that Drizzle does not document (its libSQL session's `client` and `tx`, a database's
 * `dialect`, a batch item's `_prepare()`), and the one behaviour of `libsql` our local client
 * leans on beyond its documented API (a statement is reset when it runs again:
 * `haltBusyStatement`). Each Drizzle field has a fallback that works without it, the driver
 * versions are pinned exactly in package.json, and `tests/db/driver-internals.test.ts` fails when
 * any of them changes.
 */
import type { Client, InValue, ResultSet, Transaction } from "@libsql/client";
import { Column, fillPlaceholders, is, Placeholder, QueryPromise, SQL, sql } from "drizzle-orm";
import { LibSQLPreparedQuery } from "drizzle-orm/libsql/session";
import type { BatchItem } from "drizzle-orm/batch";
import { SQLiteTransaction } from "drizzle-orm/sqlite-core";
import type { Executor, Orm } from "./client";

/**
 * A query prepared once on the ORM, ready to run on `db` — the ORM itself or an open Drizzle
 * transaction. Drizzle binds a prepared query to the session it was prepared on, and building
 * the SQL again for every call inside a transaction was about a quarter of a create's CPU time.
 * The copy differs only in the libSQL transaction it runs on. Returns null when `db` is another
 * database or the driver's shape is not the one this was written against (callers then build
 * the query as usual); `tests/core/prepared-in.test.ts` pins the behaviour.
 */
export function preparedIn<P extends object>(prepared: P, db: Executor): P | null {
  const session = (db as unknown as { session?: { client?: unknown; tx?: unknown } }).session;
  const own = prepared as unknown as { client?: unknown; tx?: unknown };
  if (!session || !("tx" in own) || session.client !== own.client) return null;
  if (!session.tx) return own.tx ? null : prepared;
  const copy = Object.assign(Object.create(Object.getPrototypeOf(prepared)) as P, prepared);
  (copy as unknown as { tx: unknown }).tx = session.tx;
  return copy;
}

/** The ORM whose once-built queries serve `db`: `orm` when `db` is one of its transactions. */
const ownerOf = (db: Executor, orm: Orm): Orm =>
  db instanceof SQLiteTransaction ? orm : (db as Orm);

/**
 * Runs one statement with positional (`?`) arguments on `db` — the ORM or an open Drizzle
 * transaction — through the libSQL client or transaction under it, with no Drizzle SQL object in
 * between. For statements that bind thousands of values (bulk inserts, change records), where
 * building a `sql` template or filling named placeholders cost more than SQLite's own work. The
 * text is the caller's: its identifiers must already be validated and quoted, and `?` may appear
 * only as a placeholder. Relies on the driver field `preparedIn` relies on (`session.tx`, else
 * `session.client`); without it the statement goes through Drizzle as a template.
 */
export async function executePositional(
  db: Executor,
  text: string,
  args: InValue[],
): Promise<ResultSet> {
  const session = (
    db as unknown as {
      session?: { tx?: Pick<Transaction, "execute"> | null; client?: Pick<Client, "execute"> };
    }
  ).session;
  const target = session?.tx ?? session?.client;
  if (target && typeof target.execute === "function") return target.execute({ sql: text, args });
  const parts = text.split("?");
  if (parts.length !== args.length + 1)
    throw new Error(
      `executePositional: ${parts.length - 1} placeholders for ${args.length} arguments`,
    );
  return (await db.run(
    sql(Object.assign(parts, { raw: parts }) as unknown as TemplateStringsArray, ...args),
  )) as unknown as ResultSet;
}

/** What a Drizzle batch item gives its own batch code (`_prepare`, `getQuery`, `mapResult`). */
interface PreparedItem {
  getQuery(): { sql: string; params: unknown[] };
  mapResult(result: unknown, isFromBatch: boolean): unknown;
  /** A select's fields (Drizzle's prepared query): its rows are mapped by position. */
  readonly fields?: unknown;
  /** `Prebuilt`'s items: whether their rows are mapped by position (a builder's select). */
  readonly byPosition?: boolean;
}

/**
 * Drizzle's D1 `batch()` as Drizzle 0.45 writes it, less its bug: a raw query (`db.all(sql…)`)
 * with parameters has no prepared `stmt` there and the batch throws. Every item is prepared from
 * its SQL text here instead. Relies on the items' `_prepare()` and `mapResult` (Drizzle's own
 * batch code calls them); pinned by `tests/db/database-interface.test.ts` on miniflare's D1.
 */
export async function batchOnD1(
  binding: {
    prepare(sql: string): { bind(...args: unknown[]): unknown };
    batch(statements: unknown[]): Promise<unknown[]>;
  },
  queries: readonly unknown[],
): Promise<unknown[]> {
  const prepared = queries.map((q) => (q as { _prepare(): PreparedItem })._prepare());
  const statements = prepared.map((p) => {
    const { sql: text, params } = p.getQuery();
    return binding.prepare(text).bind(...params);
  });
  const results = await binding.batch(statements);
  return results.map((r, i) => prepared[i]!.mapResult(r, true));
}

/**
 * Drizzle's libSQL `batch()` (0.45: each item's `_prepare()`, `getQuery()`, then `mapResult(r,
 * true)`), with a transaction mode of our choosing (a read: `BEGIN TRANSACTION READONLY`) and each
 * distinct statement sent once: items with the same SQL text and the same values (the token guard
 * of concurrent requests grouped into one read, decision 0122) are answered by one statement of
 * the one snapshot, which is what each would have been answered alone in it. Every item still
 * gets a result of its own to map: a repeat maps a copy of the rows, so no two callers share a row
 * object. Values other than text, numbers and null are never merged. Pinned, with `batchOnD1`'s
 * reliance on the same item methods, by `tests/db/driver-internals.test.ts`.
 */
export async function batchOnLibsql(
  client: Pick<Client, "batch">,
  queries: readonly unknown[],
  mode: "read" | "deferred",
): Promise<unknown[]> {
  return batchPrepared(client, queries.map(prepareItem), mode);
}

const prepareItem = (q: unknown): PreparedItem => (q as { _prepare(): PreparedItem })._prepare();

async function batchPrepared(
  client: Pick<Client, "batch">,
  items: readonly PreparedItem[],
  mode: "read" | "deferred",
): Promise<unknown[]> {
  const prepared: PreparedItem[] = [];
  const statements: { sql: string; args: InValue[] }[] = [];
  /** For each item, the statement that answers it; the first of its kind answers for repeats. */
  const answeredBy: number[] = [];
  const seen = new Map<string, number>();
  for (const item of items) {
    const { sql: text, params } = item.getQuery();
    prepared.push(item);
    const key = statementKey(text, params);
    const earlier = key === null ? undefined : seen.get(key);
    if (earlier !== undefined) {
      answeredBy.push(earlier);
      continue;
    }
    if (key !== null) seen.set(key, statements.length);
    answeredBy.push(statements.length);
    statements.push({ sql: text, args: params as InValue[] });
  }
  const results = await client.batch(statements, mode);
  const used = new Set<number>();
  return prepared.map((item, i) => {
    const at = answeredBy[i]!;
    const result = used.has(at) ? copyOfResult(results[at]!) : results[at]!;
    used.add(at);
    return item.mapResult(result, true);
  });
}

/** Batch items marked as answered by at most one row of one value (`oneRow`): a cache's guard. */
const ONE_ROW = new WeakSet<object>();

/**
 * Marks a batch item as answered by at most one row of ONE column whose value is never NULL (a
 * look-up by a unique key, its value a print), so that a remote read may carry its answer as a
 * scalar subquery of another statement (`readOnLibsql`): no value there reads as no row.
 */
export function oneRow<T extends object>(item: T): T {
  ONE_ROW.add(item);
  return item;
}

/** The column that carries part `i` of a folded statement (`foldedStatement`). */
const foldMark = (i: number) => `__fold${i}`;

/**
 * A remote read (decision 0209): when every item but the last answers one value at most (`oneRow`)
 * and every item maps its rows by position, the items travel as ONE statement, sent alone with no
 * transaction around it — one statement is one snapshot all the same. The one-value items ride as
 * scalar subqueries; the last keeps its rows and their order. Any other read is `batchOnLibsql`'s
 * read batch.
 */
export async function readOnLibsql(
  client: Pick<Client, "batch" | "execute">,
  queries: readonly unknown[],
): Promise<unknown[]> {
  const items = queries.map(prepareItem);
  if (!foldable(queries, items)) return batchPrepared(client, items, "read");
  const result = await client.execute(foldedStatement(items.map((item) => item.getQuery())));
  const last = items.length - 1;
  return items.map((item, i) =>
    item.mapResult(i === last ? foldedRows(result, last) : foldedValue(result, i), true),
  );
}

/** Whether `queries` are one-row items (`oneRow`) and one more: a read that may fold. */
function foldsToOne(queries: readonly unknown[]): boolean {
  if (queries.length < 2) return false;
  for (let i = 0; i < queries.length - 1; i++) if (!ONE_ROW.has(queries[i] as object)) return false;
  return true;
}

/** Whether the read `queries` (prepared as `items`) may travel as one statement. */
const foldable = (queries: readonly unknown[], items: readonly PreparedItem[]) =>
  foldsToOne(queries) && items.every((p) => p.byPosition ?? !!p.fields);

/** The last part's row number in a folded statement (`foldedStatement`). */
const FOLD_ORDER = "__fold_order";

/**
 * The statements as one: `SELECT * FROM (SELECT (…) AS v0, …) LEFT JOIN (SELECT 1 AS mark, …, *
 * FROM (last)) ON 1`. SQLite may drop a subquery's ORDER BY inside a join, so the last part numbers
 * its rows where its own order still holds (the only term of its FROM), and the whole is ordered
 * by that number. (A one-row part as a joined subquery, not a scalar, cost SQLite ten times more.)
 */
function foldedStatement(parts: { sql: string; params: unknown[] }[]) {
  const last = parts.length - 1;
  const values = parts.slice(0, last).map((p, i) => `(${p.sql}) AS "${foldMark(i)}"`);
  const rows = `SELECT 1 AS "${foldMark(last)}", row_number() OVER () AS "${FOLD_ORDER}", * FROM (${parts[last]!.sql})`;
  return {
    sql: `SELECT * FROM (SELECT ${values.join(", ")}) LEFT JOIN (${rows}) ON 1 ORDER BY "${FOLD_ORDER}"`,
    args: parts.flatMap((p) => p.params) as InValue[],
  };
}

/** A result of `columns` and `rows`, shaped as the driver shapes one for a mapper by position. */
function resultOf(result: ResultSet, from: number, to: number, rows: unknown[][]): ResultSet {
  const columns = result.columns.slice(from, to);
  return {
    columns,
    columnTypes: result.columnTypes.slice(from, to),
    rows: rows as unknown as ResultSet["rows"],
    rowsAffected: 0,
    lastInsertRowid: undefined,
    toJSON: () => ({ columns, rows }),
  };
}

/** One-value part `i` of a folded statement: its value as one row, or no row where it is NULL. */
function foldedValue(result: ResultSet, i: number): ResultSet {
  const at = result.columns.indexOf(foldMark(i));
  if (at < 0) throw new Error(`readOnLibsql: part ${i} missing from the answer`);
  const value = result.rows[0]?.[at] ?? null;
  return resultOf(result, at, at + 1, value === null ? [] : [[value]]);
}

/** The last part of a folded statement: its columns after its marker and row number, its rows. */
function foldedRows(result: ResultSet, i: number): ResultSet {
  const mark = result.columns.indexOf(foldMark(i));
  if (mark < 0) throw new Error(`readOnLibsql: part ${i} missing from the answer`);
  const from = mark + 2;
  const to = result.columns.length;
  // copied by index: `Array.prototype.slice` on a driver row (not an array) takes the slow path
  const rows: unknown[][] = [];
  for (const row of result.rows) {
    if (row[mark] === null) continue;
    const values = new Array<unknown>(to - from);
    for (let at = from; at < to; at++) values[at - from] = row[at];
    rows.push(values);
  }
  return resultOf(result, from, to, rows);
}

/** A key for a statement and its values, or null when a value is not text, number or null. */
function statementKey(text: string, params: readonly unknown[]): string | null {
  let key = text;
  for (const p of params) {
    if (p === null) key += "\u0000n";
    else if (typeof p === "string") key += `\u0000s${p.length}:${p}`;
    else if (typeof p === "number" || typeof p === "bigint") key += `\u0000${typeof p}${p}`;
    else return null;
  }
  return key;
}

/**
 * A result with rows of its own, shaped as libSQL shapes them (`rowFromProto`): values by index
 * and `length`, not enumerable; by column name, enumerable (the first of a repeated name).
 */
function copyOfResult(result: ResultSet): ResultSet {
  const { columns } = result;
  const rows = result.rows.map((source) => {
    const row = {} as Record<string | number, unknown>;
    Object.defineProperty(row, "length", { value: source.length });
    for (let i = 0; i < source.length; i++) {
      const value = source[i];
      Object.defineProperty(row, i, { value });
      const name = columns[i];
      if (name !== undefined && !Object.hasOwn(row, name)) row[name] = value;
    }
    return row as unknown as (typeof result.rows)[number];
  });
  return { ...result, rows, toJSON: () => result.toJSON() };
}

/** What `Prebuilt` keeps of a query it built: its SQL once, how to map and run it. */
interface Built {
  query: { sql: string; params: unknown[] };
  /** Whether its rows are mapped by position (a builder's select), not by column name. */
  byPosition: boolean;
  mapResult(result: unknown, isFromBatch: boolean): unknown;
  /** Awaited alone: the query on `db` (its ORM or one of its transactions) with `values`. */
  alone(db: Executor, values: Record<string, unknown>): PromiseLike<unknown>;
  /** `alone`'s rows as arrays of values, unmapped (a prepared builder's `values()`). */
  rows(db: Executor, values: Record<string, unknown>): PromiseLike<ArrayLike<unknown>[]>;
}

/** A query builder Drizzle can prepare (select, insert, update, delete), or a raw statement. */
type Buildable = { prepare(): unknown } | (PromiseLike<unknown> & { _prepare(): unknown });
type Build = (db: Executor) => Buildable;

/**
 * A query built once per ORM, its SQL text rendered once, handed out per use as a batch item with
 * this use's values for its named placeholders (`sql.placeholder`): the one way Host reuses a
 * statement's text on hot paths — a GET's token guard and rows (decision 0098), a write batch's
 * cache guards (0107), a create's statements (0104) — where Drizzle rendering the same SQL again
 * for every request was a large part of its CPU time. Works in `Database.read` / `write`,
 * ReadPhase and WriteBatch, on a local file, remote and D1: the item is what Drizzle's batch code
 * asks of its items (`_prepare()` giving `getQuery()` and `mapResult`, as `batchOnD1` relies on).
 * Awaited alone it runs on the database it was handed out for (an ORM, or one of that ORM's open
 * transactions, where the prepared query is reused as `preparedIn` allows, else built there). The
 * SQL text must depend only on what the instance stands for (callers keep one per shape); a value
 * not given fails the use (Drizzle's "No value for placeholder"), never binds another's.
 * Pinned by `tests/db/driver-internals.test.ts`.
 */
export class Prebuilt<T> {
  readonly #byOrm = new WeakMap<object, Built>();
  constructor(private readonly build: (orm: Orm) => Buildable) {}

  /**
   * The query with `values` for its placeholders, for `db`: an ORM, or an open transaction of
   * `orm` (a database's `reader` is an ORM of its own).
   */
  with(
    db: Executor,
    values: Record<string, unknown> = {},
    orm: Orm = db as Orm,
  ): BatchItem<"sqlite"> & PromiseLike<T> {
    const built = this.#built(db, orm);
    return new FilledQuery<T>(built, values, db) as unknown as BatchItem<"sqlite"> & PromiseLike<T>;
  }

  /**
   * `with` awaited alone, its rows as the driver gives them (values by index, in the select list's
   * order), which Drizzle does not map: a caller that reads rows by position saves that copy.
   * Builders only.
   */
  values(
    db: Executor,
    values: Record<string, unknown> = {},
    orm: Orm = db as Orm,
  ): Promise<ArrayLike<unknown>[]> {
    return Promise.resolve(this.#built(db, orm).rows(db, values));
  }

  #built(db: Executor, orm: Orm): Built {
    const owner = ownerOf(db, orm);
    let built = this.#byOrm.get(owner);
    if (!built)
      this.#byOrm.set(owner, (built = builtOf(owner, this.build(owner), this.build as Build)));
    return built;
  }
}

function builtOf(orm: Orm, q: Buildable, build: Build): Built {
  if ("prepare" in q && typeof q.prepare === "function") {
    type Prepared = PreparedItem & {
      execute(v: object): PromiseLike<unknown>;
      values(v: object): PromiseLike<ArrayLike<unknown>[]>;
    };
    const prepared = q.prepare() as Prepared;
    const on = (db: Executor): Prepared =>
      db === orm
        ? prepared
        : (preparedIn(prepared, db) ??
          ((build(db) as { prepare(): Prepared }).prepare() as Prepared));
    const mapped = rowMapper(prepared);
    return {
      query: prepared.getQuery(),
      byPosition: !!prepared.fields,
      mapResult: mapped
        ? (r, b) => (b ? mapped((r as ResultSet).rows) : mapped(r as ArrayLike<unknown>[]))
        : (r, b) => prepared.mapResult(r, b),
      alone: (db, values) => on(db).execute(values),
      rows: (db, values) => on(db).values(values),
    };
  }
  const raw = (q as { _prepare(): PreparedItem })._prepare();
  const query = raw.getQuery() as { sql: string; params: unknown[]; method?: unknown };
  const method = query.method;
  const placeholders = query.params.some((p) => p instanceof Placeholder);
  return {
    query,
    byPosition: false,
    mapResult: (r, b) => raw.mapResult(r, b),
    // alone with values: the text again as a template of its `?`s (Drizzle writes no other `?`)
    alone: (db, values) =>
      !placeholders
        ? ((db === orm ? q : build(db)) as PromiseLike<unknown>)
        : method === "all" || method === "run"
          ? db[method](positional(query.sql, fillPlaceholders(query.params, values)))
          : Promise.reject(new Error(`Prebuilt: cannot run a raw ${String(method)} alone`)),
    rows: () => Promise.reject(new Error("Prebuilt: a raw statement gives no rows as values")),
  };
}

/**
 * A once-built select's rows mapped as Drizzle's libSQL session maps them (`mapAllResult`: each
 * value through `normalizeFieldValue`, then `mapResultRow`), with each field's key and decoder
 * looked up once instead of per row and value (decision 0214: Drizzle's per-value lookups were
 * the largest part of a GET's own mapping). Only where that is all Drizzle would do: a libSQL
 * prepared `all()` whose fields are all top-level keys (no nested object a join could nullify)
 * and no custom mapper; null otherwise (Drizzle maps). `tests/db/driver-internals.test.ts` compares the two.
 */
function rowMapper(
  prepared: object,
): ((rows: ArrayLike<ArrayLike<unknown>>) => Record<string, unknown>[]) | null {
  const p = prepared as {
    executeMethod?: unknown;
    fields?: { path: string[]; field: unknown }[];
    customResultMapper?: unknown;
  };
  if (!is(prepared, LibSQLPreparedQuery) || p.executeMethod !== "all") return null;
  // top-level keys only: a join's nested keys are what `joinsNotNullableMap` nullifies
  if (!p.fields || p.customResultMapper || !p.fields.every((f) => f.path.length === 1)) return null;
  const keys = p.fields.map((f) => f.path[0]!);
  const decoders = p.fields.map(({ field }) => decoderOf(field));
  if (decoders.some((d) => !d)) return null;
  const decode = decoders as Decoder[];
  return (rows) => {
    const out: Record<string, unknown>[] = new Array(rows.length);
    for (let r = 0; r < rows.length; r++) {
      const row = rows[r]!;
      const record: Record<string, unknown> = {};
      for (let i = 0; i < keys.length; i++) {
        const raw = normalizeFieldValue(row[i]);
        record[keys[i]!] = raw === null ? null : decode[i]!.mapFromDriverValue(raw);
      }
      out[r] = record;
    }
    return out;
  };
}

/** What `mapResultRow` decodes a field's value with (a column, or a SQL's decoder). */
function decoderOf(field: unknown): Decoder | null {
  if (is(field, Column)) return field;
  // `decoder` is Drizzle's (internal in its types): what `mapWith` sets, else a pass-through
  if (is(field, SQL)) return (field as unknown as { decoder: Decoder }).decoder;
  if (is(field, SQL.Aliased)) return (field.sql as unknown as { decoder: Decoder }).decoder;
  return null;
}

type Decoder = { mapFromDriverValue(value: unknown): unknown };

/** Drizzle's libSQL `normalizeFieldValue`: a blob's ArrayBuffer as a Buffer (else as text). */
function normalizeFieldValue(value: unknown): unknown {
  if (!(value instanceof ArrayBuffer)) return value;
  if (typeof Buffer !== "undefined") return value instanceof Buffer ? value : Buffer.from(value);
  return new TextDecoder().decode(value);
}

/** `text` with its `?` placeholders bound to `args`, as a Drizzle SQL template. */
function positional(text: string, args: unknown[]): SQL {
  const parts = text.split("?");
  if (parts.length !== args.length + 1)
    throw new Error(`positional: ${parts.length - 1} placeholders for ${args.length} arguments`);
  return sql(Object.assign(parts, { raw: parts }) as unknown as TemplateStringsArray, ...args);
}

/** A built query and the values of one use: a batch item, or a promise when awaited alone. */
class FilledQuery<T> extends QueryPromise<T> {
  constructor(
    private readonly built: Built,
    private readonly values: Record<string, unknown>,
    private readonly db: Executor,
  ) {
    super();
  }

  _prepare(): PreparedItem {
    const { built, values } = this;
    const params = fillPlaceholders(built.query.params, values);
    return {
      byPosition: built.byPosition,
      getQuery: () => ({ ...built.query, params }),
      mapResult: (result, isFromBatch) => built.mapResult(result, isFromBatch),
    };
  }

  override execute(): Promise<T> {
    return Promise.resolve(this.built.alone(this.db, this.values) as PromiseLike<T>);
  }
}

/**
 * Whether the libSQL transaction under the Drizzle transaction `tx` has ended, though Drizzle's
 * has not: SQLite rolled it back by itself (a full disk, an I/O error), and group commit must not
 * run the members after it there (`group-commit.ts`). Reads Drizzle's `session.tx`; false where
 * that is missing (then those members fail on the closed transaction instead of running again).
 * Pinned by `tests/db/driver-internals.test.ts`.
 */
export function libsqlTransactionClosed(tx: Executor): boolean {
  const session = (tx as unknown as { session?: { tx?: { closed?: boolean } } }).session;
  return session?.tx?.closed === true;
}

/** The SQL text and parameters Drizzle renders for `query` on `orm` (its dialect), or null. */
export function renderSql(orm: Executor, query: SQL): { sql: string; params: unknown[] } | null {
  const dialect = (
    orm as unknown as { dialect?: { sqlToQuery?(q: SQL): { sql: string; params: unknown[] } } }
  ).dialect;
  return dialect?.sqlToQuery ? dialect.sqlToQuery(query) : null;
}

/**
 * Inside an open libSQL transaction on `db`, runs `statements` (DDL without bound values) through
 * SQLite's own multi-statement runner in groups of 16: the same statements, without a
 * prepare-and-map round through the client for each (a group on a large schema takes a few
 * milliseconds). False, with nothing run, where that does not apply (no open transaction, a
 * bound value, or the driver's shape is not the one this was written against).
 */
export async function runDdlInGroups(db: Executor, statements: SQL[]): Promise<boolean> {
  const tx = (
    db as unknown as { session?: { tx?: { executeMultiple?: (sql: string) => Promise<unknown> } } }
  ).session?.tx;
  if (!tx?.executeMultiple) return false;
  const queries = statements.map((q) => renderSql(db, q));
  if (!queries.every((q) => q && q.params.length === 0 && !q.sql.includes(";"))) return false;
  for (let i = 0; i < queries.length; i += 16)
    await tx.executeMultiple(
      queries
        .slice(i, i + 16)
        .map((q) => q!.sql)
        .join(";\n"),
    );
  return true;
}

/** The parts of a `libsql` statement that our local client uses (`local-client.ts`). */
export interface NativeStatement {
  raw(on?: boolean): NativeStatement;
  safeIntegers(on?: boolean): NativeStatement;
  columns(): Array<{ name: string; type: string | null }>;
  all(args?: unknown): unknown[];
  run(args?: unknown): { changes: number; lastInsertRowid: number | bigint };
}

/**
 * A statement SQLite refused with SQLITE_BUSY is not halted: SQLite keeps it "in progress" so it
 * can be retried, and `libsql` offers no `reset()`. While it is, the connection's next COMMIT
 * fails ("SQL statements in progress"). `libsql` resets a statement when it runs it again, so it
 * is run once more under `PRAGMA query_only`, where SQLite refuses any write before it takes a
 * lock (SQLITE_READONLY halts the statement) and a read runs to its end. Relies on that reset;
 * `tests/db/driver-internals.test.ts` fails when it changes.
 */
export function haltBusyStatement(
  db: { exec(sql: string): void; readonly open: boolean },
  stmt: NativeStatement,
  bound: unknown,
): void {
  if (!db.open) return;
  try {
    db.exec("PRAGMA query_only=1");
    try {
      stmt.run(bound);
    } catch {
      // SQLITE_READONLY (a write, now halted) or the read's own error
    } finally {
      db.exec("PRAGMA query_only=0");
    }
  } catch {
    // a connection that cannot run a PRAGMA reports that on its next statement
  }
}
