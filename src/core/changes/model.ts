/** `/api/core/object-changes/`: the change log, read-only (§7). */
import { inArray, or, sql, type SQL } from "drizzle-orm";
import { objectChanges, objectTypes, users } from "../../db/schema";
import {
  hideUnviewable,
  restrictionFor,
  restrictWhere,
  tagsJudged,
  tagsProved,
} from "../auth/restrict";
import { codename } from "../auth/permissions";
import type { AuthState, AuthUser, ModelInfo } from "../context";
import { defineModel, type DefinedModel } from "../models/define";
import { orNull, ref } from "../json-schema";
import { label as otLabel, type ObjectTypeRow } from "../object-types";
import { objectTypeFilters } from "../rest/object-type-filters";
import type { ApiRecord, ReadContext } from "../rest/resource";
import { CHANGE_ACTIONS } from "./record";
import { formsRead, modelsRead, withPageNames } from "./list-reads";
import { rememberChanges } from "./seen";
import { snapshotRelationStatements } from "./snapshot-relations";

const PAST = { create: "created", update: "updated", delete: "deleted" } as Record<string, string>;

export const objectChangeModel = defineModel({
  appLabel: "core",
  model: "objectchange",
  verboseName: "object change",
  path: "core/object-changes",
  table: objectChanges,
  changeLogged: false,
  defaultOrdering: ["-time", "-id"],
  display: (r) =>
    `${r.objectRepr} ${PAST[r.action] ?? r.action}${r.userName ? ` by ${r.userName}` : ""}`,
  fields: [
    { name: "time", type: "datetime", column: objectChanges.time, readOnly: true, brief: true },
    {
      name: "user",
      type: "fk",
      column: objectChanges.userId,
      related: "users.user",
      readOnly: true,
    },
    {
      name: "user_name",
      type: "string",
      column: objectChanges.userName,
      readOnly: true,
      search: true,
    },
    { name: "request_id", type: "string", column: objectChanges.requestId, readOnly: true },
    {
      name: "action",
      type: "choice",
      column: objectChanges.action,
      choices: CHANGE_ACTIONS,
      readOnly: true,
      brief: true,
    },
    {
      name: "changed_object_type",
      type: "object_type_ref",
      column: objectChanges.changedObjectTypeId,
      readOnly: true,
    },
    {
      name: "changed_object_id",
      type: "integer",
      column: objectChanges.changedObjectId,
      readOnly: true,
    },
    {
      name: "object_repr",
      type: "string",
      column: objectChanges.objectRepr,
      readOnly: true,
      search: true,
    },
    { name: "prechange_data", type: "json", column: objectChanges.prechangeData, readOnly: true },
    { name: "postchange_data", type: "json", column: objectChanges.postchangeData, readOnly: true },
  ],
  openapi: {
    record: {
      changed_object_type: orNull(ref("ObjectTypeLabel")),
      changed_object: orNull(ref("NestedObject")),
    },
  },
  async decorate(ctx, rows, records) {
    // a revert of a record looked at lately knows its model before it reads (decision 0118)
    rememberChanges(ctx.services, rows);
    const types = await ctx.services.objectTypes.byIds(
      rows.map((r) => r.changedObjectTypeId as number),
      ctx.db,
      ctx.scratch,
    );
    const nested = await nestedObjects(
      ctx,
      rows.map((r) => [r.changedObjectTypeId as number, r.changedObjectId as number]),
    );
    rows.forEach((row, i) => {
      const rec = records[i]!;
      const ot = types.get(row.changedObjectTypeId);
      rec.changed_object_type = ot ? otLabel(ot) : null;
      rec.changed_object = nested.get(`${row.changedObjectTypeId}:${row.changedObjectId}`) ?? null;
    });
  },
});
readOnlyWithoutTimestamps(objectChangeModel);
// The snapshots are answered as the caller may view them (`hideNested`) but stored whole: a filter
// on their stored text searched what the caller may not view (a hidden type's or tenant's name, a
// withheld count). NetBox's change log has no such filters (decisions 0064, 0187, 0191).
delete objectChangeModel.resource.list.filters.prechange_data;
delete objectChangeModel.resource.list.filters.postchange_data;
// the page's rows and, in the same read, what names their objects (decision 0143)
withPageNames(objectChangeModel.resource);
// A change record holds snapshots of its object: a non-superuser sees it only while they may view
// that object under their view constraints (decision 0064).
objectChangeModel.resource.scope = (user, ctx, auth) => changeScope(ctx, auth, user);
Object.assign(
  objectChangeModel.resource.list.filters,
  objectTypeFilters("changed_object_type", objectChanges.changedObjectTypeId),
);

