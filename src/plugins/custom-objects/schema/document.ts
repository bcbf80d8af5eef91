/**
 * Schema documents (§5.1): the valibot schema that validates them, plus the type-specific
 * checks a plain shape cannot express. Errors come back as JSON paths, at most 20.
 */
import * as v from "valibot";
import { FILTER_LOGIC, NAME_RE, ON_DELETE, RESERVED_SLUGS, SLUG_RE, UI_EDITABLE, UI_VISIBLE, isReservedFieldName } from "../constants";
import { FIELD_TYPES, fieldType, typesTaking, typesWhere } from "../field-types";

import { MAX_COLUMNS_PER_TYPE } from "../../../core/limits";
import { columnCount, tooManyColumns } from "../ddl";

const MAX_ERRORS = 20;
const RELATED_RE = /^[a-z][a-z0-9_-]*\/[-a-zA-Z0-9_]+$/;

const name = v.pipe(v.string(), v.maxLength(50), v.regex(NAME_RE, "must match ^[a-z0-9]+(_[a-z0-9]+)*$"), v.check((s) => !isReservedFieldName(s), "is a reserved field name"));
const text = (max: number) => v.pipe(v.string(), v.maxLength(max));
const related = v.pipe(v.string(), v.regex(RELATED_RE, 'must be "<app_label>/<model>" (e.g. "dcim/site" or "custom-objects/<slug>")'));
const smallInt = v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(32767));

export const FieldEntrySchema = v.strictObject({
  id: v.pipe(v.number(), v.integer(), v.minValue(1, "must be a positive integer")),
  name,
  type: v.picklist(FIELD_TYPES, `must be one of ${FIELD_TYPES.join(", ")}`),
  label: v.optional(text(50)),
  description: v.optional(text(200)),
  primary: v.optional(v.boolean()),
  required: v.optional(v.boolean()),
  unique: v.optional(v.boolean()),
  default: v.optional(v.unknown()),
  choice_set: v.optional(v.nullable(v.pipe(v.string(), v.minLength(1)))),
  validation_regex: v.optional(text(500)),
  validation_minimum: v.optional(v.nullable(v.number())),
  validation_maximum: v.optional(v.nullable(v.number())),
  is_polymorphic: v.optional(v.boolean()),
  related_object_type: v.optional(v.nullable(related)),
  related_object_types: v.optional(v.array(related)),
  related_object_filter: v.optional(v.nullable(v.record(v.string(), v.unknown()))),
  on_delete_behavior: v.optional(v.picklist(ON_DELETE)),
  group_name: v.optional(text(50)),
  search_weight: v.optional(smallInt),
  filter_logic: v.optional(v.picklist(FILTER_LOGIC)),
  ui_visible: v.optional(v.picklist(UI_VISIBLE)),
  ui_editable: v.optional(v.picklist(UI_EDITABLE)),
  weight: v.optional(smallInt),
  is_cloneable: v.optional(v.boolean()),
  deprecated: v.optional(v.boolean()),
  deprecated_since: v.optional(text(50)),
  scheduled_removal: v.optional(text(50)),
});

/** A tombstone: a removed field keeps its id so it is never reused. */
export const RemovedFieldSchema = v.looseObject({
  id: v.pipe(v.number(), v.integer(), v.minValue(1)),
  name: v.optional(v.string()),
  type: v.optional(v.string()),
});

export const TypeEntrySchema = v.strictObject({
  name: v.pipe(v.string(), v.maxLength(100), v.regex(NAME_RE, "must match ^[a-z0-9]+(_[a-z0-9]+)*$")),
  slug: v.pipe(v.string(), v.maxLength(100), v.regex(SLUG_RE, "must match ^[-a-zA-Z0-9_]+$"), v.check((s) => !RESERVED_SLUGS.has(s.toLowerCase()), "is reserved for a fixed route")),
  verbose_name: v.optional(text(100)),
  verbose_name_plural: v.optional(text(100)),
  description: v.optional(text(200)),
  version: v.optional(text(20)),
  group_name: v.optional(text(50)),
  fields: v.array(FieldEntrySchema),
  removed_fields: v.optional(v.array(RemovedFieldSchema)),
});

export const DocumentSchema = v.strictObject({
  schema_version: v.literal("1", 'must be "1" (the only supported schema_version)'),
  types: v.array(TypeEntrySchema),
});

export type FieldEntry = v.InferOutput<typeof FieldEntrySchema>;
export type TypeEntry = v.InferOutput<typeof TypeEntrySchema>;
export type SchemaDocument = v.InferOutput<typeof DocumentSchema>;
export interface SchemaError {
  path: string;
  message: string;
}

function jsonPath(path: v.IssuePathItem[] | undefined): string {
  let out = "$";
  for (const item of path ?? []) {
    const key = (item as { key: unknown }).key;
    out += typeof key === "number" ? `[${key}]` : /^[A-Za-z_][A-Za-z0-9_]*$/.test(String(key)) ? `.${String(key)}` : `[${JSON.stringify(key)}]`;
  }
  return out;
}

function issueMessage(issue: v.BaseIssue<unknown>): string {
  if (issue.kind === "schema" && issue.type === "strict_object" && issue.input !== undefined) return "unknown key";
  if (issue.kind === "schema" && issue.received === "undefined") return "is required";
  if (issue.kind === "schema" && !issue.message.startsWith("must")) return `expected ${issue.expected}, got ${issue.received}`;
  return issue.message.startsWith("Invalid") ? `${issue.message}` : issue.message;
}

