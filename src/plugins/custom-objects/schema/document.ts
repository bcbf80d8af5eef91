/**
 * Schema documents (§5.1): the valibot schema that validates them, plus the type-specific
 * checks a plain shape cannot express. Errors come back as JSON paths, at most 20.
 */
import * as v from "valibot";
import { isFieldType, fieldType as fieldTypeModule } from "../field-types";
import { NAME_RE, RESERVED_SLUGS, SLUG_RE } from "../constants";
import {
  COT_NAME_MESSAGE,
  COT_SLUG_MESSAGE,
  ONE_PRIMARY,
  versionString,
  duplicateFieldName,
  fieldAttrEntries,
  fieldIssueMessage,
  fieldName,
  fieldRuleIssues,
  fieldTypeName,
} from "../types/field-definition";

import { NUL_MESSAGE, nulPathsInSteps } from "../../../core/nul";
import { fieldTakenNames, tooWide } from "../ddl";
import { checkConditional, splitTogether } from "./constraints";
import { yieldWhenDue } from "../../../turns";

const MAX_ERRORS = 20;
const RELATED_RE = /^[a-z][a-z0-9_-]*\/[-a-zA-Z0-9_]+$/;

const text = (max: number) =>
  v.pipe(
    v.string("Not a valid string."),
    v.maxLength(max, `Ensure this field has no more than ${max} characters.`),
  );
const related = v.pipe(
  v.string("Not a valid string."),
  v.regex(RELATED_RE, 'Use "<app_label>/<model>" (e.g. "dcim/site" or "custom-objects/<slug>").'),
);

/** The document spelling of the one field-definition schema (types/field-definition.ts), plus the id. */
export const FieldEntrySchema = v.strictObject({
  id: v.pipe(
    v.number("A valid positive integer is required."),
    v.integer("A valid positive integer is required."),
    v.minValue(1, "A valid positive integer is required."),
  ),
  name: fieldName,
  type: fieldTypeName,
  ...fieldAttrEntries({
    // trimmed as a choice set's own name is (below), so the field finds the set it names
    choiceSet: v.nullable(
      v.pipe(
        v.string("Not a valid string."),
        v.trim(),
        v.minLength(1, "Name a choice set or use null."),
      ),
    ),
    relatedType: v.nullable(related),
    relatedTypes: v.array(related, "Expected a list of object types."),
  }),
});

/** A condition: an object of lookups, or a list of them (checked against the fields later). */
const ConditionSchema = v.union(
  [v.record(v.string(), v.unknown()), v.array(v.record(v.string(), v.unknown()))],
  "must be an object of lookups or a list of them",
);

/** A tombstone: a removed field keeps its id so it is never reused. */
export const RemovedFieldSchema = v.looseObject({
  id: v.pipe(v.number(), v.integer(), v.minValue(1)),
  name: v.optional(v.string()),
  type: v.optional(v.string()),
});

export const TypeEntrySchema = v.strictObject({
  name: v.pipe(
    v.string("Not a valid string."),
    v.check((s) => NAME_RE.test(s) && s.length <= 100, COT_NAME_MESSAGE),
  ),
  slug: v.pipe(
    v.string("Not a valid string."),
    v.check((s) => SLUG_RE.test(s) && s.length <= 100, COT_SLUG_MESSAGE),
    v.check(
      (s) => !RESERVED_SLUGS.has(s.toLowerCase()),
      (issue) => `"${String(issue.input)}" is reserved for a fixed route.`,
    ),
  ),
  verbose_name: v.optional(text(100)),
  verbose_name_plural: v.optional(text(100)),
  description: v.optional(text(200)),
  version: v.optional(versionString(50)),
  group_name: v.optional(text(50)),
  fields: v.optional(v.array(FieldEntrySchema, "Expected a list of fields."), () => []),
  removed_fields: v.optional(v.array(RemovedFieldSchema)),
  /**
   * Compound uniqueness (issue 16): each list of field names is one unique index; an entry
   * `{fields, condition}` is a partial key (issue 32, decision 0087).
   */
  unique_together: v.optional(
    v.array(
      v.union(
        [
          v.pipe(
            v.array(v.pipe(v.string(), v.regex(NAME_RE, "must be a field name"))),
            v.minLength(2, "must name at least two fields"),
            v.maxLength(16),
          ),
          v.strictObject({ fields: v.array(v.string()), condition: ConditionSchema }),
        ],
        "must be a list of field names or {fields, condition}",
      ),
    ),
  ),
  /** Checks every row must match (issue 32, decision 0087). */
  checks: v.optional(
    v.array(v.strictObject({ name: v.string(), condition: ConditionSchema }), "Expected a list."),
  ),
});

