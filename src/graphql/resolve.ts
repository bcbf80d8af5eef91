/**
 * List resolvers: NetBox 4 filters (`{name: {i_contains: "x"}, site: {slug: {exact: "hq"}},
 * OR: [...]}`) become SQL through the same lookup code as permission constraints, joined
 * with the caller's view constraints; pages are `offset`/`limit`.
 */
import { and, asc, desc, not, sql, type SQL, type SQLWrapper } from "drizzle-orm";
import { allOf, anyOf } from "../db/d1-limits";
import type { GraphQLInputObjectType } from "graphql";
import { constraintSql, restrictWhere } from "../core/auth/restrict";
import { viewerResource } from "../core/rest/filter-scope";
import { typeSight, withholdTypes } from "../core/auth/type-sight";
import { CONTROL_CHARACTER_MESSAGE, hasControlCharacter, MAX_FILTER_VALUES } from "../core/limits";
import { MAX_LIMIT, pastTextLimit, TEXT_LIMIT_MESSAGE } from "../core/rest/query";
import { budgetInRead, chargeRows } from "../core/rest/budget";
import { databaseStamp } from "../core/database-stamp";
import { addGuard, freshRead } from "../core/fresh-read";

/** AND / OR / NOT and related filters nest at most this deep. */
export const MAX_FILTER_NESTING = 8;
import type { ApiRecord } from "../core/rest/resource";
import type { Guard } from "../core/context";
import { labelled, type GraphQLContext } from "./loaders";
import { badArgument, filterShapeOf, LOOKUPS, type Entry } from "./shared";

/** Records of one page, primed into the request's loader so relations reuse them. */
export async function listRecords(
  g: GraphQLContext,
  entry: Entry,
  filterType: GraphQLInputObjectType,
  filters: Record<string, unknown> | null,
  pagination: { offset?: number | null; limit?: number | null } | null,
): Promise<ApiRecord[]> {
  const offset = pagination?.offset ?? 0;
  const limit = pagination?.limit ?? MAX_LIMIT;
  if (!Number.isInteger(offset) || offset < 0)
    throw badArgument("pagination.offset must be a non-negative integer.");
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
    throw badArgument(`pagination.limit must be between 1 and ${MAX_LIMIT}.`);
  const r = entry.resource;
  const budget = { terms: 0 };
  const conditions = [
    await restrictWhere(g.ctx, g.auth, "view", r),
    filters ? await filterWhere(g, entry, filterType, filters, 0, budget) : undefined,
  ].filter((x): x is SQL => !!x);
  const orderBy: SQL[] = [];
  for (const term of r.list.defaultOrdering) {
    const key = term.replace(/^-/, "");
    if (!Object.hasOwn(r.list.orderings, key)) continue;
    const expr = r.list.orderings[key]!;
    orderBy.push(term.startsWith("-") ? desc(expr as any) : asc(expr as any));
  }
  orderBy.push(asc(r.list.idExpr as any));
  if (r.loadPlan && databaseStamp(g.ctx.services) === null)
    return listInOneRead(g, entry, conditions, orderBy, limit, offset);
  const rows = (await g.ctx.db
    .select({ id: sql<number>`${r.list.idExpr}` })
    .from(r.table)
    .where(conditions.length ? and(...conditions) : undefined)
    .orderBy(...orderBy)
    .limit(limit)
    .offset(offset)) as { id: number }[];
  const ids = rows.map((x) => Number(x.id));
  await chargeRows(g.ctx, r, ids);
  return primed(g, entry, await r.load(g.ctx, ids));
}

/**
 * A page's records as answered, primed into the request's loader: the object types they name
 * that the caller may not see left out (decision 0187).
 */
function primed(g: GraphQLContext, entry: Entry, loaded: ApiRecord[]): ApiRecord[] {
  const records = withholdTypes(typeSight(g.ctx.services, g.auth), entry.resource, loaded);
  const loader = g.loaders.of(entry);
  for (const rec of records) loader.prime(rec.id as number, labelled(rec, entry.label));
  return records;
}

/**
 * A list page in one read (decision 0085): the request's guards (token, the types' shapes), the
 * page's ids, their size for the response budget and the rows, one `db.read`. A stale guard makes
 * the whole query run again (`routes.ts`), so the read here just goes on.
 */