/**
 * A record's `user_name` (and the display naming it) copies its user's name: a caller who may not
 * view that user reads neither (decision 0191; NetBox shows it). Its filter, `q` and ordering see
 * the name only where the caller may view the user, so a guess answers as one naming nobody.
 */
const userNameSeen = (view: SQL | undefined) =>
  view === undefined
    ? objectChanges.userName
    : sql`(CASE WHEN ${objectChanges.userId} IN (SELECT ${users.id} FROM ${users} WHERE ${view}) THEN ${objectChanges.userName} END)`;
objectChangeModel.resource.list.heldTo = {
  labels: ["users.user"],
  within: (list, [view]) => {
    const name = userNameSeen(view);
    return {
      ...list,
      filters: { ...list.filters, user_name: { ...list.filters.user_name!, expr: name } },
      orderings: { ...list.orderings, user_name: name },
      search: list.search.map((term) => (term === objectChanges.userName ? name : term)),
    };
  },
};

/** The record without its user's name: `user_name` empty, `display` naming no one. */
const nameless = (rec: ApiRecord): ApiRecord => {
  const action = (rec.action as { value?: string } | null)?.value ?? "";
  return { ...rec, user_name: "", display: `${rec.object_repr} ${PAST[action] ?? action}` };
};
// the user `relations` reduced to its id: the name goes with it
objectChangeModel.resource.rederive = (rec) => {
  const user = rec.user as Record<string, unknown> | null | undefined;
  return user && !("username" in user) && rec.user_name ? nameless(rec) : rec;
};

// Snapshots are records of their object's model: related objects the caller may not view are
// hidden in them exactly as in that model's own answers. A deleted user's name (no user left to
// judge) shows only to a caller whose view of users is unconstrained.
objectChangeModel.resource.hideNested = async (ctx, auth, records) => {
  const out: ApiRecord[] = [];
  const loginRequired = ctx.services.config.loginRequired;
  const usersWhole = restrictionFor(auth, loginRequired, "view", "users", "user").kind === "all";
  for (const raw of records) {
    const rec = !usersWhole && raw.user == null && raw.user_name ? nameless(raw) : raw;
    const label = typeof rec.changed_object_type === "string" ? rec.changed_object_type : null;
    const [app, model] = label ? (label.split(".") as [string, string]) : ["", ""];
    const proven = label ? modelsRead(ctx)?.get(label) : undefined;
    const target = label
      ? (proven ?? (await ctx.services.models.get(app, model, ctx)))?.resource
      : undefined;
    if (!target) {
      out.push(rec);
      continue;
    }
    const snap = async (data: unknown) =>
      data && typeof data === "object" && !Array.isArray(data)
        ? (await hideUnviewable(ctx, auth, target, [data as ApiRecord]))[0]
        : data;
    out.push({
      ...rec,
      prechange_data: await snap(rec.prechange_data),
      postchange_data: await snap(rec.postchange_data),
    });
  }
  return out;
};

/**
 * In the one-read GET and list: the tags the page's snapshots hold, judged against a constrained
 * caller's tag view in the same read (decision 0153), and the objects their relations point at
 * (decision 0166), so their hiding asks nothing after.
 */
objectChangeModel.resource.hideNestedPlan = async (ctx, auth, ids) => {
  const page = typeof ids === "number" ? sql`${ids}` : ids;
  const heldIn = (column: SQL) =>
    sql`SELECT CASE "j"."type" WHEN 'object' THEN json_extract("j"."value", '$.id') ELSE "j"."value" END FROM ${objectChanges}, json_each(CASE WHEN json_valid(${column}) THEN ${column} END, '$.tags') AS "j" WHERE ${objectChanges.id} IN (${page})`;
  const statement = await tagsJudged(
    ctx,
    auth,
    sql`${heldIn(sql`${objectChanges.prechangeData}`)} UNION ${heldIn(sql`${objectChanges.postchangeData}`)}`,
  );
  // and the objects their relations point at (one statement per related model)
  const related = await snapshotRelationStatements(ctx, auth, page);
  return statement ? [{ statement, proved: tagsProved }, ...related] : related;
};

/** The nested forms `{id, url, display, …}` of generic references that still exist. */
export async function nestedObjects(
  ctx: ReadContext,
  refs: Array<[number, number]>,
): Promise<Map<string, ApiRecord>> {
  const out = new Map<string, ApiRecord>();
  const byType = new Map<number, Set<number>>();
  for (const [typeId, id] of refs)
    (byType.get(typeId) ?? byType.set(typeId, new Set()).get(typeId)!).add(id);
  const read = formsRead(ctx);
  const types = await ctx.services.objectTypes.byIds([...byType.keys()], ctx.db, ctx.scratch);
  for (const [typeId, ids] of byType) {
    const forms = read?.get(typeId);
    if (forms) {
      // looked up in the page's own read: an id it did not find names nothing now
      for (const id of ids) if (forms.has(id)) out.set(`${typeId}:${id}`, forms.get(id)!);
      continue;
    }
    const ot = types.get(typeId);
    const info = ot ? await ctx.services.models.get(ot.appLabel, ot.model, ctx) : null;
    if (!info) continue;
    for (const [id, rec] of await info.nested(ctx, [...ids])) out.set(`${typeId}:${id}`, rec);
  }
  return out;
}

