/**
 * One full-text index for every custom object type, for `?q=` and the `__ic`/`__isw`/`__iew`
 * lookups (decision 0130, after 0050/0056/0081), made by a SQL migration:
 *
 * - `co_search`: FTS5, trigram tokenizer, contentless (`content=''`, `contentless_delete=1`).
 *   One column: an object's indexed fields' text, each after char(30) (`objectText`). Its rowid
 *   packs the type and the object: `type_id * 2^40 + id`, so a type's entries are one rowid range
 *   in object id order. Written in batches by `flushSearchIndex`, never by a request.
 * - `co_search_pending (type_id, id)`: the objects whose entry may be out of date. Three triggers
 *   per type add an object in its own transaction (insert, delete, update of an indexed column or
 *   of the id), whatever writes the row (API, bulk, SQL): a write pays one B-tree insert.
 *
 * A type has no index tables of its own (its schema is its table, its id index and the three
 * triggers): every schema change makes each connection parse the whole schema again, and FTS5
 * tables with their shadow tables made that parse grow faster than the number of types (issue 30).
 *
 * Invariant: every row is either pending or indexed with its current text. The index holds the
 * text as LIKE sees it (ASCII letters lowered, case-sensitive trigrams), so for a row it holds, a
 * phrase without the separators matches exactly when `LIKE '%needle%'` matches one of its fields.
 * A search with other conditions narrows to `id IN (match in the type's range) OR id IN
 * (pending)` and keeps its LIKE conditions; a `q` alone in id order, over every indexed field, is
 * counted and paged from the index (`indexedSearch`, decision 0081). Either way the answer is
 * exactly the rows a scan returns, whatever is pending. A type's index is used only when its
 * triggers in `sqlite_master` are exactly the ones its columns give, and only for needles it covers.
 */
import { and, sql, type SQL } from "drizzle-orm";
import {
  isWriteConflict,
  type Database,
  type Executor,
  type Orm,
  type Queries,
} from "../../../db/client";
import { inJsonList, jsonListRows } from "../../../db/d1-limits";
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

/** The shared FTS5 table, its row-size shadow table and the pending table (migration 0012). */
const SEARCH_TABLE = "co_search";
const DOCSIZE_TABLE = `${SEARCH_TABLE}_docsize`;
const PENDING_TABLE = "co_search_pending";
/** Object ids a type's rowid range holds: 0 ≤ id < 2^40. Others stay pending for good. */
const ID_SPAN = 1_099_511_627_776;
/** Type ids whose range fits a 64-bit rowid: below 2^23. A type past it is not indexed. */
const TYPE_LIMIT = 8_388_608;
const indexable = (cotId: number) =>
  Number.isSafeInteger(cotId) && cotId >= 1 && cotId < TYPE_LIMIT;
const typeId = (cotId: number) => {
  if (!indexable(cotId)) throw new Error(`type id ${cotId} has no search index range`);
  return cotId;
};
/** The first rowid of a type's range, computed by SQLite (past JavaScript's exact integers). */
const rangeStart = (cotId: number) => `(${typeId(cotId)} * ${ID_SPAN})`;
/** SQL: the object id `id` has a place in the type's range. */
const inRange = (id: string) => `${id} BETWEEN 0 AND ${ID_SPAN - 1}`;

