/**
 * What an event rule may watch and deliver: only what its owner (and its webhook's owner) may
 * view, checked when the rule is written and again at every delivery (decision 0066).
 */
import type { Executor } from "../../db/client";
import { codename, loadGrants, userRowQuery } from "../auth/permissions";
import { admitted, hideUnviewable, restrictWhere } from "../auth/restrict";
import type { ApiRecord, AuthState, AuthUser, ReadContext, Resource } from "../context";

/**
 * Authentication and authorisation records: a rule on them would mail out new users' emails,
 * tokens and grants. Only a superuser may watch them (NetBox lets anyone with the view
 * permission; we are stricter).
 */
const SUPERUSER_ONLY = new Set([
  "users.user",
  "users.group",
  "users.token",
  "users.objectpermission",
]);

/** True when `user` may have an event rule watch objects of this type (constraints apply later). */
export function mayWatch(user: AuthUser, appLabel: string, model: string): boolean {
  if (user.isSuperuser) return true;
  if (SUPERUSER_ONLY.has(`${appLabel}.${model}`)) return false;
  return user.permissions.has(codename(appLabel, "view", model));
}

/** The owner as a read-only caller, with their grants as of now; null when missing or inactive. */
export async function ownerAuth(db: Executor, userId: number | null): Promise<AuthState | null> {
  if (userId == null) return null;
  const [row] = await userRowQuery(db, userId);
  if (!row?.isActive) return null;
  const grants = row.isSuperuser
    ? { permissions: new Set<string>(), constraints: new Map() }
    : await loadGrants(db, row.id);
  return {
    user: { id: row.id, username: row.username, isSuperuser: row.isSuperuser, ...grants },
    tokenId: null,
    writeEnabled: false,
  };
}

/**
 * True when `auth` may view the changed object now. A live object must be in the owner's
 * view under their constraints; a deleted one can no longer be tested against constraints, so
 * it passes only an unconstrained view permission.
 */
export async function mayViewChanged(
  ctx: ReadContext,
  auth: AuthState,
  resource: Resource,
  objectId: number,
  deleted: boolean,
): Promise<boolean> {
  const user = auth.user!;
  if (!mayWatch(user, resource.appLabel, resource.model)) return false;
  if (user.isSuperuser) return true;
  if (deleted) {
    const name = codename(resource.appLabel, "view", resource.model);
    return !user.constraints?.get(name) && !resource.ownerColumn && !resource.scope;
  }
  const where = await restrictWhere(ctx, auth, "view", resource);
  return (await admitted(ctx, resource, [objectId], where)).has(objectId);
}

/** The snapshots with nested objects `auth` may not view reduced to their ids. */
export async function hideFromOwner(
  ctx: ReadContext,
  auth: AuthState,
  resource: Resource,
  snapshots: Array<ApiRecord | null>,
): Promise<Array<ApiRecord | null>> {
  const present = snapshots.filter((s): s is ApiRecord => !!s);
  if (!present.length) return snapshots;
  const hidden = await hideUnviewable(ctx, auth, resource, present);
  let i = 0;
  return snapshots.map((s) => (s ? hidden[i++]! : null));
}
