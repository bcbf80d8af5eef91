/**
 * The DDL behind custom object types: one table `co_<cot id>` per type, one column per scalar
 * field, `<name>_id`/`<name>_type` for object fields, a link table per multiobject field.
 * Every identifier is validated and quoted here; nothing else builds DDL.
 */
import { sql, type SQL } from "drizzle-orm";
import type { Executor } from "../../db/client";
import { inJsonList } from "../../db/d1-limits";
import { runDdlInGroups } from "../../db/driver-internals";
import { yieldWhenDue } from "../../turns";
import { MAX_COLUMNS_PER_TYPE, MAX_LINK_FIELDS_PER_TYPE } from "../../core/limits";
import { NAME_RE, tableName } from "./constants";
import { FIELD_TYPE_MODULES, fieldType, type SqlType } from "./field-types";
import {
  dropIndexStatements,
  dropSearchIndex,
  syncIndexStatements,
  type IndexRedefinition,
} from "./search/search-index";

const IDENT_RE = /^[a-z0-9][a-z0-9_]{0,62}$/;

/** Quotes an identifier after checking it; throws on anything unexpected. */
export function ident(name: string): SQL {
  if (!IDENT_RE.test(name))
    throw new Error(`refusing unsafe SQL identifier ${JSON.stringify(name)}`);
  return sql.raw(`"${name}"`);
}

export { tableName } from "./constants";
export const linkTableName = (cotId: number, fieldId: number) =>
  `co_${Math.trunc(cotId)}_f${Math.trunc(fieldId)}_links`;
const indexName = (cotId: number, fieldId: number, suffix: string) =>
  `co_${Math.trunc(cotId)}_f${Math.trunc(fieldId)}_${suffix}`;

export interface ColumnField {
  id: number;
  name: string;
  type: string;
  unique: boolean;
  isPolymorphic: boolean;
}

/** The columns a field owns in its COT table, with their SQL types (none for a link table). */
export function fieldColumnTypes(
  f: Pick<ColumnField, "name" | "type" | "isPolymorphic">,
): Array<[string, SqlType]> {
  if (!NAME_RE.test(f.name)) throw new Error(`invalid field name ${JSON.stringify(f.name)}`);
  const m = fieldType(f.type);
  switch (m.storage) {
    case "links":
      return [];
    case "reference":
      return f.isPolymorphic
        ? [
            [`${f.name}_id`, "INTEGER"],
            [`${f.name}_type`, "INTEGER"],
          ]
        : [[`${f.name}_id`, "INTEGER"]];
    case "column":
      // companions (url's link title) follow the value column: `<name>_<suffix>`
      return [
        [f.name, m.sqlType],
        ...(m.companions ?? []).map((c): [string, SqlType] => [`${f.name}_${c.suffix}`, c.sqlType]),
      ];
  }
}

/** The columns a field owns in its COT table (none for multiobject). */
export const fieldColumns = (f: Pick<ColumnField, "name" | "type" | "isPolymorphic">): string[] =>
  fieldColumnTypes(f).map(([name]) => name);

/**
 * The names a field takes among its siblings: its columns, and the record keys of a value read
 * as parts (coordinates' `<name>_latitude`), which are no columns but would collide on the API.
 */
export const fieldTakenNames = (
  f: Pick<ColumnField, "name" | "type" | "isPolymorphic">,
): string[] => [
  ...fieldColumns(f),
  ...(fieldType(f.type).parts ?? []).map((part) => `${f.name}_${part}`),
];

/** The column that holds a field's value (its id for references), or null for a link table. */
export function valueColumn(
  f: Pick<ColumnField, "name" | "type" | "isPolymorphic">,
): string | null {
  return fieldColumns(f)[0] ?? null;
}

/** Whether a field keeps its values in a link table rather than in columns. */
export const hasLinkTable = (f: Pick<ColumnField, "type">) => fieldType(f.type).storage === "links";

/**
 * Columns a type's fields take against `MAX_COLUMNS_PER_TYPE`: one per field, two for a
 * polymorphic object field or a url field (its link title); a multiobject field counts one for
 * its link table.
 */
function columnCount(fields: Array<{ type: string; isPolymorphic: boolean }>): number {
  return fields.reduce(
    (n, f) =>
      n +
      Math.max(
        1,
        fieldColumnTypes({ name: "x", type: f.type, isPolymorphic: f.isPolymorphic }).length,
      ),
    0,
  );
}

const tooManyColumns = (count: number) =>
  `A custom object type holds at most ${MAX_COLUMNS_PER_TYPE} columns (this would make ${count}; a polymorphic object field or a url field takes two).`;