/** The names of a type's triggers (its only schema objects of the index), for reading and dropping. */
const triggerNames = (cotId: number): [string, string, string] => {
  const fts = `${tableName(cotId)}_fts`;
  return [`${fts}_ai`, `${fts}_ad`, `${fts}_au`];
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

/** A type's three triggers for these columns (compared verbatim with `sqlite_master`). */
export function indexStatements(cotId: number, columns: string[]): { name: string; sql: string }[] {
  const t = q(tableName(cotId));
  const [ai, ad, au] = triggerNames(cotId);
  const list = columns.map(q).join(", ");
  const mark = (row: "new" | "old") =>
    `INSERT OR IGNORE INTO ${q(PENDING_TABLE)}(type_id, id) VALUES (${typeId(cotId)}, ${row}.id);`;
  return [
    { name: ai, sql: `CREATE TRIGGER ${q(ai)} AFTER INSERT ON ${t} BEGIN ${mark("new")} END` },
    { name: ad, sql: `CREATE TRIGGER ${q(ad)} AFTER DELETE ON ${t} BEGIN ${mark("old")} END` },
    // `id` too: a row whose id plain SQL changes leaves the old id's entry behind and needs a new one.
    {
      name: au,
      sql: `CREATE TRIGGER ${q(au)} AFTER UPDATE OF "id", ${list} ON ${t} BEGIN ${mark("old")} ${mark("new")} END`,
    },
  ];
}

/** A type's triggers as `sqlite_master` holds them (name → sql), for the model registry. */
export async function readIndexSchema(db: Executor, cotId: number): Promise<Map<string, string>> {
  return (await readIndexSchemas(db, [cotId])).get(cotId)!;
}

/** `readIndexSchema` as a statement for someone else's read; `indexSchemaFrom` takes its rows. */
export const indexSchemaStatement = (cotId: number) =>
  sql`SELECT name, sql FROM sqlite_master WHERE ${inJsonList(sql`name`, indexPartNames(cotId))}`;

export const indexSchemaFrom = (rows: unknown): Map<string, string> =>
  new Map((rows as { name: string; sql: string }[]).map((r) => [r.name, r.sql]));

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
    sql`SELECT name, sql FROM sqlite_master WHERE ${inJsonList(sql`name`, [...owner.keys()])}`,
  )) as { name: string; sql: string }[];
  for (const r of rows) out.get(owner.get(r.name)!)!.set(r.name, r.sql);
  return out;
}

/** Whether the stored triggers are exactly the ones `columns` give. */
export function indexMatches(
  stored: Map<string, string>,
  cotId: number,
  columns: string[],
): boolean {
  return (
    columns.length > 0 &&
    indexable(cotId) &&
    indexStatements(cotId, columns).every((s) => stored.get(s.name) === s.sql)
  );
}

/** The names `readIndexSchema` reads (a staged write's read phase reads them itself). */
export const indexPartNames = (cotId: number): string[] => triggerNames(cotId);

/** SQL marking every row of the type's table pending (its entries, if any, are re-done). */
const markAllStatement = (cotId: number) =>
  `INSERT OR IGNORE INTO ${q(PENDING_TABLE)}(type_id, id) SELECT ${typeId(cotId)}, id FROM ${q(tableName(cotId))}`;

/**
 * Drops a type's index (before column DDL, a type's removal or trash): its triggers go and every
 * row is marked pending, so each entry the shared index holds for the type is one the flusher
 * deletes (or re-does, if the type has an index again by then). A type's entries therefore never
 * outlive it unpending, even for a new type that takes its id. The table must still exist.
 */
export function dropIndexStatements(cotId: number): string[] {
  const drops = triggerNames(cotId).map((name) => `DROP TRIGGER IF EXISTS ${q(name)}`);
  return indexable(cotId) ? [...drops, markAllStatement(cotId)] : drops;
}

/** `dropIndexStatements`, run on `db`. */
export async function dropSearchIndex(db: Executor, cotId: number): Promise<void> {
  for (const s of dropIndexStatements(cotId)) await db.run(sql.raw(s));
}

/**
 * The statements that make the stored triggers (`stored`, name → definition) the ones `columns`
 * give: a trigger already defined as wanted stays (adding columns changes only the update
 * trigger's column list). Every DDL statement makes SQLite scan its whole schema (issue 30).
 * Null when nothing changes; with columns, every row is marked pending afterwards (a kept
 * pending row stays, hence OR IGNORE).
 */
function changeStatements(
  cotId: number,
  columns: string[],
  stored: Map<string, string>,
): string[] | null {
  if (!indexable(cotId)) return null;
  if (indexMatches(stored, cotId, columns)) return null;
  if (!columns.length) return stored.size ? dropIndexStatements(cotId) : null;
  const changed = indexStatements(cotId, columns).filter((s) => stored.get(s.name) !== s.sql);
  return [
    ...changed.filter((s) => stored.has(s.name)).map((s) => `DROP TRIGGER IF EXISTS ${q(s.name)}`),
    ...changed.map((s) => s.sql),
    markAllStatement(cotId),
  ];
}

