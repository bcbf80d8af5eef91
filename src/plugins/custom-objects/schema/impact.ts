/**
 * Impact of a schema change on live rows (decision 0044): each change that can lose or reject
 * data is counted against the type's table, so preview shows it and apply gates it (409
 * `destructive_changes`) like a removal. Read-only; every identifier goes through `ident`.
 */
import { sql, type SQL } from "drizzle-orm";
import type { Executor } from "../../../db/client";
import {
  countUnconvertible,
  fieldColumns,
  hasLinkTable,
  ident,
  linkTableName,
  tableName,
  valueColumn,
} from "../ddl";
import { fieldType } from "../field-types";
import { isLossless, retypeConverter, type FieldRow } from "../objects/values";
import { lostCountSql } from "../types/retype-sql";

type ImpactReason =
  | "field_removed"
  | "type_removed"
  | "lossy_type_change"
  | "required_over_empty_rows"
  | "unique_over_duplicates"
  | "check_over_violations"
  | "choices_in_use"
  | "link_target_changed";

/**
 * One gated change: which type and field, why, and how many rows it concerns (null where the
 * caller may not view every object of the type: the count is withheld, decision 0181).
 */
export interface DestructiveChange {
  slug: string;
  field: string | null;
  reason: ImpactReason;
  rows: number | null;
  detail: string;
}

/**
 * Records a change that loses or rejects data on live rows (gated in apply, counted over every
 * row: it guards data the caller may not view too). `detail` words it around its count, which
 * reads "some" where the count is withheld; answers those words (a warning repeats them).
 */
export type Gate = (
  field: string | null,
  reason: ImpactReason,
  rows: number,
  detail: (count: string) => string,
) => string;

/** A gated change of type `slug`, its count withheld when `withheld` says so (decision 0181). */
export function gated(
  slug: string,
  withheld: boolean,
  change: { field: string | null; reason: ImpactReason; rows: number },
  detail: (count: string) => string,
): DestructiveChange {
  const rows = withheld ? null : change.rows;
  return { slug, ...change, rows, detail: detail(rows === null ? "some" : String(rows)) };
}

/**
 * How a refusal over existing rows (a key or check they break) names them: counted, or, where
 * the count is withheld from the caller, without a number (decision 0183, as 0181).
 */
export const existingRows = (rows: number, withheld: boolean) =>
  withheld ? "Existing rows" : `${rows} existing row(s)`;

const count = async (db: Executor, q: SQL): Promise<number> => {
  const [r] = (await db.all(q)) as { n: number }[];
  return Number(r?.n ?? 0);
};

/** Rows of the type's table, as a scalar subquery (a trash entry counts them in its batch). */
export const rowsCountSql = (cotId: number): SQL =>
  sql`(SELECT count(*) FROM ${ident(tableName(cotId))})`;

/** Rows of the type's table. */
export const countRows = (db: Executor, cotId: number) => countScalar(db, rowsCountSql(cotId));

/**
 * Rows holding a value for the field (link rows for a multiobject field); a row with only a
 * companion set (a url's title without the URL) holds one too. A scalar subquery.
 */
export function valuesCountSql(cotId: number, f: FieldRow): SQL {
  if (hasLinkTable(f))
    return sql`(SELECT count(DISTINCT source_id) FROM ${ident(linkTableName(cotId, f.id))})`;
  const held =
    fieldType(f.type).storage === "column"
      ? sql.join(
          fieldColumns(f).map((c) => sql`${ident(c)} IS NOT NULL`),
          sql` OR `,
        )
      : sql`${ident(valueColumn(f)!)} IS NOT NULL`;
  return sql`(SELECT count(*) FROM ${ident(tableName(cotId))} WHERE ${held})`;
}

/** `valuesCountSql`, read. */
export const countValues = (db: Executor, cotId: number, f: FieldRow): Promise<number> =>
  countScalar(db, valuesCountSql(cotId, f));

/** Rows where the field is empty (null, or no links). */
export async function countEmpty(db: Executor, cotId: number, f: FieldRow): Promise<number> {
  const t = ident(tableName(cotId));
  if (hasLinkTable(f))
    return count(
      db,
      sql`SELECT count(*) AS n FROM ${t} WHERE id NOT IN (SELECT source_id FROM ${ident(linkTableName(cotId, f.id))})`,
    );
  return count(db, sql`SELECT count(*) AS n FROM ${t} WHERE ${ident(valueColumn(f)!)} IS NULL`);
}

/** Rows whose (non-null) value some other row shares: what a unique index would refuse. */
export const countDuplicates = (
  db: Executor,
  cotId: number,
  columns: string[],
  /** A partial key's condition (decision 0087): only the rows it admits count. */
  where?: SQL,
): Promise<number> =>
  columns.length ? countScalar(db, duplicatesCountSql(cotId, columns, where)) : Promise.resolve(0);

/**
 * `countDuplicates` as a scalar subquery (a batched apply reads it ahead, decision 0126); `from`
 * stands for the table (a retype's converted one, decision 0135).
 */
