/**
 * A full-text index per custom object type for `?q=` and the `__ic`/`__isw`/`__iew` lookups,
 * kept in two parts (decision 0056, after 0050):
 *
 * - `co_<id>_fts`: FTS5, trigram tokenizer, contentless (`content=''`, `contentless_delete=1`:
 *   the text is not stored twice and rows can be deleted by rowid) over the type's searchable
 *   columns. It is written in batches by `flushSearchIndex`, never by a request.
 * - `co_<id>_fts_pending`: the ids whose index entry may be out of date. Triggers on the table add
 *   a row's id in the row's own transaction (insert, delete, update of an indexed column or of
 *   the id), whatever writes the row (API, bulk, SQL), so a write pays one B-tree insert instead
 *   of tokenising its text (~35 % of a POST).
 *
 * Invariant: every row is either pending or indexed with its current text. The index holds the
 * text as LIKE sees it (ASCII letters lowered, case-sensitive trigrams: `indexedText`), so for a
 * row it holds, a phrase matches exactly when `LIKE '%needle%'` does. A search with other
 * conditions narrows to `id IN (fts MATCH …) OR id IN (pending)` and keeps its LIKE conditions; a
 * `q` alone in id order is counted and paged from the index (`indexedSearch`, decision 0081).
 * Either way the answer is exactly the rows a scan returns, whatever is pending. The index is used
 * only when its definition in `sqlite_master` is exactly the one these columns give (a renamed
 * column rewrites the triggers, and an index of an older form differs), and only for needles it
 * covers.
 */
import { and, sql, type SQL } from "drizzle-orm";
import type { Executor, Orm } from "../../../db/client";
import {
  buildFilter,
  type FilterSpec,
  type IndexedSearch,
  type ListSpec,
  type Lookup,
} from "../../../core/rest/query";
import { fieldType, type FieldRow } from "../field-types";
import { tableName } from "../constants";

const IDENT_RE = /^[a-z0-9][a-z0-9_]{0,62}$/;
const q = (name: string) => {
  if (!IDENT_RE.test(name))
    throw new Error(`refusing unsafe SQL identifier ${JSON.stringify(name)}`);
  return `"${name}"`;
};

const ftsTableName = (cotId: number) => `${tableName(cotId)}_fts`;
const pendingTableName = (cotId: number) => `${tableName(cotId)}_fts_pending`;
/** The names of the index's schema objects (tables and triggers), for reading and dropping. */
const partNames = (cotId: number) => {
  const fts = ftsTableName(cotId);
  return {
    fts,
    pending: pendingTableName(cotId),
    triggers: [`${fts}_ai`, `${fts}_ad`, `${fts}_au`],
  };
};

/**
 * Field types the index holds, with the needles for which their `q` term is a LIKE over the
 * column's text (the index then holds a superset of its matches).
 */
