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
import {
  isWriteConflict,
  type Database,
  type Executor,
  type Orm,
  type Queries,
} from "../../../db/client";
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
  return (await readIndexSchemas(db, [cotId])).get(cotId)!;
}

/**
 * `readIndexSchema` of several types in one statement: SQLite has no index on its schema table,
 * so each read scans all of it, a cost that grows with the number of types.
 */
export async function readIndexSchemas(
  db: Executor,
  cotIds: number[],
): Promise<Map<number, Map<string, string>>> {
  const owner = new Map<string, number>();
  for (const cotId of cotIds) for (const name of indexPartNames(cotId)) owner.set(name, cotId);
  const out = new Map(cotIds.map((cotId) => [cotId, new Map<string, string>()]));
  if (!owner.size) return out;
  const rows = (await db.all(
    sql`SELECT name, sql FROM sqlite_master WHERE name IN (SELECT value FROM json_each(${JSON.stringify([...owner.keys()])}))`,
  )) as { name: string; sql: string }[];
  for (const r of rows) out.get(owner.get(r.name)!)!.set(r.name, r.sql);
  return out;
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

/** The names `readIndexSchema` reads (a staged write's read phase reads them itself). */
export const indexPartNames = (cotId: number): string[] => {
  const { fts, pending, triggers } = partNames(cotId);
  return [fts, pending, ...triggers];
};

/** `dropSearchIndex` as statements, for a write batch. */
export function dropIndexStatements(cotId: number): string[] {
  const { fts, pending, triggers } = partNames(cotId);
  return [
    ...triggers.map((name) => `DROP TRIGGER IF EXISTS ${q(name)}`),
    `DROP TABLE IF EXISTS ${q(fts)}`,
    `DROP TABLE IF EXISTS ${q(pending)}`,
  ];
}

/**
 * The statements that make the stored index (`stored`, name → definition) the one `columns`
 * give, part by part: a part already defined as wanted stays. Adding columns changes only the
 * FTS5 table and the update trigger (their column lists); the pending table and the insert and
 * delete triggers stay as they are. Every DDL statement makes SQLite scan its whole schema, so
 * a part dropped and made again for nothing cost time in proportion to the number of types
 * (issue 30). Null when nothing changes; with columns, every row is marked pending afterwards
 * (a rebuilt FTS5 table is empty; a kept pending table keeps its ids, hence OR IGNORE).
 */
function changeStatements(
  cotId: number,
  columns: string[],
  stored: Map<string, string>,
): string[] | null {
  if (indexMatches(stored, cotId, columns)) return null;
  if (!columns.length) return stored.size ? dropIndexStatements(cotId) : null;
  const changed = indexStatements(cotId, columns).filter((s) => stored.get(s.name) !== s.sql);
  const { triggers } = partNames(cotId);
  const isTrigger = (name: string) => triggers.includes(name);
  // triggers go first and come last, as `dropIndexStatements` and `indexStatements` order them
  const drops = changed
    .filter((s) => stored.has(s.name))
    .sort((a, b) => Number(isTrigger(b.name)) - Number(isTrigger(a.name)))
    .map((s) => `DROP ${isTrigger(s.name) ? "TRIGGER" : "TABLE"} IF EXISTS ${q(s.name)}`);
  return [
    ...drops,
    ...changed.map((s) => s.sql),
    `INSERT OR IGNORE INTO ${q(pendingTableName(cotId))}(id) SELECT id FROM ${q(tableName(cotId))}`,
  ];
}

/**
 * The columns of a stored FTS5 table of the form `indexStatements` writes, or null when its
 * text is not exactly that form.
 */
function storedColumns(cotId: number, ftsSql: string | undefined): string[] | null {
  const list = /USING fts5\((.*), content=''/.exec(ftsSql ?? "")?.[1];
  const columns = list?.split(", ").map((c) => c.slice(1, -1));
  if (!columns?.length || !columns.every((c) => IDENT_RE.test(c))) return null;
  return indexStatements(cotId, columns)[0]!.sql === ftsSql ? columns : null;
}

/** A column addition's new index definitions, written in the same schema edit (`ddl.ts`). */
export interface IndexRedefinition {
  /** Empties the FTS5 table before its definition changes (run before the edit). */
  empty: string;
  /** The FTS5 table's and the update trigger's new definitions (`sqlite_schema` names → text). */
  texts: Array<{ name: string; sql: string }>;
  /** Runs the new definition (FTS5's own check of its empty index), after the edit. */
  check: string;
  /** Marks every row pending once the edit is done (the emptied index holds none of them). */
  mark: string;
}

/**
 * When columns are added by a schema edit: the stored index (`stored`) is of the current form
 * and differs from the one `columns` give only in the column lists of its FTS5 table and update
 * trigger. Instead of dropping and creating the FTS5 table (six DDL statements with its shadow
 * tables, each scanning the whole schema: a cost that grows with the number of types), the
 * table is emptied with FTS5's `delete-all` and both definitions are rewritten in the edit that
 * adds the columns. An emptied FTS5 table holds nothing that depends on its columns, so the new
 * definition reads it as a new table would be; its rows are all marked pending, as when it is
 * made again. Null when the stored index is anything else (`syncSearchIndex` then remakes it).
 */
export function indexRedefinition(
  cotId: number,
  fields: IndexField[],
  present: ReadonlySet<string>,
  stored: Map<string, string>,
): IndexRedefinition | null {
  const columns = indexedColumns(fields).filter((c) => present.has(c));
  if (!columns.length || indexMatches(stored, cotId, columns)) return null;
  const { fts, pending, triggers } = partNames(cotId);
  const au = triggers[2]!;
  const wanted = indexStatements(cotId, columns);
  if (wanted.some((s) => s.name !== fts && s.name !== au && stored.get(s.name) !== s.sql))
    return null;
  const before = storedColumns(cotId, stored.get(fts));
  if (!before || indexStatements(cotId, before)[4]!.sql !== stored.get(au)) return null;
  return {
    empty: `INSERT INTO ${q(fts)}(${q(fts)}) VALUES ('delete-all')`,
    texts: wanted.filter((s) => s.name === fts || s.name === au),
    check: `INSERT INTO ${q(fts)}(${q(fts)}, rank) VALUES ('integrity-check', 0)`,
    mark: `INSERT OR IGNORE INTO ${q(pending)}(id) SELECT id FROM ${q(tableName(cotId))}`,
  };
}

/**
 * `syncSearchIndex` as statements for a write batch (decision 0108): `fields` are the type's
 * fields as the batch leaves them (in id order, every column present), `stored` the index's
 * schema as the read phase found it (empty for a new table). Null when the index already
 * matches; else the statements, and whether they mark rows pending (the caller schedules a
 * flush once they commit).
 */
export function syncIndexStatements(
  cotId: number,
  fields: IndexField[],
  stored: Map<string, string>,
): { statements: string[]; pending: boolean } | null {
  const columns = indexedColumns(fields);
  const statements = changeStatements(cotId, columns, stored);
  return statements && { statements, pending: columns.length > 0 };
}

/**
 * Makes the index match the type's current fields (read in the caller's transaction): nothing
 * when it already does, else the parts that differ made again with every row pending (cheap:
 * the rows are indexed later by `flushSearchIndex`, and searches stay exact meanwhile). Columns
 * the table does not have (yet) are left out. `stored`: the index's schema when the caller read
 * it already (`readIndexSchemas`). Returns whether rows were marked pending.
 */
export async function syncSearchIndex(
  db: Executor,
  cotId: number,
  stored?: Map<string, string>,
): Promise<boolean> {
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
  const statements = changeStatements(cotId, columns, stored ?? (await readIndexSchema(db, cotId)));
  for (const s of statements ?? []) await db.run(sql.raw(s));
  return statements !== null && columns.length > 0;
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
 * What a flush needs of a type's index, read with each of its chunks: the definitions of the FTS5
 * table and of the pending table as `sqlite_master` holds them, the index's columns, and which of
 * them are multiselects (their index text is their items). A chunk's write is guarded on it.
 */
interface IndexShape {
  fts: string;
  pending: string;
  columns: string[];
  /** The multiselect fields' names, sorted. */
  lists: string[];
}

/**
 * The shape each database's flushes last read, per type: the next chunk's read needs the columns
 * to weigh its rows' text, and checks the shape it reads alongside (a stale one costs a re-read).
 */
const SHAPES = new WeakMap<Database, Map<number, IndexShape>>();

const shapesOf = (db: Database) => {
  let shapes = SHAPES.get(db);
  if (!shapes) SHAPES.set(db, (shapes = new Map()));
  return shapes;
};

const sameShape = (a: IndexShape, b: IndexShape) =>
  a.fts === b.fts &&
  a.pending === b.pending &&
  a.columns.join("\n") === b.columns.join("\n") &&
  a.lists.join("\n") === b.lists.join("\n");

/** A pending row as a chunk's read finds it: whether it has an entry, and its indexed text's size. */
interface Candidate {
  id: number;
  indexed: number;
  bytes: number;
}

/** The summed byte length of `columns` of the row aliased `alias`. */
const textBytes = (columns: string[], alias: string) =>
  columns.map((c) => `coalesce(length(CAST(${alias}.${q(c)} AS BLOB)), 0)`).join(" + ");

/**
 * One chunk's read, in one round trip: the index's shape and — when `known` gives the columns —
 * the first pending rows with their text's size. `candidates` is null when the shape read is not
 * `known` (the first chunk of a type, or its index changed): read again with the new one.
 */
async function readChunk(
  db: Database,
  cotId: number,
  known: IndexShape | undefined,
  batch: number,
): Promise<{ shape: IndexShape | null; candidates: Candidate[] | null }> {
  const { fts, pending } = partNames(cotId);
  const r = db.reader;
  const reads = [
    r.all(sql`SELECT name, sql FROM sqlite_master WHERE name IN (${fts}, ${pending})`),
    r.all(sql`SELECT name FROM pragma_table_info(${fts})`),
    r.all(
      sql`SELECT name FROM custom_object_type_fields WHERE custom_object_type_id = ${cotId} AND type = 'multiselect' ORDER BY name`,
    ),
  ] as const;
  const size = known && textBytes(known.columns, "t");
  // `_docsize` (FTS5's row table) tells which ids have an entry: new rows (most) have none.
  // A deleted row (no `t`) has size 0: its old entry still has to leave the index.
  const answers = (await db.read(
    size
      ? [
          ...reads,
          r.all(
            sql.raw(
              `SELECT p.id AS id, d.id IS NOT NULL AS indexed, ${size} AS bytes FROM ${q(pending)} p LEFT JOIN ${q(tableName(cotId))} t ON t.id = p.id LEFT JOIN ${q(`${fts}_docsize`)} d ON d.id = p.id WHERE ${size} <= ${INDEXED_ROW_MAX_BYTES} ORDER BY p.id LIMIT ${Math.max(1, Math.floor(batch))}`,
            ),
          ),
        ]
      : reads,
  )) as unknown as [
    { name: string; sql: string }[],
    { name: string }[],
    { name: string }[],
    Candidate[]?,
  ];
  const [defs, columns, lists, candidates] = answers;
  const def = (name: string) => defs.find((d) => d.name === name)?.sql;
  const ftsSql = def(fts);
  const pendingSql = def(pending);
  const names = columns.map((c) => c.name);
  if (!ftsSql || !pendingSql || !names.length || !names.every((c) => IDENT_RE.test(c)))
    return { shape: null, candidates: null };
  const shape = {
    fts: ftsSql,
    pending: pendingSql,
    columns: names,
    lists: lists.map((l) => l.name),
  };
  return { shape, candidates: known && sameShape(known, shape) ? (candidates ?? []) : null };
}

/**
 * A chunk's atomic write. It does not trust the read for what others may have changed since:
 * every statement is conditioned on the state it finds, so a row written meanwhile is indexed with
 * the text it has inside this write (or stays pending, if it grew past the limit), and a row
 * another flush indexed meanwhile is left as that flush left it. First a guard: the index and the
 * multiselect fields are still the ones read (else the batch rolls back: `WriteConflictError`).
 */
function chunkWrites(orm: Orm, cotId: number, shape: IndexShape, rows: Candidate[]): Queries {
  const { fts, pending } = partNames(cotId);
  const [F, P, D, T] = [fts, pending, `${fts}_docsize`, tableName(cotId)].map((n) => sql.raw(q(n)));
  const ids = JSON.stringify(rows.map((r) => r.id));
  const chunk = sql`SELECT value FROM json_each(${ids})`;
  const lists = JSON.stringify(shape.lists);
  const multiselects = sql`FROM custom_object_type_fields WHERE custom_object_type_id = ${cotId} AND type = 'multiselect'`;
  const guard = orm.run(
    sql`INSERT INTO write_guard (ok) SELECT (SELECT count(*) FROM sqlite_master WHERE (name = ${fts} AND sql = ${shape.fts}) OR (name = ${pending} AND sql = ${shape.pending})) = 2 AND (SELECT count(*) ${multiselects}) = ${shape.lists.length} AND (SELECT count(*) ${multiselects} AND name IN (SELECT value FROM json_each(${lists}))) = ${shape.lists.length}`,
  );
  // One statement per id: FTS5 answers `rowid IN (…)` by scanning the whole index. Only a row
  // still pending loses its entry (one another flush indexed meanwhile keeps it).
  const unindex = rows
    .filter((r) => r.indexed)
    .map((r) =>
      orm.run(
        sql`DELETE FROM ${F} WHERE rowid = ${r.id} AND EXISTS (SELECT 1 FROM ${P} WHERE id = ${r.id})`,
      ),
    );
  // Pending rows of the chunk without an entry (now) leave pending, unless they outgrew the limit;
  // a row gone from the table leaves too (its entry, if any, went above)...
  const size = sql.raw(textBytes(shape.columns, "t"));
  const settle = orm.run(
    sql`DELETE FROM ${P} WHERE id IN (${chunk}) AND id NOT IN (SELECT id FROM ${D}) AND coalesce((SELECT ${size} FROM ${T} t WHERE t.id = ${P}.id), 0) <= ${INDEXED_ROW_MAX_BYTES}`,
  );
  // ...and the chunk's rows that are neither pending nor in the index are exactly those: their
  // text as it is now goes in. (Every row is pending or has an entry: the index's invariant.)
  const list = sql.raw(shape.columns.map(q).join(", "));
  const texts = sql.raw(
    shape.columns.map((c) => indexedText(c, shape.lists.includes(c))).join(", "),
  );
  const index = orm.run(
    sql`INSERT INTO ${F}(rowid, ${list}) SELECT id, ${texts} FROM ${T} WHERE id IN (${chunk}) AND id NOT IN (SELECT id FROM ${P}) AND id NOT IN (SELECT id FROM ${D})`,
  );
  return [guard, ...unindex, settle, index];
}

/** A chunk's read finds the index changed this many times in a row: the flush gives up for now. */
const SHAPE_ATTEMPTS = 4;

/**
 * Indexes pending rows of one type: one read (`readChunk`), then one atomic write batch
 * (`chunkWrites`) — two round trips on a remote database, no lock held between them, and no
 * interactive transaction (D1 has none). At most `batch` rows and about `FLUSH_BYTES` of text:
 * their old entries leave the index, their current text goes in, and they leave pending. Rows
 * over `INDEXED_ROW_MAX_BYTES` are left pending. Returns how many ids it took (0: nothing it can
 * index, or no current index).
 */
export async function flushSearchIndex(
  db: Database,
  cotId: number,
  batch = FLUSH_BATCH,
): Promise<number> {
  const shapes = shapesOf(db);
  for (let attempt = 0; attempt < SHAPE_ATTEMPTS; attempt++) {
    const known = shapes.get(cotId);
    shapes.delete(cotId);
    const read = await readChunk(db, cotId, known, batch).catch((e) => {
      if (!known) throw e;
      return null; // a column the remembered shape weighs is gone (renamed, removed): afresh
    });
    if (!read) continue;
    const { shape, candidates } = read;
    if (!shape) return 0;
    shapes.set(cotId, shape);
    // the first chunk of this index (or it changed): read again, weighing rows by its columns
    if (!candidates) continue;
    const rows = withinBytes(candidates, FLUSH_BYTES);
    if (!rows.length) return 0;
    try {
      await db.write(chunkWrites(db.orm, cotId, shape, rows));
      return rows.length;
    } catch (e) {
      // the index (or a field's type) changed between the read and the write: read again
      if (!isWriteConflict(e)) throw e;
    }
  }
  throw new Error(`the search index of type ${cotId} kept changing under its flush`);
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

/** Pending tables `typesWithPending` probes in one statement (a compound SELECT, 500 at most). */
const PROBE_CHUNK = 100;

/**
 * Types with pending rows (for sweeps: at start-up, periodically, after a migration). A type
 * whose pending table is empty is left out: each flush of one reads the schema table, which
 * scans all of it, so sweeping every type cost time in proportion to the square of the type
 * count. One probe per pending table (a seek), 100 a statement.
 */
export async function typesWithPending(db: Executor): Promise<number[]> {
  const rows = (await db.all(
    sql`SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'co_[0-9]*_fts_pending'`,
  )) as { name: string }[];
  const ids = rows
    .map((r) => /^co_(\d{1,15})_fts_pending$/.exec(r.name))
    .filter((m) => m !== null)
    .map((m) => Number(m[1]));
  const out: number[] = [];
  for (let i = 0; i < ids.length; i += PROBE_CHUNK) {
    const chunk = ids.slice(i, i + PROBE_CHUNK);
    const probes = chunk.map(
      (id) => `SELECT ${id} AS id WHERE EXISTS (SELECT 1 FROM ${q(pendingTableName(id))})`,
    );
    // a type dropped since the list was read: its chunk is swept as before (a flush of a type
    // without an index finds nothing)
    const found = (await db
      .all(sql.raw(probes.join(" UNION ALL ")))
      .catch(() => chunk.map((id) => ({ id })))) as { id: number }[];
    out.push(...found.map((r) => Number(r.id)));
  }
  return out;
}

/**
 * Indexes every pending row of every type (or of `cotIds`), batch after batch, giving the event
 * loop a turn between batches. For sweeps, migrations, benches and tests; returns the ids indexed.
 */
async function flushAllSearchIndexes(
  db: Database,
  cotIds?: Iterable<number>,
  batch = FLUSH_BATCH,
): Promise<number> {
  let total = 0;
  for (const cotId of cotIds ?? (await typesWithPending(db.reader))) {
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
    // the fields the term searches are the type's, fixed under one schema (a stamp)
    key: `co-search\u0000${cotId}\u0000${columns.join(",")}\u0000${needle}`,
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
export async function upgradeSearchIndexes(db: Database): Promise<number[]> {
  const rows = (await db.orm.all(
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
