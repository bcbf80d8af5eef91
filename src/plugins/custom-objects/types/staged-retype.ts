/**
 * A field's type change as a read and statements for one batch (decisions 0121, 0135), shared by
 * REST (`staged-fields.ts`) and the schema apply (`schema/apply-staged.ts`, decision 0126): a
 * change SQLite carries exactly is converted in the batch from the old column; any other has the
 * column's values read, converted here as `retypeFieldStorage` converts them, and carried into
 * the batch as bound JSON lists of `[id, value]` pairs behind guards that they are unchanged.
 */
import { sql, type SQL } from "drizzle-orm";
import { transactionOr, type Database, type Orm } from "../../../db/client";
import type { WriteContext } from "../../../core/context";
import { ApiError } from "../../../core/errors";
import { ReadPhase } from "../../../core/rest/write-batch";
import {
  fieldColumns,
  hasLinkTable,
  ident,
  retypeFieldStatements,
  retypeUnchangedSql,
  type RetypeSource,
  tableName,
} from "../ddl";
import { isLossless, retypeConverter, type FieldRow } from "../objects/values";
import { encodedDefault } from "../schema/operations";
import {
  checkViolationsSql,
  partialDuplicatesSql,
  type Check,
  type Conditional,
  type PartialKey,
} from "../schema/constraints";
import { duplicatesCountSql } from "../schema/impact";
import { IN_DATABASE, lostCountSql, sqlConversion } from "./retype-sql";

/**
 * What a read of values may weigh at most: each value's bytes and 24 for its id and JSON. The
 * values, their JSON and the converted ones stay well inside a Worker's 128 MB, and the read
 * inside D1's 50 MB result (decision 0135).
 */
const RETYPE_MAX_BYTES = 8_000_000;
/* the 409's text says "8 MB": keep them together */
/** Pairs per bound JSON value, and characters: D1 binds a value of at most 2 MB. */
const RETYPE_CHUNK = 5_000;
const RETYPE_CHUNK_CHARS = 500_000;

type RetypeValues = Array<{ id: number; v: unknown }>;

/** A retype's read: values SQLite converts (`sql`), the values read, or too many to read. */
export type RetypeRead =
  | { kind: "sql"; count: 0; bytes: 0; lost: number }
  | { kind: "values"; values: RetypeValues; count: number; bytes: number }
  | { kind: "over"; count: number; bytes: number };

/**
 * The read a retype takes, added to `phase`: nothing when SQLite converts the values; else the
 * column's size and its non-null values in id order (none when over `RETYPE_MAX_BYTES`).
 */
export function retypeReads(
  orm: Orm,
  phase: ReadPhase,
  cotId: number,
  field: FieldRow,
  type: string,
): () => RetypeRead {
  const expr = sqlConversion(field.type, type);
  if (expr && isLossless(field.type, type))
    return () => ({ kind: "sql", count: 0, bytes: 0, lost: 0 });
  if (expr) {
    const count = lostCountSql(cotId, field, type)!;
    const lost = phase.add(orm.all<{ n: number }>(sql`SELECT ${count} AS n`));
    return () => ({ kind: "sql", count: 0, bytes: 0, lost: Number(lost()[0]?.n ?? 0) });
  }
  const t = ident(tableName(cotId));
  const column = ident(field.name);
  const weight = sql`(SELECT coalesce(sum(length(CAST(${column} AS BLOB))), 0) + 24 * count(*) FROM ${t} WHERE ${column} IS NOT NULL)`;
  const size = phase.add(
    orm.all<{ n: number; bytes: number }>(
      sql`SELECT count(*) AS n, ${weight} AS bytes FROM ${t} WHERE ${column} IS NOT NULL`,
    ),
  );
  const values = phase.add(
    orm.all<{ id: number; v: unknown }>(
      sql`SELECT id, ${column} AS v FROM ${t} WHERE ${column} IS NOT NULL AND ${weight} <= ${RETYPE_MAX_BYTES} ORDER BY id`,
    ),
  );
  return () => {
    const [s] = size();
    const [count, bytes] = [Number(s?.n ?? 0), Number(s?.bytes ?? 0)];
    if (bytes > RETYPE_MAX_BYTES) return { kind: "over", count, bytes };
    return { kind: "values", values: values(), count, bytes };
  };
}

