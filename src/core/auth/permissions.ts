/**
 * NetBox object permissions: an action on an object type, granted to users or groups.
 * `requirePermission` is the one check every route uses.
 */
import { and, eq, inArray, or, sql } from "drizzle-orm";
import type { Executor } from "../../db/client";
import { objectPermissions, objectTypes, permissionGroups, permissionObjectTypes, permissionUsers, userGroups } from "../../db/schema";
import type { Ctx } from "../context";
import { forbidden, notAuthenticated } from "../errors";

export type Action = "view" | "add" | "change" | "delete";
export const ACTIONS: Action[] = ["view", "add", "change", "delete"];

export const codename = (appLabel: string, action: string, model: string) => `${appLabel}.${action}_${model}`;

/** Every codename granted to a user through enabled permissions (direct or via groups). */
export async function loadPermissions(db: Executor, userId: number): Promise<Set<string>> {
  const groupIds = db.select({ id: userGroups.groupId }).from(userGroups).where(eq(userGroups.userId, userId));
  const rows = await db
    .select({ actions: objectPermissions.actions, appLabel: objectTypes.appLabel, model: objectTypes.model })
    .from(objectPermissions)
    .innerJoin(permissionObjectTypes, eq(permissionObjectTypes.permissionId, objectPermissions.id))
    .innerJoin(objectTypes, eq(objectTypes.id, permissionObjectTypes.objectTypeId))
    .where(
      and(
        eq(objectPermissions.enabled, true),
        or(
          inArray(objectPermissions.id, db.select({ id: permissionUsers.permissionId }).from(permissionUsers).where(eq(permissionUsers.userId, userId))),
          inArray(objectPermissions.id, db.select({ id: permissionGroups.permissionId }).from(permissionGroups).where(inArray(permissionGroups.groupId, groupIds))),
        ),
      ),
    );
  const out = new Set<string>();
  for (const r of rows) for (const action of r.actions ?? []) out.add(codename(r.appLabel, action, r.model));
  return out;
}

/**
 * Throws 403 unless the caller may do `action` on the object type. Reads need a user unless
 * LOGIN_REQUIRED is false; writes always need a user and a write-enabled token.
 */
export async function requirePermission(c: Ctx, action: Action, target: { appLabel: string; model: string }) {
  const auth = c.var.auth;
  const user = auth.user;
  if (!user) {
    if (action === "view" && !c.var.services.config.loginRequired) return;
    throw notAuthenticated();
  }
  if (action !== "view" && !auth.writeEnabled) throw forbidden("This token does not permit write operations.");
  if (user.isSuperuser) return;
  if (!user.permissions.has(codename(target.appLabel, action, target.model))) throw forbidden();
}

/** True when the caller holds the permission (no throw). */
export function hasPermission(c: Ctx, action: Action, appLabel: string, model: string): boolean {
  const user = c.var.auth.user;
  if (!user) return action === "view" && !c.var.services.config.loginRequired;
  return user.isSuperuser || user.permissions.has(codename(appLabel, action, model));
}

export { sql };