/**
 * Why a type of `fields` is too wide to keep (its columns, `MAX_COLUMNS_PER_TYPE`; its
 * multiobject fields, `MAX_LINK_FIELDS_PER_TYPE`), or null.
 */
export function tooWide(fields: Array<{ type: string; isPolymorphic: boolean }>): string | null {
  const columns = columnCount(fields);
  if (columns > MAX_COLUMNS_PER_TYPE) return tooManyColumns(columns);
  const links = fields.filter(hasLinkTable).length;
  if (links > MAX_LINK_FIELDS_PER_TYPE)
    return `A custom object type holds at most ${MAX_LINK_FIELDS_PER_TYPE} multiobject fields (this would make ${links}).`;
  return null;
}

const run = (db: Executor, q: SQL) => db.run(q);

/** The column of a type with config context support (upstream's `local_context_data`). */
export const LOCAL_CONTEXT_COLUMN = "local_context_data";
export async function addLocalContextColumn(db: Executor, cotId: number) {
  await run(
    db,
    sql`ALTER TABLE ${ident(tableName(cotId))} ADD COLUMN ${ident(LOCAL_CONTEXT_COLUMN)} TEXT`,
  );
}

/**
 * Every object's owner (NetBox 4.5): a nullable reference to `owners`. Its column's double
 * underscore is a name no field's column can take (NAME_RE), so fields never collide with it; a
 * field named `owner` shadows the owner in records, filters and constraints, as upstream's does.
 */
export const OWNER_COLUMN = "owner__id";
export const ownerAvailable = (fields: Pick<ColumnField, "name">[]) =>
  !fields.some((f) => f.name === "owner");

/**
 * Creates a COT's table with the columns of `fields` inline: one CREATE TABLE instead of an
 * ALTER TABLE per field (SQLite reloads its whole schema on every ALTER, which made creating
 * many types quadratic), then the fields' indexes and link tables (see `runAll`).
 */
export async function createCotTable(db: Executor, cotId: number, fields: ColumnField[] = []) {
  await runAll(db, createCotTableStatements(cotId, fields));
  // A new table has no index yet: nothing to read (each read of the schema scans all of it).
  const index = syncIndexStatements(
    cotId,
    [...fields].sort((a, b) => a.id - b.id),
    new Map(),
  );
  for (const s of index?.statements ?? []) await db.run(sql.raw(s));
}

/** `createCotTable`'s table, its indexes and link tables as statements (no search index). */
export function createCotTableStatements(cotId: number, fields: ColumnField[] = []): SQL[] {
  const t = tableName(cotId);
  const columns = fields.flatMap((f) =>
    fieldColumnTypes(f).map(([col, type]) => sql`, ${ident(col)} ${sql.raw(type)}`),
  );
  const owner = sql`, ${ident(OWNER_COLUMN)} INTEGER REFERENCES "owners"(id)`;
  const statements: SQL[] = [
    sql`CREATE TABLE ${ident(t)} (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, last_updated TEXT NOT NULL${owner}${sql.join(columns, sql``)})`,
  ];
  // The narrow index of §2: count(*) and deep OFFSET pages read it instead of the wide rows.
  statements.push(sql`CREATE INDEX ${ident(`${t}_id_idx`)} ON ${ident(t)} (id)`);
  for (const f of fields)
    statements.push(
      ...(hasLinkTable(f) ? linkTableStatements(cotId, f) : fieldIndexStatements(cotId, f)),
    );
  return statements;
}

/** `addLocalContextColumn` as a statement, for a write batch. */
export const localContextColumnStatement = (cotId: number): SQL =>
  sql`ALTER TABLE ${ident(tableName(cotId))} ADD COLUMN ${ident(LOCAL_CONTEXT_COLUMN)} TEXT`;

/**
 * One new field's storage as statements for a write batch (decision 0108): its columns (one
 * ALTER each), the fill of existing rows, its indexes; or its link table.
 */
export function fieldStorageStatements(cotId: number, f: ColumnField, fill?: unknown): SQL[] {
  if (hasLinkTable(f)) return linkTableStatements(cotId, f);
  const t = ident(tableName(cotId));
  const out = fieldColumnTypes(f).map(
    ([col, type]) => sql`ALTER TABLE ${t} ADD COLUMN ${ident(col)} ${sql.raw(type)}`,
  );
  if (fill !== undefined && fill !== null)
    out.push(sql`UPDATE ${t} SET ${ident(f.name)} = ${fill}`);
  return [...out, ...fieldIndexStatements(cotId, f)];
}

