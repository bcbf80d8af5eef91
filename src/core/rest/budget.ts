/**
 * The response byte budget (decision 0068): before a page of rows is read, the bytes its stored
 * text and JSON values take are summed in SQL (`octet_length` reads no value), and a request
 * whose pages would pass `MAX_RESPONSE_BYTES` answers 400 `response_too_large` instead of
 * building the answer. One budget per request: GraphQL aliases share it.
 */
import { getTableColumns, sql, type SQL } from "drizzle-orm";
import type { Context } from "hono";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { inJsonList, sumOf } from "../../db/d1-limits";
import { ApiError } from "../errors";
import type { ReadContext, Resource } from "./resource";

/** What a record costs beyond its text and JSON values (url, display, dates, nested forms). */
export const ROW_OVERHEAD_BYTES = 512;

/** Bytes charged so far by one request, against its limit. */
export class ResponseBudget {
  used = 0;
  constructor(readonly limit: number) {}
}

// One budget per request object; it goes with the request.
const budgets = new WeakMap<Request, ResponseBudget>();

/** The request's budget, made on first use. */
export function budgetOf(c: Context, limit: number): ResponseBudget {
  let budget = budgets.get(c.req.raw);
  if (!budget) budgets.set(c.req.raw, (budget = new ResponseBudget(limit)));
  return budget;
}

/** The error a request over its budget answers: it names the limit and how to stay within it. */
export function responseTooLarge(limit: number): ApiError {
  return ApiError.detail(
    400,
    `The answer would be larger than the limit of ${limit} bytes: ask for a smaller page (?limit=, GraphQL pagination.limit).`,
    "response_too_large",
    { limit },
  );
}

/** The columns whose values can be large: text, JSON and blobs. */
function wideColumns(resource: Resource): SQLiteColumn[] {
  return Object.values(getTableColumns(resource.table)).filter((col) =>
    ["string", "json", "buffer", "custom"].includes((col as SQLiteColumn).dataType),
  ) as SQLiteColumn[];
}

// by table: the same columns for every page of a resource
const rowBytesByTable = new WeakMap<object, SQL | null>();

/**
 * What one row's wide values and its link forms (`Resource.linkBytes`) take (SQL over the
 * resource's table), or null when it has neither.
 */
export function rowBytes(resource: Resource): SQL | null {
  let sum = rowBytesByTable.get(resource.table);
  if (sum === undefined) {
    const parts = wideColumns(resource).map((col) => sql`coalesce(octet_length(${col}), 0)`);
    if (resource.linkBytes) parts.push(resource.linkBytes);
    // balanced: a chain of hundreds of terms is deeper than D1 parses (decision 0125)
    sum = parts.length ? sumOf(parts) : null;
    rowBytesByTable.set(resource.table, sum);
  }
  return sum;
}

/**
 * A column for the statement that picks a page's ids, `AS bytes`: what each row's wide values
 * take, so the page is charged (`chargePage`) without a read of its own. Null when the context
 * has no budget.
 */
export function pageBytesColumn(ctx: ReadContext, resource: Resource): SQL | null {
  if (!ctx.budget) return null;
  return rowBytes(resource) ?? sql`0`;
}

/**
 * Charges a page whose ids came with their rows' bytes (`pageBytesColumn`), before the rows are
 * read; throws `response_too_large` as `chargeRows` does.
 */
export function chargePage(ctx: ReadContext, rows: ReadonlyArray<{ bytes?: unknown }>): void {
  const budget = ctx.budget;
  if (!budget || !rows.length) return;
  let bytes = rows.length * ROW_OVERHEAD_BYTES;
  for (const r of rows) bytes += Number(r.bytes ?? 0);
  budget.used += bytes;
  if (budget.used > budget.limit) throw responseTooLarge(budget.limit);
}

/** Bytes the wide values of rows `ids` take, read from the row headers only. */
async function storedBytes(ctx: ReadContext, resource: Resource, ids: number[]): Promise<number> {
  const sum = rowBytes(resource);
  if (!sum || !ids.length) return 0;
  const idColumn = resource.list.idExpr as SQLiteColumn | SQL;
  const [row] = (await ctx.db
    .select({ bytes: sql<number>`coalesce(sum(${sum}), 0)` })
    .from(resource.table)
    .where(inJsonList(idColumn, ids))) as { bytes: number }[];
  return Number(row?.bytes ?? 0);
}

/**
 * Charges the rows `ids` of `resource` to the request's budget before they are read; throws
 * `response_too_large` when the request would pass it. A context without a budget (a background
 * job, a write's own read-back) is not limited.
 */
export async function chargeRows(
  ctx: ReadContext,
  resource: Resource,
  ids: number[],
): Promise<void> {
  const budget = ctx.budget;
  if (!budget || !ids.length) return;
  const bytes = ids.length * ROW_OVERHEAD_BYTES + (await storedBytes(ctx, resource, ids));
  budget.used += bytes;
  if (budget.used > budget.limit) throw responseTooLarge(budget.limit);
}

/**
 * The budget check as part of a caller's one read (decision 0085): `statement` sums what the
 * rows `ids` (SQL: a list or a subquery) of each part would cost, and `holds` is a condition that
 * is true only while that fits what is left, so the rows' statements in the same read return
 * nothing for an over-budget page instead of carrying it. `charge` takes the statement's answer.
 * Null when the context has no budget.
 */
export function budgetInRead(ctx: ReadContext, parts: Array<{ resource: Resource; ids: SQL }>) {
  const budget = ctx.budget;
  if (!budget || !parts.length) return null;
  const total = sql.join(
    parts.map(({ resource, ids }) => {
      const sum = rowBytes(resource);
      const wide = sum ? sql`coalesce(sum(${sum}), 0)` : sql`0`;
      return sql`(SELECT ${wide} + count(*) * ${ROW_OVERHEAD_BYTES} FROM ${resource.table} WHERE ${resource.list.idExpr} IN (${ids}))`;
    }),
    sql` + `,
  );
  return {
    statement: ctx.db.all<{ bytes: number }>(sql`SELECT ${total} AS bytes`),
    holds: sql`(${total}) <= ${budget.limit - budget.used}`,
    charge(answer: unknown) {
      budget.used += Number((answer as { bytes: number }[])[0]?.bytes ?? 0);
      if (budget.used > budget.limit) throw responseTooLarge(budget.limit);
    },
  };
}
