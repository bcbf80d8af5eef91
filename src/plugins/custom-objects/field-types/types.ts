/**
 * What a field type module owns (see docs/field-types.md): its storage, the valibot schema of a
 * written value, encode/decode, filter lookups, JSON schemas, lossless type changes and search.
 * The engine (ddl, models, definitions, openapi) asks the module and never names a type itself.
 */
import type { SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type * as v from "valibot";
import type { customObjectTypeFields } from "../../../db/schema";
import type { JsonSchema } from "../../../core/json-schema";
import type { FilterSpec, SearchTerm } from "../../../core/rest/query";
import type { FieldDescription } from "../../../core/rest/resource";

export type FieldRow = typeof customObjectTypeFields.$inferSelect;
export type Checked = { value: unknown } | { error: string };
/** `encode` for one field: a written non-null value and the field's choices. */
export type ScalarEncoder = (raw: unknown, choices: ReadonlySet<string> | null) => Checked;
export type SqlType = "TEXT" | "INTEGER" | "REAL";

/** The field attributes a module reads (a stored row or a draft). */
export type FieldLike = Pick<
  FieldRow,
  "name" | "type" | "isPolymorphic" | "validationRegex" | "validationMinimum" | "validationMaximum"
> &
  Partial<FieldRow>;

/**
 * Where a field's values live: `column` — one column of the type's SQL type named like the
 * field; `reference` — `<name>_id` (and `<name>_type` when polymorphic); `links` — a link table.
 */
export type Storage = "column" | "reference" | "links";

/** Optional attributes of a field definition that only some types take. */
export interface Takes {
  /** validation_minimum / validation_maximum */
  range?: boolean;
  /** validation_regex */
  regex?: boolean;
  /** choice_set (required) */
  choices?: boolean;
  /** related_object_type(s), is_polymorphic, on_delete_behavior */
  related?: boolean;
}

/** A polymorphic field's member type, as its per-type filters name it. */
export interface TypeKey {
  /** `<app_label>_<model>` (host models), `custom_objects_<object type id>` (custom object types). */
  key: string;
  /** `app_label.model`: whom the filter may be named to (`FilterSpec.targetLabel`). */
  label: string;
}

export interface FilterContext {
  /** The field's own column (scalar storage), or the table's id for other storages. */
  column: SQLiteColumn;
  /** A column of the type's table by name. */
  columnNamed: (name: string) => SQLiteColumn;
  /** The table's id column. */
  id: SQLiteColumn;
  /** The quoted link table (links storage). */
  linkTable: SQL;
  /** An object type id's filter key and label: names a polymorphic field's per-type filters. */
  typeKey: (objectTypeId: number) => TypeKey | undefined;
}

/** What OpenAPI needs to describe references and choices. */
export interface SchemaEnv {
  /** Allowed values of a choice set. */
  choices: (choiceSetId: number | null) => string[];
  /** Their labels, in the same order. */
  choiceLabels: (choiceSetId: number | null) => string[];
  /** `app_label.model` of an object type id. */
  label: (objectTypeId: number) => string | undefined;
  /** The read schema of a reference (one target, or a polymorphic one keyed by object_type). */
  reference: (objectTypeId: number, polymorphic: boolean) => JsonSchema;
}

/**
 * A value a field keeps beside its own (url's link title, as upstream 0.7 keeps it): its own
 * column `<name>_<suffix>`, read and written as that key of the record, independent of the
 * field's value; its problems are keyed by that name.
 */
export interface Companion {
  readonly suffix: string;
  readonly sqlType: SqlType;
  /** Checks and encodes a written value; null (and what the module takes as empty) clears it. */
  encode(raw: unknown): Checked;
  /** The record value of a stored one. */
  decode(stored: unknown): unknown;
  readonly describeKind: FieldDescription["kind"];
  /** JSON Schemas in records and in requests. */
  readonly readSchema: JsonSchema;
  readonly writeSchema: JsonSchema;
}

export interface FieldTypeModule {
  readonly name: string;
  readonly storage: Storage;
  /** SQL type of the field's column (`column` storage) — `reference` is always INTEGER. */
  readonly sqlType: SqlType;
  /**
   * Gets a plain index on its column(s): object fields only (decision 0055). Every index costs
   * every insert; a unique field's UNIQUE index already serves its lookups.
   */
  readonly indexed: boolean;
  readonly canBeUnique: boolean;
  readonly canBePrimary: boolean;
  /** Whether `?ordering=<name>` sorts by it. */
  readonly orderable: boolean;
  /** Whether `q` searches it (when its search_weight is above 0). */
  readonly searchable: boolean;
  /** Whether it takes a `default`. */
  readonly takesDefault: boolean;
  readonly takes: Takes;
  /** What a field of this type is, for readers other than REST (GraphQL). */
  readonly describeKind: FieldDescription["kind"];
  /**
   * The value is an object of these parts (`coordinates`: latitude, longitude): a record also
   * carries each as `<name>_<part>`, and a write may give `<name>_<part>` instead of `<name>`
   * (a part left out keeps its stored value), as upstream spells them.
   */
  readonly parts?: readonly string[];
  /**
   * Read only as the parts (`<name>_<part>`), never as `<name>` (upstream's coordinates); a
   * write's problems are keyed by the part that is wrong (`partErrors`).
   */
  readonly flat?: boolean;
  /** Problems of a part-valued write, keyed by part (null when it is fine). */
  readonly partErrors?: (value: Record<string, unknown>) => Record<string, string> | null;
  /**
   * Values kept beside the field's own, each in its column `<name>_<suffix>` (column storage
   * only): DDL adds, renames, trashes and drops them with the field's column.
   */
  readonly companions?: readonly Companion[];
  /** A field of this type never changes to another type, nor another field to it. */
  readonly fixedType?: boolean;
  /** Types a stored value always carries over to without loss (no count needed). */
  readonly lossless: readonly string[];
  /**
   * The valibot schema a written (non-null) value must pass, before choice-set membership;
   * its output is the value as stored. Its JSON Schema documents the request body.
   */
  schema?(f: FieldLike): v.GenericSchema<unknown, unknown>;
  /** Checks and encodes a written non-null value (scalars; `choices` of the field's set). */
  encode(f: FieldLike, raw: unknown, choices: ReadonlySet<string> | null): Checked;
  /**
   * `encode` for one field with its checks built once, for a writer that converts thousands of
   * rows (a bulk create): the same answers, a plainly valid value taken without the schema's
   * walk, anything else answered by `encode`.
   */
  encoder?(f: FieldLike): ScalarEncoder;
  /** Turns a stored value back into its API value. */
  decode(stored: unknown): unknown;
  /** A stored value of another type (given as its API value and as text) in this type, or undefined. */
  fromOther?(api: unknown, text: string, from: FieldTypeModule): unknown;
  /** `?name=` filters the field adds. */
  filters(f: FieldLike, ctx: FilterContext): Record<string, FilterSpec>;
  /** How `q` searches the field's column when it is not matched as text (default: LIKE on it). */
  search?(column: SQLiteColumn): SearchTerm;
  /** JSON Schema of the value in records. */
  readSchema(f: FieldRow, env: SchemaEnv): JsonSchema;
  /** JSON Schema of the value in requests (before null/required handling). */
  writeSchema(f: FieldRow, env: SchemaEnv): JsonSchema;
}
