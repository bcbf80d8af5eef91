/**
 * Permission constraints on custom object types, for the schema routes: which types a caller
 * may see in previews, exports and the trash, and whether an apply stays inside what they may
 * add and change (checked before and after, in the apply's transaction).
 */
import { forbidden } from "../../../core/errors";
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
