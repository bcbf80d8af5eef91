/**
 * The custom objects plugin in the OpenAPI document: its fixed routes, and one set of paths per
 * custom object type whose schemas follow that type's field rows (JSON types, required, choice
 * set values, nested references, polymorphic references as `oneOf` keyed by `object_type`).
 */
import { yieldWhenDue } from "../../turns";
import { sql } from "drizzle-orm";
import type { Services } from "../../core/context";
import { label as otLabel } from "../../core/object-types";
import { choiceSets, customObjectTypes } from "../../db/schema";
import type { HttpMethod, OpenApiBuilder, PluginOpenApi } from "../../openapi/builder";
import { bulkSchemas, LIST_PARAMETERS } from "../../openapi/builder";
import {
  closedObject,
  COMPONENTS,
  ENUM_LABELS,
  orNull,
  ref,
  type JsonSchema,
  type ModelOpenApi,
} from "../../core/json-schema";
import { paginated, type ModelNames } from "../../openapi/model-schemas";
import { valibotComponents } from "../../openapi/valibot";
import { FIELD_TYPES, fieldType, type SchemaEnv } from "./field-types";
import {
  API_BASE,
  APP_LABEL,
  FILTER_LOGIC,
  NAME_RE,
  ON_DELETE,
  SLUG_RE,
  UI_EDITABLE,
  UI_VISIBLE,
} from "./constants";
import type { CotModel, CotRegistry } from "./objects/models";
import {
  DocumentSchema,
  FieldEntrySchema,
  RemovedFieldSchema,
  TypeEntrySchema,
} from "./schema/document";
import { cotModel, fieldModel } from "./types/api";

const BASE = `/api/${API_BASE}`;
const TAG = "custom-objects";

const json = (schema: JsonSchema) => ({ "application/json": { schema } });
const errors = (...codes: Array<[string, string]>) =>
  Object.fromEntries(
    codes.map(([code, name]) => [code, { $ref: `#/components/responses/${name}` }]),
  );

/**
 * Component names of a custom object type: `CustomObject.<slug>`, `CustomObject.<slug>.Brief`, …
 * A slug never holds a dot, so no two types (and no host model) can share a name.
 */
const cotNames = (slug: string): ModelNames => ({
  record: `CustomObject.${slug}`,
  brief: `CustomObject.${slug}.Brief`,
  request: `CustomObject.${slug}.Request`,
  patched: `CustomObject.${slug}.PatchedRequest`,
  list: `CustomObject.${slug}.List`,
});

const ID_URL_DISPLAY = {
  id: { type: "integer" },
  url: { type: "string", format: "uri" },
  display: { type: "string" },
};

/** What the types and fields endpoints add to, or accept beyond, their field specs. */
const COT_EXTRA: ModelOpenApi = {
  record: {
    fields: {
      type: "array",
      items: ref("CustomObjectTypeField"),
      description: "The type's fields (group_name, weight, name order).",
    },
    object_type: orNull(ref("ObjectTypeRef")),
  },
  request: {
    name: { type: "string", maxLength: 100, pattern: NAME_RE.source },
    slug: {
      type: "string",
      maxLength: 100,
      pattern: SLUG_RE.source,
      description: "Not one of the fixed route names (custom-object-types, schema, …).",
    },
    schema_document: { anyOf: [{ type: "object" }, { type: "null" }] },
  },
  required: ["name", "slug"],
};

/** Upstream's labels of a field's types and choice values (NetBox's CustomField*Choices). */
const FIELD_TYPE_LABELS: Record<string, string> = {
  text: "Text",
  longtext: "Text (long)",
  integer: "Integer",
  decimal: "Decimal",
  boolean: "Boolean",
  date: "Date",
  datetime: "Date & time",
  url: "URL",
  json: "JSON",
  select: "Selection",
  multiselect: "Multiple selection",
  object: "Object",
  multiobject: "Multiple objects",
  coordinates: "Coordinates",
};
const CHOICE_LABELS: Record<string, string> = {
  set_null: "Set null (clear the field, keep this object)",
  cascade: "Cascade (delete this object too)",
  protect: "Protect (prevent deletion of the referenced object)",
  disabled: "Disabled",
  loose: "Loose",
  exact: "Exact",
  always: "Always",
  "if-set": "If set",
  hidden: "Hidden",
  yes: "Yes",
  no: "No",
};
/** An enum with its values' labels (OPTIONS answers them as `display_name`, decision 0200). */
const labelled = (values: readonly string[], labels: Record<string, string>): JsonSchema => ({
  type: "string",
  enum: [...values],
  [ENUM_LABELS]: values.map((v) => labels[v] ?? v),
});