/** A whole type removed by the document (issue 16): gated over rows, then moved to the trash. */
const RemovedTypeSchema = v.looseObject({
  slug: v.pipe(v.string(), v.maxLength(100), v.regex(SLUG_RE, "must match ^[-a-zA-Z0-9_]+$")),
  name: v.optional(v.string()),
});

/** A choice set the document's fields use, created or updated with the document (issue 16). */
const ChoiceSetEntrySchema = v.strictObject({
  // as the REST API stores it: trimmed, then refused when blank or too long
  name: v.pipe(
    v.string("Not a valid string."),
    v.trim(),
    v.check((s) => s !== "", "This field may not be blank."),
    v.maxLength(100, "Ensure this field has no more than 100 characters."),
  ),
  description: v.optional(v.pipe(v.string(), v.maxLength(200))),
  extra_choices: v.pipe(
    v.array(
      v.tuple([
        v.pipe(v.string(), v.minLength(1), v.maxLength(100)),
        v.pipe(v.string(), v.maxLength(100)),
      ]),
    ),
    v.minLength(1, "must offer at least one choice"),
    v.maxLength(1000),
  ),
  order_alphabetically: v.optional(v.boolean()),
});

export const DocumentSchema = v.strictObject({
  schema_version: v.literal("1", 'Must be "1" (the only supported schema_version).'),
  types: v.array(TypeEntrySchema, "Expected a list of types."),
  removed_types: v.optional(v.array(RemovedTypeSchema)),
  choice_sets: v.optional(v.array(ChoiceSetEntrySchema)),
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
    out +=
      typeof key === "number"
        ? `[${key}]`
        : /^[A-Za-z_][A-Za-z0-9_]*$/.test(String(key))
          ? `.${String(key)}`
          : `[${JSON.stringify(key)}]`;
  }
  return out;
}

/**
 * Fields of one type whose name or columns take another's column (`site_title` beside a url
 * field `site`, `site_id` beside an object field `site`): refused as the field API refuses them.
 */
function columnClashes(t: SchemaDocument["types"][number], at: string): SchemaError[] {
  const taken = new Map<string, string>(); // a name or column → the field holding it
  const out: SchemaError[] = [];
  t.fields.forEach((f, fi) => {
    if (!NAME_RE.test(f.name) || !isFieldType(f.type)) return;
    const mine = [f.name, ...fieldTakenNames({ ...f, isPolymorphic: f.is_polymorphic === true })];
    // the same name twice is `duplicateFieldName`'s to report
    const clash = mine.find((c) => taken.has(c) && taken.get(c) !== f.name);
    if (clash)
      out.push({
        path: `${at}.fields[${fi}].name`,
        message: `"${f.name}" collides with the column "${clash}" of another field.`,
      });
    for (const c of mine) if (!taken.has(c)) taken.set(c, f.name);
  });
  return out;
}

/** What the types checked so far hold, for the checks across types. */
interface SeenTypes {
  slugs: Map<string, number>;
  names: Map<string, number>;
}

/** One type's attribute rules a shape cannot express (its slug and name against those before). */
function typeErrors(t: TypeEntry, ti: number, seen: SeenTypes, errors: SchemaError[]) {
  const at = `$.types[${ti}]`;
  const { slugs, names } = seen;
  if (slugs.has(t.slug))
    errors.push({
      path: `${at}.slug`,
      message: `duplicate slug "${t.slug}" (also at $.types[${slugs.get(t.slug)}])`,
    });
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
    if (fieldNames.has(f.name))
      errors.push({ path: `${fp}.name`, message: duplicateFieldName(f.name) });
    fieldNames.set(f.name, fi);
    if (f.primary) primaries++;
    for (const issue of fieldRuleIssues(f))
      errors.push({ path: `${fp}.${issue.key}`, message: issue.message });
  });
  if (primaries > 1) errors.push({ path: `${at}.fields`, message: ONE_PRIMARY });
  errors.push(...columnClashes(t, at));
  const wide = tooWide(
    t.fields.map((f) => ({ type: f.type, isPolymorphic: f.is_polymorphic === true })),
  );
  if (wide) errors.push({ path: `${at}.fields`, message: wide });
  (t.removed_fields ?? []).forEach((r, ri) => {
    if (ids.has(r.id))
      errors.push({
        path: `${at}.removed_fields[${ri}].id`,
        message: `field id ${r.id} is both listed and removed`,
      });
  });
  conditionalIssues(t, at, errors);
  togetherIssues(t, at, fieldNames, errors);
}

