/**
 * A constrained caller's view of the objects a GET's or list's relations point at, judged in
 * its one read: a statement per relation, whose answers `hideUnviewable` takes instead of a
 * query per related model after the read.
 */
import { sql, type SQL } from "drizzle-orm";
import type { AuthState, JudgedInRead, Relation } from "../context";
import type { ReadContext, Resource } from "../rest/resource";
import { constraintSql, labelOfType, relationsProved, restrictionFor } from "./restrict";

/**
 * For the objects `ids` of `resource`: per relation whose target the caller may view only under
 * constraints, the statement judging every id it points at (for those objects: never fewer, the
 * condition `hideUnviewable` applies), one statement each (D1 caps a compound SELECT). None for a
 * superuser or an anonymous caller, whose view needs no read.
 */
export async function relationViewStatements(
  ctx: ReadContext,
  auth: AuthState,
  resource: Resource,
  ids: SQL | number,
): Promise<JudgedInRead[]> {
  const user = auth.user;
  if (!user || user.isSuperuser || !resource.relations?.length) return [];
  const own = typeof ids === "number" ? sql`${ids}` : ids;
  const out: JudgedInRead[] = [];
  for (const rel of resource.relations) {
    const held = heldIds(resource, rel, own);
    const label = held ? await labelOf(ctx, rel) : null;
    if (!held || !label) continue;
    const [app, model] = label.split(".") as [string, string];
    const r = restrictionFor(auth, ctx.services.config.loginRequired, "view", app, model);
    if (r.kind !== "some") continue;
    const target = (await ctx.services.models.get(app, model, ctx))?.resource;
    if (!target) continue;
    const where = await constraintSql(ctx, target, r.sets, user);
    const visible = sql`"held"."id" IN (SELECT ${target.list.idExpr} FROM ${target.table} WHERE ${where})`;
    out.push({
      statement: sql`WITH "held"("id") AS (${held}) SELECT DISTINCT "held"."id" AS id, (${visible}) AS visible FROM "held" WHERE typeof("held"."id") = 'integer'`,
      proved: (c, rows) => relationsProved(c, label, rows),
    });
  }
  return out;
}

/** The ids `rel` points at for the objects `own`; null where it cannot say (polymorphic). */
function heldIds(resource: Resource, rel: Relation, own: SQL): SQL | null {
  if (rel.polymorphic) return null;
  if (rel.targetsOf) return rel.targetsOf(own);
  if (rel.many || !rel.expr) return null;
  return sql`SELECT ${rel.expr} FROM ${resource.table} WHERE ${resource.list.idExpr} IN (${own})`;
}

async function labelOf(ctx: ReadContext, rel: Relation): Promise<string | null> {
  if (rel.target) return rel.target;
  return rel.targetTypeId != null ? labelOfType(ctx, rel.targetTypeId) : null;
}
