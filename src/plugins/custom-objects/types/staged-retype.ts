/**
 * A field's type change as a read and statements for one batch (decisions 0121, 0135), shared by
 * REST (`staged-fields.ts`) and the schema apply (`schema/apply-staged.ts`, decision 0126): a
 * change SQLite carries exactly is converted in the batch from the old column; any other has the
 * column's values read, converted here as `retypeFieldStorage` converts them, and carried into
 * the batch as bound JSON lists of `[id, value]` pairs behind guards that they are unchanged.
 */
import { sql, type SQL } from "drizzle-orm";
import type { Database, Orm } from "../../../db/client";
import type { WriteContext } from "../../../core/context";
import { ApiError } from "../../../core/errors";
import { ReadPhase } from "../../../core/rest/write-batch";
import {
  fieldColumns,
  hasLinkTable,
  ident,
  retypeFieldStatements,
  retypePairs,
  retypeUnchangedSql,
  type RetypeSource,
  tableName,
} from "../ddl";
import { isLossless, retypeConverter, type FieldRow } from "../objects/values";
import {
  checkViolationsSql,
  partialDuplicatesSql,
  type Check,
  type Conditional,
  type PartialKey,
} from "../schema/constraints";
import { duplicatesCountSql } from "../schema/impact";

/**
 * What a read of values may weigh at most: each value's bytes and 24 for its id and JSON. The
 * values, their JSON and the converted ones stay well inside a Worker's 128 MB, and the read
 * inside D1's 50 MB result (decision 0135).
 */
const RETYPE_MAX_BYTES = 8_000_000;
/** Pairs per bound JSON value, and characters: D1 binds a value of at most 2 MB. */
const RETYPE_CHUNK = 5_000;
const RETYPE_CHUNK_CHARS = 500_000;

type RetypeValues = Array<{ id: number; v: unknown }>;

/** A retype's read: values SQLite converts (`sql`), the values read, or too many to read. */
export type RetypeRead =
  | { kind: "sql" }
  | { kind: "values"; values: RetypeValues }
  | { kind: "over"; count: number; bytes: number };

const asText = (col: SQL) => sql`CAST(${col} AS TEXT)`;
/**
 * Changes SQLite makes exactly as `retypeConverter` does (lossless ones: nothing is counted):
 * text-like values kept as they are, integers written out, booleans as "true"/"false",
 * integers as reals. `tests/custom-objects/retype-sql.test.ts` holds each to the converter.
 */
const SQL_CONVERSIONS: Record<string, Record<string, (col: SQL) => SQL>> = {
  text: { longtext: asText },
  longtext: { text: asText },
  select: { text: asText, longtext: asText },
  date: { text: asText, longtext: asText },
  datetime: { text: asText, longtext: asText },
  integer: { text: asText, longtext: asText, decimal: (col) => sql`CAST(${col} AS REAL)` },
  boolean: {
    text: (col) => sql`CASE WHEN ${col} = 1 THEN 'true' ELSE 'false' END`,
    longtext: (col) => sql`CASE WHEN ${col} = 1 THEN 'true' ELSE 'false' END`,
  },
};

/** The SQL form of a change from `from` to `to`, when SQLite converts it exactly. */
export const sqlConversion = (from: string, to: string) =>
  isLossless(from, to) ? SQL_CONVERSIONS[from]?.[to] : undefined;

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
  if (sqlConversion(field.type, type)) return () => ({ kind: "sql" });
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
    return { kind: "values", values: values() };
  };
}

/**
 * A retype whose values weigh more than one batch carries: the transaction takes it where there
 * is one; D1 has none, and answers 409 `retype_too_large` (decision 0135) rather than 501.
 */
export function overBound(
  db: Pick<Database, "kind">,
  field: FieldRow,
  read: { count: number; bytes: number },
): "transaction" {
  if (db.kind !== "d1") return "transaction";
  throw ApiError.detail(
    409,
    `Changing the type of "${field.name}" converts ${read.count} value(s) of ${read.bytes} bytes, more than one write carries on this database (${RETYPE_MAX_BYTES} bytes); clear some values first, or change it through a field with its own values.`,
    "retype_too_large",
  );
}

/** Whether a retype can be staged: the field's one column stays one column. */
export const retypeStageable = (field: FieldRow, draft: { type: string }): boolean =>
  fieldColumns(field).length === 1 && fieldColumns({ ...field, type: draft.type }).length === 1;