/** A type's plain `unique_together` sets against its fields (partial keys: `conditionalIssues`). */
function togetherIssues(
  t: TypeEntry,
  at: string,
  fieldNames: ReadonlyMap<string, number>,
  errors: SchemaError[],
) {
  (t.unique_together ?? []).forEach((set, ui) => {
    if (!Array.isArray(set)) return;
    if (new Set(set).size !== set.length)
      errors.push({ path: `${at}.unique_together[${ui}]`, message: "names a field twice" });
    set.forEach((n, ni) => {
      const fi = fieldNames.get(n);
      if (fi === undefined)
        errors.push({
          path: `${at}.unique_together[${ui}][${ni}]`,
          message: `"${n}" is not a field of this type`,
        });
      else if (fieldTypeModule(t.fields[fi]!.type).storage === "links")
        errors.push({
          path: `${at}.unique_together[${ui}][${ni}]`,
          message: `a ${t.fields[fi]!.type} field cannot be part of unique_together`,
        });
    });
  });
}

/**
 * Type-specific attribute rules a shape cannot express: a type a step (a `yield` before each,
 * where a turn may be given: decision 0210); the checks across types after.
 */
function* semanticErrors(doc: SchemaDocument): Generator<void, SchemaError[]> {
  const errors: SchemaError[] = [];
  const seen: SeenTypes = { slugs: new Map(), names: new Map() };
  for (const [ti, t] of doc.types.entries()) {
    yield;
    typeErrors(t, ti, seen, errors);
  }
  errors.push(...relatedNameClashes(doc));
  (doc.removed_types ?? []).forEach((r, ri) => {
    if (seen.slugs.has(r.slug))
      errors.push({
        path: `$.removed_types[${ri}].slug`,
        message: `"${r.slug}" is both listed and removed`,
      });
  });
  errors.push(...choiceSetErrors(doc));
  return errors;
}

function choiceSetErrors(doc: SchemaDocument): SchemaError[] {
  const errors: SchemaError[] = [];
  const sets = new Map<string, number>();
  (doc.choice_sets ?? []).forEach((c, ci) => {
    if (sets.has(c.name))
      errors.push({
        path: `$.choice_sets[${ci}].name`,
        message: `duplicate choice set "${c.name}"`,
      });
    sets.set(c.name, ci);
    const values = new Set<string>();
    c.extra_choices.forEach(([value], vi) => {
      if (values.has(value))
        errors.push({
          path: `$.choice_sets[${ci}].extra_choices[${vi}][0]`,
          message: `duplicate value "${value}"`,
        });
      values.add(value);
    });
  });
  return errors;
}

/**
 * Two fields of the document taking one reverse relation name on one related object type
 * (decision 0142): refused as a stored field's is (`checkRelatedName`), whichever types hold them.
 */
