/**
 * Validation of COT and field definitions (§5 rules 2–4), shared by the REST endpoints and
 * schema apply. Input uses API names; output uses the schema row's property names.
 */
import { and, eq } from "drizzle-orm";
import { choiceSets, customObjectTypeFields, customObjectTypes } from "../../../db/schema";
import { ErrorCollector } from "../../../core/errors";
import { outsideConstraints } from "../../../core/models/batch-failure";
import { viewableRefs } from "../../../core/auth/restrict";
import type { WriteContext } from "../../../core/rest/resource";
import * as v from "valibot";
import {
  APP_LABEL,
  NAME_RE,
  RESERVED_SLUGS,
  SLUG_RE,
  LINKABLE_APPS,
  upstreamAppLabel,
} from "../constants";
import { parseLabel } from "../../../core/object-types";
import { fieldType } from "../field-types";
import {
  isPep440,
  COT_NAME_MESSAGE,
  COT_SLUG_MESSAGE,
  FIELD_DEFAULTS,
  ONE_PRIMARY,
  duplicateFieldName,
  fieldAttrEntries,
  fieldIssueMessage,
  fieldName,
  fieldRuleIssues,
  fieldTypeName,
  typeChangeRefused,
} from "./field-definition";
import { fieldTakenNames, tooWide } from "../ddl";
import { encodeScalar, type FieldRow } from "../objects/values";
import type { CotRow } from "../objects/models";
import { cotSlugsViewable, cotsAllowed, fieldViewable } from "../schema/access";
import { slotKey } from "../../../core/slots";
import { CHOICE_SET, choiceSetAhead, type FieldsAhead } from "./field-reads";

export type FieldDraft = Omit<
  FieldRow,
  "id" | "customObjectTypeId" | "schemaId" | "created" | "lastUpdated"
>;
export type CotDraft = Pick<
  CotRow,
  | "name"
  | "slug"
  | "verboseName"
  | "verboseNamePlural"
  | "version"
  | "groupName"
  | "description"
  | "schemaDocument"
> &
  Partial<Pick<CotRow, "displayExpression" | "configContextEnabled">>;

const has = (o: Record<string, unknown>, k: string) => Object.hasOwn(o, k);

/** API name → row property, for the plain attributes. */
const SIMPLE: Record<string, keyof FieldDraft> = {
  name: "name",
  label: "label",
  description: "description",
  type: "type",
  primary: "primary",
  required: "required",
  unique: "unique",
  default: "default",
  validation_regex: "validationRegex",
  validation_minimum: "validationMinimum",
  validation_maximum: "validationMaximum",
  is_polymorphic: "isPolymorphic",
  related_object_filter: "relatedObjectFilter",
  on_delete_behavior: "onDeleteBehavior",
  group_name: "groupName",
  search_weight: "searchWeight",
  filter_logic: "filterLogic",
  ui_visible: "uiVisible",
  ui_editable: "uiEditable",
  weight: "weight",
  is_cloneable: "isCloneable",
  deprecated: "deprecated",
  deprecated_since: "deprecatedSince",
  scheduled_removal: "scheduledRemoval",
  context: "context",
  related_name: "relatedName",
};
/** References, by row property: REST takes ids, names or `app_label.model`. */
const REFERENCES = {
  choice_set: "choiceSetId",
  related_object_type: "relatedObjectTypeId",
  related_object_types: "relatedObjectTypeIds",
} as const;

/** A field in API names (references as stored ids), for merging a partial update over it. */
function apiOf(f: FieldDraft): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [api, prop] of Object.entries(SIMPLE)) out[api] = f[prop];
  for (const [api, prop] of Object.entries(REFERENCES)) out[api] = f[prop];
  return out;
}

