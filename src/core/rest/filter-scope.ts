/**
 * Filters over other objects (an object's tags) held to what the caller may view of them, so a
 * filter naming a hidden one answers as one naming nothing (decision 0178); filters naming object
 * types held to the types the caller may see (0187).
 */
import type { SQL } from "drizzle-orm";
import type { AuthState } from "../context";
import { restrictWhere } from "../auth/restrict";
import { typeSight } from "../auth/type-sight";
import type { FilterSpec, ListSpec } from "./query";
import type { ReadContext, Resource } from "./resource";

/**
 * `list` with each filter of `names` that reaches other objects held to the caller's view of
 * them; `list` itself when none does or nothing limits that view (a superuser: no copy, no cost).
 */
export async function viewerFilters(
  ctx: ReadContext,
  auth: AuthState,
  list: ListSpec,
  names: (name: string) => boolean,
): Promise<ListSpec> {
  let filters: Record<string, FilterSpec> | undefined;
  const sight = typeSight(ctx.services, auth);
  for (const [name, spec] of Object.entries(list.filters)) {
    // a per-type filter of a type the caller may not see is no filter of theirs: answered as
    // one naming a type that does not exist (0213), not by a 200 confirming the type is there
    if (
      spec.targetLabel &&
      !sight.whole &&
      names(name) &&
      !sight.sees(typeName(spec.targetLabel))
    ) {
      filters ??= { ...list.filters };
      delete filters[name];
      continue;
    }
    // a filter naming object types: only those the caller may see (decision 0187)
    if (spec.seenTypes && !sight.whole && names(name)) {
      filters ??= { ...list.filters };
      filters[name] = spec.seenTypes(sight.rows);
      continue;
    }
    if (!spec.heldTo || !names(name)) continue;
    const views: Array<SQL | undefined> = [];
    for (const label of spec.heldTo.labels) views.push(await viewOf(ctx, auth, label));
    if (views.every((v) => v === undefined)) continue;
    filters ??= { ...list.filters };
    filters[name] = spec.heldTo.within(views);
  }
  const held = filters ? { ...list, filters } : list;
  return list.heldTo ? heldList(ctx, auth, held, list.heldTo) : held;
}

/** `app_label.model` as a type name. */
function typeName(label: string): { appLabel: string; model: string } {
  const dot = label.indexOf(".");
  return { appLabel: label.slice(0, dot), model: label.slice(dot + 1) };
}

/** `list` with the columns it copies from other objects held to the caller's view of them. */
async function heldList(
  ctx: ReadContext,
  auth: AuthState,
  list: ListSpec,
  heldTo: NonNullable<ListSpec["heldTo"]>,
): Promise<ListSpec> {
  const views: Array<SQL | undefined> = [];
  for (const label of heldTo.labels) views.push(await viewOf(ctx, auth, label));
  return views.every((v) => v === undefined) ? list : heldTo.within(list, views);
}

/** The caller's view condition over the model `label`'s table; undefined when nothing limits it. */
async function viewOf(ctx: ReadContext, auth: AuthState, label: string) {
  const [app, model] = label.split(".") as [string, string];
  const target = (await ctx.services.models.get(app, model, ctx))?.resource;
  return target ? restrictWhere(ctx, auth, "view", target) : undefined;
}

/** The filters a list request's query string uses: a parameter is `name` or `name__<lookup>`. */
export const usedBy =
  (params: URLSearchParams) =>
  (name: string): boolean =>
    [...params.keys()].some((key) => key === name || key.startsWith(`${name}__`));

/** `resource` whose filters of `names` are held to the caller's view (`viewerFilters`). */
export async function viewerResource(
  ctx: ReadContext,
  auth: AuthState,
  resource: Resource,
  names: (name: string) => boolean,
): Promise<Resource> {
  const list = await viewerFilters(ctx, auth, resource.list, names);
  if (list === resource.list) return resource;
  // the resource's own members stay reachable (it may be more than a plain record)
  return Object.assign(Object.create(resource) as Resource, { list });
}
