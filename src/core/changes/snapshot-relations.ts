/**
 * A constrained caller's view of the objects the change log's snapshots point at, judged in the
 * page's one read: per related model, one statement over the relations of the models the page
 * plans (`plannedInRead`), so hiding them in the snapshots asks nothing after the read.
 */
import { sql, type SQL } from "drizzle-orm";
import { unionAll } from "../../db/d1-limits";
import { objectChanges } from "../../db/schema";
import { constraintSql, labelOfType, relationsProved, restrictionFor } from "../auth/restrict";
import type { AuthState, JudgedInRead, Relation } from "../context";
import type { ReadContext } from "../rest/resource";
import { plannedInRead } from "./list-reads";

/** The statements, one per related model the caller views under constraints; none for others. */
export async function snapshotRelationStatements(
  ctx: ReadContext,
  auth: AuthState,
  page: SQL,
): Promise<JudgedInRead[]> {
  const user = auth.user;
  if (!user || user.isSuperuser) return [];
  const heldByLabel = new Map<string, SQL[]>();
  for (const [typeId, info] of plannedInRead(ctx) ?? [])
    for (const rel of info.resource?.relations ?? []) {
      const label = rel.polymorphic ? null : await labelOf(ctx, rel);
      if (!label) continue;
      const terms = heldByLabel.get(label) ?? heldByLabel.set(label, []).get(label)!;
      for (const column of [objectChanges.prechangeData, objectChanges.postchangeData])
        terms.push(heldIn(page, typeId, rel, sql`${column}`));
    }
  const out: JudgedInRead[] = [];
  for (const [label, terms] of heldByLabel) {
    const [app, model] = label.split(".") as [string, string];
    const r = restrictionFor(auth, ctx.services.config.loginRequired, "view", app, model);
    if (r.kind !== "some") continue;
    const target = (await ctx.services.models.get(app, model, ctx))?.resource;
    if (!target) continue;
    const where = await constraintSql(ctx, target, r.sets, user);
    const visible = sql`"held"."id" IN (SELECT ${target.list.idExpr} FROM ${target.table} WHERE ${where})`;
    out.push({
      statement: sql`WITH "held"("id") AS (${unionAll(terms)}) SELECT DISTINCT "held"."id" AS id, (${visible}) AS visible FROM "held" WHERE typeof("held"."id") = 'integer'`,
      proved: (c, rows) => relationsProved(c, label, rows),
    });
  }
  return out;
}

/**
 * The ids a snapshot column of the page's records of type `typeId` holds under `rel`'s key: a
 * nested object's id or a bare id, or each of a list's (the key bound, never spliced).
 */
function heldIn(page: SQL, typeId: number, rel: Relation, column: SQL): SQL {
  const path = sql`'$.' || ${rel.name}`;
  const mine = sql`${objectChanges.id} IN (${page}) AND ${objectChanges.changedObjectTypeId} = ${typeId}`;
  if (rel.many)
    return sql`SELECT CASE "j"."type" WHEN 'object' THEN json_extract("j"."value", '$.id') ELSE "j"."value" END FROM ${objectChanges}, json_each(CASE WHEN json_valid(${column}) THEN ${column} END, ${path}) AS "j" WHERE ${mine}`;
  const value = sql`CASE WHEN json_valid(${column}) THEN ${column} END`;
  return sql`SELECT CASE json_type(${value}, ${path}) WHEN 'object' THEN json_extract(${value}, ${path} || '.id') ELSE json_extract(${value}, ${path}) END FROM ${objectChanges} WHERE ${mine}`;
}

async function labelOf(ctx: ReadContext, rel: Relation): Promise<string | null> {
  if (rel.target) return rel.target;
  return rel.targetTypeId != null ? labelOfType(ctx, rel.targetTypeId) : null;
}