const FIELD_EXTRA: ModelOpenApi = {
  request: {
    custom_object_type: {
      type: "integer",
      minimum: 1,
      description: "id of the custom object type (cannot change later).",
    },
    name: { type: "string", maxLength: 50, pattern: NAME_RE.source },
    type: { ...labelled(FIELD_TYPES, FIELD_TYPE_LABELS), default: "text" },
    choice_set: {
      anyOf: [
        { type: "integer", minimum: 1 },
        { type: "string", description: "a choice set name" },
        closedObject({ id: { type: "integer" } }),
        { type: "null" },
      ],
    },
    related_object_type: orNull(ref("ObjectTypeInput")),
    related_object_types: { type: "array", items: ref("ObjectTypeInput") },
    related_object_filter: { anyOf: [{ type: "object" }, { type: "null" }] },
    validation_minimum: { type: ["number", "null"] },
    validation_maximum: { type: ["number", "null"] },
    on_delete_behavior: labelled(ON_DELETE, CHOICE_LABELS),
    filter_logic: labelled(FILTER_LOGIC, CHOICE_LABELS),
    ui_visible: labelled(UI_VISIBLE, CHOICE_LABELS),
    ui_editable: labelled(UI_EDITABLE, CHOICE_LABELS),
    search_weight: { type: "integer", minimum: 0, maximum: 32767 },
    weight: { type: "integer", minimum: 0, maximum: 32767 },
    default: { description: "A value valid for the field's type." },
  },
  required: ["custom_object_type", "name"],
};