/** The row a field with every attribute omitted is (FIELD_DEFAULTS in row names). */
const FIELD_ROW_DEFAULTS: FieldDraft = (() => {
  const out: Record<string, unknown> = {
    name: "",
    type: "text",
    choiceSetId: null,
    relatedObjectTypeId: null,
    relatedObjectTypeIds: [],
  };
  for (const [api, prop] of Object.entries(SIMPLE))
    if (has(FIELD_DEFAULTS, api)) out[prop] = FIELD_DEFAULTS[api as keyof typeof FIELD_DEFAULTS];
  return out as FieldDraft;
})();

const IGNORED = ["id", "url", "display", "display_url", "created", "last_updated", "schema_id"];

/** The REST spelling of the one field-definition schema. */
const RestFieldSchema = v.strictObject({
  name: fieldName,
  type: fieldTypeName,
  ...fieldAttrEntries({
    choiceSet: v.unknown(),
    relatedType: v.unknown(),
    relatedTypes: v.unknown(),
  }),
  ...Object.fromEntries(IGNORED.map((k) => [k, v.optional(v.unknown())])),
});

/** One field definition under validation: the request, the stored field and the draft so far. */
/** Choice sets by name, read ahead (a batched apply, decision 0119): no read of its own. */
export type KnownChoiceSets = ReadonlyMap<string, { id: number; extraChoices: [string, string][] }>;
/** The object type ids of custom object types the same batch creates, by slug (decision 0136). */
export type PendingTypes = ReadonlyMap<string, number>;

interface FieldCheck {
  ctx: WriteContext;
  known?: KnownChoiceSets;
  pending?: PendingTypes;
  /** What the write's read phase read for these checks (`readAhead`): no read of their own. */
  ahead?: FieldsAhead;
  input: Record<string, unknown>;
  existing: FieldRow | null;
  draft: FieldDraft;
  kind: ReturnType<typeof fieldType>;
  errors: ErrorCollector;
  /** Whether no error is recorded for the key yet. */
  fine: (key: string) => boolean;
}

/**
 * Validates a field definition against its siblings. `existing` is the stored field on updates
 * (partial input is merged over it). Throws ValidationError keyed by API attribute name.
 */
export async function validateField(
  ctx: WriteContext,
  input: Record<string, unknown>,
  existing: FieldRow | null,
  siblings: FieldRow[],
  known?: KnownChoiceSets,
  /** Types a batched apply creates before this field: it may point at them (decision 0136). */
  pending?: PendingTypes,
  ahead?: FieldsAhead,
): Promise<FieldDraft> {
  const errors = new ErrorCollector();
  input = upstreamSpellings(input);
  const { merged, draft } = mergedDraft(input, existing, errors);
  const kind = fieldType(draft.type);

  // the type-specific rules every field definition shares (field-definition.ts)
  for (const issue of fieldRuleIssues(merged, (k) => has(input, k)))
    errors.add(issue.key, issue.message);
  const fine = (key: string) => !errors.errors[key];
  const check: FieldCheck = {
    ...{ ctx, known, pending, ahead, input, existing, draft },
    ...{ kind, errors, fine },
  };

  // references, resolved only where the rules allow them
  await resolveChoiceSet(check);
  await resolveRelatedTypes(check);
  // attributes the type does not take and the request did not state are dropped
  if (!kind.takes.range) draft.validationMinimum = draft.validationMaximum = null;
  if (!kind.takes.regex) draft.validationRegex = "";
  checkTypeAndNames(check, siblings);
  await checkRelatedName(check);
  if (!kind.takes.related) draft.relatedName = "";
  await checkDefault(check);
  errors.throwIfAny();
  return draft;
}

