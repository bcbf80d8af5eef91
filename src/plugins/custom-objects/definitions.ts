/**
 * Validation of COT and field definitions (§5 rules 2–4), shared by the REST endpoints and
 * schema apply. Input uses API names; output uses the schema row's property names.
 */
import { eq } from "drizzle-orm";
import { choiceSets, customObjectTypes } from "../../db/schema";
import { ErrorCollector } from "../../core/errors";
import type { WriteContext } from "../../core/rest/resource";
import {
  FILTER_LOGIC,
  NAME_RE,
  ON_DELETE,
  RESERVED_SLUGS,
  SLUG_RE,
  UI_EDITABLE,
  UI_VISIBLE,
  isReservedFieldName,
  LINKABLE_APPS,
} from "./constants";
import { fieldType, isFieldType, typesTaking, typesWhere } from "./field-types";
import { columnCount, fieldColumns, tooManyColumns } from "./ddl";
import { MAX_COLUMNS_PER_TYPE } from "../../core/limits";
import { compileRegex, encodeScalar, type FieldRow } from "./values";
import type { CotRow } from "./models";

export const FIELD_NAME_MAX = 50;

export type FieldDraft = Omit<FieldRow, "id" | "customObjectTypeId" | "schemaId" | "created" | "lastUpdated">;
export type CotDraft = Pick<CotRow, "name" | "slug" | "verboseName" | "verboseNamePlural" | "version" | "groupName" | "description" | "schemaDocument">;

const has = (o: Record<string, unknown>, k: string) => Object.prototype.hasOwnProperty.call(o, k);

export const FIELD_DEFAULTS: FieldDraft = {
  name: "",
  label: "",
  description: "",
  type: "text",
  primary: false,
  required: false,
  unique: false,
  default: null,
  choiceSetId: null,
  validationRegex: "",
  validationMinimum: null,
  validationMaximum: null,
  isPolymorphic: false,
  relatedObjectTypeId: null,
  relatedObjectTypeIds: [],
  relatedObjectFilter: null,
  onDeleteBehavior: "set_null",
  groupName: "",
  searchWeight: 1000,
  filterLogic: "loose",
  uiVisible: "always",
  uiEditable: "yes",
  weight: 100,
  isCloneable: false,
  deprecated: false,
  deprecatedSince: "",
  scheduledRemoval: "",
};

/** API name → row property, for the plain attributes. */
const SIMPLE: Record<string, keyof FieldDraft> = {
  name: "name",
  label: "label",
  description: "description",
  type: "type",
  primary: "primary",
  required: "required",
  unique: "unique",
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
};
export const FIELD_INPUT_KEYS = new Set([...Object.keys(SIMPLE), "default", "choice_set", "related_object_type", "related_object_types", "custom_object_type"]);
const IGNORED = new Set(["id", "url", "display", "display_url", "created", "last_updated", "schema_id"]);

const STRINGS: Array<[keyof FieldDraft, number]> = [
  ["label", 50],
  ["description", 200],
  ["groupName", 50],
  ["validationRegex", 500],
  ["deprecatedSince", 50],
  ["scheduledRemoval", 50],
];
const BOOLS: Array<keyof FieldDraft> = ["primary", "required", "unique", "isPolymorphic", "isCloneable", "deprecated"];

/**
 * Validates a field definition against its siblings. `existing` is the stored field on updates
 * (partial input is merged over it). Throws ValidationError keyed by API attribute name.
 */