/** Schema diff shapes of §5.1 (the TypeScript interfaces in schema/diff.ts). */
const DIFF_SCHEMAS: Record<string, JsonSchema> = {
  SchemaAttrChanges: {
    type: "object",
    additionalProperties: { type: "array", prefixItems: [{}, {}], minItems: 2, maxItems: 2 },
    description: "attribute → [old, new]",
  },
  SchemaFieldChange: {
    type: "object",
    properties: {
      op: { type: "string", enum: ["add", "alter", "remove"] },
      schema_id: { type: "integer" },
      db_name: { type: "string" },
      schema_def: { type: "object" },
      changed_attrs: ref("SchemaAttrChanges"),
      destructive: {
        type: "boolean",
        description: "Applying it loses or rejects data on live rows (see destructive_changes).",
      },
    },
    required: ["op", "schema_id", "db_name", "schema_def", "destructive"],
    additionalProperties: false,
  },
  SchemaTypeDiff: closedObject(
    {
      slug: { type: "string" },
      name: { type: "string" },
      is_new: { type: "boolean" },
      removed: { type: "boolean", description: "The document removes this type (removed_types)." },
      hidden: {
        type: "boolean",
        description: "An existing type the caller may not view: its changes are not shown.",
      },
      has_changes: { type: "boolean" },
      has_destructive_changes: { type: "boolean" },
      cot_changes: ref("SchemaAttrChanges"),
      field_changes: { type: "array", items: ref("SchemaFieldChange") },
      destructive_changes: { type: "array", items: ref("SchemaDestructiveChange") },
      warnings: { type: "array", items: { type: "string" } },
    },
    [
      "slug",
      "name",
      "is_new",
      "has_changes",
      "has_destructive_changes",
      "cot_changes",
      "field_changes",
      "destructive_changes",
      "warnings",
    ],
  ),
  SchemaDestructiveChange: closedObject({
    slug: { type: "string" },
    field: {
      type: ["string", "null"],
      description:
        "The field (a unique_together key: its fields joined by commas); null for a whole type.",
    },
    reason: {
      type: "string",
      enum: [
        "field_removed",
        "type_removed",
        "lossy_type_change",
        "required_over_empty_rows",
        "unique_over_duplicates",
        "check_over_violations",
        "choices_in_use",
        "link_target_changed",
      ],
    },
    rows: {
      type: ["integer", "null"],
      minimum: 1,
      description:
        "Live rows the change concerns; null where the caller may not view every object of the type (the change is gated all the same).",
    },
    detail: { type: "string" },
  }),
  SchemaRefusal: {
    type: "object",
    properties: {
      status: { type: "integer", description: "The apply's HTTP status." },
      error: { type: "string", enum: ["too_many_custom_object_types"] },
      detail: { type: "string" },
      limit: { type: "integer", description: "MAX_CUSTOM_OBJECT_TYPES" },
    },
    required: ["status", "error", "detail"],
    description: "The apply's error answer (§4) with its status.",
  },
  SchemaPreview: closedObject({
    plan_id: {
      type: "string",
      pattern: "^[0-9a-f]{32}\\.[0-9a-f]{32}$",
      description:
        "Pass it to apply to apply exactly this plan (409 stale_plan if the database moved).",
    },
    from_state_hash: { type: "string" },
    to_state_hash: {
      type: "string",
      description: "The state hash the types will have once the plan is applied.",
    },
    diffs: { type: "array", items: ref("SchemaTypeDiff") },
    destructive_changes: { type: "array", items: ref("SchemaDestructiveChange") },
    refusals: {
      type: "array",
      items: ref("SchemaRefusal"),
      description:
        "What an apply of the document would answer instead of applying it, beyond destructive_changes (the type cap); told only to a caller who may apply.",
    },
    state_hash: {
      type: "string",
      description: "Equal to from_state_hash; pass it back as expected_state_hash.",
    },
  }),
  SchemaApplied: closedObject(
    {
      applied: { const: true },
      diffs: { type: "array", items: ref("SchemaTypeDiff") },
      plan_id: {
        type: "string",
        description: "With plan_id or expected_state_hash in the request: the plan applied.",
      },
      from_state_hash: { type: "string" },
      to_state_hash: { type: "string" },
      trash: {
        type: "array",
        items: { type: "integer" },
        description:
          "Trash entries of the types removed (fields' entries are listed by schema/trash/).",
      },
    },
    ["applied", "diffs", "trash"],
  ),
  SchemaTrashEntry: {
    type: "object",
    properties: {
      id: { type: "integer" },
      kind: { type: "string", enum: ["field", "type"] },
      custom_object_type: closedObject({ id: { type: "integer" }, slug: { type: "string" } }),
      name: { type: "string" },
      field: closedObject({
        id: { type: "integer" },
        schema_id: { type: "integer" },
        name: { type: "string" },
        type: { type: "string" },
      }),
      fields: { type: "array", items: { type: "string" } },
      rows: {
        type: ["integer", "null"],
        description:
          "Rows (a type's) or values (a field's) the entry keeps; null where the caller may not view every object of the type.",
      },
      removed: { type: "string", format: "date-time" },
      expires: { type: "string", format: "date-time" },
    },
    required: ["id", "kind", "custom_object_type", "name", "rows", "removed", "expires"],
    additionalProperties: false,
  },
  SchemaApplyRequest: {
    oneOf: [
      closedObject(
        {
          schema: ref("SchemaDocument"),
          allow_destructive: { type: "boolean", default: false },
          expected_state_hash: { type: ["string", "null"] },
          plan_id: {
            type: ["string", "null"],
            description: "A preview's plan_id: apply exactly that plan.",
          },
          purge: {
            type: "boolean",
            default: false,
            description:
              "Drop removed fields and types at once instead of keeping them in the trash.",
          },
        },
        ["schema"],
      ),
      ref("SchemaDocument"),
    ],
  },
  SchemaInvalidError: {
    type: "object",
    properties: {
      error: { const: "invalid_schema" },
      detail: { type: "string" },
      schema_errors: {
        type: "array",
        items: closedObject({
          path: { type: "string", examples: ["$.types[0].fields[1].type"] },
          message: { type: "string" },
        }),
      },
    },
    required: ["error", "detail", "schema_errors"],
  },
  SchemaConflictError: {
    type: "object",
    properties: {
      error: {
        type: "string",
        enum: ["destructive_changes", "stale_plan", "plan_mismatch", "protected"],
      },
      detail: { type: "string" },
      destructive_slugs: { type: "array", items: { type: "string" } },
      destructive_changes: { type: "array", items: ref("SchemaDestructiveChange") },
      state_hash: { type: "string" },
      plan_id: { type: "string" },
    },
    required: ["error", "detail"],
  },
  NestedCustomObjectType: closedObject({
    ...ID_URL_DISPLAY,
    name: { type: "string" },
    slug: { type: "string" },
  }),
};