/** The request merged over the stored field (or the defaults), shape-checked, and its draft. */
function mergedDraft(
  input: Record<string, unknown>,
  existing: FieldRow | null,
  errors: ErrorCollector,
): { merged: Record<string, unknown>; draft: FieldDraft } {
  // A new field has no name until the request gives one; `type` defaults to text.
  const { name: _unnamed, ...defaults } = apiOf(FIELD_ROW_DEFAULTS);
  const merged: Record<string, unknown> = {
    ...(existing ? apiOf(stripIds(existing)) : defaults),
    ...input,
  };
  const shape = v.safeParse(RestFieldSchema, merged, { abortEarly: false, abortPipeEarly: true });
  if (!shape.success) {
    for (const issue of shape.issues)
      errors.add(
        String((issue.path?.[0] as { key?: unknown } | undefined)?.key ?? "non_field_errors"),
        fieldIssueMessage(issue),
      );
    errors.throwIfAny();
  }
  const draft: FieldDraft = { ...FIELD_ROW_DEFAULTS, ...(existing ? stripIds(existing) : {}) };
  for (const [api, prop] of Object.entries(SIMPLE))
    if (has(merged, api))
      (draft as any)[prop] = merged[api] ?? (prop === "default" ? null : merged[api]);
  return { merged, draft };
}

/** `choice_set` (an id, a name or a nested form) resolved to its id, for types with choices. */
async function resolveChoiceSet(check: FieldCheck) {
  const { ctx, known, input, draft, kind, errors, fine, ahead, existing } = check;
  // a set the writer may not view is not found, unless the field holds it already (0064, 0194)
  const nameable = async (id: number) =>
    id === existing?.choiceSetId ||
    ctx.scratch.get(REFERENCES_CHECKED) ||
    (await viewableRefs(ctx, ctx.auth, ...CHOICE_SET, [id])).has(id);
  if (kind.takes.choices) {
    if (has(input, "choice_set") && input.choice_set !== null && fine("choice_set")) {
      // a name as the choice set API stores it: trimmed
      const raw = typeof input.choice_set === "string" ? input.choice_set.trim() : input.choice_set;
      const named = typeof raw === "string" ? known?.get(raw) : undefined;
      if (named) {
        draft.choiceSetId = named.id;
        return;
      }
      const read = ahead && choiceSetAhead(ahead.sets, input.choice_set);
      if (read !== undefined) {
        if (read && (read.viewable || read.id === existing?.choiceSetId))
          draft.choiceSetId = read.id;
        else errors.add("choice_set", `Choice set not found: ${JSON.stringify(raw)}`);
        return;
      }
      const id =
        typeof raw === "number"
          ? raw
          : raw && typeof raw === "object"
            ? (raw as any).id
            : undefined;
      const where =
        typeof raw === "string"
          ? eq(choiceSets.name, raw)
          : typeof id === "number"
            ? eq(choiceSets.id, id)
            : null;
      const [cs] = where
        ? await ctx.db.select({ id: choiceSets.id }).from(choiceSets).where(where).limit(1)
        : [];
      if (!cs || !(await nameable(cs.id)))
        errors.add("choice_set", `Choice set not found: ${JSON.stringify(raw)}`);
      else draft.choiceSetId = cs.id;
    }
  } else draft.choiceSetId = null;
}

/** The related object type(s) resolved, for object fields; unchangeable after creation. */
async function resolveRelatedTypes(check: FieldCheck) {
  const { existing, draft, kind, errors } = check;
  if (kind.takes.related) {
    if (existing && existing.isPolymorphic !== draft.isPolymorphic)
      errors.add("is_polymorphic", "Cannot be changed after the field is created.");
    if (draft.isPolymorphic) {
      await resolvePolymorphicTargets(check);
      draft.relatedObjectTypeId = null;
    } else {
      await resolveSingleTarget(check);
      draft.relatedObjectTypeIds = [];
    }
  } else {
    draft.relatedObjectTypeId = null;
    draft.relatedObjectTypeIds = [];
    draft.isPolymorphic = false;
  }
}