/** `dropCotTable` as statements, for a write batch. */
export function dropCotTableStatements(cotId: number, fields: ColumnField[]): SQL[] {
  return [
    ...dropIndexStatements(cotId).map((s) => sql.raw(s)),
    ...fields
      .filter(hasLinkTable)
      .map((f) => sql`DROP TABLE IF EXISTS ${ident(linkTableName(cotId, f.id))}`),
    sql`DROP TABLE IF EXISTS ${ident(tableName(cotId))}`,
  ];
}

/** `dropFieldStorage` as statements, for a write batch (the search index is dropped too). */
export function dropFieldStorageStatements(cotId: number, f: ColumnField): SQL[] {
  if (hasLinkTable(f)) return [sql`DROP TABLE IF EXISTS ${ident(linkTableName(cotId, f.id))}`];
  const t = ident(tableName(cotId));
  return [
    sql`DROP INDEX IF EXISTS ${ident(indexName(cotId, f.id, "idx"))}`,
    sql`DROP INDEX IF EXISTS ${ident(indexName(cotId, f.id, "uq"))}`,
    ...dropIndexStatements(cotId).map((s) => sql.raw(s)),
    ...fieldColumns(f).map((col) => sql`ALTER TABLE ${t} DROP COLUMN ${ident(col)}`),
  ];
}

/**
 * Runs statements in order: inside an open libSQL transaction, DDL without bound values goes to
 * SQLite in groups (`runDdlInGroups`, the one driver internal it needs); else one by one.
 */
async function runAll(db: Executor, statements: SQL[]) {
  if (await runDdlInGroups(db, statements)) return;
  for (const q of statements) await run(db, q);
}

function linkTableStatements(cotId: number, f: ColumnField): SQL[] {
  const lt = linkTableName(cotId, f.id);
  return [
    sql`CREATE TABLE ${ident(lt)} (source_id INTEGER NOT NULL REFERENCES ${ident(tableName(cotId))}(id) ON DELETE CASCADE, target_type INTEGER, target_id INTEGER NOT NULL, position INTEGER NOT NULL DEFAULT 0)`,
    sql`CREATE INDEX ${ident(`${lt}_src`)} ON ${ident(lt)} (source_id)`,
    sql`CREATE INDEX ${ident(`${lt}_tgt`)} ON ${ident(lt)} (target_id, target_type)`,
  ];
}

async function createLinkTable(db: Executor, cotId: number, f: ColumnField) {
  for (const q of linkTableStatements(cotId, f)) await run(db, q);
}

export async function dropCotTable(db: Executor, cotId: number, fields: ColumnField[]) {
  await dropSearchIndex(db, cotId);
  for (const f of fields)
    if (hasLinkTable(f))
      await run(db, sql`DROP TABLE IF EXISTS ${ident(linkTableName(cotId, f.id))}`);
  await run(db, sql`DROP TABLE IF EXISTS ${ident(tableName(cotId))}`);
}

function fieldIndexStatements(cotId: number, f: ColumnField): SQL[] {
  const t = ident(tableName(cotId));
  const out: SQL[] = [];
  const m = fieldType(f.type);
  if (m.storage === "links") return out;
  // A polymorphic reference is looked up by (type, id): its columns go in that order; a
  // column-stored field's index is on its value (not on its companions).
  const cols = m.storage === "column" ? [valueColumn(f)!] : fieldColumns(f).reverse();
  if (m.indexed)
    out.push(
      sql`CREATE INDEX ${ident(indexName(cotId, f.id, "idx"))} ON ${t} (${sql.join(
        cols.map((c) => ident(c)),
        sql`, `,
      )})`,
    );
  if (f.unique)
    out.push(
      sql`CREATE UNIQUE INDEX ${ident(indexName(cotId, f.id, "uq"))} ON ${t} (${ident(valueColumn(f)!)})`,
    );
  return out;
}

async function createFieldIndexes(db: Executor, cotId: number, f: ColumnField) {
  for (const q of fieldIndexStatements(cotId, f)) await run(db, q);
}

async function dropFieldIndexes(db: Executor, cotId: number, fieldId: number) {
  await run(db, sql`DROP INDEX IF EXISTS ${ident(indexName(cotId, fieldId, "idx"))}`);
  await run(db, sql`DROP INDEX IF EXISTS ${ident(indexName(cotId, fieldId, "uq"))}`);
}

/**
 * Brings databases made before decision 0055 to its index policy: drops each plain field index
 * (`co_<id>_f<id>_idx`) whose field's type no longer gets one. Run with the migrations, once per
 * start; afterwards it finds nothing to drop. Indexes only change speed, never answers.
 */
