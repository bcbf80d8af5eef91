/**
 * `linked-objects/?object_type=<app_label>.<model>&object_id=<id>` (§5 rule 7): one row per
 * (linking custom object, field), paged. One indexed count and at most one indexed page query
 * per linking field; never a table scan.
 */
import { sql } from "drizzle-orm";
import { hasPermission } from "../../core/auth/permissions";
import type { Ctx } from "../../core/context";
import { notFound, ValidationError } from "../../core/errors";
import { parseLabel } from "../../core/object-types";
import { readContext } from "../../core/rest/handlers";
import { pageLinks, parsePaging } from "../../core/rest/query";
import { ident, linkTableName, tableName } from "./ddl";
import { nestedCot, type CotRegistry } from "./models";
import { fieldsPointingAt, linkCondition } from "./on-delete";

export async function linkedObjects(c: Ctx, registry: CotRegistry) {
  const ctx = readContext(c);
  const url = new URL(c.req.url);
  const params = url.searchParams;
  const rawType = params.get("object_type")?.trim();
  const rawId = params.get("object_id")?.trim();
  const errors: Record<string, string[]> = {};
  if (!rawType) errors.object_type = ["This parameter is required (<app_label>.<model>)."];
  if (!rawId) errors.object_id = ["This parameter is required."];
  else if (!/^\d{1,15}$/.test(rawId)) errors.object_id = ["A valid integer is required."];
  if (Object.keys(errors).length) throw new ValidationError(errors);
  const parts = parseLabel(rawType!);
  const ot = parts ? await ctx.services.objectTypes.byLabel(parts.appLabel, parts.model, ctx.db) : null;
  const info = ot ? await ctx.services.models.get(ot.appLabel, ot.model, ctx) : null;
  if (!ot || !info) throw new ValidationError({ object_type: [`Unknown object type "${rawType}".`] });
  const objectId = Number(rawId);
  if (!(await info.nested(ctx, [objectId])).has(objectId)) throw notFound(`No ${ot.appLabel}.${ot.model} with id ${objectId}.`);

  const { limit, offset } = parsePaging(params);
  // Fields the caller may see, in a stable order, each with its count of linking objects.
  const sources: { field: Awaited<ReturnType<typeof fieldsPointingAt>>[number]; count: number }[] = [];
  const models = new Map<number, Awaited<ReturnType<CotRegistry["byId"]>>>();
  for (const field of await fieldsPointingAt(ctx.db, ot.id)) {
    let model = models.get(field.customObjectTypeId);
    if (model === undefined) {
      model = await registry.byId(ctx.db, field.customObjectTypeId);
      models.set(field.customObjectTypeId, model);
    }
    if (!model || !hasPermission(c, "view", "custom_objects", model.cot.slug)) continue;
    const where = linkCondition(field, ot.id, objectId);
    const countSql =
      field.type === "multiobject"
        ? sql`SELECT count(DISTINCT source_id) AS n FROM ${ident(linkTableName(field.customObjectTypeId, field.id))} WHERE ${where}`
        : sql`SELECT count(*) AS n FROM ${ident(tableName(field.customObjectTypeId))} WHERE ${where}`;
    const [row] = (await ctx.db.all(countSql)) as { n: number }[];
    const count = Number(row?.n ?? 0);
    if (count) sources.push({ field, count });
  }
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
    const where = linkCondition(field, ot.id, objectId);
    const idSql =
      field.type === "multiobject"
        ? sql`SELECT DISTINCT source_id AS id FROM ${ident(linkTableName(field.customObjectTypeId, field.id))} WHERE ${where} ORDER BY source_id LIMIT ${want} OFFSET ${skip}`
        : sql`SELECT id FROM ${ident(tableName(field.customObjectTypeId))} WHERE ${where} ORDER BY id LIMIT ${want} OFFSET ${skip}`;
    const ids = ((await ctx.db.all(idSql)) as { id: number }[]).map((r) => Number(r.id));
    skip = 0;
    const model = models.get(field.customObjectTypeId)!;
    const records = await model.resource.load(ctx, ids);
    const cot = nestedCot(ctx.baseUrl, model.cot);
    for (const object of records) results.push({ custom_object_type: cot, field_name: field.name, object });
    want -= records.length;
  }
  return c.json({ count: total, ...pageLinks(url, total, limit, offset), results });
}
