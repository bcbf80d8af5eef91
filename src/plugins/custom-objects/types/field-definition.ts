/**
 * The one field-definition schema (§5 rules 2–4): the REST field API (`definitions.ts`) and
 * schema documents (`schema/document.ts`) validate a field with these valibot entries and these
 * type-specific rules, so both say the same thing in the same words. Defaults are defined here
 * once, in API names. Only references differ by vocabulary (REST takes ids, names or objects;
 * documents take `app/model` and choice-set names), so the caller passes their schemas.
 */
import * as v from "valibot";
import {
  FILTER_LOGIC,
  NAME_RE,
  ON_DELETE,
  UI_EDITABLE,
  UI_VISIBLE,
  isReservedFieldName,
} from "../constants";
import { FIELD_TYPES, fieldType, isFieldType, typesTaking, typesWhere } from "../field-types";
import { patternProblem } from "../field-types/pattern";
import { NUL_MESSAGE, nulPaths } from "../../../core/nul";

const FIELD_NAME_MAX = 50;

/** Field attributes a definition may state, with the value an omitted key means. */
export const FIELD_DEFAULTS = {
  label: "",
  description: "",
  primary: false,
  required: false,
  unique: false,
  default: null as unknown,
  choice_set: null as string | null,
  validation_regex: "",
  validation_minimum: null as number | null,
  validation_maximum: null as number | null,
  is_polymorphic: false,
  related_object_type: null as string | null,
  related_object_types: [] as string[],
  related_object_filter: null as Record<string, unknown> | null,
  on_delete_behavior: "set_null",
  group_name: "",
  search_weight: 1000,
  filter_logic: "loose",
  ui_visible: "always",
  ui_editable: "yes",
  weight: 100,
  is_cloneable: false,
  deprecated: false,
  deprecated_since: "",
  scheduled_removal: "",
  context: false,
  related_name: "",
};
type FieldAttrs = typeof FIELD_DEFAULTS;

// ---- messages (one set, DRF-style sentences; REST shows them per key, documents per path) ----
const NOT_STRING = "Not a valid string.";
const NOT_BOOLEAN = "Must be a valid boolean.";
const SMALL_INT = "A valid integer between 0 and 32767 is required.";
const NOT_NUMBER = "A valid number is required.";
const tooLong = (max: number) => `Ensure this field has no more than ${max} characters.`;
const notChoice = (issue: v.BaseIssue<unknown>) =>
  `"${String(issue.input)}" is not a valid choice.`;
const cap = (s: string) => s[0]!.toUpperCase() + s.slice(1);

/** The message of a structural issue (missing or unknown key); other issues carry their own. */
export function fieldIssueMessage(issue: v.BaseIssue<unknown>): string {
  if (issue.kind === "schema" && issue.type === "strict_object" && issue.expected === "never")
    return "Unknown field.";
  if (issue.kind === "schema" && issue.received === "undefined") return "This field is required.";
  return issue.message;
}

// ---- shape ----------------------------------------------------------------------------------
const text = (max: number) => v.pipe(v.string(NOT_STRING), v.maxLength(max, tooLong(max)));
const bool = v.boolean(NOT_BOOLEAN);
const smallInt = v.pipe(
  v.number(SMALL_INT),
  v.integer(SMALL_INT),
  v.minValue(0, SMALL_INT),
  v.maxValue(32767, SMALL_INT),
);
const bound = v.nullable(v.pipe(v.number(NOT_NUMBER), v.finite(NOT_NUMBER)));
const choice = <T extends readonly string[]>(options: T) => v.picklist(options, notChoice);

export const fieldName = v.pipe(
  v.string(NOT_STRING),
  v.check(
    (s) => !isReservedFieldName(s),
    (issue) => `"${String(issue.input)}" is a reserved name.`,
  ),
  v.check(
    (s) => NAME_RE.test(s) && s.length <= FIELD_NAME_MAX,
    `Use lowercase letters, digits and single underscores (^[a-z0-9]+(_[a-z0-9]+)*$), at most ${FIELD_NAME_MAX} characters.`,
  ),
);
/**
 * PEP 440 versions, as upstream checks `version`, `deprecated_since` and `scheduled_removal`
 * (the grammar of `packaging.version`: epoch, release, pre, post, dev and local parts).
 */