export async function dropUnwantedFieldIndexes(db: Executor): Promise<number> {
  const rows =
    (await db.all(sql`SELECT m.name, f.type FROM sqlite_master m JOIN custom_object_type_fields f
    ON m.name = 'co_' || f.custom_object_type_id || '_f' || f.id || '_idx' WHERE m.type = 'index' AND m.name GLOB 'co_[0-9]*_f[0-9]*_idx'`)) as {
      name: string;
      type: string;
    }[];
  let dropped = 0;
  for (const { name, type } of rows) {
    let indexed = true;
    try {
      indexed = fieldType(type).indexed;
    } catch {
      continue; // a type this build does not know: leave its index alone
    }
    if (indexed) continue;
    await run(db, sql`DROP INDEX IF EXISTS ${ident(name)}`);
    dropped++;
  }
  return dropped;
}

/**
 * Adds the columns of `fields` that the table of `cotId` lacks (NULL in every row): a table made
 * before a type gained a companion (url's link title, decision 0100), or a field trashed then.
 * Answers how many it added.
 */
export async function addMissingColumns(
  db: Executor,
  cotId: number,
  fields: Array<Pick<ColumnField, "name" | "type" | "isPolymorphic">>,
): Promise<number> {
  const table = tableName(cotId);
  const present = new Set(
    ((await db.all(sql`SELECT name FROM pragma_table_info(${table})`)) as { name: string }[]).map(
      (r) => r.name,
    ),
  );
  if (!present.size) return 0; // no such table
  const missing = fields.flatMap((f) => fieldColumnTypes(f).filter(([c]) => !present.has(c)));
  for (const [col, type] of missing)
    await run(db, sql`ALTER TABLE ${ident(table)} ADD COLUMN ${ident(col)} ${sql.raw(type)}`);
  return missing.length;
}

/**
 * Brings tables made before a field type gained a companion column to the current layout: run
 * with the migrations on every start; afterwards it only reads. Types this build does not know
 * are left alone.
 */
export async function addMissingCompanionColumns(db: Executor): Promise<number> {
  const types = FIELD_TYPE_MODULES.filter((m) => m.storage === "column" && m.companions?.length);
  if (!types.length) return 0;
  const rows = (await db.all(
    sql`SELECT custom_object_type_id AS cot, name, type FROM custom_object_type_fields WHERE type IN (${sql.join(
      types.map((m) => sql`${m.name}`),
      sql`, `,
    )}) ORDER BY custom_object_type_id`,
  )) as Array<{ cot: number; name: string; type: string }>;
  const byCot = new Map<number, Array<{ name: string; type: string; isPolymorphic: boolean }>>();
  for (const r of rows)
    (byCot.get(r.cot) ?? byCot.set(r.cot, []).get(r.cot)!).push({ ...r, isPolymorphic: false });
  let added = 0;
  for (const [cotId, fields] of byCot) added += await addMissingColumns(db, cotId, fields);
  return added;
}

/** Adds a field's storage; `fill` sets every existing row to that (already encoded) value. */
export async function addFieldStorage(db: Executor, cotId: number, f: ColumnField, fill?: unknown) {
  await addFieldsStorage(db, cotId, [{ field: f, fill }]);
}

/** New fields of one COT waiting for their storage: their columns, then fills and indexes. */
export interface PendingStorage {
  cotId: number;
  items: Array<{ field: ColumnField; fill?: unknown }>;
  /** Runs one field's part (the caller names the field a failure belongs to). */
  at?: <T>(index: number, fn: () => Promise<T>) => Promise<T>;
}

/** Adds many fields' storage to one COT (see `addPendingStorage`). */
async function addFieldsStorage(
  db: Executor,
  cotId: number,
  items: PendingStorage["items"],
  at?: PendingStorage["at"],
) {
  await addPendingStorage(db, [{ cotId, items, at }]);
}

/**
 * Adds the storage of new fields of one or more COTs: every new column of every table in one
 * schema edit (`addColumns`), then each field's fill, indexes or link table. `index`: search
 * index definitions the edit rewrites too; answers whether it did (else none changed).
 */
export async function addPendingStorage(
  db: Executor,
  pending: PendingStorage[],
  index: IndexRedefinition[] = [],
): Promise<boolean> {
  const edited = await addColumns(
    db,
    pending.map((p) => ({
      table: tableName(p.cotId),
      columns: p.items.flatMap(({ field }) => fieldColumnTypes(field)),
    })),
    index,
  );
  const now = <T>(_: number, fn: () => Promise<T>) => fn();
  for (const { cotId, items, at = now } of pending) {
    const t = ident(tableName(cotId));
    for (const [i, { field, fill }] of items.entries())
      await at(i, async () => {
        if (hasLinkTable(field)) return createLinkTable(db, cotId, field);
        if (fill !== undefined && fill !== null)
          await run(db, sql`UPDATE ${t} SET ${ident(field.name)} = ${fill}`);
        await createFieldIndexes(db, cotId, field);
      });
  }
  return edited;
}

