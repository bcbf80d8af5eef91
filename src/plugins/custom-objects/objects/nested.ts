/** The `ModelInfo` of a custom object type: nested forms of its objects, by id or as SQL. */
import { sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { inIds, jsonListRows } from "../../../db/d1-limits";
import { jsonKey } from "../../../db/json-key";
import type { ModelInfo } from "../../../core/models/registry";
import type { ApiRecord, Resource } from "../../../core/rest/resource";
import { APP_LABEL } from "../constants";
import { fieldColumns, ident } from "../ddl";
import type { Reader } from "./read";
import { instanceUrl, verboseName, type Shape } from "./shape";

/**
 * The inner table's name in `selectOne`: the outer query may read this very table (a type whose
 * field points at its own type), and an unaliased inner table would capture the outer's columns.
 */
const FORM = sql.raw(`"co_form"`);

export function modelInfo(shape: Shape, resource: Resource, read: Reader): ModelInfo {
  const { cot, table, column, slug, primary, primaryLabel, labelOf, expressionFields } = shape;
  const { display } = read;
  const nestedCols: Record<string, SQLiteColumn | SQL> = { id: table.id };
  if (primary) for (const c of fieldColumns(primary)) nestedCols[c] = column(c);
  if (primaryLabel) nestedCols.__label = primaryLabel;
  for (const f of expressionFields) nestedCols[f.name] = column(f.name);
  const selectIn = (ids: SQL) =>
    sql`SELECT ${table.id} AS id, json_object(${sql.join(
      Object.entries(nestedCols).map(([k, c]) => sql`${jsonKey(k)}, ${c}`),
      sql`, `,
    )}) AS j FROM ${table} WHERE ${table.id} IN (${ids})`;
  // The same keys in the same order over the aliased table: the same JSON text as `selectIn`'s.
  const aliased = (name: string) => sql`${FORM}.${ident(name)}`;
  const formCols = Object.keys(nestedCols).map((k) =>
    k === "__label"
      ? sql`${jsonKey(k)}, ${labelOf!(aliased(primary!.name))}`
      : sql`${jsonKey(k)}, ${aliased(k)}`,
  );
  const selectOne = (idExpr: SQL) =>
    sql`(SELECT json_object(${sql.join(formCols, sql`, `)}) FROM ${table} AS ${FORM} WHERE ${FORM}."id" = ${idExpr})`;
  return {
    appLabel: APP_LABEL,
    model: slug,
    verboseName: verboseName(cot),
    resource,
    async nested(ctx, ids) {
      const out = new Map<number, ApiRecord>();
      if (!ids.length) return out;
      const rows = (await ctx.db
        .select(nestedCols)
        .from(table)
        .where(inIds(table.id, ids))) as Record<string, any>[];
      for (const row of rows)
        out.set(row.id, {
          id: row.id,
          url: instanceUrl(ctx.baseUrl, slug, row.id),
          display: display(row),
        });
      return out;
    },
    nestedSql: {
      select: (ids) => selectIn(jsonListRows(ids)),
      selectIn,
      // not `selectOne`: the reads that take it would plan custom types anew (decision 0165 kept
      // them as they are; the proof of forms that refused it on D1 no longer uses it, 0169);
      // planned reads take this one
      selectOneAliased: selectOne,
      build: (ctx, id, row) => ({
        id,
        url: instanceUrl(ctx.baseUrl, slug, id),
        display: display(row),
      }),
    },
  };
}