/**
 * Everything the per-type part depends on: type shapes and the choice sets they use, as one
 * statement (its row's `k`), so the route reads it with the request's guards (decision 0166).
 */
function fingerprint(services: Services) {
  const types = sql`SELECT count(*) || '|' || coalesce(group_concat(id || ':' || shape_version || ':' || slug, ','), '') FROM (SELECT id, shape_version, slug FROM ${customObjectTypes} ORDER BY id)`;
  const sets = sql`SELECT coalesce(group_concat(id || ':' || name || ':' || extra_choices, ','), '') FROM (SELECT id, name, extra_choices FROM ${choiceSets} ORDER BY id)`;
  return services.db.reader.all<{ k: string }>(sql`SELECT (${types}) || '|' || (${sets}) AS k`);
}

interface Env {
  b: OpenApiBuilder;
  choices: Map<number, string[]>;
  choiceLabels: Map<number, string[]>;
  labels: Map<number, string>;
}

/** The nested form of a target, with `object_type` for polymorphic fields (inline: closed schemas cannot be extended). */
function target(env: Env, typeId: number, polymorphic: boolean): JsonSchema {
  const label = env.labels.get(typeId);
  const brief = label ? env.b.brief(label) : ref("NestedObject");
  if (!polymorphic) return brief;
  const name = String(brief.$ref ?? "").slice(COMPONENTS.length);
  const base =
    (env.b.schemas[name] as
      | { properties?: Record<string, JsonSchema>; required?: string[] }
      | undefined) ?? {};
  const props = base.properties ?? ID_URL_DISPLAY;
  return {
    ...closedObject(
      {
        object_type: { const: label ?? typeId },
        _content_type: {
          const: label ?? typeId,
          description: "object_type, as upstream spells it.",
        },
        ...props,
      },
      ["object_type", ...(base.required ?? ["id"])],
    ),
    title: label ?? String(typeId),
  };
}

/** What the field type modules need to describe references and choices. */
const schemaEnv = (env: Env): SchemaEnv => ({
  choices: (id) => (id == null ? [] : (env.choices.get(id) ?? [])),
  choiceLabels: (id) => (id == null ? [] : (env.choiceLabels.get(id) ?? [])),
  label: (id) => env.labels.get(id),
  reference: (id, polymorphic) => target(env, id, polymorphic),
});

/** Record, brief, request and list schemas of one type. */
function cotSchemas(env: Env, model: CotModel): Record<string, JsonSchema> {
  const n = cotNames(model.cot.slug);
  const title = model.cot.verboseName || model.cot.name;
  const record: Record<string, JsonSchema> = {
    ...ID_URL_DISPLAY,
    custom_object_type: ref("NestedCustomObjectType"),
    created: { type: "string", format: "date-time" },
    last_updated: { type: "string", format: "date-time" },
    tags: { type: "array", items: ref("NestedTag") },
  };
  const input: Record<string, JsonSchema> = {};
  const required: string[] = [];
  const types = schemaEnv(env);
  for (const f of model.fields) {
    const kind = fieldType(f.type);
    // A flat field (coordinates) reads only as its parts; a write may still give the pair.
    if (!kind.flat) record[f.name] = kind.readSchema(f, types);
    input[f.name] = kind.writeSchema(f, types);
    for (const part of kind.parts ?? []) {
      record[`${f.name}_${part}`] = {
        type: ["number", "null"],
        description: `The ${part} of ${f.name}, as upstream spells it.`,
      };
      input[`${f.name}_${part}`] = {
        type: ["number", "string", "null"],
        description: `Sets the ${part} of ${f.name} (the other half keeps its value).`,
      };
    }
    for (const c of kind.storage === "column" ? (kind.companions ?? []) : []) {
      record[`${f.name}_${c.suffix}`] = c.readSchema;
      input[`${f.name}_${c.suffix}`] = c.writeSchema;
    }
    if (f.required && (f.default === null || f.default === undefined)) required.push(f.name);
  }
  if (model.fields.some((f) => f.context))
    record._context = {
      type: ["object", "null"],
      properties: { display: { type: "string" } },
      description: "The values of the context fields, or null when they are empty.",
    };
  if (model.cot.configContextEnabled) {
    record.local_context_data = {
      type: ["object", "null"],
      description: "Local config context data.",
    };
    input.local_context_data = {
      type: ["object", "null"],
      description: "Local config context data.",
    };
  }
  input.tags = { type: "array", items: ref("TagInput") };
  // Every object's owner, unless a field of the type is named `owner` (objects/owner.ts).
  if (!model.fields.some((f) => f.name === "owner")) {
    record.owner = orNull(ref("BriefOwner"));
    input.owner = { type: ["integer", "null"], minimum: 1, description: "id of a users.owner" };
  }
  const schemas: Record<string, JsonSchema> = {
    [n.record]: {
      ...closedObject(record),
      title,
      description:
        model.cot.description || `A ${title} (custom object type \`${model.cot.slug}\`).`,
    },
    [n.brief]: {
      ...closedObject(
        record._context ? { ...ID_URL_DISPLAY, _context: record._context } : ID_URL_DISPLAY,
      ),
      description: `The nested form of a ${title}.`,
    },
    [n.request]: {
      ...closedObject(input, required),
      description: `A ${title} to create or replace.`,
    },
    [n.patched]: { ...closedObject(input, []), description: `Changes to a ${title}.` },
    [n.list]: paginated(n.record),
  };
  return { ...schemas, ...bulkSchemas(n, schemas) };
}

