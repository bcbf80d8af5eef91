/**
 * A full-text index per custom object type for `?q=` and the `__ic`/`__isw`/`__iew` lookups:
 * an FTS5 table `co_<id>_fts` with the trigram tokenizer over the type's searchable columns,
 * external content (`co_<id>` holds the text), kept by triggers — so in the same transaction as
 * the row, whatever writes it. The index only narrows: a list asks it for candidate ids and keeps
 * its own LIKE conditions, so the answer is exactly the rows a scan returns (a trigram phrase
 * matches a superset of ASCII-case-insensitive LIKE). It is used only when its definition in
 * `sqlite_master` is exactly the one these columns give (a renamed column rewrites the triggers,
 * so a stale index is never trusted) and only for needles it covers. Decision 0050.
 */
import { and, sql, type SQL } from "drizzle-orm";
import type { Executor } from "../../db/client";
import { buildFilter, type FilterSpec, type ListSpec, type Lookup } from "../../core/rest/query";
import { fieldType, type FieldRow } from "./field-types";
import { tableName } from "./constants";

const IDENT_RE = /^[a-z0-9][a-z0-9_]{0,62}$/;
const q = (name: string) => {
  if (!IDENT_RE.test(name)) throw new Error(`refusing unsafe SQL identifier ${JSON.stringify(name)}`);
  return `"${name}"`;
};

export const ftsTableName = (cotId: number) => `${tableName(cotId)}_fts`;

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
  // Items are matched one by one; the index holds the list's JSON text, where only quotes,
  // backslashes and control characters are written differently from the item.
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
export function indexedColumns(fields: IndexField[]): string[] {
  return fields.filter((f) => Object.hasOwn(INDEXED, f.type) && fieldType(f.type).storage === "column").map((f) => f.name);
}

/** The index's schema statements for these columns (compared verbatim with `sqlite_master`). */
export function indexStatements(cotId: number, columns: string[]): { name: string; sql: string }[] {
  const t = q(tableName(cotId));
  const fts = ftsTableName(cotId);
  const cols = columns.map(q);
  const news = cols.map((c) => `new.${c}`).join(", ");
  const olds = cols.map((c) => `old.${c}`).join(", ");
  const list = cols.join(", ");
  return [
    { name: fts, sql: `CREATE VIRTUAL TABLE ${q(fts)} USING fts5(${list}, content=${t}, content_rowid='id', tokenize='trigram')` },
    { name: `${fts}_ai`, sql: `CREATE TRIGGER ${q(`${fts}_ai`)} AFTER INSERT ON ${t} BEGIN INSERT INTO ${q(fts)}(rowid, ${list}) VALUES (new.id, ${news}); END` },
    { name: `${fts}_ad`, sql: `CREATE TRIGGER ${q(`${fts}_ad`)} AFTER DELETE ON ${t} BEGIN INSERT INTO ${q(fts)}(${q(fts)}, rowid, ${list}) VALUES ('delete', old.id, ${olds}); END` },
    {
      name: `${fts}_au`,
      sql: `CREATE TRIGGER ${q(`${fts}_au`)} AFTER UPDATE OF ${list} ON ${t} BEGIN INSERT INTO ${q(fts)}(${q(fts)}, rowid, ${list}) VALUES ('delete', old.id, ${olds}); INSERT INTO ${q(fts)}(rowid, ${list}) VALUES (new.id, ${news}); END`,
    },
  ];
}

/** The index's statements as `sqlite_master` holds them (name → sql), for the model registry. */
export async function readIndexSchema(db: Executor, cotId: number): Promise<Map<string, string>> {
  const fts = ftsTableName(cotId);
  const rows = (await db.all(sql`SELECT name, sql FROM sqlite_master WHERE name IN (${fts}, ${`${fts}_ai`}, ${`${fts}_ad`}, ${`${fts}_au`})`)) as { name: string; sql: string }[];
  return new Map(rows.map((r) => [r.name, r.sql]));
}

/** Whether the stored index is exactly the one `columns` give. */
export function indexMatches(stored: Map<string, string>, cotId: number, columns: string[]): boolean {
  return columns.length > 0 && indexStatements(cotId, columns).every((s) => stored.get(s.name) === s.sql);
}

