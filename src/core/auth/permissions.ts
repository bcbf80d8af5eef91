/**
 * NetBox object permissions: an action on an object type, granted to users or groups.
 * `requirePermission` is the one check every route uses.
 */
import { and, eq, inArray, or, sql, type SQL } from "drizzle-orm";
import type { Executor } from "../../db/client";
import {
  objectPermissions,
  objectTypes,
  permissionGroups,
  permissionObjectTypes,
  permissionUsers,
  userGroups,
  users,
} from "../../db/schema";
import type { AuthState, AuthUser, Ctx } from "../context";
import { forbidden, notAuthenticated } from "../errors";

export type Action = "view" | "add" | "change" | "delete";
export const ACTIONS: Action[] = ["view", "add", "change", "delete"];

export const codename = (appLabel: string, action: string, model: string) =>
  `${appLabel}.${action}_${model}`;

/** One constraint object: `{"<field>[__<lookup>]": value, …}`, all of which must hold. */
export type ConstraintSet = Record<string, unknown>;

/**
 * Flattens a permission's stored constraints into constraint sets. `null` means the grant is
 * unrestricted; a value that is neither an object nor a list of objects grants nothing.
 */
export function constraintSets(raw: unknown): ConstraintSet[] | null {
  if (raw === null || raw === undefined) return null;
  const list = Array.isArray(raw) ? raw : [raw];
  if (!list.length) return null;
  const sets: ConstraintSet[] = [];
  for (const item of list) {
    if (!item || typeof item !== "object" || Array.isArray(item)) return [{ __invalid__: true }];
    // `{}` matches every object, so it lifts the restriction like an empty constraint
    if (!Object.keys(item).length) return null;
    sets.push(item as ConstraintSet);
  }
  return sets;
}

/** What a user is granted: codenames, and constraint sets where every grant is constrained. */
export interface Grants {
  permissions: Set<string>;
  constraints: Map<string, Record<string, unknown>[]>;
}

/**
 * The enabled grants of the user `userId` names (an id, or a subquery for one), as rows in a
 * fixed order: `foldGrants` turns them into `Grants`, and equal rows mean equal grants (the auth
 * cache compares them to prove itself current, decision 0085).
 */
export function grantRowsQuery(db: Executor, userId: number | SQL) {
  const groupIds = db
    .select({ id: userGroups.groupId })
    .from(userGroups)
    .where(eq(userGroups.userId, userId as number));
  return db
    .select({
      actions: objectPermissions.actions,
      constraints: objectPermissions.constraints,
      appLabel: objectTypes.appLabel,
      model: objectTypes.model,
    })
    .from(objectPermissions)
    .innerJoin(permissionObjectTypes, eq(permissionObjectTypes.permissionId, objectPermissions.id))
    .innerJoin(objectTypes, eq(objectTypes.id, permissionObjectTypes.objectTypeId))
    .where(
      and(
        eq(objectPermissions.enabled, true),
        or(
          inArray(
            objectPermissions.id,
            db
              .select({ id: permissionUsers.permissionId })
              .from(permissionUsers)
              .where(eq(permissionUsers.userId, userId as number)),
          ),
          inArray(
            objectPermissions.id,
            db
              .select({ id: permissionGroups.permissionId })
              .from(permissionGroups)
              .where(inArray(permissionGroups.groupId, groupIds)),
          ),
        ),
      ),
    )
    .orderBy(objectPermissions.id, objectTypes.id);
}

export type GrantRow = Awaited<ReturnType<typeof grantRowsQuery>>[number];

/**
 * `grantRowsQuery` as one text value computed by SQL (every row's columns quoted, in order):
 * a write batch compares it with the value a cached read took, proving the grants unchanged
 * (decision 0107). Any difference, even in the order of rows, only ever reads as "changed".
 */
export function grantsPrintSql(db: Executor, userId: SQL): SQL<string> {
  return sql<string>`coalesce((SELECT group_concat(quote("actions") || quote("constraints") || quote("app_label") || quote("model"), ';') FROM (${grantRowsQuery(db, userId)})), '')`;
}

/** Codenames and their constraints (NetBox: an unconstrained grant lifts every constraint). */
export function foldGrants(rows: GrantRow[]): Grants {
  const permissions = new Set<string>();
  const constrained = new Map<string, Record<string, unknown>[]>();
  const unconstrained = new Set<string>();
  for (const r of rows) {
    const sets = constraintSets(r.constraints);
    for (const action of r.actions ?? []) {
      const name = codename(r.appLabel, action, r.model);
      permissions.add(name);
      if (!sets) unconstrained.add(name);
      else constrained.set(name, [...(constrained.get(name) ?? []), ...sets]);
    }
  }
  for (const name of unconstrained) constrained.delete(name);
  return { permissions, constraints: constrained };
}

/** A user's grants, read now. */
export async function loadGrants(db: Executor, userId: number): Promise<Grants> {
  return foldGrants(await grantRowsQuery(db, userId));
}

/**
 * Throws 403 unless the caller may do `action` on the object type. Reads need a user unless
 * LOGIN_REQUIRED is false; writes always need a user and a write-enabled token.
 */
export async function requirePermission(
  c: Ctx,
  action: Action,
  target: { appLabel: string; model: string },
) {
  const auth = c.get("auth");
  const user = auth.user;
  if (!user) {
    if (action === "view" && !c.get("services").config.loginRequired) return;
    throw notAuthenticated();
  }
  if (action !== "view" && !auth.writeEnabled)
    throw forbidden("This token does not permit write operations.");
  if (user.isSuperuser) return;
  if (!user.permissions.has(codename(target.appLabel, action, target.model))) throw forbidden();
}

/**
 * Whether the caller holds any permission on the model (or reads as an anonymous caller may): a
 * custom object type without one does not exist to them at its endpoints (decision 0178).
 */
export function holdsAnyPermission(c: Ctx, appLabel: string, model: string): boolean {
  return holdsAny(c.get("auth"), c.get("services").config.loginRequired, appLabel, model);
}

/** `holdsAnyPermission` of a caller outside a request's context. */
export function holdsAny(
  auth: AuthState,
  loginRequired: boolean,
  appLabel: string,
  model: string,
): boolean {
  const user = auth.user;
  if (!user) return !loginRequired;
  if (user.isSuperuser) return true;
  return ACTIONS.some((a) => user.permissions.has(codename(appLabel, a, model)));
}

/** The models of `appLabel` on which `user` holds any permission (from their codenames). */
export function modelsHeld(user: AuthUser, appLabel: string): string[] {
  const out = new Set<string>();
  for (const name of user.permissions) {
    if (!name.startsWith(`${appLabel}.`)) continue;
    const rest = name.slice(appLabel.length + 1);
    const action = ACTIONS.find((a) => rest.startsWith(`${a}_`));
    if (action) out.add(rest.slice(action.length + 1));
  }
  return [...out];
}

/** True when the caller holds the permission (no throw). */
export function hasPermission(c: Ctx, action: Action, appLabel: string, model: string): boolean {
  const user = c.get("auth").user;
  if (!user) return action === "view" && !c.get("services").config.loginRequired;
  return user.isSuperuser || user.permissions.has(codename(appLabel, action, model));
}

/** A user's row as a caller is built from it (a job's caller, an event rule's owner). */
export const userRowQuery = (db: Executor, userId: number) =>
  db
    .select({
      id: users.id,
      username: users.username,
      isSuperuser: users.isSuperuser,
      isActive: users.isActive,
    })
    .from(users)
    .where(eq(users.id, userId));
