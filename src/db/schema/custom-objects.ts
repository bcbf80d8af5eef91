/** Custom object types and their fields. Each COT also owns a run-time table `co_<id>` (not declared here). */
import { sql } from "drizzle-orm";
import { integer, sqliteTable, text, uniqueIndex, index, real } from "drizzle-orm/sqlite-core";
import { idIndex, pk, timestamps } from "./common";
import { choiceSets, objectTypes } from "./core";

/** A NetBox permission-constraint object (AND of lookups), or a list of them (OR). */
export type ConstraintCondition = Record<string, unknown> | Array<Record<string, unknown>>;

export const customObjectTypes = sqliteTable(
  "custom_object_types",
  {
    id: pk(),
    name: text("name").notNull(),
    slug: text("slug").notNull(),
    verboseName: text("verbose_name").notNull().default(""),
    verboseNamePlural: text("verbose_name_plural").notNull().default(""),
    version: text("version").notNull().default(""),
    groupName: text("group_name").notNull().default(""),
    description: text("description").notNull().default(""),
    schemaDocument: text("schema_document", { mode: "json" }).$type<Record<
      string,
      unknown
    > | null>(),
    /** The object type row of `custom_objects.<slug>`; its `model` follows the slug. */
    objectTypeId: integer("object_type_id").references(() => objectTypes.id, {
      onDelete: "set null",
    }),
    /** Next `schema_id` to hand out to a field: monotonic, never reused. */
    nextSchemaId: integer("next_schema_id").notNull().default(1),
    /** Bumped on every change to the type or its fields; the model registry keys on it. */
    shapeVersion: integer("shape_version").notNull().default(1),
    /** Compound uniqueness: lists of field names, each enforced by a unique index `co_<id>_ut<n>`. */
    uniqueTogether: text("unique_together", { mode: "json" })
      .$type<string[][]>()
      .notNull()
      .default(sql`'[]'`),
    /**
     * Conditional constraints (decision 0087): partial unique keys, each an index `co_<id>_uc<n>`
     * with a WHERE clause, and checks, each a pair of triggers `co_<id>_ck<n>_i`/`_u`.
     */
    conditionalConstraints: text("conditional_constraints", { mode: "json" })
      .$type<{
        unique: Array<{ fields: string[]; condition: ConstraintCondition }>;
        checks: Array<{ name: string; condition: ConstraintCondition }>;
      }>()
      .notNull()
      .default(sql`'{"unique":[],"checks":[]}'`),
    /** How objects show (`display`): `{{ field }}` placeholders; empty = primary field or name. */
    displayExpression: text("display_expression").notNull().default(""),
    /** Objects carry `local_context_data` (a column of `co_<id>`); set only at creation. */
    configContextEnabled: integer("config_context_enabled", { mode: "boolean" })
      .notNull()
      .default(false),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("cot_slug_uq").on(t.slug),
    uniqueIndex("cot_name_uq").on(t.name),
    idIndex("custom_object_types", t),
  ],
);

export const customObjectTypeFields = sqliteTable(
  "custom_object_type_fields",
  {
    id: pk(),
    customObjectTypeId: integer("custom_object_type_id")
      .notNull()
      .references(() => customObjectTypes.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    label: text("label").notNull().default(""),
    description: text("description").notNull().default(""),
    type: text("type").notNull(),
    primary: integer("primary", { mode: "boolean" }).notNull().default(false),
    required: integer("required", { mode: "boolean" }).notNull().default(false),
    unique: integer("unique", { mode: "boolean" }).notNull().default(false),
    default: text("default", { mode: "json" }).$type<unknown>(),
    choiceSetId: integer("choice_set_id").references(() => choiceSets.id, { onDelete: "restrict" }),
    validationRegex: text("validation_regex").notNull().default(""),
    validationMinimum: real("validation_minimum"),
    validationMaximum: real("validation_maximum"),
    isPolymorphic: integer("is_polymorphic", { mode: "boolean" }).notNull().default(false),
    relatedObjectTypeId: integer("related_object_type_id").references(() => objectTypes.id, {
      onDelete: "restrict",
    }),
    /** For polymorphic fields: the allowed object type ids. */
    relatedObjectTypeIds: text("related_object_type_ids", { mode: "json" })
      .$type<number[]>()
      .notNull()
      .$defaultFn(() => []),
    relatedObjectFilter: text("related_object_filter", { mode: "json" }).$type<Record<
      string,
      unknown
    > | null>(),
    onDeleteBehavior: text("on_delete_behavior").notNull().default("set_null"),
    groupName: text("group_name").notNull().default(""),
    searchWeight: integer("search_weight").notNull().default(1000),
    filterLogic: text("filter_logic").notNull().default("loose"),
    uiVisible: text("ui_visible").notNull().default("always"),
    uiEditable: text("ui_editable").notNull().default("yes"),
    weight: integer("weight").notNull().default(100),
    isCloneable: integer("is_cloneable", { mode: "boolean" }).notNull().default(false),
    schemaId: integer("schema_id").notNull(),
    deprecated: integer("deprecated", { mode: "boolean" }).notNull().default(false),
    deprecatedSince: text("deprecated_since").notNull().default(""),
    scheduledRemoval: text("scheduled_removal").notNull().default(""),
    /** Shown as `_context` of objects that others reference (upstream's context fields). */
    context: integer("context", { mode: "boolean" }).notNull().default(false),
    /** Upstream's reverse relation name of an object/multiobject field (unique per target type). */
    relatedName: text("related_name").notNull().default(""),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("cotf_cot_name_uq").on(t.customObjectTypeId, t.name),
    uniqueIndex("cotf_cot_schema_id_uq").on(t.customObjectTypeId, t.schemaId),
    // one field per reverse name on a related type (0156): the database settles a race for it
    uniqueIndex("cotf_related_name_uq")
      .on(t.relatedObjectTypeId, t.relatedName)
      .where(sql`related_name <> ''`),
    index("cotf_related_ot_idx").on(t.relatedObjectTypeId),
    idIndex("custom_object_type_fields", t),
  ],
);

/**
 * Removed fields and types kept with their data for `SCHEMA_TRASH_DAYS` (decision 0051): the
 * records as they were, and where their storage went (renamed columns or tables).
 */
export const customObjectTrash = sqliteTable(
  "custom_object_trash",
  {
    id: pk(),
    /** "field" or "type" */
    kind: text("kind").notNull(),
    customObjectTypeId: integer("custom_object_type_id").notNull(),
    slug: text("slug").notNull(),
    /** The field's name, or the type's name. */
    name: text("name").notNull(),
    /** The removed records: `{field}` or `{cot, fields, objectType, tags}`. */
    record: text("record", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    /** Renames done: `[[original, trash name], …]` for columns (`columns`) and tables (`tables`). */
    storage: text("storage", { mode: "json" })
      .$type<{ columns: [string, string][]; tables: [string, string][] }>()
      .notNull(),
    rows: integer("rows").notNull().default(0),
    removed: text("removed").notNull(),
    expires: text("expires").notNull(),
  },
  (t) => [index("cot_trash_expires_idx").on(t.expires), idIndex("custom_object_trash", t)],
);