/** Drops the index and its triggers (before column DDL: a renamed or dropped column invalidates it). */
export async function dropSearchIndex(db: Executor, cotId: number): Promise<void> {
  const fts = ftsTableName(cotId);
  for (const suffix of ["_ai", "_ad", "_au"]) await db.run(sql.raw(`DROP TRIGGER IF EXISTS ${q(fts + suffix)}`));
  await db.run(sql.raw(`DROP TABLE IF EXISTS ${q(fts)}`));
}

/**
 * Makes the index match the type's current fields (read in the caller's transaction): nothing
 * when it already does, else drop, create and rebuild from the rows. Columns the table does not
 * have (yet) are left out.
 */
export async function syncSearchIndex(db: Executor, cotId: number): Promise<void> {
  const t = tableName(cotId);
  const present = new Set(((await db.all(sql`SELECT name FROM pragma_table_info(${t})`)) as { name: string }[]).map((r) => r.name));
  if (!present.size) return;
  const fields = (await db.all(sql`SELECT name, type FROM custom_object_type_fields WHERE custom_object_type_id = ${cotId} ORDER BY id`)) as IndexField[];
  const columns = indexedColumns(fields).filter((c) => present.has(c));
  const stored = await readIndexSchema(db, cotId);
  if (indexMatches(stored, cotId, columns)) return;
  if (stored.size) await dropSearchIndex(db, cotId);
  if (!columns.length) return;
  for (const s of indexStatements(cotId, columns)) await db.run(sql.raw(s.sql));
  const fts = q(ftsTableName(cotId));
  await db.run(sql.raw(`INSERT INTO ${fts}(${fts}) VALUES ('rebuild')`));
}

const phrase = (needle: string) => `"${needle.replace(/"/g, '""')}"`;
/** A trigram phrase needs three characters; shorter needles are not narrowed. */
const longEnough = (needle: string) => [...needle].length >= 3;

function candidates(cotId: number, idExpr: ListSpec["idExpr"], columns: string[], needles: string[]): SQL {
  const set = `{${columns.map(q).join(" ")}}`;
  const match = needles.map((n) => `${set} : ${phrase(n)}`).join(" OR ");
  return sql`${idExpr} IN (SELECT rowid FROM ${sql.raw(q(ftsTableName(cotId)))} WHERE ${sql.raw(q(ftsTableName(cotId)))} MATCH ${match})`;
}

/**
 * A list spec that narrows `q` and the text lookups through the index, when the stored index
 * (`stored`, from `readIndexSchema`) is the one these fields give; else `spec` as it is.
 */
export function withSearchIndex(spec: ListSpec, cotId: number, fields: Array<FieldRow>, stored: Map<string, string>): ListSpec {
  const columns = indexedColumns(fields);
  if (!indexMatches(stored, cotId, columns)) return spec;
  const indexed = new Set(columns);
  const searched = fields.filter((f) => f.filterLogic !== "disabled" && f.searchWeight > 0 && fieldType(f.type).searchable);
  const searchIndex = (needle: string): SQL | undefined => {
    if (!searched.length || !longEnough(needle)) return undefined;
    const through: string[] = [];
    for (const f of searched) {
      if (indexed.has(f.name) && INDEXED[f.type]!(needle)) through.push(f.name);
      else if (!(Object.hasOwn(NEVER_MATCHES, f.type) && NEVER_MATCHES[f.type]!.test(needle))) return undefined;
    }
    return through.length ? candidates(cotId, spec.idExpr, through, [needle]) : sql`0`;
  };
  const filters: Record<string, FilterSpec> = { ...spec.filters };
  for (const f of fields) {
    const filter = Object.hasOwn(filters, f.name) ? filters[f.name] : undefined;
    if (!filter || filter.build || filter.kind !== "string" || !LOOKUP_TYPES.has(f.type) || !indexed.has(f.name)) continue;
    filters[f.name] = {
      ...filter,
      build: (lookup, values) => {
        const exact = buildFilter(f.name, { ...filter, build: undefined }, lookup, values);
        if (!NARROWED.has(lookup) || !exact || !values.length || !values.every(longEnough)) return exact;
        return and(candidates(cotId, spec.idExpr, [f.name], values), exact);
      },
    };
  }
  return { ...spec, filters, searchIndex };
}