/** The columns of a stored update trigger of the form `indexStatements` writes, or null. */
function storedColumns(cotId: number, triggerSql: string | null | undefined): string[] | null {
  const list = /AFTER UPDATE OF "id", (.*) ON "co_\d+" BEGIN/.exec(triggerSql ?? "")?.[1];
  const columns = list?.split(", ").map((c) => c.slice(1, -1));
  if (!columns?.length || !columns.every((c) => IDENT_RE.test(c))) return null;
  return indexStatements(cotId, columns)[2]!.sql === triggerSql ? columns : null;
}

/** A column addition's new trigger definition, written in the same schema edit (`ddl.ts`). */
export interface IndexRedefinition {
  /** The update trigger's new definition (`sqlite_schema` name → text). */
  texts: Array<{ name: string; sql: string }>;
}

/**
 * When columns are added by a schema edit: the stored triggers are of the current form and
 * differ from the ones `columns` give only in the update trigger's column list. Its text is
 * rewritten in the edit that adds the columns, with no DDL of its own. No row is marked pending:
 * a column added by the edit is NULL in every row, and a NULL field adds nothing to an object's
 * indexed text (`objectText`), so every entry still holds its row's current text. Null when the
 * stored triggers are anything else (`syncSearchIndex` then remakes them). `present`: the
 * table's columns once the edit is done; `added`: those the edit adds.
 */
export function indexRedefinition(
  cotId: number,
  fields: IndexField[],
  present: ReadonlySet<string>,
  stored: Map<string, string>,
  added: ReadonlySet<string>,
): IndexRedefinition | null {
  const columns = indexedColumns(fields).filter((c) => present.has(c));
  if (!columns.length || !indexable(cotId) || indexMatches(stored, cotId, columns)) return null;
  const au = triggerNames(cotId)[2];
  const wanted = indexStatements(cotId, columns);
  if (wanted.some((s) => s.name !== au && stored.get(s.name) !== s.sql)) return null;
  const before = storedColumns(cotId, stored.get(au));
  // only additions: the stored columns come first, as they were; the others are the edit's own
  if (!before || before.join("\n") !== columns.slice(0, before.length).join("\n")) return null;
  if (!columns.slice(before.length).every((c) => added.has(c))) return null;
  return { texts: wanted.filter((s) => s.name === au) };
}

/**
 * `syncSearchIndex` as statements for a write batch (decision 0108): `fields` are the type's
 * fields as the batch leaves them (in id order, every column present), `stored` the triggers as
 * the read phase found them (empty for a new table). Null when the index already matches; else
 * the statements, and whether they mark rows pending (the caller schedules a flush once they
 * commit).
 */
export function syncIndexStatements(
  cotId: number,
  fields: IndexField[],
  stored: Map<string, string>,
): { statements: string[]; pending: boolean } | null {
  const columns = indexedColumns(fields);
  const statements = changeStatements(cotId, columns, stored);
  return statements && { statements, pending: true };
}

/** The columns the index holds for the type's fields and table as they are; null: no table. */
async function currentColumns(db: Executor, cotId: number): Promise<string[] | null> {
  const t = tableName(cotId);
  const present = new Set(
    ((await db.all(sql`SELECT name FROM pragma_table_info(${t})`)) as { name: string }[]).map(
      (r) => r.name,
    ),
  );
  if (!present.size) return null;
  const fields = (await db.all(
    sql`SELECT name, type FROM custom_object_type_fields WHERE custom_object_type_id = ${cotId} ORDER BY id`,
  )) as IndexField[];
  return indexedColumns(fields).filter((c) => present.has(c));
}