export async function validateField(
  ctx: WriteContext,
  input: Record<string, unknown>,
  existing: FieldRow | null,
  siblings: FieldRow[],
): Promise<FieldDraft> {
  const errors = new ErrorCollector();
  for (const key of Object.keys(input)) if (!FIELD_INPUT_KEYS.has(key) && !IGNORED.has(key)) errors.add(key, "Unknown field.");
  const draft: FieldDraft = { ...FIELD_DEFAULTS, ...(existing ? stripIds(existing) : {}) };
  const apiOf = Object.fromEntries(Object.entries(SIMPLE).map(([a, p]) => [p, a])) as Record<string, string>;
  for (const [api, prop] of Object.entries(SIMPLE)) if (has(input, api)) (draft as any)[prop] = input[api];

  // shapes
  if (typeof draft.name === "string" && isReservedFieldName(draft.name)) errors.add("name", `"${draft.name}" is a reserved name.`);
  else if (typeof draft.name !== "string" || !NAME_RE.test(draft.name) || draft.name.length > FIELD_NAME_MAX) {
    errors.add("name", `Use lowercase letters, digits and single underscores (^[a-z0-9]+(_[a-z0-9]+)*$), at most ${FIELD_NAME_MAX} characters.`);
  }
  if (!isFieldType(draft.type)) errors.add("type", `"${String(draft.type)}" is not a valid choice.`);
  for (const [prop, max] of STRINGS) {
    const v = draft[prop];
    if (typeof v !== "string") errors.add(apiOf[prop]!, "Not a valid string.");
    else if (v.length > max) errors.add(apiOf[prop]!, `Ensure this field has no more than ${max} characters.`);
  }
  for (const prop of BOOLS) if (typeof draft[prop] !== "boolean") errors.add(apiOf[prop]!, "Must be a valid boolean.");
  for (const prop of ["searchWeight", "weight"] as const) {
    if (typeof draft[prop] !== "number" || !Number.isInteger(draft[prop]) || draft[prop] < 0 || draft[prop] > 32767) errors.add(apiOf[prop]!, "A valid integer between 0 and 32767 is required.");
  }
  const pick = (prop: keyof FieldDraft, allowed: readonly string[]) => {
    if (!allowed.includes(draft[prop] as string)) errors.add(apiOf[prop]!, `"${String(draft[prop])}" is not a valid choice.`);
  };
  pick("onDeleteBehavior", ON_DELETE);
  pick("filterLogic", FILTER_LOGIC);
  pick("uiVisible", UI_VISIBLE);
  pick("uiEditable", UI_EDITABLE);
  if (draft.relatedObjectFilter !== null && (typeof draft.relatedObjectFilter !== "object" || Array.isArray(draft.relatedObjectFilter))) {
    errors.add("related_object_filter", "Must be a JSON object or null.");
  }
  for (const prop of ["validationMinimum", "validationMaximum"] as const) {
    const v = draft[prop];
    if (v !== null && (typeof v !== "number" || !Number.isFinite(v))) errors.add(apiOf[prop]!, "A valid number is required.");
  }
  if (!errors.empty) errors.throwIfAny();
  const type = draft.type;
  const kind = fieldType(type);
  const Cap = (s: string) => s[0]!.toUpperCase() + s.slice(1);

  // type-specific attributes
  if (!kind.takes.range && (draft.validationMinimum !== null || draft.validationMaximum !== null)) {
    if (has(input, "validation_minimum") && draft.validationMinimum !== null) errors.add("validation_minimum", `Only ${typesTaking("range")} fields take a minimum.`);
    if (has(input, "validation_maximum") && draft.validationMaximum !== null) errors.add("validation_maximum", `Only ${typesTaking("range")} fields take a maximum.`);
    draft.validationMinimum = draft.validationMaximum = null;
  }
  if (draft.validationMinimum !== null && draft.validationMaximum !== null && draft.validationMinimum > draft.validationMaximum) {
    errors.add("validation_maximum", "The maximum must not be below the minimum.");
  }
  if (draft.validationRegex) {
    if (!kind.takes.regex) {
      if (has(input, "validation_regex")) errors.add("validation_regex", `Only ${typesTaking("regex")} fields take a regex.`);
      draft.validationRegex = "";
    } else if (!compileRegex(draft.validationRegex)) errors.add("validation_regex", "Not a valid regular expression.");
  }

  if (has(input, "choice_set")) {
    const raw = input.choice_set;
    if (raw === null) draft.choiceSetId = null;
    else {
      const id = typeof raw === "number" ? raw : raw && typeof raw === "object" ? (raw as any).id : undefined;
      const where = typeof raw === "string" ? eq(choiceSets.name, raw) : typeof id === "number" ? eq(choiceSets.id, id) : null;
      const [cs] = where ? await ctx.db.select({ id: choiceSets.id }).from(choiceSets).where(where).limit(1) : [];
      if (!cs) errors.add("choice_set", `Choice set not found: ${JSON.stringify(raw)}`);
      else draft.choiceSetId = cs.id;
    }
  }
  if (kind.takes.choices) {
    if (draft.choiceSetId === null && !errors.errors.choice_set) errors.add("choice_set", `${Cap(typesTaking("choices"))} fields need a choice set.`);
  } else if (draft.choiceSetId !== null) {
    if (has(input, "choice_set")) errors.add("choice_set", `Only ${typesTaking("choices")} fields take a choice set.`);
    else draft.choiceSetId = null;
  }

  // related types
  if (kind.takes.related) {
    if (existing && existing.isPolymorphic !== draft.isPolymorphic) errors.add("is_polymorphic", "Cannot be changed after the field is created.");
    if (draft.isPolymorphic) {
      if (has(input, "related_object_types")) {
        const raw = input.related_object_types;
        if (!Array.isArray(raw) || raw.length === 0) errors.add("related_object_types", "Polymorphic fields need a non-empty list of object types.");
        else {
          const ids: number[] = [];
          for (const item of raw) {
            const ot = await ctx.services.objectTypes.resolve(item, ctx.db);
            if (!ot) errors.add("related_object_types", `Unknown object type: ${JSON.stringify(item)}`);
            else if (!(await isLinkable(ctx, ot))) errors.add("related_object_types", `Objects of ${ot.appLabel}.${ot.model} cannot be linked.`);
            else if (!ids.includes(ot.id)) ids.push(ot.id);
          }
          if (existing && JSON.stringify([...ids].sort()) !== JSON.stringify([...existing.relatedObjectTypeIds].sort())) {
            errors.add("related_object_types", "Cannot be changed after the field is created.");
          }
          draft.relatedObjectTypeIds = ids;
        }
      } else if (!existing) errors.add("related_object_types", "Polymorphic fields need a non-empty list of object types.");
      if (has(input, "related_object_type") && input.related_object_type !== null) errors.add("related_object_type", "Polymorphic fields use related_object_types.");
      draft.relatedObjectTypeId = null;
    } else {
      if (has(input, "related_object_type")) {
        const ot = await ctx.services.objectTypes.resolve(input.related_object_type, ctx.db);
        if (!ot) errors.add("related_object_type", `Unknown object type: ${JSON.stringify(input.related_object_type)}`);
        else if (!(await isLinkable(ctx, ot))) errors.add("related_object_type", `Objects of ${ot.appLabel}.${ot.model} cannot be linked.`);
        else if (existing && existing.relatedObjectTypeId !== ot.id) errors.add("related_object_type", "Cannot be changed after the field is created.");
        else draft.relatedObjectTypeId = ot.id;
      } else if (!existing) errors.add("related_object_type", `${Cap(typesTaking("related"))} fields need a related object type.`);
      if (has(input, "related_object_types") && Array.isArray(input.related_object_types) && input.related_object_types.length) {
        errors.add("related_object_types", "Only polymorphic fields take a list of object types.");
      }
      draft.relatedObjectTypeIds = [];
    }
  } else {
    const related = typesTaking("related");
    if (has(input, "related_object_type") && input.related_object_type !== null) errors.add("related_object_type", `Only ${related} fields take a related object type.`);
    if (has(input, "related_object_types") && Array.isArray(input.related_object_types) && input.related_object_types.length) errors.add("related_object_types", `Only ${related} fields take related object types.`);
    if (has(input, "is_polymorphic") && draft.isPolymorphic) errors.add("is_polymorphic", `Only ${related} fields can be polymorphic.`);
    draft.relatedObjectTypeId = null;
    draft.relatedObjectTypeIds = [];
    draft.isPolymorphic = false;
  }
  // Only plain columns change type: a reference never becomes another kind of storage.
  if (existing && existing.type !== type && (fieldType(existing.type).storage !== "column" || kind.storage !== "column")) {
    errors.add("type", `Cannot change a ${existing.type} field into a ${type} field.`);
  }

  if (!kind.canBePrimary && draft.primary) errors.add("primary", `A ${type} field cannot be primary.`);
  if (!kind.canBeUnique && draft.unique) errors.add("unique", `A ${type} field cannot be unique.`);

  // names must not collide with siblings' names or columns
  const others = siblings.filter((s) => !existing || s.id !== existing.id);
  if (NAME_RE.test(draft.name)) {
    if (others.some((s) => s.name === draft.name)) errors.add("name", `A field named "${draft.name}" already exists on this type.`);
    const mine = fieldColumns({ ...draft, type });
    const taken = new Set(others.flatMap((s) => [s.name, ...fieldColumns(s)]));
    const clash = mine.find((c) => taken.has(c)) ?? (others.some((s) => mine.includes(s.name)) ? draft.name : undefined);
    if (clash && !errors.errors.name) errors.add("name", `"${draft.name}" collides with the column "${clash}" of another field.`);
  }
  if (draft.primary && others.some((s) => s.primary)) errors.add("primary", "Only one field of a type can be primary.");
  // Only a new field adds columns: polymorphism and object-ness cannot change afterwards.
  if (!existing) {
    const columns = columnCount([...others, { type, isPolymorphic: draft.isPolymorphic }]);
    if (columns > MAX_COLUMNS_PER_TYPE) errors.add("non_field_errors", tooManyColumns(columns));
  }

  // default, checked against the type
  if (has(input, "default")) draft.default = input.default ?? null;
  if (draft.default !== null && draft.default !== undefined && !errors.errors.type) {
    if (!kind.takesDefault) errors.add("default", `${Cap(typesWhere((m) => !m.takesDefault))} fields take no default.`);
    else {
      let choices: Set<string> | null = null;
      if (kind.takes.choices && draft.choiceSetId) {
        const [cs] = await ctx.db.select().from(choiceSets).where(eq(choiceSets.id, draft.choiceSetId));
        choices = new Set(cs?.extraChoices.map(([v]) => v) ?? []);
      }
      const checked = encodeScalar({ ...(draft as FieldRow), type }, draft.default, choices);
      if ("error" in checked) errors.add("default", `Invalid default: ${checked.error}`);
    }
  }
  errors.throwIfAny();
  return draft;
}