async function listInOneRead(
  g: GraphQLContext,
  entry: Entry,
  conditions: SQL[],
  orderBy: SQL[],
  limit: number,
  offset: number,
): Promise<ApiRecord[]> {
  const r = entry.resource;
  const page = g.ctx.db
    .select({ id: sql<number>`${r.list.idExpr}` })
    .from(r.table)
    .where(conditions.length ? and(...conditions) : undefined)
    .orderBy(...orderBy)
    .limit(limit)
    .offset(offset);
  const budget = budgetInRead(g.ctx, [{ resource: r, ids: page.getSQL() }]);
  // the plan may take other types' models from the caches, their guards riding in this read
  const ctx = {
    ...g.ctx,
    guard: (guard: Guard) => addGuard(g.http, guard),
    carriesForms: true as const,
  };
  const plan = r.loadPlan!(
    ctx,
    budget ? sql`SELECT * FROM (${page.getSQL()}) WHERE ${budget.holds}` : page.getSQL(),
  );
  const answers = await freshRead(
    g.http,
    () => [page, ...(budget ? [budget.statement] : []), ...plan.statements] as const,
  );
  const ids = (answers[0] as { id: number }[]).map((x) => Number(x.id));
  budget?.charge(answers[1]);
  return primed(g, entry, await plan.finish(answers.slice(budget ? 2 : 1) as unknown[], ids));
}

/** One filter input as SQL: lookups AND together; `AND`, `OR`, `NOT` compose; related filters follow the relation. */
async function filterWhere(
  g: GraphQLContext,
  entry: Entry,
  type: GraphQLInputObjectType,
  input: Record<string, unknown>,
  depth: number,
  budget: { terms: number },
): Promise<SQL> {
  // SQLite refuses very deep or very large expressions: a filter past these limits is a clear error.
  if (depth > MAX_FILTER_NESTING)
    throw badArgument(
      `Filters nest at most ${MAX_FILTER_NESTING} levels (AND, OR, NOT and related filters).`,
    );
  const shape = filterShapeOf(type);
  const terms: SQL[] = [];
  const count = (n: number) => {
    budget.terms += n;
    if (budget.terms > MAX_FILTER_VALUES)
      throw badArgument(`A filter takes at most ${MAX_FILTER_VALUES} lookups and values in all.`);
  };
  for (const [name, value] of Object.entries(input)) {
    if (value === null || value === undefined) continue;
    if (name === "AND" || name === "OR") {
      const parts: SQL[] = [];
      for (const item of value as Record<string, unknown>[])
        parts.push(await filterWhere(g, entry, type, item, depth + 1, budget));
      // balanced trees: a long chain is deeper than D1 parses (decision 0125)
      if (parts.length) terms.push(name === "AND" ? allOf(parts) : anyOf(parts));
      continue;
    }
    if (name === "NOT") {
      terms.push(
        not(await filterWhere(g, entry, type, value as Record<string, unknown>, depth + 1, budget)),
      );
      continue;
    }
    const key = shape.keys.get(name);
    if (!key) continue;
    const related = shape.related.get(name);
    if (related) {
      const nested = type.getFields()[name]!.type as GraphQLInputObjectType;
      const input = value as Record<string, unknown>;
      terms.push(await relatedWhere(g, related, nested, input, depth + 1, budget));
      continue;
    }
    // a filter over other objects (tags) reaches only those the caller may view (0178)
    const resource = await viewerResource(g.ctx, g.auth, entry.resource, (n) => n === key);
    for (const [lookup, v] of Object.entries(value as Record<string, unknown>)) {
      if (v === undefined || !Object.hasOwn(LOOKUPS, lookup)) continue;
      if (v === null && lookup !== "exact") continue;
      const texts = (Array.isArray(v) ? v : [v]).filter((x): x is string => typeof x === "string");
      if (texts.some(hasControlCharacter)) throw badArgument(CONTROL_CHARACTER_MESSAGE);
      if (texts.some(pastTextLimit)) throw badArgument(TEXT_LIMIT_MESSAGE);
      count(Array.isArray(v) ? Math.max(1, v.length) : 1);
      terms.push(
        await constraintSql(g.ctx, resource, [{ [`${key}__${LOOKUPS[lookup]}`]: v }], null),
      );
    }
  }
  return terms.length ? allOf(terms) : sql`1`;
}

/**
 * A related filter (`tenant: {name: {…}}`): the relation's column among the targets the caller
 * may view that match it. Never a join past the caller's view: a guess at a hidden tenant's name
 * answers as a guess at nothing (decision 0178).
 */
async function relatedWhere(
  g: GraphQLContext,
  related: { entry: Entry; expr: SQLWrapper },
  type: GraphQLInputObjectType,
  input: Record<string, unknown>,
  depth: number,
  budget: { terms: number },
): Promise<SQL> {
  const target = related.entry.resource;
  const inner = await filterWhere(g, related.entry, type, input, depth, budget);
  const view = await restrictWhere(g.ctx, g.auth, "view", target);
  const where = view ? and(view, inner) : inner;
  return sql`${related.expr} IN (SELECT ${target.list.idExpr} FROM ${target.table} WHERE ${where})`;
}