/** An object type by any of its spellings; one the same batch creates by its label. */
async function targetOf({ ctx, pending, existing, ahead }: FieldCheck, value: unknown) {
  const label = pending && typeof value === "string" ? parseLabel(value) : null;
  const id = label?.appLabel === APP_LABEL ? pending?.get(label.model) : undefined;
  if (label && id !== undefined) return { id, appLabel: label.appLabel, model: label.model };
  const registry = ctx.services.objectTypes;
  const readAhead = ahead && registry.resolveFrom(value, ahead.types);
  const ot = readAhead === undefined ? await registry.resolve(value, ctx.db) : readAhead;
  if (!ot || ot.appLabel !== APP_LABEL || ctx.scratch.get(REFERENCES_CHECKED)) return ot;
  // a custom object type the caller may not view is unknown to them (0064), unless the field
  // already points at it (sent back unchanged)
  const held =
    existing?.relatedObjectTypeId === ot.id || existing?.relatedObjectTypeIds.includes(ot.id);
  if (held) return ot;
  // the read phase asked which of the types it found the caller may view
  const viewable =
    readAhead && ahead
      ? (ahead.viewable ?? new Set([ot.model]))
      : await cotSlugsViewable(ctx, ctx.auth, [ot.model]);
  return viewable.has(ot.model) ? ot : undefined;
}

/**
 * Set on a write whose schema apply has already held the custom object types and the choice sets
 * its fields name to the caller's view (`withoutHiddenTargets`, `hiddenChoiceSets`; a set the
 * document defines is its own): its fields are not checked again one by one.
 */
export const REFERENCES_CHECKED = slotKey<true>("custom-objects.references-checked");

/** `related_object_types` of a polymorphic field: a non-empty list of linkable types. */
async function resolvePolymorphicTargets(check: FieldCheck) {
  const { ctx, input, existing, draft, errors, fine } = check;
  if (has(input, "related_object_types") && fine("related_object_types")) {
    const raw = input.related_object_types;
    if (!Array.isArray(raw) || raw.length === 0)
      errors.add(
        "related_object_types",
        "Polymorphic fields need a non-empty list of object types.",
      );
    else {
      const ids: number[] = [];
      for (const item of raw) {
        const ot = await targetOf(check, item);
        if (!ot) errors.add("related_object_types", `Unknown object type: ${JSON.stringify(item)}`);
        else if (!(await isLinkable(ctx, ot)))
          errors.add(
            "related_object_types",
            `Objects of ${ot.appLabel}.${ot.model} cannot be linked.`,
          );
        else if (!ids.includes(ot.id)) ids.push(ot.id);
      }
      if (
        existing &&
        JSON.stringify([...ids].sort()) !==
          JSON.stringify([...existing.relatedObjectTypeIds].sort())
      ) {
        errors.add("related_object_types", "Cannot be changed after the field is created.");
      }
      draft.relatedObjectTypeIds = ids;
    }
  }
}

/** `related_object_type` of a single-type object field: a linkable type. */
async function resolveSingleTarget(check: FieldCheck) {
  const { ctx, input, existing, draft, errors, fine } = check;
  if (
    has(input, "related_object_type") &&
    input.related_object_type !== null &&
    fine("related_object_type")
  ) {
    const ot = await targetOf(check, input.related_object_type);
    if (!ot)
      errors.add(
        "related_object_type",
        `Unknown object type: ${JSON.stringify(input.related_object_type)}`,
      );
    else if (!(await isLinkable(ctx, ot)))
      errors.add("related_object_type", `Objects of ${ot.appLabel}.${ot.model} cannot be linked.`);
    else if (existing && existing.relatedObjectTypeId !== ot.id)
      errors.add("related_object_type", "Cannot be changed after the field is created.");
    else draft.relatedObjectTypeId = ot.id;
  }
}

