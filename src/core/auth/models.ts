/** `/api/users/`: users, groups, object permissions and tokens, as declarative models. */
import { eq, inArray } from "drizzle-orm";
import {
  groups,
  objectPermissions,
  permissionGroups,
  permissionObjectTypes,
  permissionUsers,
  tokens,
  userGroups,
  users,
} from "../../db/schema";
import { defineModel } from "../models/define";
import type { Resource, WriteContext } from "../rest/resource";
import { forbidden } from "../errors";
import { ACTIONS } from "./permissions";
import { guardPermissionWrites, guardUserWrites } from "./delegation";
import { generateToken, hashToken } from "./tokens";
import { slotKey } from "../slots";

/** The plain token key issued inside a write, readable once by the route that answers. */
export const ISSUED_KEY = slotKey<string>("auth.issued-key");

/**
 * Forgets cached token lookups once the change has committed: a lookup made before the commit
 * could otherwise put the old row back, and the `database` cache backend needs the connection
 * that the transaction holds until then.
 */
function forgetAfterCommit(ctx: WriteContext, keyHashes: string[]) {
  if (!keyHashes.length) return;
  const forget = () =>
    Promise.all(keyHashes.map((h) => ctx.services.cache.delete(tokenCacheKey(h)))).then(
      () => undefined,
    );
  if (ctx.onCommit) ctx.onCommit(forget);
  else throw new Error("token cache invalidation needs a transaction with onCommit");
}

/** Forgets cached token lookups of these users (after a user or token change). */
async function forgetTokensOf(ctx: WriteContext, userIds: number[]) {
  if (!userIds.length) return;
  const rows = await ctx.db
    .select({ keyHash: tokens.keyHash })
    .from(tokens)
    .where(inArray(tokens.userId, userIds));
  forgetAfterCommit(
    ctx,
    rows.map((r) => r.keyHash),
  );
}

export const tokenCacheKey = (keyHash: string) => `auth:token:${keyHash}`;

/** Wraps update/delete so cached token lookups never outlive the change. */
function invalidating(
  resource: Resource,
  userIdsOf: (ctx: WriteContext, id: number) => Promise<number[]>,
): Resource {
  return {
    ...resource,
    // a staged delete forgets the same lookups; other staged writes would go around the wrapper
    staged: resource.staged && {
      async delete(ctx, ids, options) {
        for (const id of new Set(ids)) await forgetTokensOf(ctx, await userIdsOf(ctx, id));
        return resource.staged!.delete(ctx, ids, options);
      },
    },
    async update(ctx, id, input, partial) {
      await forgetTokensOf(ctx, await userIdsOf(ctx, id));
      await resource.update(ctx, id, input, partial);
    },
    async delete(ctx, id) {
      await forgetTokensOf(ctx, await userIdsOf(ctx, id));
      await resource.delete(ctx, id);
    },
  };
}

/** Superuser accounts are a superuser's business: nobody else creates, edits or deletes one. */
function requireSuperuserFor(ctx: WriteContext, what: string) {
  if (!ctx.auth.user?.isSuperuser) throw forbidden(`Only a superuser may ${what}.`);
}

const userModelBase = defineModel({
  appLabel: "users",
  model: "user",
  verboseName: "user",
  path: "users/users",
  table: users,
  defaultOrdering: ["username"],
  display: (r) => r.username,
  async validate(ctx, values, existing) {
    if (values.isSuperuser === true && !existing?.isSuperuser)
      requireSuperuserFor(ctx, "grant superuser status");
    if (existing?.isSuperuser) requireSuperuserFor(ctx, "change a superuser account");
  },
  fields: [
    {
      name: "username",
      type: "string",
      column: users.username,
      required: true,
      maxLength: 150,
      search: true,
      brief: true,
      check: (v) =>
        /^[\w.@+-]+$/.test(String(v))
          ? null
          : "Enter a valid username: letters, digits and @/./+/-/_ only.",
    },
    {
      name: "password",
      type: "password",
      column: users.passwordHash,
      writeOnly: true,
      maxLength: 128,
      nullable: true,
    },
    { name: "first_name", type: "string", column: users.firstName, maxLength: 150, search: true },
    { name: "last_name", type: "string", column: users.lastName, maxLength: 150, search: true },
    {
      name: "email",
      type: "string",
      column: users.email,
      maxLength: 254,
      search: true,
      check: (v) =>
        v === "" || /^[^@\s]+@[^@\s]+$/.test(String(v)) ? null : "Enter a valid email address.",
    },
    { name: "is_superuser", type: "boolean", column: users.isSuperuser },
    { name: "is_active", type: "boolean", column: users.isActive },
    {
      name: "groups",
      type: "m2m",
      related: "users.group",
      link: { table: userGroups, own: userGroups.userId, other: userGroups.groupId },
    },
  ],
});
const userResource = guardUserWrites(
  invalidating(userModelBase.resource, async (_ctx, id) => [id]),
);
const deleteUser = userResource.delete;
userResource.delete = async (ctx, id) => {
  const [row] = await ctx.db
    .select({ isSuperuser: users.isSuperuser })
    .from(users)
    .where(eq(users.id, id));
  if (row?.isSuperuser) requireSuperuserFor(ctx, "delete a superuser account");
  await deleteUser(ctx, id);
};
export const userModel = { ...userModelBase, resource: userResource };
userModel.info = { ...userModelBase.info, resource: userModel.resource };

