/**
 * Who may change what a user is granted (decision 0065): group membership and a group's
 * permissions change only with view and change on that group, and nobody but a superuser hands
 * out (to anyone, themselves included) a grant they do not hold themselves.
 */
import { and, eq, inArray } from "drizzle-orm";
import {
  objectPermissions,
  objectTypes,
  permissionGroups,
  permissionObjectTypes,
  permissionUsers,
  userGroups,
} from "../../db/schema";
import type { AuthUser } from "../context";
import { forbidden } from "../errors";
import type { Resource, WriteContext } from "../rest/resource";
import { codename, constraintSets, type ConstraintSet } from "./permissions";
import { admitted, restrictWhere } from "./restrict";

/** A write a superuser or no user (provisioning, a job) makes is not limited here. */
export const limited = (ctx: WriteContext): AuthUser | null => {
  const user = ctx.auth.user;
  return user && !user.isSuperuser ? user : null;
};

const difference = (a: number[], b: number[]) => a.filter((x) => !b.includes(x));

/** One constraint set as text with sorted keys, so equal sets compare equal. */
const setKey = (set: ConstraintSet) =>
  JSON.stringify(
    Object.keys(set)
      .sort()
      .map((k) => [k, set[k]]),
  );

async function groupsOfUser(ctx: WriteContext, userId: number): Promise<number[]> {
  const rows = await ctx.db
    .select({ id: userGroups.groupId })
    .from(userGroups)
    .where(eq(userGroups.userId, userId));
  return rows.map((r) => r.id);
}

async function assigneesOf(ctx: WriteContext, permissionId: number) {
  const users = await ctx.db
    .select({ id: permissionUsers.userId })
    .from(permissionUsers)
    .where(eq(permissionUsers.permissionId, permissionId));
  const groups = await ctx.db
    .select({ id: permissionGroups.groupId })
    .from(permissionGroups)
    .where(eq(permissionGroups.permissionId, permissionId));
  return { users: users.map((r) => r.id), groups: groups.map((r) => r.id) };
}

/** 403 unless the writer may view and change every group in `ids` (their membership changes). */
async function requireGroupRights(ctx: WriteContext, ids: number[]) {
  if (!ids.length) return;
  const groups = (await ctx.services.models.get("users", "group", ctx))?.resource;
  if (!groups) throw forbidden();
  for (const action of ["view", "change"] as const) {
    const ok = await admitted(ctx, groups, ids, await restrictWhere(ctx, ctx.auth, action, groups));
    if (ids.some((id) => !ok.has(id)))
      throw forbidden(
        "You do not have permission to change the members or permissions of this group.",
      );
  }
}

/** True when `user` holds `name` with constraints at least as wide as `sets` (null: none). */
export function holds(user: AuthUser, name: string, sets: ConstraintSet[] | null): boolean {
  if (!user.permissions.has(name)) return false;
  const own = user.constraints?.get(name);
  if (!own) return true; // held unconstrained
  if (!sets) return false; // an unconstrained grant of something they hold constrained
  const mine = new Set(own.map(setKey));
  return sets.every((s) => mine.has(setKey(s)));
}

/** 403 unless every enabled permission in `permissionIds` grants only what `user` holds. */
async function requireHeld(ctx: WriteContext, user: AuthUser, permissionIds: number[]) {
  if (!permissionIds.length) return;
  const rows = await ctx.db
    .select({
      actions: objectPermissions.actions,
      constraints: objectPermissions.constraints,
      appLabel: objectTypes.appLabel,
      model: objectTypes.model,
    })
    .from(objectPermissions)
    .innerJoin(permissionObjectTypes, eq(permissionObjectTypes.permissionId, objectPermissions.id))
    .innerJoin(objectTypes, eq(objectTypes.id, permissionObjectTypes.objectTypeId))
    .where(and(inArray(objectPermissions.id, permissionIds), eq(objectPermissions.enabled, true)));
  for (const r of rows) {
    const sets = constraintSets(r.constraints);
    for (const action of r.actions ?? [])
      if (!holds(user, codename(r.appLabel, action, r.model), sets))
        throw forbidden("You may not grant permissions you do not hold yourself.");
  }
}

async function permissionsOfGroups(ctx: WriteContext, groupIds: number[]): Promise<number[]> {
  if (!groupIds.length) return [];
  const rows = await ctx.db
    .select({ id: permissionGroups.permissionId })
    .from(permissionGroups)
    .where(inArray(permissionGroups.groupId, groupIds));
  return [...new Set(rows.map((r) => r.id))];
}

/** After a user's groups changed from `before`: rights over each group, and no wider grants. */
async function checkMembership(ctx: WriteContext, userId: number, before: number[]) {
  const user = limited(ctx);
  if (!user) return;
  const after = await groupsOfUser(ctx, userId);
  const added = difference(after, before);
  await requireGroupRights(ctx, [...added, ...difference(before, after)]);
  await requireHeld(ctx, user, await permissionsOfGroups(ctx, added));
}

/** Users: membership as `checkMembership` says; another user's password is a superuser's to set. */
export function guardUserWrites(resource: Resource): Resource {
  return {
    ...resource,
    // the staged writes carry the same rules (`delegation-staged.ts`; models.ts wires them)
    staged: undefined,
    async create(ctx, input) {
      const id = await resource.create(ctx, input);
      if (Object.hasOwn(input, "groups")) await checkMembership(ctx, id, []);
      return id;
    },
    async update(ctx, id, input, partial) {
      const user = limited(ctx);
      if (user && id !== user.id && Object.hasOwn(input, "password"))
        throw forbidden("Only a superuser may set another user's password.");
      const before = Object.hasOwn(input, "groups") ? await groupsOfUser(ctx, id) : null;
      await resource.update(ctx, id, input, partial);
      if (before) await checkMembership(ctx, id, before);
    },
  };
}

/** What a permission grants: a change to these while it is assigned hands that grant out. */
const GRANT_KEYS = ["actions", "object_types", "constraints", "enabled"];

/**
 * After a permission was written (from `before`, null on create): rights over each group it was
 * attached to or taken from, and, when it hands out anything new, nothing beyond the writer's own.
 */
async function checkPermission(
  ctx: WriteContext,
  id: number,
  input: Record<string, unknown>,
  before: { users: number[]; groups: number[] } | null,
) {
  const user = limited(ctx);
  if (!user) return;
  const after = await assigneesOf(ctx, id);
  const was = before ?? { users: [], groups: [] };
  await requireGroupRights(ctx, [
    ...difference(after.groups, was.groups),
    ...difference(was.groups, after.groups),
  ]);
  const assigned = after.users.length + after.groups.length > 0;
  const handsOut =
    difference(after.users, was.users).length > 0 ||
    difference(after.groups, was.groups).length > 0 ||
    (assigned && GRANT_KEYS.some((k) => Object.hasOwn(input, k)));
  if (handsOut) await requireHeld(ctx, user, [id]);
}

/** Object permissions: see `checkPermission`. */
export function guardPermissionWrites(resource: Resource): Resource {
  return {
    ...resource,
    // the staged writes carry the same rules (`delegation-staged.ts`; models.ts wires them)
    staged: undefined,
    async create(ctx, input) {
      const id = await resource.create(ctx, input);
      await checkPermission(ctx, id, input, null);
      return id;
    },
    async update(ctx, id, input, partial) {
      const before = limited(ctx) ? await assigneesOf(ctx, id) : null;
      await resource.update(ctx, id, input, partial);
      await checkPermission(ctx, id, input, before);
    },
  };
}