/**
 * Log-like tables have no `created`/`last_updated` pair: drop the keys, filters and orderings
 * the declarative serialiser adds for them.
 */
export function readOnlyWithoutTimestamps(model: DefinedModel, keep: string[] = []) {
  const load = model.resource.load;
  const drop = ["created", "last_updated"].filter((k) => !keep.includes(k));
  model.resource.load = async (ctx, ids) =>
    (await load(ctx, ids)).map((rec) => {
      for (const k of drop) delete rec[k];
      return rec;
    });
  model.info.resource = model.resource;
  model.spec.openapi = {
    ...model.spec.openapi,
    omit: [...(model.spec.openapi?.omit ?? []), ...drop],
  };
  for (const k of drop) {
    delete model.resource.list.filters[k];
    delete model.resource.list.orderings[k];
  }
}

/** `app_label.model` of every type the user holds a view permission on. */
function viewedLabels(user: AuthUser): string[] {
  return [...user.permissions].flatMap((name) => {
    const dot = name.indexOf(".");
    const rest = name.slice(dot + 1);
    return dot > 0 && rest.startsWith("view_") ? [`${name.slice(0, dot)}.${rest.slice(5)}`] : [];
  });
}

/**
 * The change records a non-superuser may read: those about objects of a type they may view
 * whole, and those about an existing object their view constraints (and the model's own scope,
 * such as a token's owner) admit. An object that no longer exists is judged by no snapshot: its
 * records show only where the view of its type is unconstrained (decision 0064).
 */
async function changeScope(ctx: ReadContext, auth: AuthState, user: AuthUser): Promise<SQL> {
  const labels = viewedLabels(user);
  if (!labels.length) return sql`0`;
  const whole: number[] = [];
  const some: SQL[] = [];
  for (const ot of await scopeTypes(ctx, labels)) {
    const info = ot.info ?? (await ctx.services.models.get(ot.appLabel, ot.model, ctx));
    const target = info?.resource;
    if (target?.scope === objectChangeModel.resource.scope) continue; // the log records no changes to itself
    if (!target) {
      // a model that is gone (a removed custom object type): only an unconstrained view reads it
      if (!user.constraints?.has(codename(ot.appLabel, "view", ot.model))) whole.push(ot.id);
      continue;
    }
    const where = await restrictWhere(ctx, auth, "view", target);
    if (!where) whole.push(ot.id);
    else
      some.push(
        sql`(${objectChanges.changedObjectTypeId} = ${ot.id} AND ${objectChanges.changedObjectId} IN (SELECT ${target.list.idExpr} FROM ${target.table} WHERE ${where}))`,
      );
  }
  const terms = [
    whole.length ? inArray(objectChanges.changedObjectTypeId, whole) : undefined,
    ...some,
  ].filter((x): x is SQL => !!x);
  return terms.length ? (or(...terms) as SQL) : sql`0`;
}

/**
 * The object types `labels` name, each with its model where a cache knows both without a read:
 * a host model's (its type never changes), or a run-time model its plugin caches, proven by a
 * guard that rides in the request's read (only where the context takes guards: decision 0143).
 * The others are read.
 */
async function scopeTypes(
  ctx: ReadContext,
  labels: string[],
): Promise<Array<ObjectTypeRow & { info?: ModelInfo }>> {
  const known: Array<ObjectTypeRow & { info?: ModelInfo }> = [];
  const unknown: string[] = [];
  for (const label of labels) {
    const [appLabel, model] = label.split(".") as [string, string];
    const row = ctx.services.objectTypes.cached(appLabel, model);
    // a run-time model from its cache even where its type's row is cached: no read for its model
    const cached = ctx.guard ? ctx.services.models.cachedByLabel(label) : null;
    if (cached) ctx.guard!(cached.guard);
    if (cached) known.push({ id: cached.objectTypeId, appLabel, model, info: cached.info });
    else if (row) known.push(row);
    else unknown.push(label);
  }
  if (!unknown.length) return known;
  const read = await ctx.db
    .select({ id: objectTypes.id, appLabel: objectTypes.appLabel, model: objectTypes.model })
    .from(objectTypes)
    .where(inArray(sql`${objectTypes.appLabel} || '.' || ${objectTypes.model}`, unknown));
  return [...known, ...read];
}
