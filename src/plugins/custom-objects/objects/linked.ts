/**
 * `linked-objects/?object_type=<app_label>.<model>&object_id=<id>` (§5 rule 7): one row per
 * (linking custom object, field), paged. One indexed count and at most one indexed page query
 * per linking field; never a table scan.
 */
import { sql, type SQL } from "drizzle-orm";
import type { Queries } from "../../../db/client";
import { unionAll } from "../../../db/d1-limits";
import { databaseStamp } from "../../../core/database-stamp";
import { addGuard, freshRead } from "../../../core/fresh-read";
import type { ReadContext, Resource } from "../../../core/rest/resource";
import type { FieldRow } from "../field-types";
import { hasPermission, holdsAnyPermission } from "../../../core/auth/permissions";
import { APP_LABEL, COT_MODEL, FIELD_MODEL } from "../constants";
import { hideUnviewable, requireObject, restrictWhere } from "../../../core/auth/restrict";
import type { Ctx } from "../../../core/context";
import { notFound, ValidationError } from "../../../core/errors";
import { publicUrlOf } from "../../../core/http";
import { parseLabel } from "../../../core/object-types";
import { judgedInRead, proveJudged, readContext } from "../../../core/rest/handlers";
import { budgetInRead, chargeRows } from "../../../core/rest/budget";
import { pageLinks, parsePaging } from "../../../core/rest/query";
import { hasLinkTable, ident, linkTableName, tableName } from "../ddl";
import { nestedCot, type CotModel, type CotRegistry } from "./models";
import { linkCondition } from "./on-delete";

/** The query's object type and id, checked (400 naming what is wrong). */
async function target(c: Ctx, ctx: ReadContext) {
  const params = new URL(c.req.url).searchParams;
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
  const info =
    ot && knowsType(c, ot) ? await ctx.services.models.get(ot.appLabel, ot.model, ctx) : null;
  if (!ot || !info)
    throw new ValidationError({ object_type: [`Unknown object type "${rawType}".`] });
  return { ot, info, objectId: Number(rawId) };
}

/**
 * A custom object type the caller holds no permission on is unknown to them (decision 0178), as
 * at its own endpoints; the host's models and the type definitions are known to everyone.
 */
function knowsType(c: Ctx, ot: { appLabel: string; model: string }): boolean {
  if (ot.appLabel !== APP_LABEL || ot.model === COT_MODEL || ot.model === FIELD_MODEL) return true;
  return holdsAnyPermission(c, ot.appLabel, ot.model);
}

type Linking = { field: FieldRow; model: CotModel };

/**
 * Linked objects in one read where there is no change stamp (remote, D1; decision 0085): the
 * request's guards (token, the fields pointing at the type with their types' versions), whether
 * the object exists for the caller, every field's count, the page's (field, id) pairs from one
 * ordered union, the page's size for the response budget, and each linking type's rows. Null
 * (the caller reads step by step) until the linking fields are cached, or for a target without a
 * table.
 */