/** The type change allowed, the name and columns free among the siblings, one primary field. */
function checkTypeAndNames({ existing, draft, errors }: FieldCheck, siblings: FieldRow[]) {
  const type = draft.type;
  // Only plain columns change type: a reference never becomes another kind of storage.
  const refused = existing ? typeChangeRefused(existing.type, type) : null;
  if (refused) errors.add("type", refused);

  // names must not collide with siblings' names or columns
  const others = siblings.filter((s) => !existing || s.id !== existing.id);
  if (others.some((s) => s.name === draft.name)) errors.add("name", duplicateFieldName(draft.name));
  const mine = fieldTakenNames({ ...draft, type });
  const taken = new Set(others.flatMap((s) => [s.name, ...fieldTakenNames(s)]));
  const clash =
    mine.find((c) => taken.has(c)) ??
    (others.some((s) => mine.includes(s.name)) ? draft.name : undefined);
  if (clash && !errors.errors.name)
    errors.add("name", `"${draft.name}" collides with the column "${clash}" of another field.`);
  if (draft.primary && others.some((s) => s.primary)) errors.add("primary", ONE_PRIMARY);
  // Only a new field adds columns: polymorphism and object-ness cannot change afterwards.
  if (!existing) {
    const wide = tooWide([...others, { type, isPolymorphic: draft.isPolymorphic }]);
    if (wide) errors.add("non_field_errors", wide);
  }
}

/**
 * A reverse relation name is unique per related object type (upstream; the database's index
 * settles a race, decision 0156). The holder is named only to a caller who may view it.
 */
async function checkRelatedName({ ctx, existing, draft, errors, fine, ahead }: FieldCheck) {
  if (draft.relatedName && draft.relatedObjectTypeId != null && fine("related_name")) {
    const [taken] =
      heldAhead(ahead, existing, draft) ??
      (await ctx.db
        .select({
          id: customObjectTypeFields.id,
          name: customObjectTypeFields.name,
          cotId: customObjectTypes.id,
          cot: customObjectTypes.name,
        })
        .from(customObjectTypeFields)
        .innerJoin(
          customObjectTypes,
          eq(customObjectTypes.id, customObjectTypeFields.customObjectTypeId),
        )
        .where(
          and(
            eq(customObjectTypeFields.relatedObjectTypeId, draft.relatedObjectTypeId),
            eq(customObjectTypeFields.relatedName, draft.relatedName),
          ),
        )
        .limit(1));
    if (taken && taken.id !== existing?.id) {
      const holder = (await fieldViewable(ctx, ctx.auth, taken.id, taken.cotId))
        ? `field "${taken.name}" on "${taken.cot}"`
        : "another field";
      errors.add(
        "related_name",
        `Reverse relation name "${draft.relatedName}" is already used by ${holder}.`,
      );
    }
  }
}

/**
 * The holder of the draft's reverse name among those the read phase read (`readAhead`); undefined
 * when it did not read this name.
 */
function heldAhead(ahead: FieldsAhead | undefined, existing: FieldRow | null, draft: FieldDraft) {
  const name = draft.relatedName;
  const read =
    ahead &&
    (ahead.names.has(name) ||
      (existing && ahead.storedOf.has(existing.id) && existing.relatedName === name));
  if (!read) return undefined;
  return ahead.holders.filter(
    (h) => h.relatedName === name && h.relatedObjectTypeId === draft.relatedObjectTypeId,
  );
}

/** The default, checked against the type (and its choice set). */
async function checkDefault({ ctx, known, draft, kind, errors, fine, ahead }: FieldCheck) {
  const type = draft.type;
  if (
    draft.default !== null &&
    draft.default !== undefined &&
    kind.takesDefault &&
    fine("default") &&
    fine("choice_set")
  ) {
    let choices: Set<string> | null = null;
    const read =
      [...(known?.values() ?? [])].find((k) => k.id === draft.choiceSetId) ??
      (ahead && draft.choiceSetId ? choiceSetAhead(ahead.sets, draft.choiceSetId) : undefined);
    if (kind.takes.choices && draft.choiceSetId && read)
      choices = new Set(read.extraChoices.map(([v]) => v));
    else if (kind.takes.choices && draft.choiceSetId) {
      const [cs] = await ctx.db
        .select()
        .from(choiceSets)
        .where(eq(choiceSets.id, draft.choiceSetId));
      choices = new Set(cs?.extraChoices.map(([v]) => v) ?? []);
    }
    const checked = encodeScalar({ ...(draft as FieldRow), type }, draft.default, choices);
    if ("error" in checked) errors.add("default", `Invalid default: ${checked.error}`);
  }
}

