/** The `ModelInfo` of a custom object type: nested forms of its objects, by id or as SQL. */
import { inArray, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { ModelInfo } from "../../../core/models/registry";
import type { ApiRecord, Resource } from "../../../core/rest/resource";
import { APP_LABEL } from "../constants";
import { fieldColumns } from "../ddl";
import type { Reader } from "./read";
import { instanceUrl, verboseName, type Shape } from "./shape";

export function modelInfo(shape: Shape, resource: Resource, read: Reader): ModelInfo {
  const { cot, table, column, slug, primary, primaryLabel, expressionFields } = shape;
  const { display } = read;
  const nestedCols: Record<string, SQLiteColumn | SQL> = { id: table.id };
  if (primary) for (const c of fieldColumns(primary)) nestedCols[c] = column(c);
  if (primaryLabel) nestedCols.__label = primaryLabel;
  for (const f of expressionFields) nestedCols[f.name] = column(f.name);
  const selectIn = (ids: SQL) =>
    sql`SELECT ${table.id} AS id, json_object(${sql.join(
      Object.entries(nestedCols).map(([k, c]) => sql`${k}, ${c}`),
      sql`, `,
    )}) AS j FROM ${table} WHERE ${table.id} IN (${ids})`;
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
        .where(inArray(table.id, ids))) as Record<string, any>[];
      for (const row of rows)
        out.set(row.id, {
          id: row.id,
          url: instanceUrl(ctx.baseUrl, slug, row.id),
          display: display(row),
        });
      return out;
    },
    nestedSql: {
      select: (ids) =>
        selectIn(
          sql`SELECT value FROM json_each(${Array.isArray(ids) ? JSON.stringify(ids) : ids})`,
        ),
      selectIn,
      build: (ctx, id, row) => ({
        id,
        url: instanceUrl(ctx.baseUrl, slug, id),
        display: display(row),
      }),
    },
  };
}
