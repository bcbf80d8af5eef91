/** `/api/users/`: users, groups, object permissions and tokens, as declarative models. */
import { eq } from "drizzle-orm";
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
import type { WriteContext } from "../rest/resource";
import { forbidden } from "../errors";
import { ACTIONS } from "./permissions";
import { guardPermissionWrites, guardUserWrites } from "./delegation";
import { stagedPermissionWrites, stagedUserWrites } from "./delegation-staged";
import { generateToken, generateV2Token, hashToken } from "./tokens";
import { parseNetwork } from "./networks";
import { slotKey } from "../slots";

/** The secret of a token issued inside a write, readable once by the route that answers (`token`). */
export const ISSUED_KEY = slotKey<string>("auth.issued-key");

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
  // throws or passes on what it is given: user writes are staged (decision 0092)
  validateReadsNothing: true,
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
// Token look-ups are cached per app only while a guard proves them current (decision 0085):
// nothing to forget when a user or token changes.
const userResource = guardUserWrites(userModelBase.resource);
const deleteUser = userResource.delete;
userResource.delete = async (ctx, id) => {
  const [row] = await ctx.db
    .select({ isSuperuser: users.isSuperuser })
    .from(users)
    .where(eq(users.id, id));
  if (row?.isSuperuser) requireSuperuserFor(ctx, "delete a superuser account");
  await deleteUser(ctx, id);
};
// one read and one batch, the rules of decision 0065 inside them (decision 0092)
userResource.staged = stagedUserWrites(userModelBase.resource.staged!);
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
  resource: {
    ...guardPermissionWrites(permissionModelBase.resource),
    staged: stagedPermissionWrites(permissionModelBase.resource.staged!),
  },
};
permissionModel.info = { ...permissionModelBase.info, resource: permissionModel.resource };
/** `allowed_ips`: a list of IPv4/IPv6 networks (CIDR); each must parse. */
function checkAllowedIps(value: unknown): string | null {
  if (!Array.isArray(value) || value.length > 100)
    return "Expected a list of at most 100 networks.";
  const bad = value.find((n) => typeof n !== "string" || !parseNetwork(n));
  return bad === undefined ? null : `Enter a valid IPv4 or IPv6 network: ${JSON.stringify(bad)}.`;
}

/** Gives a new token its secret (v2 by default, as NetBox 4.5+), stashed for the one answer that shows it. */
async function issueSecret(ctx: WriteContext, values: Record<string, unknown>) {
  values.version ??= 2;
  if (values.version === 2) {
    const { key, secret } = generateV2Token();
    Object.assign(values, { key, keyHash: await hashToken(secret), keyHint: secret.slice(-4) });
    ctx.scratch.set(ISSUED_KEY, secret);
    return;
  }
  const secret = generateToken();
  Object.assign(values, { key: null, keyHash: await hashToken(secret), keyHint: secret.slice(-4) });
  ctx.scratch.set(ISSUED_KEY, secret);
}

const tokenModelBase = defineModel({
  appLabel: "users",
  model: "token",
  verboseName: "token",
  path: "users/tokens",
  table: tokens,
  defaultOrdering: ["id"],
  display: (r) => (r.version === 2 && r.key ? r.key : `**********${r.keyHint}`),
  async validate(ctx, values, existing, errors) {
    // NetBox 4: only a superuser issues tokens for, or moves tokens to, another user. (An
    // anonymous writer here is the password provisioning route, which names its own user.)
    const actor = ctx.auth.user;
    if (actor && !actor.isSuperuser && values.userId !== undefined && values.userId !== actor.id) {
      throw forbidden("Only a superuser may create or assign a token for another user.");
    }
    if (existing) {
      if (values.version !== undefined && values.version !== existing.version)
        errors.add("version", "The version of an existing token cannot be changed.");
      return;
    }
    await issueSecret(ctx, values);
  },
  // the key is made here, nothing is read: token writes are staged (one read, one batch)
  validateReadsNothing: true,
  fields: [
    {
      name: "version",
      type: "integer",
      column: tokens.version,
      brief: true,
      check: (v) => (v === 1 || v === 2 ? null : '"version" must be 1 or 2.'),
    },
    {
      name: "key",
      type: "string",
      column: tokens.key,
      readOnly: true,
      nullable: true,
      brief: true,
    },
    { name: "user", type: "fk", column: tokens.userId, related: "users.user", required: true },
    {
      name: "description",
      type: "string",
      column: tokens.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    { name: "expires", type: "datetime", column: tokens.expires, nullable: true },
    { name: "last_used", type: "datetime", column: tokens.lastUsed, readOnly: true },
    { name: "enabled", type: "boolean", column: tokens.enabled, brief: true },
    { name: "write_enabled", type: "boolean", column: tokens.writeEnabled, brief: true },
    {
      name: "allowed_ips",
      type: "json",
      column: tokens.allowedIps,
      nullable: true,
      check: checkAllowedIps,
    },
  ],
});
export const tokenModel = {
  ...tokenModelBase,
  resource: { ...tokenModelBase.resource, ownerColumn: tokens.userId },
};
tokenModel.info = { ...tokenModelBase.info, resource: tokenModel.resource };