const INDEXED: Record<string, (needle: string) => boolean> = {
  text: () => true,
  longtext: () => true,
  url: () => true,
  select: () => true,
  json: () => true,
  // Items are matched one by one; the index holds them apart, each after a control character
  // (`indexedText`), which a needle must not contain (nor quotes or backslashes, which JSON writes
  // differently: kept from when the index held the JSON text).
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
  multiselect: (needle) => !/["\\\u0000-\u001f]/.test(needle),
};
/**
 * Field types the index leaves out (their text is short and would cost every write): a needle
 * with a character their stored text never has cannot match them (LIKE folds ASCII case only).
 * Any other needle (digits, a date) is not narrowed: the list scans.
 */
const NEVER_MATCHES: Record<string, RegExp> = {
  integer: /[^-0-9]/,
  decimal: /[^-+.0-9eEiInNfF]/,
  date: /[^-0-9]/,
  datetime: /[^-+0-9:. tTzZ]/,
};
/** Text kinds whose string lookups are LIKE over the column (`query.ts` `condition`). */
const LOOKUP_TYPES = new Set(["text", "longtext", "url"]);
const NARROWED: ReadonlySet<Lookup> = new Set<Lookup>(["ic", "isw", "iew"]);

type IndexField = Pick<FieldRow, "name" | "type">;

/** The columns the index holds: every column-stored field of a covered type, in field order. */
function indexedColumns(fields: IndexField[]): string[] {
  return fields
    .filter((f) => Object.hasOwn(INDEXED, f.type) && fieldType(f.type).storage === "column")
    .map((f) => f.name);
}

/** The index's schema statements for these columns (compared verbatim with `sqlite_master`). */
export function indexStatements(cotId: number, columns: string[]): { name: string; sql: string }[] {
  const t = q(tableName(cotId));
  const { fts, pending, triggers } = partNames(cotId);
  const [ai, ad, au] = triggers as [string, string, string];
  const list = columns.map(q).join(", ");
  const mark = (row: "new" | "old") =>
    `INSERT OR IGNORE INTO ${q(pending)}(id) VALUES (${row}.id);`;
  return [
    {
      name: fts,
      sql: `CREATE VIRTUAL TABLE ${q(fts)} USING fts5(${list}, content='', contentless_delete=1, tokenize='trigram case_sensitive 1')`,
    },
    { name: pending, sql: `CREATE TABLE ${q(pending)} (id INTEGER PRIMARY KEY)` },
    { name: ai, sql: `CREATE TRIGGER ${q(ai)} AFTER INSERT ON ${t} BEGIN ${mark("new")} END` },
    { name: ad, sql: `CREATE TRIGGER ${q(ad)} AFTER DELETE ON ${t} BEGIN ${mark("old")} END` },
    // `id` too: a row whose id plain SQL changes leaves the old id's entry behind and needs a new one.
    {
      name: au,
      sql: `CREATE TRIGGER ${q(au)} AFTER UPDATE OF "id", ${list} ON ${t} BEGIN ${mark("old")} ${mark("new")} END`,
    },
  ];
}

/** The index's statements as `sqlite_master` holds them (name → sql), for the model registry. */
export async function readIndexSchema(db: Executor, cotId: number): Promise<Map<string, string>> {
  const { fts, pending, triggers } = partNames(cotId);
  const names = [fts, pending, ...triggers];
  const rows = (await db.all(
    sql`SELECT name, sql FROM sqlite_master WHERE name IN (${sql.join(
      names.map((n) => sql`${n}`),
      sql`, `,
    )})`,
  )) as { name: string; sql: string }[];
  return new Map(rows.map((r) => [r.name, r.sql]));
}

/** Whether the stored index is exactly the one `columns` give (its pending table and triggers included). */
export function indexMatches(
  stored: Map<string, string>,
  cotId: number,
  columns: string[],
): boolean {
  return (
    columns.length > 0 && indexStatements(cotId, columns).every((s) => stored.get(s.name) === s.sql)
  );
}

/** Drops the index, its pending table and its triggers (before column DDL: a renamed or dropped column invalidates it). */
export async function dropSearchIndex(db: Executor, cotId: number): Promise<void> {
  const { fts, pending, triggers } = partNames(cotId);
  for (const name of triggers) await db.run(sql.raw(`DROP TRIGGER IF EXISTS ${q(name)}`));
  await db.run(sql.raw(`DROP TABLE IF EXISTS ${q(fts)}`));
  await db.run(sql.raw(`DROP TABLE IF EXISTS ${q(pending)}`));
}

/**
 * Makes the index match the type's current fields (read in the caller's transaction): nothing
 * when it already does, else drop and create it with every row pending (cheap: the rows are
 * indexed later by `flushSearchIndex`, and searches stay exact meanwhile). Columns the table
 * does not have (yet) are left out. Returns whether rows were marked pending.
 */
export async function syncSearchIndex(db: Executor, cotId: number): Promise<boolean> {
  const t = tableName(cotId);
  const present = new Set(
    ((await db.all(sql`SELECT name FROM pragma_table_info(${t})`)) as { name: string }[]).map(
      (r) => r.name,
    ),
  );
  if (!present.size) return false;
  const fields = (await db.all(
    sql`SELECT name, type FROM custom_object_type_fields WHERE custom_object_type_id = ${cotId} ORDER BY id`,
  )) as IndexField[];
  const columns = indexedColumns(fields).filter((c) => present.has(c));
  const stored = await readIndexSchema(db, cotId);
  if (indexMatches(stored, cotId, columns)) return false;
  if (stored.size) await dropSearchIndex(db, cotId);
  if (!columns.length) return false;
  for (const s of indexStatements(cotId, columns)) await db.run(sql.raw(s.sql));
  await db.run(sql.raw(`INSERT INTO ${q(pendingTableName(cotId))}(id) SELECT id FROM ${q(t)}`));
  return true;
}

/** Ids moved from pending into the index per transaction (a few milliseconds of tokenising each). */
const FLUSH_BATCH = 250;
/**
 * Text one flush transaction tokenises at most (the first row always goes in): the trigram
 * tokenizer costs about 0.1 ms per KiB on the event loop, so a batch stays near 25 ms.
 */
export const FLUSH_BYTES = 256 * 1024;
/**
 * A row with more indexed text than this stays pending for good: tokenising one 1 MiB value
 * holds the event loop ~120 ms. Searches stay exact (pending rows are matched by LIKE, off the
 * event loop on the read pool); only those rows miss the index's speed-up.
 */
export const INDEXED_ROW_MAX_BYTES = 64 * 1024;

/**
 * Indexes pending rows of one type in one transaction on `db` (the ORM: the transaction is its
 * own), at most `batch` rows and about `FLUSH_BYTES` of text: their old entries leave the index,
 * their current text goes in, and they leave pending. Rows over `INDEXED_ROW_MAX_BYTES` are left
 * pending. Returns how many ids it took (0: nothing it can index, or no current index).
 */
export async function flushSearchIndex(
  db: Orm,
  cotId: number,
  batch = FLUSH_BATCH,
): Promise<number> {
  const { fts, pending } = partNames(cotId);
  const columns = await indexColumnsOf(db, cotId);
  if (!columns) return 0;
  const size = columns.map((c) => `coalesce(length(CAST(t.${q(c)} AS BLOB)), 0)`).join(" + ");
  const lists = await multiselectColumns(db, cotId);
  return db.transaction(async (tx) => {
    // `_docsize` (FTS5's row table) tells which ids have an entry: new rows (most) have none.
    // A deleted row (no `t`) has size 0: its old entry still has to leave the index.
    const candidates = (await tx.all(
      sql.raw(
        `SELECT p.id AS id, d.id IS NOT NULL AS indexed, ${size} AS bytes FROM ${q(pending)} p LEFT JOIN ${q(tableName(cotId))} t ON t.id = p.id LEFT JOIN ${q(`${fts}_docsize`)} d ON d.id = p.id WHERE ${size} <= ${INDEXED_ROW_MAX_BYTES} ORDER BY p.id LIMIT ${Math.max(1, Math.floor(batch))}`,
      ),
    )) as { id: number; indexed: number; bytes: number }[];
    const rows = withinBytes(candidates, FLUSH_BYTES);
    if (!rows.length) return 0;
    // One statement per id: FTS5 answers `rowid IN (…)` by scanning the whole index.
    for (const r of rows)
      if (r.indexed) await tx.run(sql`DELETE FROM ${sql.raw(q(fts))} WHERE rowid = ${r.id}`);
    const ids = JSON.stringify(rows.map((r) => r.id));
    const list = columns.map(q).join(", ");
    const texts = columns.map((c) => indexedText(c, lists.has(c))).join(", ");
    await tx.run(
      sql`INSERT INTO ${sql.raw(q(fts))}(rowid, ${sql.raw(list)}) SELECT id, ${sql.raw(texts)} FROM ${sql.raw(q(tableName(cotId)))} WHERE id IN (SELECT value FROM json_each(${ids}))`,
    );
    await tx.run(
      sql`DELETE FROM ${sql.raw(q(pending))} WHERE id IN (SELECT value FROM json_each(${ids}))`,
    );
    return rows.length;
  });
}

/** The leading rows whose text adds up to at most `budget` bytes (always the first one). */
function withinBytes<T extends { bytes: number }>(rows: T[], budget: number): T[] {
  let total = 0;
  let n = 0;
  for (const r of rows) {
    total += Number(r.bytes);
    if (n > 0 && total > budget) break;
    n++;
  }
  return rows.slice(0, n);
}

/**
 * What the index holds for a column: its text with ASCII letters in lower case (SQLite's
 * `lower()`, which folds exactly what LIKE folds), so the case-sensitive trigram index matches
 * exactly what `LIKE '%needle%'` matches. A multiselect holds its items, not its JSON text, each
 * after a unit separator (char 31) that no needle it is searched with contains (`INDEXED`): a
 * needle then matches inside one item, as `q` matches items one by one.
 */
function indexedText(column: string, isList: boolean): string {
  const c = q(column);
  if (!isList) return `lower(${c})`;
  return `lower(CASE WHEN json_valid(${c}) AND json_type(${c}) = 'array' THEN (SELECT group_concat(char(31) || je.value, '') FROM json_each(${c}) je) ELSE ${c} END)`;
}

/** The type's multiselect fields (their index text is their items, `indexedText`). */
async function multiselectColumns(db: Executor, cotId: number): Promise<Set<string>> {
  const rows = (await db.all(
    sql`SELECT name FROM custom_object_type_fields WHERE custom_object_type_id = ${cotId} AND type = 'multiselect'`,
  )) as { name: string }[];
  return new Set(rows.map((r) => r.name));
}

/** The columns of a type's index when it has one with a pending table; else null. */
async function indexColumnsOf(db: Executor, cotId: number): Promise<string[] | null> {
  const { fts, pending } = partNames(cotId);
  const rows = (await db.all(
    sql`SELECT name FROM sqlite_master WHERE name IN (${fts}, ${pending})`,
  )) as { name: string }[];
  if (rows.length < 2) return null;
  const columns = (
    (await db.all(sql`SELECT name FROM pragma_table_info(${fts})`)) as { name: string }[]
  ).map((r) => r.name);
  return columns.length && columns.every((c) => IDENT_RE.test(c)) ? columns : null;
}

/** Types that have a pending table (for sweeps: at start-up, periodically, after a migration). */
export async function typesWithPending(db: Executor): Promise<number[]> {
  const rows = (await db.all(
    sql`SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'co_[0-9]*_fts_pending'`,
  )) as { name: string }[];
  return rows
    .map((r) => /^co_(\d+)_fts_pending$/.exec(r.name))
    .filter((m) => m !== null)
    .map((m) => Number(m[1]));
}

/**
 * Indexes every pending row of every type (or of `cotIds`), batch after batch, giving the event
 * loop a turn between batches. For sweeps, migrations, benches and tests; returns the ids indexed.
 */
async function flushAllSearchIndexes(
  db: Orm,
  cotIds?: Iterable<number>,
  batch = FLUSH_BATCH,
): Promise<number> {
  let total = 0;
  for (const cotId of cotIds ?? (await typesWithPending(db))) {
    for (;;) {
      const n = await flushSearchIndex(db, cotId, batch);
      total += n;
      if (n === 0) break;
      await new Promise((r) => setTimeout(r, 0));
    }
  }
  return total;
}

/** ASCII letters in lower case and nothing else: what SQLite's `lower()` and LIKE fold. */
const asciiLower = (s: string) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
const phrase = (needle: string) => `"${asciiLower(needle).replace(/"/g, '""')}"`;
/** A trigram phrase needs three characters; shorter needles are not narrowed. */
const longEnough = (needle: string) => [...needle].length >= 3;

/** An FTS5 query: any of `needles` as a phrase in any of `columns`. */
function matchExpression(columns: string[], needles: string[]): string {
  const set = `{${columns.map(q).join(" ")}}`;
  return needles.map((n) => `${set} : ${phrase(n)}`).join(" OR ");
}

/**
 * A `q` answered from the index (decision 0081). The index matches exactly what the `q` term
 * matches for every row it holds that is not pending (`indexedText`; the invariant of 0056), so:
 * count = the index's matches outside pending ids + pending rows matching by their own text;
 * a page = the first ids the index gives in id order, pending ids left out, merged with the
 * pending rows that match. Neither reads a row the index answers for; pending rows are few (a
 * flush follows every write within 150 ms) and are read as before.
 */
function indexedSearch(cotId: number, columns: string[], needle: string, term: SQL): IndexedSearch {
  const fts = sql.raw(q(ftsTableName(cotId)));
  const pending = sql.raw(q(pendingTableName(cotId)));
  const table = sql.raw(q(tableName(cotId)));
  const match = matchExpression(columns, [needle]);
  const pendingMatches = sql`SELECT id FROM ${table} WHERE id IN (SELECT id FROM ${pending}) AND ${term}`;
  return {
    count: sql`SELECT (SELECT count(*) FROM ${fts} WHERE ${fts} MATCH ${match} AND rowid NOT IN (SELECT id FROM ${pending})) + CASE WHEN EXISTS (SELECT 1 FROM ${pending}) THEN (SELECT count(*) FROM (${pendingMatches})) ELSE 0 END AS n`,
    pageIds(direction, limit, offset) {
      const dir = sql.raw(direction === "asc" ? "ASC" : "DESC");
      const first = sql`SELECT rowid AS id FROM ${fts} WHERE ${fts} MATCH ${match} AND rowid NOT IN (SELECT id FROM ${pending}) ORDER BY rowid ${dir} LIMIT ${offset + limit}`;
      return sql`SELECT id FROM (SELECT id FROM (${first}) UNION ALL ${pendingMatches}) ORDER BY id ${dir} LIMIT ${limit} OFFSET ${offset}`;
    },
  };
}

function candidates(
  cotId: number,
  idExpr: ListSpec["idExpr"],
  columns: string[],
  needles: string[],
): SQL {
  const match = matchExpression(columns, needles);
  const fts = sql.raw(q(ftsTableName(cotId)));
  // Pending rows are not (or not correctly) in the index yet: they are candidates too.
  return sql`(${idExpr} IN (SELECT rowid FROM ${fts} WHERE ${fts} MATCH ${match}) OR ${idExpr} IN (SELECT id FROM ${sql.raw(q(pendingTableName(cotId)))}))`;
}

/**
 * A list spec that narrows `q` and the text lookups through the index, when the stored index
 * (`stored`, from `readIndexSchema`) is the one these fields give; else `spec` as it is.
 */
export function withSearchIndex(
  spec: ListSpec,
  cotId: number,
  fields: Array<FieldRow>,
  stored: Map<string, string>,
): ListSpec {
  const columns = indexedColumns(fields);
  if (!indexMatches(stored, cotId, columns)) return spec;
  const indexed = new Set(columns);
  const searched = fields.filter(
    (f) => f.filterLogic !== "disabled" && f.searchWeight > 0 && fieldType(f.type).searchable,
  );
  // The indexed fields `q` can match for this needle; null when one it can match is not indexed.
  const coverage = (needle: string): string[] | null => {
    if (!searched.length || !longEnough(needle)) return null;
    const through: string[] = [];
    for (const f of searched) {
      if (indexed.has(f.name) && INDEXED[f.type]!(needle)) through.push(f.name);
      else if (!(Object.hasOwn(NEVER_MATCHES, f.type) && NEVER_MATCHES[f.type]!.test(needle)))
        return null;
    }
    return through;
  };
  const searchIndex = (needle: string): SQL | undefined => {
    const through = coverage(needle);
    if (!through) return undefined;
    return through.length ? candidates(cotId, spec.idExpr, through, [needle]) : sql`0`;
  };
  const searchFirstPage = (needle: string, term: SQL): IndexedSearch | undefined => {
    const through = coverage(needle);
    return through?.length ? indexedSearch(cotId, through, needle, term) : undefined;
  };
  const filters: Record<string, FilterSpec> = { ...spec.filters };
  for (const f of fields) {
    const filter = Object.hasOwn(filters, f.name) ? filters[f.name] : undefined;
    if (
      !filter ||
      filter.build ||
      filter.kind !== "string" ||
      !LOOKUP_TYPES.has(f.type) ||
      !indexed.has(f.name)
    )
      continue;
    filters[f.name] = {
      ...filter,
      build: (lookup, values) => {
        const exact = buildFilter(f.name, { ...filter, build: undefined }, lookup, values);
        if (!NARROWED.has(lookup) || !exact || !values.length || !values.every(longEnough))
          return exact;
        return and(candidates(cotId, spec.idExpr, [f.name], values), exact);
      },
    };
  }
  return { ...spec, filters, searchIndex, searchFirstPage };
}

/**
 * Migration (decision 0056): indexes of the older external-content form (decision 0050) are
 * replaced by the current one and filled at once, so an upgraded database searches through its
 * index from the start. Once done, finds nothing (one statement).
 */
export async function upgradeSearchIndexes(db: Orm): Promise<number[]> {
  const rows = (await db.all(
    sql`SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'co_[0-9]*_fts' AND (sql NOT LIKE '%contentless_delete=1%' OR sql NOT LIKE '%case_sensitive 1%')`,
  )) as { name: string }[];
  const ids = rows
    .map((r) => /^co_(\d+)_fts$/.exec(r.name))
    .filter((m) => m !== null)
    .map((m) => Number(m[1]));
  for (const cotId of ids) {
    await db.transaction(async (tx) => {
      await dropSearchIndex(tx, cotId);
      await syncSearchIndex(tx, cotId);
    });
  }
  // before serving: bigger batches than a running server's
  if (ids.length) await flushAllSearchIndexes(db, ids, 2000);
  return ids;
}