async function linkedInOneRead(c: Ctx, registry: CotRegistry) {
  if (databaseStamp(c.get("services")) !== null) return null;
  const ctx = readContext(c);
  const { ot, info, objectId } = await target(c, ctx);
  const resource = info.resource;
  if (!resource) return null;
  if (!registry.linkingGuarded(ot.id)) {
    await registry.loadLinking(ot.id); // kept for the next request; this one reads step by step
    return null;
  }
  const url = publicUrlOf(c);
  const { limit, offset } = parsePaging(url.searchParams);
  let step!: Awaited<ReturnType<typeof linkedStatements>>;
  const answers = await freshRead(c, async () => {
    const guarded = registry.linkingGuarded(ot.id)!;
    addGuard(c, {
      name: "linking fields",
      statements: [guarded.statement],
      settle: ([rows]) => guarded.settle(rows),
    });
    step = await linkedStatements(
      c,
      ctx,
      { ot, resource, objectId, limit, offset },
      guarded.fields,
    );
    return step.statements as unknown as Queries;
  });
  const [exists, counted, pairs, ...rest] = [...answers];
  const missing = `No ${ot.appLabel}.${ot.model} with id ${objectId}.`;
  if (!(exists as unknown[]).length) throw notFound(missing);
  const total = (counted as { n: number }[]).reduce((n, r) => n + Number(r.n), 0);
  const page = (pairs as { k: number; id: number }[]).map((p) => ({
    k: Number(p.k),
    id: Number(p.id),
  }));
  if (step.charge) step.charge(rest.shift());
  const byField = new Map<number, Map<number, Record<string, unknown>>>();
  for (const [i, part] of step.parts.entries()) {
    const ids = page.filter((p) => part.ks.includes(p.k)).map((p) => p.id);
    const at = step.offsets[i]!;
    const answered = rest.slice(at, at + part.plan.statements.length);
    const judgedAt = at + part.plan.statements.length;
    proveJudged(ctx, part.judged, rest.slice(judgedAt, judgedAt + part.judged.length));
    const loaded = await part.plan.finish(answered, [...new Set(ids)]);
    const records = await hideUnviewable(ctx, c.get("auth"), part.model.resource, loaded);
    const byId = new Map(records.map((r) => [r.id as number, r]));
    for (const k of part.ks) byField.set(k, byId);
  }
  const results = page.flatMap(({ k, id }) => {
    const object = byField.get(k)?.get(id);
    const { field, model } = step.visible[k]!;
    return object
      ? [{ custom_object_type: nestedCot(ctx.baseUrl, model.cot), field_name: field.name, object }]
      : [];
  });
  return c.json({ count: total, ...pageLinks(url, total, limit, offset), results });
}

/** The statements of `linkedInOneRead`, built on the caches as they stand (run again when stale). */
async function linkedStatements(
  c: Ctx,
  ctx: ReadContext,
  q: {
    ot: { id: number; appLabel: string; model: string };
    resource: Resource;
    objectId: number;
    limit: number;
    offset: number;
  },
  linking: Linking[],
) {
  const { ot, resource, objectId } = q;
  const missing = `No ${ot.appLabel}.${ot.model} with id ${objectId}.`;
  // An object the caller may not view answers exactly like one that does not exist.
  if (!hasPermission(c, "view", ot.appLabel, ot.model)) throw notFound(missing);
  const viewable = await restrictWhere(ctx, c.get("auth"), "view", resource);
  const id = resource.list.idExpr;
  const exists = ctx.db.all(
    sql`SELECT ${id} AS id FROM ${resource.table} WHERE ${id} = ${objectId}${viewable ? sql` AND (${viewable})` : sql``}`,
  );
  const visible = linking.filter(({ model }) =>
    hasPermission(c, "view", "custom_objects", model.cot.slug),
  );
  const where = await linkWheres(ctx, c, visible, ot.id, objectId);
  // every field's count (each its own indexed lookup), and the page's (field, id) pairs in order:
  // a term per field, grouped within D1's five terms of a compound SELECT (decision 0161)
  const counts = visible.length
    ? ctx.db.all<{ n: number }>(
        unionAll(visible.map((l, k) => sql`SELECT ${k} AS k, ${countOf(l.field, where[k]!)} AS n`)),
      )
    : ctx.db.all<{ n: number }>(sql`SELECT 0 AS n`);
  const union = visible.length
    ? unionAll(
        visible.map((l, k) =>
          hasLinkTable(l.field)
            ? sql`SELECT DISTINCT ${k} AS k, source_id AS id FROM ${ident(linkTableName(l.field.customObjectTypeId, l.field.id))} WHERE ${where[k]}`
            : sql`SELECT ${k} AS k, id FROM ${ident(tableName(l.field.customObjectTypeId))} WHERE ${where[k]}`,
        ),
      )
    : sql`SELECT 0 AS k, 0 AS id WHERE 0`;
  const pageSql = sql`SELECT k, id FROM (${union}) ORDER BY k, id LIMIT ${q.limit} OFFSET ${q.offset}`;
  const pairs = ctx.db.all<{ k: number; id: number }>(pageSql);
  // one part per linking type: its rows, for the page's ids of its fields
  const byCot = new Map<number, { model: CotModel; ks: number[] }>();
  for (const [k, l] of visible.entries()) {
    const part = byCot.get(l.model.cot.id) ?? { model: l.model, ks: [] };
    part.ks.push(k);
    byCot.set(l.model.cot.id, part);
  }
  const idsOf = (ks: number[]) =>
    sql`SELECT id FROM (${pageSql}) WHERE k IN (${sql.join(
      ks.map((k) => sql`${k}`),
      sql`, `,
    )})`;
  const budget = budgetInRead(
    ctx,
    [...byCot.values()].map((p) => ({ resource: p.model.resource, ids: idsOf(p.ks) })),
  );
  const parts = [];
  for (const p of byCot.values()) {
    const ids = budget ? sql`SELECT * FROM (${idsOf(p.ks)}) WHERE ${budget.holds}` : idsOf(p.ks);
    // what hiding the records' tags and relations would ask after the read, judged in it
    const judged = await judgedInRead(ctx, c.get("auth"), p.model.resource, ids);
    parts.push({ ...p, plan: p.model.resource.loadPlan!(ctx, ids), judged });
  }
  const offsets: number[] = [];
  let at = 0;
  for (const p of parts) {
    offsets.push(at);
    at += p.plan.statements.length + p.judged.length;
  }
  return {
    statements: [
      exists,
      counts,
      pairs,
      ...(budget ? [budget.statement] : []),
      ...parts.flatMap((p) => [
        ...p.plan.statements,
        ...p.judged.map((j) => ctx.db.all(j.statement)),
      ]),
    ],
    charge: budget?.charge ?? null,
    parts,
    offsets,
    visible,
  };
}