/**
 * Retypes whose values weigh more than one batch carries (each alone, or together in one apply):
 * the transaction takes them where there is one; D1 has none, and answers 409
 * `retype_too_large` (decisions 0135, 0198) rather than 501, stating the bound (a constant) and
 * the way around it: the changes SQLite converts itself carry no values and have no bound. The
 * values are every object's, some maybe hidden from the caller: the answer tells neither their
 * number nor their size (0173).
 */
export function overBound(
  db: Pick<Database, "needTransaction">,
  fields: FieldRow[],
): "transaction" {
  return transactionOr(db, () => {
    const names = fields.map((f) => `"${f.name}"`).join(", ");
    return ApiError.detail(
      409,
      `Changing the type of ${names} converts its values outside the database, and one write on this database carries at most 8 MB of such values (together, in one schema apply). Change the type in steps the database converts itself, which have no size limit (${IN_DATABASE}), apply one field's change at a time, or clear some values first.`,
      "retype_too_large",
    );
  });
}

/**
 * The retypes of one batch taken together (`overBound` when they weigh more than it carries),
 * or null: each is read and weighed alone (`retypeReads`), an apply's add up.
 */
export function overTogether(retypes: Array<{ row: FieldRow; read: RetypeRead }>) {
  const read = retypes.reduce(
    (sum, r) => ({ count: sum.count + r.read.count, bytes: sum.bytes + r.read.bytes }),
    { count: 0, bytes: 0 },
  );
  return read.bytes > RETYPE_MAX_BYTES ? { fields: retypes.map((r) => r.row), read } : null;
}

/** Values of `read` the change cannot carry (0 for a lossless change, as `countLossy`). */
export function lostValues(field: FieldRow, type: string, read: RetypeRead): number {
  if (read.kind === "sql") return read.lost;
  if (read.kind !== "values" || isLossless(field.type, type)) return 0;
  const convert = retypeConverter(field.type, type);
  return read.values.filter((r) => {
    const value = convert(r.v);
    return value === undefined || value === null;
  }).length;
}

/** JSON chunks of `list`, each at most `RETYPE_CHUNK` items and about `RETYPE_CHUNK_CHARS`. */
function chunks(list: unknown[]): string[] {
  const out: string[] = [];
  let part: string[] = [];
  let chars = 0;
  for (const item of list) {
    const text = JSON.stringify(item);
    if (part.length && (part.length >= RETYPE_CHUNK || chars + text.length > RETYPE_CHUNK_CHARS)) {
      out.push(`[${part.join(",")}]`);
      [part, chars] = [[], 0];
    }
    part.push(text);
    chars += text.length + 1;
  }
  if (part.length) out.push(`[${part.join(",")}]`);
  return out;
}

/**
 * Where the batch takes the new values from: SQLite's conversion, or the values read converted
 * (a value lost left null: the caller gated it), the read ones guarded and the converted carried.
 */
export function retypeSource(field: FieldRow, type: string, read: RetypeRead): RetypeSource {
  const expr = sqlConversion(field.type, type);
  // a lossy one guarded on the count read: a value lost since the read fails the batch (409)
  if (expr)
    return isLossless(field.type, type) ? { expr } : { expr, lost: lostValues(field, type, read) };
  if (read.kind !== "values") throw new Error("a retype's values were not read");
  const convert = retypeConverter(field.type, type);
  const written: Array<[number, unknown]> = [];
  for (const r of read.values) {
    const value = convert(r.v);
    if (value !== undefined && value !== null) written.push([Number(r.id), value]);
  }
  return {
    count: read.values.length,
    read: chunks(read.values.map((r) => [Number(r.id), r.v])),
    written: chunks(written),
  };
}

/** The retype's statements (`retypeFieldStatements`) from its source. */
export const retypeStatements = (
  cotId: number,
  field: FieldRow,
  draft: { name: string; type: string; unique: boolean },
  source: RetypeSource,
): SQL[] => retypeFieldStatements(cotId, field, draft, source);

/** A retype in a batch: the field as it was, and where its new values come from. */
export interface Retyped {
  row: FieldRow;
  source: RetypeSource;
}

type Column = [value: SQL, name: string];