export const groupModel = defineModel({
  appLabel: "users",
  model: "group",
  verboseName: "group",
  path: "users/groups",
  table: groups,
  defaultOrdering: ["name"],
  display: (r) => r.name,
  fields: [
    {
      name: "name",
      type: "string",
      column: groups.name,
      required: true,
      maxLength: 150,
      search: true,
      brief: true,
    },
    {
      name: "description",
      type: "string",
      column: groups.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
  ],
});

const permissionModelBase = defineModel({
  appLabel: "users",
  model: "objectpermission",
  verboseName: "permission",
  path: "users/permissions",
  table: objectPermissions,
  defaultOrdering: ["name"],
  display: (r) => r.name,
  fields: [
    {
      name: "name",
      type: "string",
      column: objectPermissions.name,
      required: true,
      maxLength: 100,
      search: true,
      brief: true,
    },
    {
      name: "description",
      type: "string",
      column: objectPermissions.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    { name: "enabled", type: "boolean", column: objectPermissions.enabled },
    {
      name: "object_types",
      type: "object_types",
      link: {
        table: permissionObjectTypes,
        own: permissionObjectTypes.permissionId,
        other: permissionObjectTypes.objectTypeId,
      },
    },
    {
      name: "actions",
      type: "json",
      column: objectPermissions.actions,
      required: true,
      check: (v) =>
        Array.isArray(v) && v.length && v.every((a) => typeof a === "string" && /^[a-z_]+$/.test(a))
          ? null
          : `Provide a non-empty list of actions (${ACTIONS.join(", ")} or custom action names).`,
    },
    { name: "constraints", type: "json", column: objectPermissions.constraints, nullable: true },
    {
      name: "groups",
      type: "m2m",
      related: "users.group",
      link: {
        table: permissionGroups,
        own: permissionGroups.permissionId,
        other: permissionGroups.groupId,
      },
    },
    {
      name: "users",
      type: "m2m",
      related: "users.user",
      link: {
        table: permissionUsers,
        own: permissionUsers.permissionId,
        other: permissionUsers.userId,
      },
    },
  ],
});

// Assigning a permission hands out what it grants: decision 0065 says who may.
export const permissionModel = {
  ...permissionModelBase,
  resource: guardPermissionWrites(permissionModelBase.resource),
};
permissionModel.info = { ...permissionModelBase.info, resource: permissionModel.resource };

const tokenModelBase = defineModel({
  appLabel: "users",
  model: "token",
  verboseName: "token",
  path: "users/tokens",
  table: tokens,
  defaultOrdering: ["id"],
  display: (r) => `**********${r.keyHint}`,
  async validate(ctx, values, existing) {
    // NetBox 4: only a superuser issues tokens for, or moves tokens to, another user. (An
    // anonymous writer here is the password provisioning route, which names its own user.)
    const actor = ctx.auth.user;
    if (actor && !actor.isSuperuser && values.userId !== undefined && values.userId !== actor.id) {
      throw forbidden("Only a superuser may create or assign a token for another user.");
    }
    if (existing) return;
    const key = generateToken();
    values.keyHash = await hashToken(key);
    values.keyHint = key.slice(-4);
    ctx.scratch.set(ISSUED_KEY, key);
  },
  fields: [
    { name: "user", type: "fk", column: tokens.userId, related: "users.user", required: true },
    {
      name: "description",
      type: "string",
      column: tokens.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    { name: "write_enabled", type: "boolean", column: tokens.writeEnabled, brief: true },
    { name: "expires", type: "datetime", column: tokens.expires, nullable: true },
    { name: "last_used", type: "datetime", column: tokens.lastUsed, readOnly: true },
  ],
});
export const tokenModel = {
  ...tokenModelBase,
  resource: invalidating(
    { ...tokenModelBase.resource, ownerColumn: tokens.userId },
    async (ctx, id) => {
      const [row] = await ctx.db
        .select({ keyHash: tokens.keyHash })
        .from(tokens)
        .where(eq(tokens.id, id));
      if (row) forgetAfterCommit(ctx, [row.keyHash]);
      return [];
    },
  ),
};
tokenModel.info = { ...tokenModelBase.info, resource: tokenModel.resource };
