/**
 * A constrained caller's view of the objects a GET's or list's relations point at, judged in
 * its one read: a statement per relation and target model, whose answers `hideUnviewable` takes
 * instead of a query per related model after the read.
 */
import { sql, type SQL } from "drizzle-orm";
import type { AuthState, JudgedInRead, Relation } from "../context";
import type { ReadContext, Resource } from "../rest/resource";
import { constraintSql, labelOfType, relationsProved, restrictionFor } from "./restrict";

/** A model a relation points at: its label, its resource, and its object type id when known so. */
interface Target {
  label: string;
  resource: Resource;
  typeId?: number;
}

/**
 * For the objects `ids` of `resource`: per relation and model it points at that the caller may
 * view only under constraints, the statement judging every id it points at (for those objects:
 * never fewer, the condition `hideUnviewable` applies), one statement each (D1 caps a compound
 * SELECT). Each proves too the labels of the targets known by object type id, which the hiding
 * would read otherwise (a statement of its own when nothing is judged). None for a superuser.
 */
export async function relationViewStatements(
  ctx: ReadContext,
  auth: AuthState,
  resource: Resource,
  ids: SQL | number,
): Promise<JudgedInRead[]> {
  const user = auth.user;
  if (user?.isSuperuser || !resource.relations?.length) return [];
  const own = typeof ids === "number" ? sql`${ids}` : ids;
  const judged: { statement: SQL; label: string | null }[] = [];
  const labels = new Map<number, string>();
  for (const rel of resource.relations)
    for (const typeId of typeIdsOf(rel)) {
      const held = heldIds(resource, rel, own, typeId);
      const target = held ? await targetOf(ctx, rel, typeId) : null;
      if (!held || !target) continue;
      if (target.typeId !== undefined) labels.set(target.typeId, target.label);
      const { label, resource: of } = target;
      const [app, model] = label.split(".") as [string, string];
      const r = restrictionFor(auth, ctx.services.config.loginRequired, "view", app, model);
      if (r.kind !== "some" || !user) continue;
      const where = await constraintSql(ctx, of, r.sets, user);
      const visible = sql`"held"."id" IN (SELECT ${of.list.idExpr} FROM ${of.table} WHERE ${where})`;
      judged.push({
        statement: sql`WITH "held"("id") AS (${held}) SELECT DISTINCT "held"."id" AS id, (${visible}) AS visible FROM "held" WHERE typeof("held"."id") = 'integer'`,
        label,
      });
    }
  if (!judged.length && labels.size) judged.push({ statement: NOTHING, label: null });
  return judged.map(({ statement, label }) => ({
    statement,
    proved: (c, rows) => relationsProved(c, label, rows, labels),
  }));
}

/** A statement answering no rows: what carries the labels when nothing is judged. */
const NOTHING = sql`SELECT 0 AS id, 0 AS visible WHERE 0`;

/**
 * The object types a relation is judged per: each of a polymorphic one's (decision 0165), else
 * one pass (`undefined`: its single target).
 */
const typeIdsOf = (rel: Relation): (number | undefined)[] =>
  rel.polymorphic ? (rel.targetTypeIds ?? []) : [undefined];

/**
 * The ids `rel` points at for the objects `own` (of object type `typeId` for a polymorphic
 * relation); null where it cannot say.
 */
function heldIds(resource: Resource, rel: Relation, own: SQL, typeId?: number): SQL | null {
  if (rel.polymorphic)
    return typeId !== undefined && rel.targetsOf ? rel.targetsOf(own, typeId) : null;
  if (rel.targetsOf) return rel.targetsOf(own);
  if (rel.many || !rel.expr) return null;
  return sql`SELECT ${rel.expr} FROM ${resource.table} WHERE ${resource.list.idExpr} IN (${own})`;
}

/**
 * The model `rel` points at (the type `typeId` of a polymorphic one). One known by object type id
 * is taken from the models a read on `ctx` may plan (`plannedByObjectType`: static, or a cached
 * custom type proven by a guard in this very read, decision 0165); else, for a single target,
 * read as before the read. A polymorphic type that cannot be planned is left to the hiding.
 */
async function targetOf(ctx: ReadContext, rel: Relation, typeId?: number): Promise<Target | null> {
  if (rel.target) return byLabel(ctx, rel.target);
  const id = typeId ?? rel.targetTypeId;
  if (id == null) return null;
  const planned = ctx.services.models.plannedByObjectType(ctx, id);
  if (planned?.info.resource)
    return { label: planned.label, resource: planned.info.resource, typeId: id };
  if (rel.polymorphic) return null;
  const label = await labelOfType(ctx, id);
  const target = label ? await byLabel(ctx, label) : null;
  return target && { ...target, typeId: id };
}

async function byLabel(ctx: ReadContext, label: string): Promise<Target | null> {
  const [app, model] = label.split(".") as [string, string];
  const resource = (await ctx.services.models.get(app, model, ctx))?.resource;
  return resource ? { label, resource } : null;
}