/**
 * The columns of `after` (the fields as the batch leaves them) read from the table as it is:
 * a kept field's columns under their new names, an added field's default (as its storage fills
 * it) or null; no link tables.
 */
function keptColumns(t: SQL, before: FieldRow[], after: FieldRow[]): Column[] {
  return after
    .filter((f) => !hasLinkTable(f))
    .flatMap((f) => {
      const had = before.find((b) => b.id === f.id);
      const names = fieldColumns(f);
      if (had) return fieldColumns(had).map((c, i): Column => [sql`${t}.${ident(c)}`, names[i]!]);
      const fill = encodedDefault(f);
      return names.map((n, i): Column => [i || fill == null ? sql`NULL` : sql`${fill}`, n]);
    });
}

/** A retype whose values were read: its converted ones ride as bound JSON chunks. */
type ReadRetype = Retyped & { source: Extract<RetypeSource, { written: string[] }> };

/**
 * The type's table as the retypes leave it, for counts over it (`AS` the table's name, so
 * conditions read it as they read the table): each retyped column under its new name holding the
 * converted values, the other fields' columns as `keptColumns` reads them. Values SQLite converts
 * are converted in the select; the lists of values read are one table of converted values by id
 * (`converted`, each list a column, its chunks rows of one VALUES), which drives the join (rows
 * looked up by id); rows without a converted value hold null. Flat whatever the retypes: nesting
 * a level per list doubled the statement each time (SQLite's parser overflowed at six). A join
 * led by the table would scan the pairs for every row (minutes at 40,000 rows).
 */
function retypedTable(
  cotId: number,
  retypes: Retyped[],
  fields: { before: FieldRow[]; after: FieldRow[] },
): SQL {
  const t = ident(tableName(cotId));
  const nameOf = (r: Retyped) => ident(fields.after.find((f) => f.id === r.row.id)!.name);
  const retyped = new Set(retypes.map((r) => r.row.id));
  const columns: SQL[] = [
    sql`${t}.id`,
    ...keptColumns(
      t,
      fields.before,
      fields.after.filter((f) => !retyped.has(f.id)),
    ).map(([value, name]) => sql`${value} AS ${ident(name)}`),
    ...retypes.flatMap((r) =>
      "expr" in r.source
        ? [sql`${r.source.expr(sql`${t}.${ident(r.row.name)}`)} AS ${nameOf(r)}`]
        : [],
    ),
  ];
  const read = retypes.filter((r): r is ReadRetype => !("expr" in r.source));
  if (!read.length) return sql`(SELECT ${sql.join(columns, sql`, `)} FROM ${t})`;
  // each chunk a row of VALUES (exempt from D1's five terms of a compound SELECT), read by
  // json_each
  const chunks = read.flatMap((r, k) =>
    r.source.written.map((c) => sql`(${sql.raw(String(k))}, ${c})`),
  );
  const pairs = chunks.length
    ? sql`SELECT c.column1 AS k, json_extract(j.value, '$[0]') AS id, json_extract(j.value, '$[1]') AS v FROM (VALUES ${sql.join(chunks, sql`, `)}) AS c, json_each(c.column2) AS j`
    : sql`SELECT NULL AS k, NULL AS id, NULL AS v WHERE 0`;
  const picks = read.map((_, k) => sql.raw(`max(CASE WHEN k = ${k} THEN v END) AS v${k}`));
  const converted = sql`(SELECT id, ${sql.join(picks, sql`, `)} FROM (${pairs}) GROUP BY id)`;
  const without = [...columns, ...read.map((r) => sql`NULL AS ${nameOf(r)}`)];
  const withValues = [
    ...columns,
    ...read.map((r, k) => sql`p.${sql.raw(`v${k}`)} AS ${nameOf(r)}`),
  ];
  return sql`(SELECT ${sql.join(without, sql`, `)} FROM ${t} WHERE ${t}.id NOT IN (SELECT id FROM ${converted}) UNION ALL SELECT ${sql.join(withValues, sql`, `)} FROM ${converted} AS p CROSS JOIN ${t} ON ${t}.id = p.id)`;
}

/** Whether the columns still hold what the retypes read, as one SQL condition (true: no race). */
function unchangedSql(cotId: number, retypes: Retyped[]): SQL {
  const all = retypes.flatMap((r) => retypeUnchangedSql(cotId, r.row.name, r.source));
  return all.length ? sql.join(all, sql` AND `) : sql`1`;
}