async function describe(b: OpenApiBuilder, services: Services, registry: CotRegistry) {
  const db = services.db.orm;
  b.tag(TAG, "Custom object types, their fields, linked objects and schema documents.");
  b.model(cotModel, { path: `${BASE}/custom-object-types`, tag: TAG, extra: COT_EXTRA });
  b.model(fieldModel, { path: `${BASE}/custom-object-type-fields`, tag: TAG, extra: FIELD_EXTRA });
  b.addSchemas({
    ...valibotComponents("SchemaDocument", DocumentSchema, {
      SchemaDocumentType: TypeEntrySchema,
      SchemaDocumentField: FieldEntrySchema,
      SchemaDocumentRemovedField: RemovedFieldSchema,
    }),
    ...DIFF_SCHEMAS,
  });

  const models = await currentModels(db, registry);
  describeTypes(b, await typesEnv(b, services, models), models);
  describeReadRoutes(b);
  describeSchemaWrites(b);
  describeExportAndTrash(b);
}

type Db = Services["db"]["orm"];

/**
 * The types as they are now, ordered by slug: the registry's models, cached by shape version and
 * built again a type a step with turns after a schema change (read all at once, a local file's
 * reads never waiting, the rebuild of 1,000 types held the loop for a second; decision 0210).
 */
async function currentModels(db: Db, registry: CotRegistry): Promise<CotModel[]> {
  const { models } = await registry.all(db);
  return [...models].sort((a, b) =>
    a.cot.slug < b.cot.slug ? -1 : a.cot.slug > b.cot.slug ? 1 : 0,
  );
}

/** What the per-type schemas read: each choice set's values and the related types' labels. */
async function typesEnv(b: OpenApiBuilder, services: Services, models: CotModel[]): Promise<Env> {
  const db = services.db.orm;
  const sets = await db
    .select({ id: choiceSets.id, extra: choiceSets.extraChoices })
    .from(choiceSets);
  const choices = new Map(sets.map((c) => [c.id, c.extra.map(([v]) => v)]));
  const choiceLabels = new Map(sets.map((c) => [c.id, c.extra.map(([v, label]) => label ?? v)]));
  const typeIds = new Set<number>();
  for (const m of models)
    for (const f of m.fields)
      for (const id of [f.relatedObjectTypeId, ...f.relatedObjectTypeIds])
        if (id != null) typeIds.add(id);
  const labels = new Map(
    [...(await services.objectTypes.byIds([...typeIds], db))].map(([id, ot]) => [id, otLabel(ot)]),
  );
  return { b, choices, choiceLabels, labels };
}

