/**
 * The field type registry: every type a custom object field can have, one module each
 * (docs/field-types.md). Adding a type is one module and one line here.
 */
import { boolean } from "./boolean";
import { coordinates } from "./coordinates";
import { date } from "./date";
import { datetime } from "./datetime";
import { decimal } from "./decimal";
import { integer } from "./integer";
import { json } from "./json";
import { longtext } from "./longtext";
import { multiobject } from "./multiobject";
import { multiselect } from "./multiselect";
import { object } from "./object";
import { select } from "./select";
import { text } from "./text";
import { url } from "./url";
import type { FieldTypeModule, Takes } from "./types";

export const FIELD_TYPE_MODULES = [
  text,
  longtext,
  integer,
  decimal,
  boolean,
  date,
  datetime,
  url,
  json,
  select,
  multiselect,
  object,
  multiobject,
  coordinates,
] as const satisfies readonly FieldTypeModule[];

export const FIELD_TYPES = FIELD_TYPE_MODULES.map((m) => m.name) as [string, ...string[]];

const byName = new Map<string, FieldTypeModule>(FIELD_TYPE_MODULES.map((m) => [m.name, m]));

export const isFieldType = (name: unknown): boolean => typeof name === "string" && byName.has(name);

/** The module of a field type; throws on a name no module has (stored rows are checked on write). */
export function fieldType(name: string): FieldTypeModule {
  const m = byName.get(name);
  if (!m) throw new Error(`unknown field type ${JSON.stringify(name)}`);
  return m;
}

export type {
  Checked,
  ScalarEncoder,
  Companion,
  FieldLike,
  FieldRow,
  FieldTypeModule,
  SchemaEnv,
  SqlType,
  Storage,
  TypeKey,
} from "./types";

/** "object and multiobject": the types a predicate holds for, for messages. */
export function typesWhere(test: (m: FieldTypeModule) => boolean): string {
  const names = FIELD_TYPE_MODULES.filter(test).map((m) => m.name);
  return names.length > 1
    ? `${names.slice(0, -1).join(", ")} and ${names.at(-1)}`
    : (names[0] ?? "no");
}

/** "integer and decimal": the types that take an attribute. */
export const typesTaking = (attribute: keyof Takes) => typesWhere((m) => !!m.takes[attribute]);