function relatedNameClashes(doc: SchemaDocument): SchemaError[] {
  const errors: SchemaError[] = [];
  const seen = new Map<string, string>();
  for (const [ti, t] of doc.types.entries())
    for (const [fi, f] of t.fields.entries()) {
      const target = f.is_polymorphic ? null : f.related_object_type;
      if (!f.related_name || !target) continue;
      // `custom_objects/x` and `custom-objects/x` name one type
      const ref = target.toLowerCase().replace(/^custom_objects\//, "custom-objects/");
      const key = `${ref} ${f.related_name}`;
      const first = seen.get(key);
      if (first === undefined) seen.set(key, `$.types[${ti}].fields[${fi}]`);
      else
        errors.push({
          path: `$.types[${ti}].fields[${fi}].related_name`,
          message: `Reverse relation name "${f.related_name}" is already used by the field at ${first}.`,
        });
    }
  return errors;
}

/** A type's partial keys and checks, against its fields in the document. */
function conditionalIssues(t: TypeEntry, at: string, errors: SchemaError[]) {
  const { partial } = splitTogether(t.unique_together ?? []);
  if (!partial.length && !t.checks?.length) return;
  const fields = t.fields.map((f) => ({
    name: f.name,
    type: f.type,
    isPolymorphic: f.is_polymorphic === true,
  }));
  const found = checkConditional(partial, t.checks ?? [], fields).errors;
  for (const [key, messages] of Object.entries(found))
    for (const message of messages) errors.push({ path: `${at}.${key}`, message });
}

export type ParseResult =
  | { ok: true; document: SchemaDocument }
  | { ok: false; errors: SchemaError[] };

/**
 * Every text of a document is stored in a text column, where a NUL would cut it (decision
 * 0124); only a json field's default is stored as JSON text, which keeps it.
 */
function* nulErrors(input: unknown): Generator<void, SchemaError[]> {
  const kept = new Set<string>();
  const types = (input as { types?: unknown } | null)?.types;
  if (Array.isArray(types))
    types.forEach((t, ti) => {
      const fields = (t as { fields?: unknown } | null)?.fields;
      if (Array.isArray(fields))
        fields.forEach((f, fi) => {
          if ((f as { type?: unknown } | null)?.type === "json")
            kept.add(`$.types[${ti}].fields[${fi}].default`);
        });
    });
  const paths = yield* nulPathsInSteps(input, (path) => kept.has(path), MAX_ERRORS);
  return paths.map((path) => ({ path, message: NUL_MESSAGE }));
}

type TypeDataset = ReturnType<(typeof TypeEntrySchema)["~run"]>;

/**
 * The document's shape, its types run through `TypeEntrySchema` a type a step (a `yield` before
 * each): the schema then takes each type's result as it comes to it, so the issues and the
 * output are the ones a single run of `DocumentSchema` gives, in the same order.
 */
function* shapeOf(input: unknown) {
  const config = v.getGlobalConfig({ abortEarly: false });
  // as `strictObject` reads a member: present (`in`), then `array` takes only an array
  const types =
    input && typeof input === "object" && "types" in input && Array.isArray(input.types)
      ? (input.types as unknown[])
      : null;
  if (!types) return v.safeParse(DocumentSchema, input, config);
  const ran: TypeDataset[] = [];
  for (const item of types) {
    yield;
    ran.push(TypeEntrySchema["~run"]({ value: item }, config));
  }
  let next = 0;
  const alreadyRun = { ...TypeEntrySchema, "~run": () => ran[next++]! };
  const schema = v.strictObject({
    ...DocumentSchema.entries,
    types: v.array(alreadyRun, "Expected a list of types."),
  });
  return v.safeParse(schema, input, config);
}

/** The validation's steps: a `yield` where a turn may be given. */
function* parseSteps(input: unknown): Generator<void, ParseResult> {
  const nul = yield* nulErrors(input);
  if (nul.length) return { ok: false, errors: nul };
  const result = yield* shapeOf(input);
  if (!result.success) {
    const errors = result.issues
      .slice(0, MAX_ERRORS)
      .map((issue) => ({ path: jsonPath(issue.path), message: fieldIssueMessage(issue) }));
    return { ok: false, errors };
  }
  const semantic = yield* semanticErrors(result.output as SchemaDocument);
  if (semantic.length) return { ok: false, errors: semantic.slice(0, MAX_ERRORS) };
  return { ok: true, document: result.output as SchemaDocument };
}

/** Validates a document; errors carry JSON paths (`$.types[0].fields[1].type`). */
export function parseDocument(input: unknown): ParseResult {
  const steps = parseSteps(input);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/**
 * `parseDocument` a type a step, giving the event loop its turns when due: a document of 1,000
 * types held it 34–113 ms in one go (decision 0210). The same answer and errors.
 */
export async function parseDocumentWithTurns(input: unknown): Promise<ParseResult> {
  const steps = parseSteps(input);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    await yieldWhenDue();
  }
}