/** Each visible field's condition for objects linking to the target, within the caller's view. */
async function linkWheres(
  ctx: ReadContext,
  c: Ctx,
  visible: Linking[],
  typeId: number,
  objectId: number,
): Promise<SQL[]> {
  const restricted = new Map<number, SQL | undefined>();
  for (const { model } of visible)
    if (!restricted.has(model.cot.id))
      restricted.set(model.cot.id, await restrictWhere(ctx, c.get("auth"), "view", model.resource));
  return visible.map(({ field, model }) => {
    const where = linkCondition(field, typeId, objectId);
    const limit = restricted.get(model.cot.id);
    if (!limit) return where;
    return hasLinkTable(field)
      ? sql`${where} AND source_id IN (SELECT ${model.table.id} FROM ${model.table} WHERE ${limit})`
      : sql`${where} AND ${limit}`;
  });
}

/** How many objects link to the target through `field` (`where`: `linkWheres`'s condition). */
function countOf(field: FieldRow, where: SQL) {
  return hasLinkTable(field)
    ? sql`(SELECT count(DISTINCT source_id) FROM ${ident(linkTableName(field.customObjectTypeId, field.id))} WHERE ${where})`
    : sql`(SELECT count(*) FROM ${ident(tableName(field.customObjectTypeId))} WHERE ${where})`;
}

export async function linkedObjects(c: Ctx, registry: CotRegistry) {
  const oneRead = await linkedInOneRead(c, registry);
  if (oneRead) return oneRead;
  const ctx = readContext(c);
  const url = publicUrlOf(c);
  const params = url.searchParams;
  const { ot, info, objectId } = await target(c, ctx);
  const missing = `No ${ot.appLabel}.${ot.model} with id ${objectId}.`;
  // An object the caller may not view answers exactly like one that does not exist.
  if (!hasPermission(c, "view", ot.appLabel, ot.model)) throw notFound(missing);
  if (!(await info.nested(ctx, [objectId])).has(objectId)) throw notFound(missing);
  if (info.resource)
    await requireObject(ctx, c.get("auth"), "view", info.resource, objectId, missing);

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
      restricted.set(cotId, await restrictWhere(ctx, c.get("auth"), "view", model.resource));
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
  // a term per field, grouped within D1's five terms of a compound SELECT (decision 0161)
  const counts = visible.length
    ? ((await ctx.db.all(
        unionAll(visible.map((f, k) => sql`SELECT ${k} AS k, ${countOf(f)} AS n`)),
      )) as { k: number; n: number }[])
    : [];
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
      c.get("auth"),
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