function stripIds(f: FieldRow): FieldDraft {
  const { id: _i, customObjectTypeId: _c, schemaId: _s, created: _cr, lastUpdated: _l, ...rest } = f;
  return rest;
}

/** Host models and COTs can be link targets; users, tokens and the like cannot. */
async function isLinkable(ctx: WriteContext, ot: { appLabel: string; model: string }): Promise<boolean> {
  if (ot.appLabel === "custom_objects") return ot.model !== "customobjecttype" && ot.model !== "customobjecttypefield";
  return LINKABLE_APPS.includes(ot.appLabel) && !!(await ctx.services.models.get(ot.appLabel, ot.model, ctx));
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
};
export const COT_INPUT_KEYS = new Set([...Object.keys(COT_SIMPLE), "tags"]);

/** Validates a COT definition; `existing` on updates. */
export async function validateCot(ctx: WriteContext, input: Record<string, unknown>, existing: CotRow | null, partial: boolean): Promise<CotDraft> {
  const errors = new ErrorCollector();
  for (const key of Object.keys(input)) if (!COT_INPUT_KEYS.has(key) && !IGNORED.has(key) && key !== "fields" && key !== "object_type") errors.add(key, "Unknown field.");
  const draft: CotDraft = existing
    ? { name: existing.name, slug: existing.slug, verboseName: existing.verboseName, verboseNamePlural: existing.verboseNamePlural, version: existing.version, groupName: existing.groupName, description: existing.description, schemaDocument: existing.schemaDocument }
    : { name: "", slug: "", verboseName: "", verboseNamePlural: "", version: "", groupName: "", description: "", schemaDocument: null };
  for (const [api, prop] of Object.entries(COT_SIMPLE)) if (has(input, api)) (draft as any)[prop] = input[api];
  if (!existing || !partial) {
    for (const req of ["name", "slug"]) if (!has(input, req) && !existing) errors.add(req, "This field is required.");
  }
  if (typeof draft.name !== "string" || !NAME_RE.test(draft.name) || draft.name.length > 100) {
    errors.add("name", "Use lowercase letters, digits and single underscores (^[a-z0-9]+(_[a-z0-9]+)*$), at most 100 characters.");
  }
  if (typeof draft.slug !== "string" || !SLUG_RE.test(draft.slug) || draft.slug.length > 100) {
    errors.add("slug", 'Enter a valid "slug" consisting of letters, numbers, underscores or hyphens (at most 100).');
  } else if (RESERVED_SLUGS.has(draft.slug.toLowerCase())) errors.add("slug", `"${draft.slug}" is reserved for a fixed route.`);
  for (const [api, prop, max] of [
    ["verbose_name", "verboseName", 100],
    ["verbose_name_plural", "verboseNamePlural", 100],
    ["version", "version", 20],
    ["group_name", "groupName", 50],
    ["description", "description", 200],
  ] as const) {
    const v = draft[prop];
    if (typeof v !== "string") errors.add(api, "Not a valid string.");
    else if (v.length > max) errors.add(api, `Ensure this field has no more than ${max} characters.`);
  }
  if (draft.schemaDocument !== null && (typeof draft.schemaDocument !== "object" || Array.isArray(draft.schemaDocument))) {
    errors.add("schema_document", "Must be a JSON object or null.");
  }
  if (errors.empty) {
    for (const [prop, api] of [
      ["slug", "slug"],
      ["name", "name"],
    ] as const) {
      const [clash] = await ctx.db.select({ id: customObjectTypes.id }).from(customObjectTypes).where(eq(customObjectTypes[prop], draft[prop] as string)).limit(1);
      if (clash && clash.id !== existing?.id) errors.add(api, `custom object type with this ${api} already exists.`);
    }
  }
  errors.throwIfAny();
  return draft;
}