/**
 * Field writes as upstream clients spell them, turned into ours: top-level `app_label` +
 * `model` name the related object type, `related_object_types_input` lists `{app_label, model}`.
 * Ours wins where both are given.
 */
export function upstreamSpellings(input: Record<string, unknown>): Record<string, unknown> {
  if (!has(input, "app_label") && !has(input, "model") && !has(input, "related_object_types_input"))
    return input;
  const { app_label, model, related_object_types_input, ...rest } = input;
  if (
    (app_label !== undefined || model !== undefined) &&
    !has(rest, "related_object_type") &&
    (app_label || model)
  )
    rest.related_object_type = { app_label: upstreamAppLabel(app_label), model };
  if (
    related_object_types_input !== undefined &&
    related_object_types_input !== null &&
    !has(rest, "related_object_types")
  )
    rest.related_object_types = Array.isArray(related_object_types_input)
      ? related_object_types_input.map((t) =>
          t && typeof t === "object"
            ? { ...t, app_label: upstreamAppLabel((t as Record<string, unknown>).app_label) }
            : t,
        )
      : related_object_types_input;
  return rest;
}

function stripIds(f: FieldRow): FieldDraft {
  const {
    id: _i,
    customObjectTypeId: _c,
    schemaId: _s,
    created: _cr,
    lastUpdated: _l,
    ...rest
  } = f;
  return rest;
}

/** Host models and COTs can be link targets; users, tokens and the like cannot. */
async function isLinkable(
  ctx: WriteContext,
  ot: { appLabel: string; model: string },
): Promise<boolean> {
  if (ot.appLabel === "custom_objects")
    return ot.model !== "customobjecttype" && ot.model !== "customobjecttypefield";
  return (
    LINKABLE_APPS.includes(ot.appLabel) &&
    !!(await ctx.services.models.get(ot.appLabel, ot.model, ctx))
  );
}

const COT_SIMPLE: Record<string, keyof CotDraft> = {
  name: "name",
  slug: "slug",
  verbose_name: "verboseName",
  verbose_name_plural: "verboseNamePlural",
  version: "version",
  group_name: "groupName",
  description: "description",
  schema_document: "schemaDocument",
  display_expression: "displayExpression",
  config_context_enabled: "configContextEnabled",
};
const COT_INPUT_KEYS = new Set([...Object.keys(COT_SIMPLE), "tags"]);

/** Types holding a name or slug a write asks for, as a staged write's read phase found them. */
export type TakenCots = Array<{ id: number; name: string; slug: string }>;

/** Validates a COT definition; `existing` on updates; `taken` when the caller read the clashes. */
export async function validateCot(
  ctx: WriteContext,
  input: Record<string, unknown>,
  existing: CotRow | null,
  partial: boolean,
  taken?: TakenCots,
): Promise<CotDraft> {
  const errors = new ErrorCollector();
  for (const key of Object.keys(input))
    if (
      !COT_INPUT_KEYS.has(key) &&
      !IGNORED.includes(key) &&
      key !== "fields" &&
      key !== "object_type"
    )
      errors.add(key, "Unknown field.");
  const draft = cotDraft(input, existing);
  checkCotAttributes(draft, input, existing, partial, errors);
  if (errors.empty) await checkCotUnique(ctx, draft, existing, errors, taken);
  errors.throwIfAny();
  return draft;
}

/** The stored type (or the empty one) with the request's attributes over it. */
function cotDraft(input: Record<string, unknown>, existing: CotRow | null): CotDraft {
  const draft: CotDraft = existing
    ? {
        name: existing.name,
        slug: existing.slug,
        verboseName: existing.verboseName,
        verboseNamePlural: existing.verboseNamePlural,
        version: existing.version,
        groupName: existing.groupName,
        description: existing.description,
        schemaDocument: existing.schemaDocument,
        displayExpression: existing.displayExpression,
        configContextEnabled: existing.configContextEnabled,
      }
    : {
        name: "",
        slug: "",
        verboseName: "",
        verboseNamePlural: "",
        version: "",
        groupName: "",
        description: "",
        schemaDocument: null,
        displayExpression: "",
        configContextEnabled: false,
      };
  for (const [api, prop] of Object.entries(COT_SIMPLE))
    if (has(input, api)) (draft as any)[prop] = input[api];
  return draft;
}