export function duplicatesCountSql(
  cotId: number,
  columns: string[],
  where?: SQL,
  from: SQL = ident(tableName(cotId)),
): SQL {
  const t = from;
  // no column varies (a key over fields that every row fills alike): all rows share its values
  if (!columns.length)
    return sql`(SELECT CASE WHEN count(*) > 1 THEN count(*) ELSE 0 END FROM ${t}${where ? sql` WHERE ${where}` : sql``})`;
  const cols = sql.join(
    columns.map((c) => ident(c)),
    sql`, `,
  );
  const notNull = sql.join(
    [...columns.map((c) => sql`${ident(c)} IS NOT NULL`), ...(where ? [sql`(${where})`] : [])],
    sql` AND `,
  );
  return sql`(SELECT coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM ${t} WHERE ${notNull} GROUP BY ${cols} HAVING count(*) > 1))`;
}

/** A scalar count subquery, read. */
export const countScalar = (db: Executor, q: SQL): Promise<number> =>
  count(db, sql`SELECT ${q} AS n`);

/** Rows of a choice field holding a value outside `allowed`. */
export async function countOutsideChoices(
  db: Executor,
  cotId: number,
  f: FieldRow,
  allowed: string[],
): Promise<number> {
  const t = ident(tableName(cotId));
  const col = ident(valueColumn(f)!);
  const list = allowed.length
    ? sql.join(
        allowed.map((a) => sql`${a}`),
        sql`, `,
      )
    : sql`NULL`;
  if (f.type === "multiselect") {
    return count(
      db,
      sql`SELECT count(*) AS n FROM ${t} WHERE ${col} IS NOT NULL AND EXISTS (SELECT 1 FROM json_each(${col}) je WHERE je.value NOT IN (${list}))`,
    );
  }
  return count(
    db,
    sql`SELECT count(*) AS n FROM ${t} WHERE ${col} IS NOT NULL AND ${col} NOT IN (${list})`,
  );
}

/**
 * Rows linking to an object type outside `keep` (object type ids): every linked row for a
 * plain reference whose target changed, those of dropped types for a polymorphic one.
 */
export function countLinksOutside(
  db: Executor,
  cotId: number,
  f: FieldRow,
  keep: number[] | null,
): Promise<number> {
  return count(db, linksOutsideCountSql(cotId, f, keep));
}

const keepListOf = (keep: number[] | null) =>
  keep?.length
    ? sql.join(
        keep.map((k) => sql`${k}`),
        sql`, `,
      )
    : null;

/** `countLinksOutside`'s count as one statement (`n`), for a read phase or a batch's guard. */
export function linksOutsideCountSql(cotId: number, f: FieldRow, keep: number[] | null): SQL {
  const keepList = keepListOf(keep);
  if (hasLinkTable(f)) {
    const lt = ident(linkTableName(cotId, f.id));
    if (!f.isPolymorphic || !keepList) return sql`SELECT count(DISTINCT source_id) AS n FROM ${lt}`;
    return sql`SELECT count(DISTINCT source_id) AS n FROM ${lt} WHERE target_type IS NULL OR target_type NOT IN (${keepList})`;
  }
  const [idCol, typeCol] = fieldColumns(f);
  const t = ident(tableName(cotId));
  if (!f.isPolymorphic || !keepList || !typeCol)
    return sql`SELECT count(*) AS n FROM ${t} WHERE ${ident(idCol!)} IS NOT NULL`;
  return sql`SELECT count(*) AS n FROM ${t} WHERE ${ident(idCol!)} IS NOT NULL AND (${ident(typeCol)} IS NULL OR ${ident(typeCol)} NOT IN (${keepList}))`;
}

/**
 * Values a type change cannot convert (0 for a lossless change): one statement wherever SQLite
 * tells the converter's loss exactly (`lostCountSql`, decision 0207), else the converter's count
 * over the values a bounded page at a time.
 */
export async function countLossy(
  db: Executor,
  cotId: number,
  f: FieldRow,
  to: string,
): Promise<number> {
  if (isLossless(f.type, to)) return 0;
  if (fieldType(f.type).storage !== "column" || fieldType(to).storage !== "column")
    return countValues(db, cotId, f);
  const lost = lostCountSql(cotId, f, to);
  if (lost) return countScalar(db, lost);
  return countUnconvertible(db, cotId, f, retypeConverter(f.type, to));
}

/** Clears what `countLinksOutside` counts (a link target change applied with allow_destructive). */
export async function clearLinksOutside(
  db: Executor,
  cotId: number,
  f: FieldRow,
  keep: number[] | null,
): Promise<void> {
  await db.run(clearLinksOutsideSql(cotId, f, keep));
}

/** `clearLinksOutside` as one statement, for a batch. */
export function clearLinksOutsideSql(cotId: number, f: FieldRow, keep: number[] | null): SQL {
  const keepList = f.isPolymorphic ? keepListOf(keep) : null;
  if (hasLinkTable(f)) {
    const lt = ident(linkTableName(cotId, f.id));
    return keepList
      ? sql`DELETE FROM ${lt} WHERE target_type IS NULL OR target_type NOT IN (${keepList})`
      : sql`DELETE FROM ${lt}`;
  }
  const [idCol, typeCol] = fieldColumns(f);
  const t = ident(tableName(cotId));
  const set = typeCol
    ? sql`${ident(idCol!)} = NULL, ${ident(typeCol)} = NULL`
    : sql`${ident(idCol!)} = NULL`;
  return keepList && typeCol
    ? sql`UPDATE ${t} SET ${set} WHERE ${ident(typeCol)} IS NULL OR ${ident(typeCol)} NOT IN (${keepList})`
    : sql`UPDATE ${t} SET ${set}`;
}