type ColumnEdit = { table: string; columns: Array<[string, SqlType]> };

/**
 * Adds plain columns (TEXT, INTEGER or REAL; NULL in every existing row) to COT tables. Each
 * `ALTER TABLE ADD COLUMN` makes SQLite parse its whole schema again, so adding hundreds of
 * columns cost time in proportion to the number of other types (188 s for +500 columns beside
 * 817 types; issue 30). Columns are added the way ADD COLUMN adds one — their definitions
 * appended to the table's CREATE TABLE text in `sqlite_schema`, the schema version bumped — but
 * for every table at once, so the schema is parsed once. This is the procedure SQLite's ALTER
 * TABLE documentation gives for changes that leave the stored rows as they are (a nullable column
 * without a default is one: rows shorter than the table read NULL). Decision 0095 measures the
 * alternatives (one ALTER per column, the 12-step rebuild) and says why this one. Where schema
 * edits are refused (D1, a defensive server) or the text is not the shape `createCotTable`
 * writes, one ALTER per column. The edit also rewrites the search indexes' definitions in
 * `index` (`indexRedefinition`), so those take no DDL of their own; answers whether it did.
 */
async function addColumns(
  db: Executor,
  edits: ColumnEdit[],
  index: IndexRedefinition[],
): Promise<boolean> {
  const wanted = edits.filter((e) => e.columns.length);
  const count = wanted.reduce((n, e) => n + e.columns.length, 0);
  if (count > 1 && (await appendColumns(db, wanted, index))) return index.length > 0;
  for (const { table, columns } of wanted)
    for (const [col, type] of columns)
      await run(db, sql`ALTER TABLE ${ident(table)} ADD COLUMN ${ident(col)} ${sql.raw(type)}`);
  return false;
}

const COLUMN_TYPES = new Set<string>(["TEXT", "INTEGER", "REAL"]);

/**
 * `text` (a COT table's CREATE TABLE) with `columns` appended, or null when it is not the shape
 * this module writes: `CREATE TABLE "co_<id>" (id INTEGER PRIMARY KEY AUTOINCREMENT, …)` with
 * column definitions only. A table constraint, a quoted ")" or a table option (`STRICT`,
 * `WITHOUT ROWID`) would make the appended text wrong, so such a table takes the ALTER path.
 */
