/** Object types (content types), tags and custom-field choice sets. */
import {
  integer,
  primaryKey,
  sqliteTable,
  text,
  uniqueIndex,
  index,
} from "drizzle-orm/sqlite-core";
import { idIndex, pk, timestamps } from "./common";

export const objectTypes = sqliteTable(
  "object_types",
  { id: pk(), appLabel: text("app_label").notNull(), model: text("model").notNull() },
  (t) => [uniqueIndex("object_types_label_model_uq").on(t.appLabel, t.model)],
);

export const tags = sqliteTable(
  "tags",
  {
    id: pk(),
    name: text("name").notNull(),
    slug: text("slug").notNull(),
    color: text("color").notNull().default("9e9e9e"),
    description: text("description").notNull().default(""),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("tags_name_uq").on(t.name),
    uniqueIndex("tags_slug_uq").on(t.slug),
    idIndex("tags", t),
  ],
);

/** Which object types a tag may be applied to (none = any). */
export const tagObjectTypes = sqliteTable(
  "tag_object_types",
  {
    tagId: integer("tag_id")
      .notNull()
      .references(() => tags.id, { onDelete: "cascade" }),
    objectTypeId: integer("object_type_id")
      .notNull()
      .references(() => objectTypes.id, { onDelete: "cascade" }),
  },
  (t) => [primaryKey({ columns: [t.tagId, t.objectTypeId] })],
);

/** Generic (object_type, object_id) → tag assignments. */
export const taggedItems = sqliteTable(
  "tagged_items",
  {
    tagId: integer("tag_id")
      .notNull()
      .references(() => tags.id, { onDelete: "cascade" }),
    objectTypeId: integer("object_type_id")
      .notNull()
      .references(() => objectTypes.id, { onDelete: "cascade" }),
    objectId: integer("object_id").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.objectTypeId, t.objectId, t.tagId] }),
    index("tagged_items_tag_idx").on(t.tagId),
  ],
);

export const choiceSets = sqliteTable(
  "custom_field_choice_sets",
  {
    id: pk(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    /** [[value, label], …] */
    extraChoices: text("extra_choices", { mode: "json" }).$type<[string, string][]>().notNull(),
    orderAlphabetically: integer("order_alphabetically", { mode: "boolean" })
      .notNull()
      .default(false),
    ...timestamps,
  },
  (t) => [uniqueIndex("choice_sets_name_uq").on(t.name), idIndex("custom_field_choice_sets", t)],
);

/** A small key/value store with expiry: the `database` cache backend. */
export const cacheEntries = sqliteTable(
  "cache_entries",
  {
    key: text("key").primaryKey(),
    value: text("value").notNull(),
    /** Epoch milliseconds; null = never expires. */
    expiresAt: integer("expires_at"),
  },
  (t) => [index("cache_entries_expires_idx").on(t.expiresAt)],
);