/** Values of `read` the change cannot carry (0 for a lossless change, as `countLossy`). */
export function lostValues(field: FieldRow, type: string, read: RetypeRead): number {
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
  if (expr) return { expr };
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

/**
 * The type's table as the retype leaves it, for counts over it (`AS` the table's name, so
 * conditions read it as they read the table): the field's column under its new name holding the
 * converted values, the other columns as they are. `columns`: the table's other columns.
 */
function retypedTable(
  cotId: number,
  field: FieldRow,
  name: string,
  columns: string[],
  source: RetypeSource,
): SQL {
  const t = ident(tableName(cotId));
  const kept = sql.join(
    ["id", ...columns].map((c) => sql`${t}.${ident(c)}`),
    sql`, `,
  );
  if ("expr" in source)
    return sql`(SELECT ${kept}, ${source.expr(ident(field.name))} AS ${ident(name)} FROM ${t})`;
  const pairs = source.written.length
    ? sql.join(
        source.written.map((c) => sql`SELECT id, v FROM ${retypePairs(c)}`),
        sql` UNION ALL `,
      )
    : sql`SELECT NULL AS id, NULL AS v WHERE 0`;
  // the pairs drive the join (looked up by rowid); rows without a converted value hold null
  return sql`(SELECT ${kept}, NULL AS ${ident(name)} FROM ${t} WHERE id NOT IN (SELECT id FROM (${pairs})) UNION ALL SELECT ${kept}, j.v FROM (${pairs}) AS j CROSS JOIN ${t} ON ${t}.id = j.id)`;
}

/** Whether the column still holds what the retype read, as one SQL condition (true: no race). */
function unchangedSql(cotId: number, field: FieldRow, source: RetypeSource): SQL {
  const all = retypeUnchangedSql(cotId, field.name, source);
  return all.length ? sql.join(all, sql` AND `) : sql`1`;
}

/** The keys and checks a retype builds again over its converted column, as they will stand. */
export interface RetypedKeys {
  /** The field's own `unique`, after. */
  unique: boolean;
  together: string[][];
  conditional: Conditional;
}

/** Why a retype's batch failed, read over the values it would have left (`retypeRefusal`). */
export type RetypeRefusal =
  | { kind: "race" | "unique"; rows?: number }
  | { kind: "partial"; key: PartialKey; rows: number }
  | { kind: "check"; check: Check; rows: number }
  | { kind: "together"; set: string[]; rows: number };

/**
 * After a retype's batch failed building keys or checks: one read over the table as the batch
 * would have left it (`retypedTable`) — whether the values read are still there (else a race),
 * then the field's own duplicates, the partial keys', the checks' and the compound keys' counts,
 * in the order the transaction builds them. Null when none breaks: the failure was another.
 */
export async function retypeRefusal(
  ctx: Pick<WriteContext, "services" | "readPhase">,
  cotId: number,
  field: FieldRow,
  fieldsAfter: FieldRow[],
  keys: RetypedKeys,
  source: RetypeSource,
): Promise<RetypeRefusal | null> {
  const orm = ctx.services.db.orm;
  const after = fieldsAfter.find((f) => f.id === field.id)!;
  const others = fieldsAfter
    .filter((f) => f.id !== field.id && !hasLinkTable(f))
    .flatMap((f) => fieldColumns(f));
  const from = sql`${retypedTable(cotId, field, after.name, others, source)} AS ${ident(tableName(cotId))}`;
  const column = (name: string) => fieldColumns(fieldsAfter.find((f) => f.name === name)!)[0]!;
  const counts: Array<[RetypeRefusal, SQL | null]> = [
    [
      { kind: "unique" },
      keys.unique ? duplicatesCountSql(cotId, [after.name], undefined, from) : null,
    ],
    ...keys.conditional.unique.map((key): [RetypeRefusal, SQL | null] => [
      { kind: "partial", key, rows: 0 },
      partialDuplicatesSql(cotId, fieldsAfter, key, from),
    ]),
    ...keys.conditional.checks.map((check): [RetypeRefusal, SQL | null] => [
      { kind: "check", check, rows: 0 },
      checkViolationsSql(cotId, fieldsAfter, check, from),
    ]),
    ...keys.together.map((set): [RetypeRefusal, SQL | null] => [
      { kind: "together", set, rows: 0 },
      duplicatesCountSql(cotId, set.map(column), undefined, from),
    ]),
  ];
  const phase = new ReadPhase();
  const same = phase.add(
    orm.all<{ n: number }>(sql`SELECT ${unchangedSql(cotId, field, source)} AS n`),
  );
  // one statement each: every one binds the converted values' chunks
  const reads = counts.map(([, q]) =>
    q ? phase.add(orm.all<{ n: number }>(sql`SELECT ${q} AS n`)) : null,
  );
  await phase.run(ctx);
  if (!Number(same()[0]?.n)) return { kind: "race" };
  for (const [i, [refusal]] of counts.entries()) {
    const rows = Number(reads[i]?.()[0]?.n ?? 0);
    if (rows) return { ...refusal, rows };
  }
  return null;
}