/**
 * Makes the triggers match the type's current fields (read in the caller's transaction):
 * nothing when they already do, else the ones that differ made again with every row pending
 * (cheap: the rows are indexed later by `flushSearchIndex`, and searches stay exact meanwhile).
 * Columns the table does not have (yet) are left out. `stored`: the triggers when the caller read
 * them already (`readIndexSchemas`). Returns whether rows were marked pending.
 */
export async function syncSearchIndex(
  db: Executor,
  cotId: number,
  stored?: Map<string, string>,
): Promise<boolean> {
  const columns = await currentColumns(db, cotId);
  if (!columns) return false;
  const statements = changeStatements(cotId, columns, stored ?? (await readIndexSchema(db, cotId)));
  for (const s of statements ?? []) await db.run(sql.raw(s));
  return statements !== null;
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
 * What a flush needs of a type's index, read with each of its chunks: its update trigger as
 * `sqlite_master` holds it (null: the type has no index now, its entries only leave), the
 * columns it names, and which of them are multiselects (their index text is their items). A
 * chunk's write is guarded on it.
 */
interface IndexShape {
  trigger: string | null;
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
  a.trigger === b.trigger &&
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

/** SQL: the pending row `p` (of type `cotId`) has an entry in the index. */
const hasEntry = (cotId: number, p: string) =>
  `(${inRange(`${p}.id`)} AND EXISTS (SELECT 1 FROM ${q(DOCSIZE_TABLE)} d WHERE d.id = ${rangeStart(cotId)} + ${p}.id))`;

/**
 * The first pending rows of a type with whether they have an entry and their text's size. A
 * row whose text is over the limit, or whose id has no place in the range, is left out: it
 * stays pending for good. Without columns (the type has no index now, or no table) every
 * pending row is a candidate, to leave.
 */
function candidatesQuery(cotId: number, columns: string[], batch: number): string {
  const limit = Math.max(1, Math.floor(batch));
  const pending = `${q(PENDING_TABLE)} p`;
  if (!columns.length)
    return `SELECT p.id AS id, ${hasEntry(cotId, "p")} AS indexed, 0 AS bytes FROM ${pending} WHERE p.type_id = ${cotId} ORDER BY p.id LIMIT ${limit}`;
  // A deleted row (no `t`) has size 0: its old entry still has to leave the index.
  const size = textBytes(columns, "t");
  return `SELECT p.id AS id, ${hasEntry(cotId, "p")} AS indexed, ${size} AS bytes FROM ${pending} LEFT JOIN ${q(tableName(cotId))} t ON t.id = p.id WHERE p.type_id = ${cotId} AND ${size} <= ${INDEXED_ROW_MAX_BYTES} AND (t.id IS NULL OR ${inRange("p.id")}) ORDER BY p.id LIMIT ${limit}`;
}

/**
 * One chunk's read, in one round trip: the index's shape and — when `known` gives the columns —
 * the first pending rows with their text's size. `candidates` is null when the shape read is not
 * `known` (the first chunk of a type, or its index changed): read again with the new one. The
 * shape is null when the type's trigger is of a form this code does not write (left as it is).
 */
async function readChunk(
  db: Database,
  cotId: number,
  known: IndexShape | undefined,
  batch: number,
): Promise<{ shape: IndexShape | null; candidates: Candidate[] | null }> {
  const au = triggerNames(cotId)[2];
  const r = db.reader;
  const reads = [
    r.all(sql`SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ${au}`),
    r.all(
      sql`SELECT name FROM custom_object_type_fields WHERE custom_object_type_id = ${cotId} AND type = 'multiselect' ORDER BY name`,
    ),
  ] as const;
  const answers = (await db.read(
    known ? [...reads, r.all(sql.raw(candidatesQuery(cotId, known.columns, batch)))] : reads,
  )) as unknown as [{ sql: string }[], { name: string }[], Candidate[]?];
  const [defs, lists, candidates] = answers;
  const trigger = defs[0]?.sql ?? null;
  const columns = trigger === null ? [] : storedColumns(cotId, trigger);
  if (!columns) return { shape: null, candidates: null };
  const shape = { trigger, columns, lists: lists.map((l) => l.name) };
  return { shape, candidates: known && sameShape(known, shape) ? (candidates ?? []) : null };
}

/**
 * A chunk's atomic write. It does not trust the read for what others may have changed since:
 * every statement is conditioned on the state it finds, so a row written meanwhile is indexed with
 * the text it has inside this write (or stays pending, if it grew past the limit), and a row
 * another flush indexed meanwhile is left as that flush left it. First a guard: the trigger and
 * the multiselect fields are still the ones read (else the batch rolls back: `WriteConflictError`).
 */
function chunkWrites(orm: Orm, cotId: number, shape: IndexShape, rows: Candidate[]): Queries {
  const [F, P, D, T] = [SEARCH_TABLE, PENDING_TABLE, DOCSIZE_TABLE, tableName(cotId)].map((n) =>
    sql.raw(q(n)),
  );
  const start = sql.raw(rangeStart(cotId));
  const au = triggerNames(cotId)[2];
  const chunk = jsonListRows(rows.map((r) => r.id));
  const multiselects = sql`FROM custom_object_type_fields WHERE custom_object_type_id = ${cotId} AND type = 'multiselect'`;
  const guard = orm.run(
    sql`INSERT INTO write_guard (ok) SELECT (SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ${au}) IS ${shape.trigger} AND (SELECT count(*) ${multiselects}) = ${shape.lists.length} AND (SELECT count(*) ${multiselects} AND ${inJsonList(sql`name`, shape.lists)}) = ${shape.lists.length}`,
  );
  const stillPending = (id: number) =>
    sql`EXISTS (SELECT 1 FROM ${P} WHERE type_id = ${cotId} AND id = ${id})`;
  // One statement per id: FTS5 answers `rowid IN (…)` by scanning the whole index. Only a row
  // still pending loses its entry (one another flush indexed meanwhile keeps it).
  const unindex = rows
    .filter((r) => r.indexed)
    .map((r) =>
      orm.run(sql`DELETE FROM ${F} WHERE rowid = ${start} + ${r.id} AND ${stillPending(r.id)}`),
    );
  const entry = sql.raw(hasEntry(cotId, q(PENDING_TABLE)));
  if (!shape.columns.length) {
    // no index for the type now: its pending rows without an entry (now) just leave
    const settle = orm.run(
      sql`DELETE FROM ${P} WHERE type_id = ${cotId} AND id IN (${chunk}) AND NOT ${entry}`,
    );
    return [guard, ...unindex, settle];
  }
  // Pending rows of the chunk without an entry (now) leave pending, unless they outgrew the limit
  // or have no place in the range; a row gone from the table leaves too (its entry went above)...
  const size = sql.raw(textBytes(shape.columns, "t"));
  const row = sql`(SELECT t.id FROM ${T} t WHERE t.id = ${P}.id)`;
  const settle = orm.run(
    sql`DELETE FROM ${P} WHERE type_id = ${cotId} AND id IN (${chunk}) AND NOT ${entry} AND (${row} IS NULL OR (${sql.raw(inRange("id"))} AND coalesce((SELECT ${size} FROM ${T} t WHERE t.id = ${P}.id), 0) <= ${INDEXED_ROW_MAX_BYTES}))`,
  );
  // ...and the chunk's rows that are neither pending nor in the index are exactly those: their
  // text as it is now goes in. (Every row is pending or has an entry: the index's invariant.)
  const text = sql.raw(objectText(shape.columns, shape.lists));
  const index = orm.run(
    sql`INSERT INTO ${F}(rowid, body) SELECT ${start} + id, ${text} FROM ${T} WHERE id IN (${chunk}) AND ${sql.raw(inRange("id"))} AND NOT EXISTS (SELECT 1 FROM ${P} WHERE type_id = ${cotId} AND id = ${T}.id) AND NOT EXISTS (SELECT 1 FROM ${D} WHERE id = ${start} + ${T}.id)`,
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
 * over `INDEXED_ROW_MAX_BYTES` are left pending. A type without an index (removed, trashed, no
 * indexed field) only loses its entries and pending rows. Returns how many ids it took (0:
 * nothing it can index).
 */
export async function flushSearchIndex(
  db: Database,
  cotId: number,
  batch = FLUSH_BATCH,
): Promise<number> {
  if (!indexable(cotId)) return 0;
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

/**
 * An object's entry: each field's text after a record separator (char 30), which no needle the
 * index is searched with contains (`coverable`), so a phrase matches inside one field. A NULL
 * field adds nothing (a NULL column added to the table leaves every entry as it was).
 */
function objectText(columns: string[], lists: string[]): string {
  return columns
    .map((c) => `coalesce(char(30) || ${indexedText(c, lists.includes(c))}, '')`)
    .join(" || ");
}

/**
 * Types with pending rows (for sweeps: at start-up, periodically, after a migration), one seek
 * per type: the least type id, then the least past it, and so on.
 */
export async function typesWithPending(db: Executor): Promise<number[]> {
  const P = sql.raw(q(PENDING_TABLE));
  const rows = (await db.all(
    sql`WITH RECURSIVE t(x) AS (SELECT (SELECT min(type_id) FROM ${P}) UNION ALL SELECT (SELECT min(type_id) FROM ${P} WHERE type_id > t.x) FROM t WHERE t.x IS NOT NULL) SELECT x FROM t WHERE x IS NOT NULL`,
  )) as { x: number }[];
  return rows.map((r) => Number(r.x));
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
/**
 * A needle the index answers for: three characters at least (a trigram phrase needs them), and
 * neither separator of `objectText` (a phrase with one could match across two fields or items).
 */
const coverable = (needle: string) =>
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the separators are control characters
  [...needle].length >= 3 && !/[\u001e\u001f]/.test(needle);

/** An FTS5 query: any of `needles` as a phrase. */
const matchExpression = (needles: string[]) => needles.map(phrase).join(" OR ");

/** SQL: the index's entries of type `cotId` that match `needles`, as rowids. */
function typeMatches(cotId: number, needles: string[]): SQL {
  const F = sql.raw(q(SEARCH_TABLE));
  const start = rangeStart(cotId);
  const range = sql.raw(`rowid BETWEEN ${start} AND ${start} + ${ID_SPAN - 1}`);
  return sql`${F} MATCH ${matchExpression(needles)} AND ${range}`;
}

/**
 * A `q` answered from the index (decision 0081). When the term searches every field the index
 * holds for the type, the index matches exactly what it matches for every row it holds that is
 * not pending (`objectText`; the invariant), so: count = the type's matches outside pending ids +
 * pending rows matching by their own text; a page = the first ids the index gives in id order,
 * pending ids left out, merged with the pending rows that match. Neither reads a row the index
 * answers for; pending rows are few (a flush follows every write within 150 ms).
 */
function indexedSearch(cotId: number, columns: string[], needle: string, term: SQL): IndexedSearch {
  const F = sql.raw(q(SEARCH_TABLE));
  const P = sql.raw(q(PENDING_TABLE));
  const start = sql.raw(rangeStart(cotId));
  const table = sql.raw(q(tableName(cotId)));
  const own = sql`${P} WHERE type_id = ${cotId}`;
  const matches = typeMatches(cotId, [needle]);
  const unpending = sql`rowid NOT IN (SELECT ${start} + id FROM ${own} AND ${sql.raw(inRange("id"))})`;
  const pendingMatches = sql`SELECT id FROM ${table} WHERE id IN (SELECT id FROM ${own}) AND ${term}`;
  return {
    // the fields the term searches are the type's, fixed under one schema (a stamp)
    key: `co-search\u0000${cotId}\u0000${columns.join(",")}\u0000${needle}`,
    count: sql`SELECT (SELECT count(*) FROM ${F} WHERE ${matches} AND ${unpending}) + CASE WHEN EXISTS (SELECT 1 FROM ${own}) THEN (SELECT count(*) FROM (${pendingMatches})) ELSE 0 END AS n`,
    pageIds(direction, limit, offset) {
      const dir = sql.raw(direction === "asc" ? "ASC" : "DESC");
      const first = sql`SELECT rowid - ${start} AS id FROM ${F} WHERE ${matches} AND ${unpending} ORDER BY rowid ${dir} LIMIT ${offset + limit}`;
      return sql`SELECT id FROM (SELECT id FROM (${first}) UNION ALL ${pendingMatches}) ORDER BY id ${dir} LIMIT ${limit} OFFSET ${offset}`;
    },
  };
}

/**
 * The ids that may match any of `needles` in some indexed field: the type's entries that match
 * (a superset: the whole object's text is searched, the caller keeps its exact conditions) and
 * every pending row (not, or not correctly, in the index yet).
 */
function candidates(cotId: number, idExpr: ListSpec["idExpr"], needles: string[]): SQL {
  const start = sql.raw(rangeStart(cotId));
  const P = sql.raw(q(PENDING_TABLE));
  return sql`(${idExpr} IN (SELECT rowid - ${start} FROM ${sql.raw(q(SEARCH_TABLE))} WHERE ${typeMatches(cotId, needles)}) OR ${idExpr} IN (SELECT id FROM ${P} WHERE type_id = ${cotId}))`;
}

/**
 * A list spec that narrows `q` and the text lookups through the index, when the type's stored
 * triggers (`stored`, from `readIndexSchema`) are the ones these fields give; else `spec` as it is.
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
    if (!searched.length || !coverable(needle)) return null;
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
    return through.length ? candidates(cotId, spec.idExpr, [needle]) : sql`0`;
  };
  // Counted and paged from the index only when the term searches every field it holds: an
  // entry matching through a field the term does not search would be counted wrongly.
  const searchFirstPage = (needle: string, term: SQL): IndexedSearch | undefined => {
    const through = coverage(needle);
    if (!through?.length || through.length !== indexed.size) return undefined;
    return indexedSearch(cotId, through, needle, term);
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
        if (!NARROWED.has(lookup) || !exact || !values.length || !values.every(coverable))
          return exact;
        return and(candidates(cotId, spec.idExpr, values), exact);
      },
    };
  }
  return { ...spec, filters, searchIndex, searchFirstPage };
}

/**
 * Migration (decision 0130): each type's own index of the earlier forms (an FTS5 table
 * `co_<id>_fts`, a pending table `co_<id>_fts_pending`, decisions 0050/0056) is dropped, its
 * triggers are made for the shared index with every row pending, and the rows are indexed at
 * once in batches, so an upgraded database searches through the index from the start. Once
 * done, finds nothing (one statement).
 */
export async function upgradeSearchIndexes(db: Database): Promise<number[]> {
  const rows = (await db.orm.all(
    sql`SELECT name FROM sqlite_master WHERE type = 'table' AND (name GLOB 'co_[0-9]*_fts' OR name GLOB 'co_[0-9]*_fts_pending')`,
  )) as { name: string }[];
  const ids = [
    ...new Set(
      rows
        .map((r) => /^co_(\d{1,15})_fts(_pending)?$/.exec(r.name))
        .filter((m) => m !== null)
        .map((m) => Number(m[1])),
    ),
  ];
  // one atomic batch per type (no interactive transaction: D1 has none)
  for (const cotId of ids) {
    const own = [`${tableName(cotId)}_fts`, `${tableName(cotId)}_fts_pending`];
    const drops = [
      ...triggerNames(cotId).map((name) => `DROP TRIGGER IF EXISTS ${q(name)}`),
      ...own.map((name) => `DROP TABLE IF EXISTS ${q(name)}`),
    ];
    const columns = await currentColumns(db.orm, cotId);
    const make = columns ? (changeStatements(cotId, columns, new Map()) ?? []) : [];
    const [first, ...rest] = [...drops, ...make].map((s) => db.orm.run(sql.raw(s)));
    await db.write([first!, ...rest]);
  }
  // before serving: bigger batches than a running server's
  if (ids.length) await flushAllSearchIndexes(db, ids.filter(indexable), 2000);
  return ids;
}