/** The attributes' own rules: required, names and slugs, lengths, version, config context. */
function checkCotAttributes(
  draft: CotDraft,
  input: Record<string, unknown>,
  existing: CotRow | null,
  partial: boolean,
  errors: ErrorCollector,
): void {
  if (!existing || !partial) {
    for (const req of ["name", "slug"])
      if (!has(input, req) && !existing) errors.add(req, "This field is required.");
  }
  if (typeof draft.name !== "string" || !NAME_RE.test(draft.name) || draft.name.length > 100) {
    errors.add("name", COT_NAME_MESSAGE);
  }
  if (typeof draft.slug !== "string" || !SLUG_RE.test(draft.slug) || draft.slug.length > 100) {
    errors.add("slug", COT_SLUG_MESSAGE);
  } else if (RESERVED_SLUGS.has(draft.slug.toLowerCase()))
    errors.add("slug", `"${draft.slug}" is reserved for a fixed route.`);
  for (const [api, prop, max] of [
    ["verbose_name", "verboseName", 100],
    ["verbose_name_plural", "verboseNamePlural", 100],
    ["version", "version", 50],
    ["display_expression", "displayExpression", 500],
    ["group_name", "groupName", 50],
    ["description", "description", 200],
  ] as const) {
    const v = draft[prop];
    if (typeof v !== "string") errors.add(api, "Not a valid string.");
    else if (v.length > max)
      errors.add(api, `Ensure this field has no more than ${max} characters.`);
  }
  if (typeof draft.version === "string" && draft.version && !isPep440(draft.version))
    errors.add(
      "version",
      `'${draft.version}' is not a valid version string (expected e.g. '1.0.0').`,
    );
  if (typeof draft.configContextEnabled !== "boolean")
    errors.add("config_context_enabled", "Must be a valid boolean.");
  else if (existing && draft.configContextEnabled !== existing.configContextEnabled)
    errors.add(
      "config_context_enabled",
      "Config context support cannot be changed after creation.",
    );
  if (
    draft.schemaDocument !== null &&
    (typeof draft.schemaDocument !== "object" || Array.isArray(draft.schemaDocument))
  ) {
    errors.add("schema_document", "Must be a JSON object or null.");
  }
}

/**
 * The slug and the name are each unique among the custom object types. A clash with a type the
 * caller may not view is refused as a write outside their constraints (decision 0137): "already
 * exists" would confirm a type they cannot see; a clash they can see is named as before.
 */
async function checkCotUnique(
  ctx: WriteContext,
  draft: CotDraft,
  existing: CotRow | null,
  errors: ErrorCollector,
  taken?: TakenCots,
): Promise<void> {
  const clashes = new Map<"slug" | "name", number>();
  for (const prop of ["slug", "name"] as const) {
    const [clash] = taken
      ? taken.filter((t) => t[prop] === draft[prop])
      : await ctx.db
          .select({ id: customObjectTypes.id })
          .from(customObjectTypes)
          .where(eq(customObjectTypes[prop], draft[prop] as string))
          .limit(1);
    if (clash && clash.id !== existing?.id) clashes.set(prop, clash.id);
  }
  if (!clashes.size) return;
  const viewable = await cotsAllowed(ctx, ctx.auth, "view", [...new Set(clashes.values())]);
  for (const [prop, id] of clashes)
    if (viewable.has(id)) errors.add(prop, `custom object type with this ${prop} already exists.`);
  if (errors.empty) throw outsideConstraints(existing ? "change" : "add");
}
