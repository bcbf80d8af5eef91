/**
 * The one generator from `defineModel` field specs to JSON Schema: the record a model returns,
 * its nested (brief) form, and what POST/PUT and PATCH accept. Host models and the plugins'
 * static models are all described through here; nothing per model is written by hand.
 */
import type { DefinedModel, FieldSpec } from "../core/models/define";
import {
  closedObject,
  ENUM_LABELS,
  orNull,
  pascal,
  ref,
  type JsonSchema,
} from "../core/json-schema";

/** Component names of one model. */
export interface ModelNames {
  record: string;
  brief: string;
  request: string;
  patched: string;
  list: string;
}

/** `Site`, `BriefSite`, `SiteRequest`, `PatchedSiteRequest`, `PaginatedSiteList`. */
export function modelNames(base: string): ModelNames {
  return {
    record: base,
    brief: `Brief${base}`,
    request: `${base}Request`,
    patched: `Patched${base}Request`,
    list: `Paginated${base}List`,
  };
}

/** The component base name of a host model, from its verbose name (`IP address` → `IPAddress`). */
export const hostModelName = (m: DefinedModel) => pascal(m.spec.verboseName);

/** Shared shapes the generated schemas point at. */
export const SHARED_SCHEMAS: Record<string, JsonSchema> = {
  ObjectTypeLabel: {
    type: "string",
    pattern: "^[a-z][a-z0-9_-]*\\.[-a-zA-Z0-9_]+$",
    description: "`<app_label>.<model>`",
    examples: ["dcim.site"],
  },
  ObjectTypeRef: {
    type: "object",
    description: "An object type; `app_label` and `model` are absent only if the type row is gone.",
    properties: {
      id: { type: "integer" },
      app_label: { type: "string" },
      model: { type: "string" },
    },
    required: ["id"],
    additionalProperties: false,
  },
  ObjectTypeInput: {
    description:
      'An object type: `"app_label.model"`, its id, or `{app_label, model}` (`custom-objects` is an alias of `custom_objects`).',
    anyOf: [
      { type: "string", examples: ["dcim.site"] },
      { type: "integer", minimum: 1 },
      closedObject({ app_label: { type: "string" }, model: { type: "string" } }),
    ],
  },
  NestedObject: {
    type: "object",
    description: "The nested form of an object: `id`, `url`, `display` and its brief fields.",
    properties: {
      id: { type: "integer" },
      url: { type: "string", format: "uri" },
      display: { type: "string" },
    },
    required: ["id"],
  },
  NestedTag: closedObject({
    id: { type: "integer" },
    url: { type: "string", format: "uri" },
    display: { type: "string" },
    name: { type: "string" },
    slug: { type: "string" },
    color: { type: "string" },
  }),
  TagInput: {
    description: "A tag by id, slug, or `{id}` / `{slug}` / `{name}`.",
    anyOf: [
      { type: "integer", minimum: 1 },
      { type: "string" },
      closedObject({ id: { type: "integer" } }),
      closedObject({ slug: { type: "string" } }),
      closedObject({ name: { type: "string" } }),
    ],
  },
};

const SLUG_PATTERN = "^[-a-zA-Z0-9_]+$";
const COLOR_PATTERN = "^[0-9a-f]{6}$";

/** Finds the component base name of the model an fk/m2m points at (`app_label.model`). */
export type BriefRef = (label: string) => JsonSchema;

/** Whether the column behind a field may hold NULL (what the serialiser then returns). */
function columnNullable(f: FieldSpec): boolean {
  const col = f.column as { notNull?: boolean } | undefined;
  return col ? !col.notNull : false;
}

function choiceValue(f: FieldSpec): JsonSchema {
  const values = (f.choices ?? []).map(([v]) => v);
  return closedObject({ value: { type: "string", enum: values }, label: { type: "string" } });
}

/** A decimal as NetBox's schema gives it (a JSON number), with the range Host holds it to. */
function decimalSchema(f: FieldSpec): JsonSchema {
  const d = f.decimal!;
  return { type: "number", format: "double", minimum: d.min, maximum: d.max };
}

/** A field as records show it. */
function readSchema(f: FieldSpec, brief: BriefRef): JsonSchema {
  const nullable = columnNullable(f);
  const maybe = (s: JsonSchema) => (nullable ? orNull(s) : s);
  switch (f.type) {
    case "string":
    case "text":
    case "slug":
    case "color":
    case "password":
      return maybe({ type: "string" });
    case "datetime":
      return maybe({ type: "string", format: "date-time" });
    case "integer":
      return maybe({ type: "integer" });
    case "decimal":
      return maybe(decimalSchema(f));
    case "boolean":
      return maybe({ type: "boolean" });
    case "choice":
      return maybe(choiceValue(f));
    case "fk":
      return maybe(brief(f.related!));
    case "m2m":
      return { type: "array", items: brief(f.related!) };
    case "object_types":
      return { type: "array", items: ref("ObjectTypeLabel") };
    case "object_type_ref":
      return maybe(ref("ObjectTypeRef"));
    case "object_type_refs":
      return { type: "array", items: ref("ObjectTypeRef") };
    default:
      return {};
  }
}

