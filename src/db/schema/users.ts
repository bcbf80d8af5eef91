/** Users, groups, object permissions and API tokens (§4). */
import {
  integer,
  primaryKey,
  sqliteTable,
  text,
  uniqueIndex,
  index,
} from "drizzle-orm/sqlite-core";
import { idIndex, pk, timestamps } from "./common";
import { objectTypes } from "./core";

export const users = sqliteTable(
  "users",
  {
    id: pk(),
    username: text("username").notNull(),
    passwordHash: text("password_hash"),
    firstName: text("first_name").notNull().default(""),
    lastName: text("last_name").notNull().default(""),
    email: text("email").notNull().default(""),
    isSuperuser: integer("is_superuser", { mode: "boolean" }).notNull().default(false),
    isActive: integer("is_active", { mode: "boolean" }).notNull().default(true),
    ...timestamps,
  },
  (t) => [uniqueIndex("users_username_uq").on(t.username), idIndex("users", t)],
);

export const groups = sqliteTable(
  "groups",
  {
    id: pk(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    ...timestamps,
  },
  (t) => [uniqueIndex("groups_name_uq").on(t.name), idIndex("groups", t)],
);

/** Owner groups (NetBox 4.5): a named set of owners. */
export const ownerGroups = sqliteTable(
  "owner_groups",
  {
    id: pk(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    ...timestamps,
  },
  (t) => [uniqueIndex("owner_groups_name_uq").on(t.name), idIndex("owner_groups", t)],
);

/**
 * Owners (NetBox 4.5): who answers for an object — users and user groups under one name.
 * Objects point at an owner through a nullable `owner_id`; an owner in use cannot be deleted.
 */
export const owners = sqliteTable(
  "owners",
  {
    id: pk(),
    name: text("name").notNull(),
    groupId: integer("group_id").references(() => ownerGroups.id, { onDelete: "restrict" }),
    description: text("description").notNull().default(""),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("owners_name_uq").on(t.name),
    index("owners_group_idx").on(t.groupId),
    idIndex("owners", t),
  ],
);

export const ownerUsers = sqliteTable(
  "owner_users",
  {
    ownerId: integer("owner_id")
      .notNull()
      .references(() => owners.id, { onDelete: "cascade" }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
  },
  (t) => [
    primaryKey({ columns: [t.ownerId, t.userId] }),
    index("owner_users_user_idx").on(t.userId),
  ],
);

export const ownerUserGroups = sqliteTable(
  "owner_user_groups",
  {
    ownerId: integer("owner_id")
      .notNull()
      .references(() => owners.id, { onDelete: "cascade" }),
    groupId: integer("group_id")
      .notNull()
      .references(() => groups.id, { onDelete: "cascade" }),
  },
  (t) => [
    primaryKey({ columns: [t.ownerId, t.groupId] }),
    index("owner_user_groups_group_idx").on(t.groupId),
  ],
);

export const userGroups = sqliteTable(
  "user_groups",
  {
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    groupId: integer("group_id")
      .notNull()
      .references(() => groups.id, { onDelete: "cascade" }),
  },
  (t) => [
    primaryKey({ columns: [t.userId, t.groupId] }),
    index("user_groups_group_idx").on(t.groupId),
  ],
);

export const objectPermissions = sqliteTable(
  "object_permissions",
  {
    id: pk(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    actions: text("actions", { mode: "json" }).$type<string[]>().notNull(),
    constraints: text("constraints", { mode: "json" }).$type<unknown>(),
    ...timestamps,
  },
  (t) => [idIndex("object_permissions", t)],
);

export const permissionObjectTypes = sqliteTable(
  "object_permission_object_types",
  {
    permissionId: integer("permission_id")
      .notNull()
      .references(() => objectPermissions.id, { onDelete: "cascade" }),
    objectTypeId: integer("object_type_id")
      .notNull()
      .references(() => objectTypes.id, { onDelete: "cascade" }),
  },
  (t) => [
    primaryKey({ columns: [t.permissionId, t.objectTypeId] }),
    index("opot_ot_idx").on(t.objectTypeId),
  ],
);

export const permissionUsers = sqliteTable(
  "object_permission_users",
  {
    permissionId: integer("permission_id")
      .notNull()
      .references(() => objectPermissions.id, { onDelete: "cascade" }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
  },
  (t) => [primaryKey({ columns: [t.permissionId, t.userId] }), index("opu_user_idx").on(t.userId)],
);

export const permissionGroups = sqliteTable(
  "object_permission_groups",
  {
    permissionId: integer("permission_id")
      .notNull()
      .references(() => objectPermissions.id, { onDelete: "cascade" }),
    groupId: integer("group_id")
      .notNull()
      .references(() => groups.id, { onDelete: "cascade" }),
  },
  (t) => [
    primaryKey({ columns: [t.permissionId, t.groupId] }),
    index("opg_group_idx").on(t.groupId),
  ],
);

export const tokens = sqliteTable(
  "tokens",
  {
    id: pk(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    /** 1: a 40-character secret (`Token <secret>`); 2: `nbt_<key>.<secret>` (NetBox 4.5+). */
    version: integer("version").notNull().default(1),
    /** v2 only: the 12-character public key that names the token (null for v1). */
    key: text("key"),
    /** SHA-256 of the token's secret, hex. The secret itself is never stored. */
    keyHash: text("key_hash").notNull(),
    /** Last four characters, so a user can tell tokens apart. */
    keyHint: text("key_hint").notNull(),
    description: text("description").notNull().default(""),
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    writeEnabled: integer("write_enabled", { mode: "boolean" }).notNull().default(true),
    /** Networks (CIDR) the token may be used from; null or empty: anywhere. */
    allowedIps: text("allowed_ips", { mode: "json" }).$type<string[]>(),
    expires: text("expires"),
    lastUsed: text("last_used"),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("tokens_key_hash_uq").on(t.keyHash),
    uniqueIndex("tokens_key_uq").on(t.key),
    index("tokens_user_idx").on(t.userId),
    idIndex("tokens", t),
  ],
);

/**
 * Per user, a `stamp` that triggers move on every write that can change a look-up of one of the
 * user's tokens (migration 0018): what a remote read compares to prove its cached token and
 * grants current (decision 0209), and a write batch's token guard. No row reads as ''.
 */
export const authStamp = sqliteTable("auth_stamp", {
  userId: integer("user_id").primaryKey(),
  stamp: text("stamp").notNull(),
});