/** Each type's schemas and its paths, with the methods the `/{slug}` routes have. */
function describeTypes(b: OpenApiBuilder, env: Env, models: CotModel[]): void {
  const bySlug = new Map(models.map((m) => [m.cot.slug, m]));
  b.briefResolver((label) =>
    label.startsWith(`${APP_LABEL}.`) && bySlug.has(label.slice(APP_LABEL.length + 1))
      ? ref(cotNames(label.slice(APP_LABEL.length + 1)).brief)
      : null,
  );
  // After the host models, so polymorphic branches can copy their nested forms.
  // turns between types, here and in their paths (decision 0205)
  b.afterModels(async () => {
    for (const m of models) {
      await yieldWhenDue();
      b.addSchemas(cotSchemas(env, m));
    }
    b.addSchemas({
      LinkedObject: closedObject({
        custom_object_type: ref("NestedCustomObjectType"),
        field_name: { type: "string" },
        object: models.length
          ? { anyOf: models.map((m) => ref(cotNames(m.cot.slug).record)) }
          : { type: "object" },
      }),
      PaginatedLinkedObjectList: paginated("LinkedObject"),
    });
  });

  // One set of paths per type, with the methods the `/{slug}` routes have.
  const perType = (detail: boolean) => async (methods: Set<HttpMethod>) => {
    for (const m of models) {
      await yieldWhenDue();
      const slug = m.cot.slug;
      const tag = `${TAG}: ${slug}`;
      b.tag(tag, m.cot.description || `Objects of the custom object type ${m.cot.name}.`);
      b.resource({
        path: `${BASE}/${slug}`,
        tag,
        verbose: m.cot.verboseName || m.cot.name,
        operationPrefix: `custom_objects.${slug}`,
        operationSeparator: ".",
        names: cotNames(slug),
        list: m.resource.list,
        methods: detail
          ? { list: new Set(), detail: methods }
          : { list: methods, detail: new Set() },
      });
    }
  };
  b.expand(`${BASE}/{slug}`, perType(false));
  b.expand(`${BASE}/{slug}/{id}`, perType(true));
}

/** The plugin root and linked objects. */
function describeReadRoutes(b: OpenApiBuilder): void {
  b.operation("get", BASE, {
    tags: [TAG],
    operationId: "plugins_custom_objects_root",
    summary: "One URL per custom object type",
    responses: {
      "200": {
        description: "Slug → URL of its objects.",
        content: json({ type: "object", additionalProperties: { type: "string", format: "uri" } }),
      },
      ...errors(["403", "Forbidden"]),
    },
  });
  b.operation("get", `${BASE}/linked-objects`, {
    tags: [TAG],
    operationId: "plugins_custom_objects_linked_objects",
    summary: "Custom objects that link to an object, one row per (object, field)",
    parameters: [
      {
        name: "object_type",
        in: "query",
        required: true,
        description: "`<app_label>.<model>` of the target.",
        schema: ref("ObjectTypeLabel"),
      },
      { name: "object_id", in: "query", required: true, schema: { type: "integer", minimum: 1 } },
      LIST_PARAMETERS.limit!,
      LIST_PARAMETERS.offset!,
    ],
    responses: {
      "200": { description: "A page of links.", content: json(ref("PaginatedLinkedObjectList")) },
      ...errors(["400", "BadRequest"], ["403", "Forbidden"], ["404", "NotFound"]),
    },
  });
}