/** The keys and checks a batch builds again over its converted columns, as they will stand. */
export interface RetypedKeys {
  together: string[][];
  conditional: Conditional;
  /** Compound keys counted before partial keys and checks, as an apply builds them. */
  togetherFirst?: boolean;
}

/** Why a batch with retypes failed, read over the values it would have left (`retypeRefusal`). */
export type RetypeRefusal =
  | { kind: "race" }
  | { kind: "unique"; field: FieldRow; rows: number }
  | { kind: "partial"; key: PartialKey; rows: number }
  | { kind: "check"; check: Check; rows: number }
  | { kind: "together"; set: string[]; rows: number };

/**
 * After a batch with retypes failed building keys or checks: one read over the table as the
 * batch would have left it (`retypedTable`) — whether the values read are still there (else a
 * race), then each retyped field's own duplicates (when it is unique after), the partial keys',
 * the checks' and the compound keys' counts, in the order the transaction builds them (REST's;
 * an apply's builds compound keys first). Null when none breaks: the failure was another.
 * `fields`: the type's fields before and after the batch.
 */
export async function retypeRefusal(
  ctx: Pick<WriteContext, "services" | "readPhase">,
  cotId: number,
  retypes: Retyped[],
  fields: { before: FieldRow[]; after: FieldRow[] },
  keys: RetypedKeys,
): Promise<RetypeRefusal | null> {
  const phase = new ReadPhase();
  const refusal = retypeRefusalReads(ctx.services.db.orm, phase, cotId, retypes, fields, keys);
  await phase.run(ctx);
  return refusal();
}

/**
 * `retypeRefusal`'s read added to `phase` (several share one round trip), answered once it ran.
 * `earlier`: retypes of the type the batch made before these (a list's earlier items, decision
 * 0142): their values converted in the table, their own keys not counted.
 */
export function retypeRefusalReads(
  orm: Orm,
  phase: ReadPhase,
  cotId: number,
  retypes: Retyped[],
  fields: { before: FieldRow[]; after: FieldRow[] },
  keys: RetypedKeys,
  earlier: Retyped[] = [],
): () => RetypeRefusal | null {
  const after = fields.after;
  const all = [...earlier, ...retypes];
  const from = sql`${retypedTable(cotId, all, fields)} AS ${ident(tableName(cotId))}`;
  const column = (name: string) => fieldColumns(after.find((f) => f.name === name)!)[0]!;
  const uniques = retypes
    .map((r) => after.find((f) => f.id === r.row.id)!)
    .filter((f) => f.unique)
    .map((field): [RetypeRefusal, SQL | null] => [
      { kind: "unique", field, rows: 0 },
      duplicatesCountSql(cotId, [field.name], undefined, from),
    ]);
  const conditional = [
    ...keys.conditional.unique.map((key): [RetypeRefusal, SQL | null] => [
      { kind: "partial", key, rows: 0 },
      partialDuplicatesSql(cotId, after, key, from),
    ]),
    ...keys.conditional.checks.map((check): [RetypeRefusal, SQL | null] => [
      { kind: "check", check, rows: 0 },
      checkViolationsSql(cotId, after, check, from),
    ]),
  ];
  const together = keys.together.map((set): [RetypeRefusal, SQL | null] => [
    { kind: "together", set, rows: 0 },
    duplicatesCountSql(cotId, set.map(column), undefined, from),
  ]);
  const counts = keys.togetherFirst
    ? [...uniques, ...together, ...conditional]
    : [...uniques, ...conditional, ...together];
  const same = phase.add(orm.all<{ n: number }>(sql`SELECT ${unchangedSql(cotId, all)} AS n`));
  // one statement each: every one binds the converted values' chunks
  const reads = counts.map(([, q]) =>
    q ? phase.add(orm.all<{ n: number }>(sql`SELECT ${q} AS n`)) : null,
  );
  return () => {
    if (!Number(same()[0]?.n)) return { kind: "race" };
    for (const [i, [refusal]] of counts.entries()) {
      const rows = Number(reads[i]?.()[0]?.n ?? 0);
      if (rows && refusal.kind !== "race") return { ...refusal, rows };
    }
    return null;
  };
}
