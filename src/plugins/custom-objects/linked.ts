/**
 * `linked-objects/?object_type=<app_label>.<model>&object_id=<id>` (§5 rule 7): one row per
 * (linking custom object, field), paged. One indexed count and at most one indexed page query
 * per linking field; never a table scan.
 */
import { sql, type SQL } from "drizzle-orm";
import { hasPermission } from "../../core/auth/permissions";
import { hideUnviewable, requireObject, restrictWhere } from "../../core/auth/restrict";
import type { Ctx } from "../../core/context";
import { notFound, ValidationError } from "../../core/errors";
import { publicUrlOf } from "../../core/http";
import { parseLabel } from "../../core/object-types";
import { readContext } from "../../core/rest/handlers";
import { chargeRows } from "../../core/rest/budget";
import { pageLinks, parsePaging } from "../../core/rest/query";
import { hasLinkTable, ident, linkTableName, tableName } from "./ddl";
import { nestedCot, type CotRegistry } from "./models";
import { linkCondition } from "./on-delete";

export async function linkedObjects(c: Ctx, registry: CotRegistry) {
  const ctx = readContext(c);
  const url = publicUrlOf(c);
  const params = url.searchParams;
  const rawType = params.get("object_type")?.trim();
  const rawId = params.get("object_id")?.trim();
  const errors: Record<string, string[]> = {};
  if (!rawType) errors.object_type = ["This parameter is required (<app_label>.<model>)."];
  if (!rawId) errors.object_id = ["This parameter is required."];
  else if (!/^\d{1,15}$/.test(rawId)) errors.object_id = ["A valid integer is required."];
  if (Object.keys(errors).length) throw new ValidationError(errors);
  const parts = parseLabel(rawType!);
  const ot = parts
    ? await ctx.services.objectTypes.byLabel(parts.appLabel, parts.model, ctx.db)
    : null;
  const info = ot ? await ctx.services.models.get(ot.appLabel, ot.model, ctx) : null;
  if (!ot || !info)
    throw new ValidationError({ object_type: [`Unknown object type "${rawType}".`] });
  const objectId = Number(rawId);
  const missing = `No ${ot.appLabel}.${ot.model} with id ${objectId}.`;
  // An object the caller may not view answers exactly like one that does not exist.
  if (!hasPermission(c, "view", ot.appLabel, ot.model)) throw notFound(missing);
  if (!(await info.nested(ctx, [objectId])).has(objectId)) throw notFound(missing);
  if (info.resource) await requireObject(ctx, c.var.auth, "view", info.resource, objectId, missing);

  const { limit, offset } = parsePaging(params);
  // Fields the caller may see, in a stable order, with their models (one statement), and
  // every field's count in one statement (each count is still its own indexed lookup).
  const linking = await registry.fieldsPointingAt(ctx.db, ot.id);
  const models = new Map(linking.map(({ model }) => [model.cot.id, model]));
  const visible = linking
    .filter(({ model }) => hasPermission(c, "view", "custom_objects", model.cot.slug))
    .map(({ field }) => field);
  // Linking objects outside the caller's view constraints are neither counted nor listed.
  const restricted = new Map<number, SQL | undefined>();
  for (const [cotId, model] of models) {
    if (visible.some((f) => f.customObjectTypeId === cotId))
      restricted.set(cotId, await restrictWhere(ctx, c.var.auth, "view", model.resource));
  }
  const linkWhere = (field: (typeof visible)[number]) => {
    const where = linkCondition(field, ot.id, objectId);
    const limit = restricted.get(field.customObjectTypeId);
    if (!limit) return where;
    const table = models.get(field.customObjectTypeId)!.table;
    return hasLinkTable(field)
      ? sql`${where} AND source_id IN (SELECT ${table.id} FROM ${table} WHERE ${limit})`
      : sql`${where} AND ${limit}`;
  };
  const countOf = (field: (typeof visible)[number]) => {
    const where = linkWhere(field);
    return hasLinkTable(field)
      ? sql`(SELECT count(DISTINCT source_id) FROM ${ident(linkTableName(field.customObjectTypeId, field.id))} WHERE ${where})`
      : sql`(SELECT count(*) FROM ${ident(tableName(field.customObjectTypeId))} WHERE ${where})`;
  };
  const counts: { k: number; n: number }[] = [];
  // SQLite allows 500 terms in a compound SELECT; chunk well below that.
  for (let start = 0; start < visible.length; start += 250) {
    const chunk = visible
      .slice(start, start + 250)
      .map((f, i) => sql`SELECT ${start + i} AS k, ${countOf(f)} AS n`);
    counts.push(
      ...((await ctx.db.all(sql.join(chunk, sql` UNION ALL `))) as { k: number; n: number }[]),
    );
  }
  const sources = counts
    .sort((a, b) => Number(a.k) - Number(b.k))
    .map((r) => ({ field: visible[Number(r.k)]!, count: Number(r.n) }))
    .filter((s) => s.count > 0);
  const total = sources.reduce((n, s) => n + s.count, 0);

  const results: Record<string, unknown>[] = [];
  let skip = offset;
  let want = limit;
  for (const { field, count } of sources) {
    if (want <= 0) break;
    if (skip >= count) {
      skip -= count;
      continue;
    }
    const where = linkWhere(field);
    const idSql = hasLinkTable(field)
      ? sql`SELECT DISTINCT source_id AS id FROM ${ident(linkTableName(field.customObjectTypeId, field.id))} WHERE ${where} ORDER BY source_id LIMIT ${want} OFFSET ${skip}`
      : sql`SELECT id FROM ${ident(tableName(field.customObjectTypeId))} WHERE ${where} ORDER BY id LIMIT ${want} OFFSET ${skip}`;
    const ids = ((await ctx.db.all(idSql)) as { id: number }[]).map((r) => Number(r.id));
    skip = 0;
    const model = models.get(field.customObjectTypeId)!;
    await chargeRows(ctx, model.resource, ids);
    const records = await hideUnviewable(
      ctx,
      c.var.auth,
      model.resource,
      await model.resource.load(ctx, ids),
    );
    const cot = nestedCot(ctx.baseUrl, model.cot);
    for (const object of records)
      results.push({ custom_object_type: cot, field_name: field.name, object });
    want -= records.length;
  }
  return c.json({ count: total, ...pageLinks(url, total, limit, offset), results });
}