/** Schema preview and apply. */
function describeSchemaWrites(b: OpenApiBuilder): void {
  const schemaErrors = {
    "400": {
      description:
        "The document is invalid (`invalid_schema`, with `schema_errors`), circular (`circular_dependency`) or names what does not exist (`unresolvable_reference`).",
      content: json({ anyOf: [ref("SchemaInvalidError"), ref("Error")] }),
    },
    "403": { $ref: "#/components/responses/Forbidden" },
  };
  b.operation("post", `${BASE}/schema/preview`, {
    tags: [TAG],
    operationId: "plugins_custom_objects_schema_preview",
    summary: "Diff a schema document against the database (writes nothing)",
    requestBody: { required: true, content: json(ref("SchemaApplyRequest")) },
    responses: {
      "200": {
        description: "One diff per type in the document.",
        content: json(ref("SchemaPreview")),
      },
      ...schemaErrors,
    },
  });
  b.operation("post", `${BASE}/schema/apply`, {
    tags: [TAG],
    operationId: "plugins_custom_objects_schema_apply",
    summary: "Apply a schema document in one transaction",
    parameters: [
      {
        name: "allow_destructive",
        in: "query",
        description: "For a bare document body: apply destructive changes too.",
        schema: { type: "boolean" },
      },
      {
        name: "background",
        in: "query",
        description:
          "Queue the apply as a `schema.apply` job and answer 202 (needs the tasks Redis).",
        schema: { type: "boolean" },
      },
    ],
    requestBody: { required: true, content: json(ref("SchemaApplyRequest")) },
    responses: {
      "200": {
        description: "Applied; the diffs equal the preview's.",
        content: json(ref("SchemaApplied")),
      },
      "202": {
        description:
          "Queued (`background=true`); the job's `data` holds what the synchronous call would have answered.",
        content: json({
          type: "object",
          properties: {
            job: closedObject({ id: { type: "integer" }, url: { type: "string", format: "uri" } }),
            status: { type: "string" },
            detail: { type: "string" },
          },
          required: ["job", "status"],
        }),
      },
      ...schemaErrors,
      "409": {
        description:
          "Changes that lose or reject data without allow_destructive (counted per change; nothing changed), the database moved since the previewed plan (`stale_plan`), another document than the plan's (`plan_mismatch`), or a removed type others point at (`protected`).",
        content: json(ref("SchemaConflictError")),
      },
      "503": {
        description: "`background=true` without a tasks Redis.",
        content: json(ref("Error")),
      },
    },
  });
}

/** The schema export and the schema trash (list, restore, purge). */
function describeExportAndTrash(b: OpenApiBuilder): void {
  b.operation("get", `${BASE}/schema/export`, {
    tags: [TAG],
    operationId: "plugins_custom_objects_schema_export",
    summary: "The database as a schema document (round-trips through apply with no changes)",
    parameters: [
      {
        name: "slug",
        in: "query",
        description: "Types to export (repeat or comma-separate; none = all).",
        schema: { type: "array", items: { type: "string" } },
        style: "form",
        explode: true,
      },
    ],
    responses: {
      "200": { description: "The schema document.", content: json(ref("SchemaDocument")) },
      ...errors(["403", "Forbidden"], ["404", "NotFound"]),
    },
  });
  b.operation("get", `${BASE}/schema/trash`, {
    tags: [TAG],
    operationId: "plugins_custom_objects_schema_trash_list",
    summary: "Removed fields and types kept with their data until they expire",
    parameters: [
      {
        name: "slug",
        in: "query",
        description: "Only entries of this type slug.",
        schema: { type: "string" },
      },
    ],
    responses: {
      "200": {
        description: "The entries the caller may see.",
        content: json(
          closedObject({
            count: { type: "integer" },
            results: { type: "array", items: ref("SchemaTrashEntry") },
          }),
        ),
      },
      ...errors(["403", "Forbidden"]),
    },
  });
  const trashId = {
    name: "id",
    in: "path",
    required: true,
    schema: { type: "integer", minimum: 1 },
  };
  b.operation("post", `${BASE}/schema/trash/{id}/restore`, {
    tags: [TAG],
    operationId: "plugins_custom_objects_schema_trash_restore",
    summary: "Put a trash entry back, data included",
    parameters: [trashId],
    responses: {
      "200": {
        description: "Restored.",
        content: json(closedObject({ restored: ref("SchemaTrashEntry") })),
      },
      "409": {
        description:
          "Its name, slug or schema id is taken again, or its type is gone (`restore_conflict`).",
        content: json(ref("Error")),
      },
      ...errors(["403", "Forbidden"], ["404", "NotFound"]),
    },
  });
  b.operation("delete", `${BASE}/schema/trash/{id}`, {
    tags: [TAG],
    operationId: "plugins_custom_objects_schema_trash_purge",
    summary: "Purge a trash entry now (its data is dropped)",
    parameters: [trashId],
    responses: {
      "204": { description: "Purged." },
      ...errors(["403", "Forbidden"], ["404", "NotFound"]),
    },
  });
}

/** The plugin's part of the document, over the app's registry of types. */
export const customObjectsOpenApi = (registry: CotRegistry): PluginOpenApi => ({
  fingerprint,
  describe: (b, services) => describe(b, services, registry),
});