/** Type-specific attribute rules a shape cannot express. */
function semanticErrors(doc: SchemaDocument): SchemaError[] {
  const errors: SchemaError[] = [];
  const slugs = new Map<string, number>();
  const names = new Map<string, number>();
  doc.types.forEach((t, ti) => {
    const at = `$.types[${ti}]`;
    if (slugs.has(t.slug)) errors.push({ path: `${at}.slug`, message: `duplicate slug "${t.slug}" (also at $.types[${slugs.get(t.slug)}])` });
    slugs.set(t.slug, ti);
    if (names.has(t.name)) errors.push({ path: `${at}.name`, message: `duplicate name "${t.name}"` });
    names.set(t.name, ti);
    const ids = new Map<number, number>();
    const fieldNames = new Map<string, number>();
    let primaries = 0;
    t.fields.forEach((f, fi) => {
      const fp = `${at}.fields[${fi}]`;
      if (ids.has(f.id)) errors.push({ path: `${fp}.id`, message: `duplicate field id ${f.id}` });
      ids.set(f.id, fi);
      if (fieldNames.has(f.name)) errors.push({ path: `${fp}.name`, message: `duplicate field name "${f.name}"` });
      fieldNames.set(f.name, fi);
      if (f.primary) primaries++;
      const has = (k: keyof FieldEntry) => f[k] !== undefined && f[k] !== null && !(Array.isArray(f[k]) && (f[k] as unknown[]).length === 0) && f[k] !== "";
      const kind = fieldType(f.type);
      if (!kind.takes.range) {
        if (has("validation_minimum")) errors.push({ path: `${fp}.validation_minimum`, message: `only ${typesTaking("range")} fields take a minimum` });
        if (has("validation_maximum")) errors.push({ path: `${fp}.validation_maximum`, message: `only ${typesTaking("range")} fields take a maximum` });
      } else if (typeof f.validation_minimum === "number" && typeof f.validation_maximum === "number" && f.validation_minimum > f.validation_maximum) {
        errors.push({ path: `${fp}.validation_maximum`, message: "must not be below validation_minimum" });
      }
      if (!kind.takes.regex && has("validation_regex")) errors.push({ path: `${fp}.validation_regex`, message: `only ${typesTaking("regex")} fields take a regex` });
      if (has("validation_regex")) {
        try {
          new RegExp(f.validation_regex!);
        } catch {
          errors.push({ path: `${fp}.validation_regex`, message: "is not a valid regular expression" });
        }
      }
      if (kind.takes.choices && !has("choice_set")) errors.push({ path: `${fp}.choice_set`, message: `${typesTaking("choices")} fields need a choice_set` });
      if (!kind.takes.choices && has("choice_set")) errors.push({ path: `${fp}.choice_set`, message: `only ${typesTaking("choices")} fields take a choice_set` });
      if (kind.takes.related) {
        if (f.is_polymorphic) {
          if (!has("related_object_types")) errors.push({ path: `${fp}.related_object_types`, message: "polymorphic fields need related_object_types" });
          if (has("related_object_type")) errors.push({ path: `${fp}.related_object_type`, message: "polymorphic fields use related_object_types" });
        } else {
          if (!has("related_object_type")) errors.push({ path: `${fp}.related_object_type`, message: `${typesTaking("related")} fields need related_object_type` });
          if (has("related_object_types")) errors.push({ path: `${fp}.related_object_types`, message: "only polymorphic fields take related_object_types" });
        }
      } else {
        for (const k of ["related_object_type", "related_object_types"] as const) if (has(k)) errors.push({ path: `${fp}.${k}`, message: `only ${typesTaking("related")} fields take related object types` });
        if (f.is_polymorphic) errors.push({ path: `${fp}.is_polymorphic`, message: `only ${typesTaking("related")} fields can be polymorphic` });
      }
      if (!kind.takesDefault && has("default")) errors.push({ path: `${fp}.default`, message: `${typesWhere((m) => !m.takesDefault)} fields take no default` });
      if (!kind.canBePrimary && f.primary) errors.push({ path: `${fp}.primary`, message: `a ${f.type} field cannot be primary` });
      if (!kind.canBeUnique && f.unique) errors.push({ path: `${fp}.unique`, message: `a ${f.type} field cannot be unique` });
    });
    if (primaries > 1) errors.push({ path: `${at}.fields`, message: "at most one field can be primary" });
    const columns = columnCount(t.fields.map((f) => ({ type: f.type, isPolymorphic: f.is_polymorphic === true })));
    if (columns > MAX_COLUMNS_PER_TYPE) errors.push({ path: `${at}.fields`, message: tooManyColumns(columns) });
    (t.removed_fields ?? []).forEach((r, ri) => {
      if (ids.has(r.id)) errors.push({ path: `${at}.removed_fields[${ri}].id`, message: `field id ${r.id} is both listed and removed` });
    });
  });
  return errors;
}

export type ParseResult = { ok: true; document: SchemaDocument } | { ok: false; errors: SchemaError[] };

/** Validates a document; errors carry JSON paths (`$.types[0].fields[1].type`). */
export function parseDocument(input: unknown): ParseResult {
  const result = v.safeParse(DocumentSchema, input, { abortEarly: false });
  if (!result.success) {
    const errors = result.issues.slice(0, MAX_ERRORS).map((issue) => ({ path: jsonPath(issue.path), message: issueMessage(issue) }));
    return { ok: false, errors };
  }
  const semantic = semanticErrors(result.output);
  if (semantic.length) return { ok: false, errors: semantic.slice(0, MAX_ERRORS) };
  return { ok: true, document: result.output };
}
