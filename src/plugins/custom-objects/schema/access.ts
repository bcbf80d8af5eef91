/**
 * Permission constraints on custom object types, for the schema routes: which types a caller
 * may see in previews, exports and the trash, and whether an apply stays inside what they may
 * add and change (checked before and after, in the apply's transaction).
 */
import { ApiError, forbidden } from "../../../core/errors";
import { admitted, restrictWhere } from "../../../core/auth/restrict";
import type { Action } from "../../../core/auth/permissions";
import type { AuthState } from "../../../core/context";
import type { ReadContext, WriteContext } from "../../../core/rest/resource";
import { cotModel } from "../types/api";

/** The ids among `ids` of types the caller may `action` (all when nothing restricts them). */
export async function cotsAllowed(
  ctx: ReadContext,
  auth: AuthState,
  action: Action,
  ids: number[],
): Promise<Set<number>> {
  return admitted(
    ctx,
    cotModel.resource,
    ids,
    await restrictWhere(ctx, auth, action, cotModel.resource),
  );
}

/** 403 unless the caller may `action` every one of the types (by id); names only their slugs. */
export async function requireCots(
  ctx: WriteContext,
  action: Action,
  cots: Map<number, { slug?: unknown }>,
) {
  const ids = [...cots.keys()];
  if (!ids.length) return;
  const allowed = await cotsAllowed(ctx, ctx.auth, action, ids);
  const refused = ids
    .filter((id) => !allowed.has(id))
    .map((id) => String(cots.get(id)?.slug ?? id));
  if (refused.length) throw cotsRefused(action, refused);
}

/** The 403 of a schema write touching types outside the caller's `action`, named by slug. */
export const cotsRefused = (action: Action, slugs: string[]) =>
  forbidden(
    `You do not have permission to ${action} the custom object type(s) ${slugs.join(", ")} as submitted.`,
  );

/**
 * The slugs of the types among `cots` the caller may not view. To an apply they are types that do
 * not exist (decision 0129): a kept one is refused as an add, a removed one is already gone.
 */
export async function hiddenAmong(
  ctx: WriteContext,
  cots: Map<number, { slug?: unknown }>,
): Promise<Set<string>> {
  const viewable = await cotsAllowed(ctx, ctx.auth, "view", [...cots.keys()]);
  return new Set([...cots].filter(([id]) => !viewable.has(id)).map(([, r]) => String(r.slug)));
}

/** The state an apply sees: without the types the caller may not view (decision 0129). */
export function withoutHidden<T>(state: Map<string, T>, hidden?: ReadonlySet<string>) {
  if (!hidden?.size) return state;
  return new Map([...state].filter(([slug]) => !hidden.has(slug)));
}

/** An apply's document types the caller may not view: refused as the add of a new slug is. */
export function refuseHidden(slugs: string[], hidden?: ReadonlySet<string>) {
  const refused = slugs.filter((s) => hidden?.has(s));
  if (refused.length) throw cotsRefused("add", refused);
}

/**
 * The 409 of removing a type other types' fields point at. It counts none and names only a field
 * of a type the caller may view: a count or a name would tell of fields they may not (0129).
 */
export async function protectedRefusal(
  ctx: WriteContext,
  slug: string,
  refs: Array<{ name: string; cotId: number }>,
  verb: "remove" | "delete" = "remove",
) {
  const cotIds = [...new Set(refs.map((r) => r.cotId))];
  const viewable = await cotsAllowed(ctx, ctx.auth, "view", cotIds);
  const shown = refs.find((r) => viewable.has(r.cotId));
  const example = shown ? ` (e.g. "${shown.name}")` : "";
  return ApiError.detail(
    409,
    `Cannot ${verb} custom object type "${slug}": fields of other types point at it${example}. Remove those fields first.`,
    "protected",
  );
}