export function appendedColumns(
  text: string,
  table: string,
  columns: Array<[string, SqlType]>,
): string | null {
  for (const [col, type] of columns)
    if (!/^[a-z0-9]+(_[a-z0-9]+)*$/.test(col) || !COLUMN_TYPES.has(type))
      throw new Error(`unexpected column ${JSON.stringify(col)} ${type}`);
  const head = `CREATE TABLE "${table}" (id INTEGER PRIMARY KEY AUTOINCREMENT, `;
  if (!/^co_\d+$/.test(table) || !text.startsWith(head) || !text.endsWith(")")) return null;
  const body = text.slice(head.length, -1);
  // Only column definitions: no nested list closes early, no table constraint, no string.
  if (/[()]/.test(body.replace(/REFERENCES "owners"\(id\)/g, "")) || /['`[]/.test(body))
    return null;
  if (/(^|,)\s*(CONSTRAINT|PRIMARY|UNIQUE|CHECK|FOREIGN)\b/i.test(body)) return null;
  return `${text.slice(0, -1)}${columns.map(([col, type]) => `, "${col}" ${type}`).join("")})`;
}

/**
 * The edited CREATE TABLE texts of the tables, in order, or null when one is not the shape this
 * module writes. One read: SQLite's schema table has no index, so each read scans all of it.
 */
async function withColumns(db: Executor, edits: ColumnEdit[]): Promise<string[] | null> {
  const tables = edits.map((e) => e.table);
  const rows = (await db.all(
    sql`SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND ${inJsonList(sql`name`, tables)}`,
  )) as Array<{ name: string; sql: string }>;
  const texts = new Map(rows.map((r) => [r.name, r.sql]));
  const out: string[] = [];
  for (const { table, columns } of edits) {
    const text = appendedColumns(texts.get(table) ?? "", table, columns);
    if (text === null) return null;
    out.push(text);
  }
  return out;
}

/**
 * Inside the edit: search index triggers' texts rewritten by name (`indexRedefinition`). The
 * texts travel as one JSON object, read by key (not a list for `inJsonList`): one bound value.
 */
async function redefineIndexes(db: Executor, index: IndexRedefinition[]) {
  if (!index.length) return;
  const byName = JSON.stringify(
    Object.fromEntries(index.flatMap((r) => r.texts).map((p) => [p.name, p.sql])),
  );
  await run(
    db,
    sql`UPDATE sqlite_schema SET sql = (SELECT value FROM json_each(${byName}) WHERE key = sqlite_schema.name) WHERE type = 'trigger' AND name IN (SELECT key FROM json_each(${byName}))`,
  );
}

/** The one-edit path of `addColumns`; false (nothing changed) where the database refuses it. */
async function appendColumns(
  db: Executor,
  edits: ColumnEdit[],
  index: IndexRedefinition[],
): Promise<boolean> {
  const texts = await withColumns(db, edits);
  if (texts === null) return false;
  // every table's text in one statement: each statement on the schema table scans all of it
  // (one JSON object read by key, as `redefineIndexes` reads its texts)
  const byTable = JSON.stringify(Object.fromEntries(edits.map((e, i) => [e.table, texts[i]])));
  try {
    await run(db, sql`PRAGMA writable_schema = ON`);
    await run(
      db,
      sql`UPDATE sqlite_schema SET sql = (SELECT value FROM json_each(${byTable}) WHERE key = sqlite_schema.name) WHERE type = 'table' AND name IN (SELECT key FROM json_each(${byTable}))`,
    );
  } catch {
    await run(db, sql`PRAGMA writable_schema = OFF`).catch(() => undefined);
    return false; // refused: nothing was changed
  }
  try {
    await redefineIndexes(db, index);
    const [version] = (await db.all(sql`PRAGMA schema_version`)) as Array<{
      schema_version: number;
    }>;
    // A new schema version makes every connection, this one first, parse the edited schema.
    await run(
      db,
      sql.raw(`PRAGMA schema_version = ${Math.trunc(Number(version!.schema_version)) + 1}`),
    );
  } finally {
    await run(db, sql`PRAGMA writable_schema = OFF`);
  }
  await checkEdit(db, edits, index);
  return true;
}

/**
 * After the edit, which this connection's next statement parses: a column or index definition
 * missing, or a search trigger's text not the one written, throws (the caller's transaction, and the
 * edit, roll back).
 */
async function checkEdit(db: Executor, edits: ColumnEdit[], index: IndexRedefinition[]) {
  for (const { table, columns } of edits) {
    const info = (await db.all(sql`SELECT name FROM pragma_table_info(${table})`)) as Array<{
      name: string;
    }>;
    const names = new Set(info.map((r) => r.name));
    if (!columns.every(([col]) => names.has(col)))
      throw new Error(`the columns of ${table} were not added`);
  }
  const texts = index.flatMap((r) => r.texts);
  if (!texts.length) return;
  const redefined = texts.map((p) => p.name);
  const rows = (await db.all(
    sql`SELECT name, sql FROM sqlite_schema WHERE ${inJsonList(sql`name`, redefined)}`,
  )) as Array<{ name: string; sql: string }>;
  const now = new Map(rows.map((r) => [r.name, r.sql]));
  if (!texts.every((p) => now.get(p.name) === p.sql))
    throw new Error("the search index definitions were not rewritten");
}

export async function dropFieldStorage(db: Executor, cotId: number, f: ColumnField) {
  if (hasLinkTable(f)) {
    await run(db, sql`DROP TABLE IF EXISTS ${ident(linkTableName(cotId, f.id))}`);
    return;
  }
  await dropFieldIndexes(db, cotId, f.id);
  await dropSearchIndex(db, cotId); // its triggers name the column; syncSearchIndex rebuilds it
  for (const col of fieldColumns(f))
    await run(db, sql`ALTER TABLE ${ident(tableName(cotId))} DROP COLUMN ${ident(col)}`);
}

/**
 * `renameFieldStorage` and, when `unique` changes, `refreshFieldIndexes` as statements for a write
 * batch (decision 0108): the search index goes first (its triggers name the columns), then each
 * column is renamed; the field's indexes are made again for its new `unique`.
 */
export function alterFieldStatements(
  cotId: number,
  f: ColumnField,
  next: { name: string; unique: boolean },
): SQL[] {
  const out: SQL[] = [];
  const before = fieldColumns(f);
  if (next.name !== f.name && before.length) {
    const after = fieldColumns({ ...f, name: next.name });
    const t = ident(tableName(cotId));
    out.push(...dropIndexStatements(cotId).map((s) => sql.raw(s)));
    for (const [i, col] of before.entries())
      out.push(sql`ALTER TABLE ${t} RENAME COLUMN ${ident(col)} TO ${ident(after[i]!)}`);
  }
  if (next.unique !== f.unique)
    out.push(
      sql`DROP INDEX IF EXISTS ${ident(indexName(cotId, f.id, "idx"))}`,
      sql`DROP INDEX IF EXISTS ${ident(indexName(cotId, f.id, "uq"))}`,
      ...fieldIndexStatements(cotId, { ...f, name: next.name, unique: next.unique }),
    );
  return out;
}

export async function renameFieldStorage(
  db: Executor,
  cotId: number,
  f: ColumnField,
  newName: string,
) {
  const t = ident(tableName(cotId));
  const before = fieldColumns(f);
  const after = fieldColumns({ ...f, name: newName });
  await dropSearchIndex(db, cotId); // its columns keep the old names; syncSearchIndex rebuilds it
  for (let i = 0; i < before.length; i++) {
    await run(db, sql`ALTER TABLE ${t} RENAME COLUMN ${ident(before[i]!)} TO ${ident(after[i]!)}`);
  }
}

/** Re-creates indexes after `unique` changes. */
export async function refreshFieldIndexes(db: Executor, cotId: number, f: ColumnField) {
  await dropFieldIndexes(db, cotId, f.id);
  await createFieldIndexes(db, cotId, f);
}

/**
 * Changes a scalar column's type: a new column receives the converted values (computed by
 * `convert`; `undefined` means "cannot convert" and stores NULL), then replaces the old one.
 * Returns how many non-null values could not be converted.
 */
export async function retypeFieldStorage(
  db: Executor,
  cotId: number,
  f: ColumnField,
  newType: string,
  convert: (value: unknown) => unknown,
): Promise<number> {
  const t = ident(tableName(cotId));
  const tmp = `${f.name}__retype`;
  await dropFieldIndexes(db, cotId, f.id);
  await dropSearchIndex(db, cotId);
  const [[, type]] = fieldColumnTypes({ ...f, type: newType }) as [[string, SqlType]];
  await run(db, sql`ALTER TABLE ${t} ADD COLUMN ${ident(tmp)} ${sql.raw(type)}`);
  const rows = (await db.all(
    sql`SELECT id, ${ident(f.name)} AS v FROM ${t} WHERE ${ident(f.name)} IS NOT NULL`,
  )) as { id: number; v: unknown }[];
  let lost = 0;
  for (const row of rows) {
    const value = convert(row.v);
    if (value === undefined || value === null) {
      lost++;
      continue;
    }
    await run(db, sql`UPDATE ${t} SET ${ident(tmp)} = ${value} WHERE id = ${row.id}`);
  }
  await run(db, sql`ALTER TABLE ${t} DROP COLUMN ${ident(f.name)}`);
  await run(db, sql`ALTER TABLE ${t} RENAME COLUMN ${ident(tmp)} TO ${ident(f.name)}`);
  await createFieldIndexes(db, cotId, { ...f, type: newType });
  return lost;
}

/**
 * Where a retype's new values come from: an SQL expression of the old column (`expr`, decision
 * 0135: SQLite converts them, nothing is read), or the values converted beforehand — `read` and
 * `written` chunks of JSON `[[id, value], …]` (each one bound value), `count` the values read.
 */
export type RetypeSource =
  | { expr: (column: SQL) => SQL; lost?: number }
  | { count: number; read: string[]; written: string[] };

/**
 * A chunk of `[id, value]` pairs as a table `(id, v)`, looked up by id (the rowid). Bound as one
 * JSON value as `inJsonList` binds a list, but rows of two columns, which that helper does not give.
 */
const retypePairs = (chunk: string) =>
  sql`(SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS v FROM json_each(${chunk}))`;

/**
 * Whether the column still holds the values a retype read (a value written since the read, a
 * row gone or new: false), as SQL conditions; none for values SQLite converts in the batch.
 */
export function retypeUnchangedSql(cotId: number, column: string, source: RetypeSource): SQL[] {
  const t = ident(tableName(cotId));
  const col = ident(column);
  if ("expr" in source)
    return source.lost === undefined
      ? []
      : [
          sql`(SELECT count(*) FROM ${t} WHERE ${col} IS NOT NULL AND ${source.expr(col)} IS NULL) = ${source.lost}`,
        ];
  return [
    sql`(SELECT count(*) FROM ${t} WHERE ${col} IS NOT NULL) = ${source.count}`,
    ...source.read.map(
      (chunk) =>
        sql`NOT EXISTS (SELECT 1 FROM ${retypePairs(chunk)} AS j WHERE (SELECT ${col} FROM ${t} WHERE id = j.id) IS NOT j.v)`,
    ),
  ];
}

/**
 * `retypeFieldStorage` as statements for a write batch (decisions 0121, 0135): a new column
 * filled from `source` (after guards that the old values are those read, when they were read)
 * replaces the old one under the field's new name, and the field's indexes are made anew. Keys
 * and checks reading the column are the caller's: dropped before, built after.
 */
export function retypeFieldStatements(
  cotId: number,
  f: ColumnField,
  next: { name: string; type: string; unique: boolean },
  source: RetypeSource,
): SQL[] {
  const t = ident(tableName(cotId));
  const col = ident(f.name);
  const tmp = ident(`${f.name}__retype`);
  const [[, type]] = fieldColumnTypes({ ...f, type: next.type }) as [[string, SqlType]];
  const fill =
    "expr" in source
      ? [sql`UPDATE ${t} SET ${tmp} = ${source.expr(col)} WHERE ${col} IS NOT NULL`]
      : // pairs looked up by id (the rowid): a join on the JSON's keys would scan it for every row
        source.written.map(
          (chunk) =>
            sql`UPDATE ${t} SET ${tmp} = j.v FROM ${retypePairs(chunk)} AS j WHERE ${t}.id = j.id`,
        );
  return [
    sql`DROP INDEX IF EXISTS ${ident(indexName(cotId, f.id, "idx"))}`,
    sql`DROP INDEX IF EXISTS ${ident(indexName(cotId, f.id, "uq"))}`,
    ...dropIndexStatements(cotId).map((s) => sql.raw(s)),
    // a value written since the read (or a row gone or new) fails the batch: 409, nothing changed
    ...retypeUnchangedSql(cotId, f.name, source).map(
      (ok) => sql`INSERT INTO write_guard (ok) VALUES (${ok})`,
    ),
    sql`ALTER TABLE ${t} ADD COLUMN ${tmp} ${sql.raw(type)}`,
    ...fill,
    sql`ALTER TABLE ${t} DROP COLUMN ${col}`,
    sql`ALTER TABLE ${t} RENAME COLUMN ${tmp} TO ${ident(next.name)}`,
    ...fieldIndexStatements(cotId, { ...f, ...next }),
  ];
}

/** Rows `countUnconvertible` holds at once at most: one page of values, never the whole column. */
const CONVERT_PAGE = 2_000;
/** Bytes of values a page holds at most (past its first value): a JSON value may weigh 1 MB. */
const CONVERT_PAGE_BYTES = 4_000_000;

/**
 * One page of a column's non-null values after id `after`: at most `CONVERT_PAGE` rows, cut where
 * their bytes pass `CONVERT_PAGE_BYTES` (the first always comes). The sizes are summed over the
 * ids alone; `n` is the rows the page had before the cut.
 */
function convertPageSql(cotId: number, column: string, after: number): SQL {
  const t = ident(tableName(cotId));
  const col = ident(column);
  const sizes = sql`SELECT id, length(CAST(${col} AS BLOB)) AS w FROM ${t} WHERE id > ${after} AND ${col} IS NOT NULL ORDER BY id LIMIT ${CONVERT_PAGE}`;
  const page = sql`SELECT id, count(*) OVER () AS n, sum(w) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) - w AS before FROM (${sizes})`;
  return sql`SELECT p.id AS id, p.n AS n, ${t}.${col} AS v FROM (${page}) AS p JOIN ${t} ON ${t}.id = p.id WHERE p.before < ${CONVERT_PAGE_BYTES} ORDER BY p.id`;
}

/**
 * Counts non-null values of a scalar column that `convert` cannot carry to a new type: for the
 * changes only the converter tells (decision 0207). Memory stays one bounded page whatever the
 * table's size (issue 27), and the event loop gets its turns between values (a local file's
 * reads never wait, and a value may be a megabyte of JSON to parse).
 */
export async function countUnconvertible(
  db: Executor,
  cotId: number,
  f: ColumnField,
  convert: (value: unknown) => unknown,
): Promise<number> {
  let lost = 0;
  for (let after = 0; ; ) {
    const rows = (await db.all(convertPageSql(cotId, f.name, after))) as {
      id: number;
      n: number;
      v: unknown;
    }[];
    for (const r of rows) {
      await yieldWhenDue();
      const v = convert(r.v);
      if (v === undefined || v === null) lost++;
    }
    const whole = Number(rows[0]?.n ?? 0);
    if (rows.length === whole && whole < CONVERT_PAGE) return lost;
    after = Number(rows[rows.length - 1]!.id);
  }
}