/** A field as POST/PUT/PATCH accept it. */
function writeSchema(f: FieldSpec): JsonSchema {
  const maybe = (s: JsonSchema) => (f.nullable ? orNull(s) : s);
  const text = (extra: JsonSchema = {}) =>
    maybe({ type: "string", ...(f.maxLength ? { maxLength: f.maxLength } : {}), ...extra });
  switch (f.type) {
    case "string":
    case "text":
      return text();
    case "slug":
      return text({ pattern: SLUG_PATTERN });
    case "color":
      return text({ pattern: COLOR_PATTERN });
    case "password":
      return text({ writeOnly: true });
    case "datetime":
      return maybe({ type: "string", format: "date-time" });
    case "integer":
      return maybe({ type: "integer" });
    case "decimal":
      return maybe(decimalSchema(f));
    case "boolean":
      return maybe({ type: "boolean" });
    case "choice":
      return maybe({
        type: "string",
        enum: (f.choices ?? []).map(([v]) => v),
        [ENUM_LABELS]: (f.choices ?? []).map(([, label]) => label),
      });
    case "fk":
      return maybe({ type: "integer", minimum: 1, description: `id of a ${f.related}` });
    case "m2m":
      return {
        type: "array",
        items: { type: "integer", minimum: 1 },
        description: `ids of ${f.related} objects`,
      };
    case "object_types":
    case "object_type_refs":
      return { type: "array", items: ref("ObjectTypeInput") };
    case "object_type_ref":
      return maybe(ref("ObjectTypeInput"));
    default:
      return {};
  }
}

const TIMESTAMP = { type: "string", format: "date-time" };
/** NetBox's custom field data; Host defines no custom fields, so it is always `{}` (decision 0200). */
const CUSTOM_FIELDS = {
  type: "object",
  maxProperties: 0,
  description: "Custom field data (NetBox). Host defines no custom fields: always `{}`.",
};

/** Every schema of one model, keyed by component name. */
export function modelSchemas(
  m: DefinedModel,
  names: ModelNames,
  brief: BriefRef,
  extra: DefinedModel["spec"]["openapi"] = {},
): Record<string, JsonSchema> {
  const spec = m.spec;
  const annotations = {
    ...spec.openapi,
    ...extra,
    record: { ...spec.openapi?.record, ...extra?.record },
    request: { ...spec.openapi?.request, ...extra?.request },
  };
  const omit = new Set(annotations.omit ?? []);

  const props: Record<string, JsonSchema> = {
    id: { type: "integer", readOnly: true },
    url: { type: "string", format: "uri", readOnly: true },
    display: { type: "string", readOnly: true },
  };
  for (const f of spec.fields) if (!f.writeOnly) props[f.name] = readSchema(f, brief);
  if (spec.tags) props.tags = { type: "array", items: ref("NestedTag") };
  if (spec.customFields) props.custom_fields = CUSTOM_FIELDS;
  props.created = TIMESTAMP;
  props.last_updated = TIMESTAMP;
  Object.assign(props, annotations.record);
  for (const key of omit) delete props[key];
  // A `decorate` nobody described may add keys: then only the keys every record has are promised.
  const described = !spec.decorate || Object.keys(annotations.record).length > 0;
  const record: JsonSchema = described
    ? closedObject(props)
    : {
        type: "object",
        properties: props,
        required: ["id", "url", "display"],
        additionalProperties: true,
      };

  const nested: Record<string, JsonSchema> = {
    id: props.id!,
    url: props.url!,
    display: props.display!,
  };
  for (const f of spec.fields)
    if (f.brief && f.column && f.type !== "fk") nested[f.name] = readSchema(f, brief);

  const input: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const f of spec.fields) {
    if (f.readOnly) continue;
    input[f.name] = writeSchema(f);
    if (f.required) required.push(f.name);
  }
  if (spec.tags) input.tags = { type: "array", items: ref("TagInput") };
  if (spec.customFields) input.custom_fields = CUSTOM_FIELDS;
  Object.assign(input, annotations.request);
  for (const key of annotations.required ?? []) if (!required.includes(key)) required.push(key);
  const description = `A ${spec.verboseName} (\`${spec.appLabel}.${spec.model}\`).`;

  return {
    [names.record]: { ...record, description },
    [names.brief]: {
      ...closedObject(nested),
      description: `The nested form of a ${spec.verboseName}.`,
    },
    [names.request]: {
      ...closedObject(input, required),
      description: `A ${spec.verboseName} to create or replace.`,
    },
    [names.patched]: {
      ...closedObject(input, []),
      description: `Changes to a ${spec.verboseName}.`,
    },
    [names.list]: paginated(names.record),
  };
}

/** The §4 list envelope around a record schema. */
export function paginated(recordName: string): JsonSchema {
  return closedObject({
    count: {
      type: ["integer", "null"],
      minimum: 0,
      description: "Matching objects; null with cursor pagination (`start`).",
    },
    next: { type: ["string", "null"], format: "uri" },
    previous: { type: ["string", "null"], format: "uri" },
    results: { type: "array", items: ref(recordName) },
  });
}