const PEP440_RE =
  /^\s*v?(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?(?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?(?:[-_.]?dev[-_.]?[0-9]*)?(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?\s*$/i;
export const isPep440 = (s: string) => PEP440_RE.test(s);
export const versionString = (max: number) =>
  v.pipe(
    text(max),
    v.check(
      (s) => s === "" || isPep440(s),
      (issue) => `'${String(issue.input)}' is not a valid version string (expected e.g. '1.0.0').`,
    ),
  );

/** Upstream's reverse relation name: lowercase letters, digits and single underscores. */
const relatedName = v.pipe(
  text(100),
  v.regex(/^[a-z0-9_]*$/, "Only lowercase alphanumeric characters and underscores are allowed."),
  v.check(
    (s) => !s.includes("__"),
    "Double underscores are not permitted in the reverse relation name.",
  ),
);

export const fieldTypeName = v.picklist(FIELD_TYPES, notChoice);

/** How a writer names a choice set and related object types. */
export interface Vocabulary<
  C extends v.GenericSchema = v.GenericSchema,
  R extends v.GenericSchema = v.GenericSchema,
  L extends v.GenericSchema = v.GenericSchema,
> {
  choiceSet: C;
  relatedType: R;
  relatedTypes: L;
}

/** The attribute entries of a field definition (all optional: omitted means FIELD_DEFAULTS). */
export function fieldAttrEntries<
  C extends v.GenericSchema,
  R extends v.GenericSchema,
  L extends v.GenericSchema,
>(vocab: Vocabulary<C, R, L>) {
  return {
    label: v.optional(text(50)),
    description: v.optional(text(200)),
    primary: v.optional(bool),
    required: v.optional(bool),
    unique: v.optional(bool),
    default: v.optional(v.unknown()),
    choice_set: v.optional(vocab.choiceSet),
    validation_regex: v.optional(text(500)),
    validation_minimum: v.optional(bound),
    validation_maximum: v.optional(bound),
    is_polymorphic: v.optional(bool),
    related_object_type: v.optional(vocab.relatedType),
    related_object_types: v.optional(vocab.relatedTypes),
    related_object_filter: v.optional(
      v.custom<Record<string, unknown> | null>(
        (x) => x === null || (typeof x === "object" && !Array.isArray(x)),
        "Must be a JSON object or null.",
      ),
    ),
    on_delete_behavior: v.optional(choice(ON_DELETE)),
    group_name: v.optional(text(50)),
    search_weight: v.optional(smallInt),
    filter_logic: v.optional(choice(FILTER_LOGIC)),
    ui_visible: v.optional(choice(UI_VISIBLE)),
    ui_editable: v.optional(choice(UI_EDITABLE)),
    weight: v.optional(smallInt),
    is_cloneable: v.optional(bool),
    deprecated: v.optional(bool),
    deprecated_since: v.optional(versionString(50)),
    scheduled_removal: v.optional(versionString(50)),
    context: v.optional(bool),
    related_name: v.optional(relatedName),
  } satisfies Record<
    keyof FieldAttrs,
    v.GenericSchema | v.OptionalSchema<v.GenericSchema, undefined>
  >;
}

// ---- type-specific rules ----------------------------------------------------------------------
export interface RuleIssue {
  key: string;
  message: string;
}

const nonEmpty = (x: unknown) =>
  x !== undefined && x !== null && x !== "" && !(Array.isArray(x) && x.length === 0);

/**
 * The rules a shape cannot express, over a field in API names. `present(k)`: the field has a
 * value for k (merged over the stored field on REST updates); `stated(k)`: the writer set k
 * (REST: in the request; documents: everything present is stated). Returns issues by key.
 */
export function fieldRuleIssues(
  f: Record<string, unknown>,
  stated: (key: string) => boolean = (k) => nonEmpty(f[k]),
): RuleIssue[] {
  const out: RuleIssue[] = [];
  if (!isFieldType(f.type)) return out;
  const kind = fieldType(f.type as string);
  const present = (k: string) => nonEmpty(f[k]);
  const said = (k: string) => stated(k) && present(k);
  if (!kind.takes.range) {
    if (said("validation_minimum"))
      out.push({
        key: "validation_minimum",
        message: `Only ${typesTaking("range")} fields take a minimum.`,
      });
    if (said("validation_maximum"))
      out.push({
        key: "validation_maximum",
        message: `Only ${typesTaking("range")} fields take a maximum.`,
      });
  } else if (
    typeof f.validation_minimum === "number" &&
    typeof f.validation_maximum === "number" &&
    f.validation_minimum > f.validation_maximum
  ) {
    out.push({ key: "validation_maximum", message: "The maximum must not be below the minimum." });
  }
  if (present("validation_regex")) {
    if (!kind.takes.regex) {
      if (said("validation_regex"))
        out.push({
          key: "validation_regex",
          message: `Only ${typesTaking("regex")} fields take a regex.`,
        });
    } else {
      const problem = patternProblem(f.validation_regex as string);
      if (problem) out.push({ key: "validation_regex", message: problem });
    }
  }
  if (kind.takes.choices) {
    if (!present("choice_set"))
      out.push({
        key: "choice_set",
        message: `${cap(typesTaking("choices"))} fields need a choice set.`,
      });
  } else if (said("choice_set"))
    out.push({
      key: "choice_set",
      message: `Only ${typesTaking("choices")} fields take a choice set.`,
    });
  const related = typesTaking("related");
  if (kind.takes.related) {
    if (f.is_polymorphic === true) {
      if (!present("related_object_types"))
        out.push({
          key: "related_object_types",
          message: "Polymorphic fields need a non-empty list of object types.",
        });
      if (said("related_object_type"))
        out.push({
          key: "related_object_type",
          message: "Polymorphic fields use related_object_types.",
        });
    } else {
      if (!present("related_object_type"))
        out.push({
          key: "related_object_type",
          message: `${cap(related)} fields need a related object type.`,
        });
      if (said("related_object_types"))
        out.push({
          key: "related_object_types",
          message: "Only polymorphic fields take a list of object types.",
        });
    }
  } else {
    if (said("related_object_type"))
      out.push({
        key: "related_object_type",
        message: `Only ${related} fields take a related object type.`,
      });
    if (said("related_object_types"))
      out.push({
        key: "related_object_types",
        message: `Only ${related} fields take related object types.`,
      });
    if (stated("is_polymorphic") && f.is_polymorphic === true)
      out.push({ key: "is_polymorphic", message: `Only ${related} fields can be polymorphic.` });
  }
  if (f.primary === true && f.context === true)
    out.push({ key: "context", message: "A field cannot be both primary and context." });
  if (said("related_name") && !kind.takes.related)
    out.push({
      key: "related_name",
      message: `A reverse relation name can only be set for ${related} fields.`,
    });
  if (!kind.takesDefault && present("default"))
    out.push({
      key: "default",
      message: `${cap(typesWhere((m) => !m.takesDefault))} fields take no default.`,
    });
  // the definition keeps a default as JSON text, but the objects taking it store it in a text
  // column, where a NUL would cut it (decision 0124); only a json field's stays JSON text
  else if (f.type !== "json" && nulPaths(f.default, undefined, 1).length)
    out.push({ key: "default", message: NUL_MESSAGE });
  if (!kind.canBePrimary && f.primary === true)
    out.push({ key: "primary", message: `A ${f.type} field cannot be primary.` });
  if (!kind.canBeUnique && f.unique === true)
    out.push({ key: "unique", message: `A ${f.type} field cannot be unique.` });
  return out;
}

/** Messages about the fields of one type taken together. */
/**
 * Why a field of type `from` cannot become `to`, or null when it can: only plain columns change
 * type, and never to or from a fixed type (coordinates, url: their columns would not match) or
 * one stored in more than one column (a polymorphic object, url's link title). So a retype is
 * one column made another, which a batch carries (decision 0135).
 */
export function typeChangeRefused(from: string, to: string): string | null {
  if (from === to || !isFieldType(from) || !isFieldType(to)) return null;
  const [a, b] = [fieldType(from), fieldType(to)];
  const fixed = (m: typeof a) => m.storage !== "column" || m.fixedType || !!m.companions?.length;
  return fixed(a) || fixed(b) ? `Cannot change a ${from} field into a ${to} field.` : null;
}

export const ONE_PRIMARY = "Only one field of a type can be primary.";
export const duplicateFieldName = (name: string) =>
  `A field named "${name}" already exists on this type.`;

/** Custom object type names and slugs (REST and documents). */
export const COT_NAME_MESSAGE =
  "Use lowercase letters, digits and single underscores (^[a-z0-9]+(_[a-z0-9]+)*$), at most 100 characters.";
export const COT_SLUG_MESSAGE =
  'Enter a valid "slug" consisting of letters, numbers, underscores or hyphens (at most 100).';
