/**
 * `custom-object-types/` and `custom-object-type-fields/`: the read side comes from the host's
 * declarative models; writes validate definitions and run the schema operations.
 */
import { asc, eq, inArray, sql, type SQL } from "drizzle-orm";
import {
  customObjectTypeFields,
  customObjectTypes,
  objectTypes,
  tags as tagsTable,
} from "../../../db/schema";
import type { ObjectTypeRow } from "../../../core/object-types";
import { ValidationError } from "../../../core/errors";
import { defineModel, resolveTags, setTags } from "../../../core/models/define";
import { parseBool } from "../../../core/rest/query";
import { rowBytes } from "../../../core/rest/budget";
import type { ApiRecord, ReadContext, Resource, WriteContext } from "../../../core/rest/resource";
import { slotKey } from "../../../core/slots";
import { hideUnviewable } from "../../../core/auth/restrict";
import { relationViewStatements } from "../../../core/auth/relations-judged";
import { API_BASE, APP_LABEL, COT_MODEL, FIELD_MODEL } from "../constants";
import { refuseCycle } from "./cycles";
import { countsWithheldFor } from "../schema/access";
import { addLocalContextColumn } from "../ddl";
import { titleCase } from "../objects/shape";
import { validateCot, validateField } from "./definitions";
import { cotIdOf, stagedFieldWrites } from "./staged-fields";
import { stagedTypeWrites } from "./staged-types";
import { nameableTags } from "../../../core/models/tag-scope";
import type { CotRegistry, CotRow } from "../objects/models";
import {
  addField,
  alterField,
  createCot,
  deleteCot,
  removeField,
  updateCot,
} from "../schema/operations";
import type { FieldRow } from "../objects/values";
import {
  dropUniqueTogether,
  followFieldChange,
  normalizeTogether,
  setUniqueTogether,
} from "../schema/unique-together";
import { conditionalOf, mergedTogether } from "../schema/constraints";
import {
  aroundFieldChange,
  refuseRemovingRead,
  setTypeConstraints,
} from "../schema/constraints-api";

/**
 * Field records already loaded in a transaction (by id, in its scratch): a type's record embeds
 * its fields', so a caller loading both (the schema change log's snapshots) serialises each once.
 */
export const PRELOADED_FIELDS = slotKey<Map<number, ApiRecord>>("custom-objects.preloaded-fields");

export const fieldModel = defineModel({
  appLabel: APP_LABEL,
  model: FIELD_MODEL,
  verboseName: "custom object type field",
  path: `${API_BASE}/custom-object-type-fields`,
  table: customObjectTypeFields,
  defaultOrdering: ["custom_object_type", "group_name", "weight", "name"],
  display: (r) => r.label || r.name,
  fields: [
    {
      name: "custom_object_type",
      type: "integer",
      column: customObjectTypeFields.customObjectTypeId,
      brief: true,
    },
    {
      name: "name",
      type: "string",
      column: customObjectTypeFields.name,
      search: true,
      brief: true,
    },
    {
      name: "label",
      type: "string",
      column: customObjectTypeFields.label,
      search: true,
      brief: true,
    },
    {
      name: "description",
      type: "string",
      column: customObjectTypeFields.description,
      search: true,
      brief: true,
    },
    { name: "type", type: "string", column: customObjectTypeFields.type, brief: true },
    { name: "primary", type: "boolean", column: customObjectTypeFields.primary },
    { name: "required", type: "boolean", column: customObjectTypeFields.required },
    { name: "unique", type: "boolean", column: customObjectTypeFields.unique },
    { name: "default", type: "json", column: customObjectTypeFields.default },
    {
      name: "choice_set",
      type: "fk",
      column: customObjectTypeFields.choiceSetId,
      related: "extras.customfieldchoiceset",
    },
    { name: "validation_regex", type: "string", column: customObjectTypeFields.validationRegex },
    { name: "validation_minimum", type: "json", column: customObjectTypeFields.validationMinimum },
    { name: "validation_maximum", type: "json", column: customObjectTypeFields.validationMaximum },
    { name: "is_polymorphic", type: "boolean", column: customObjectTypeFields.isPolymorphic },
    {
      name: "related_object_type",
      type: "object_type_ref",
      column: customObjectTypeFields.relatedObjectTypeId,
      // a definition names the types its caller may view definitions of (0129), not 0187's
      namesAnyType: true,
    },
    {
      name: "related_object_types",
      type: "object_type_refs",
      column: customObjectTypeFields.relatedObjectTypeIds,
      namesAnyType: true,
    },
    {
      name: "related_object_filter",
      type: "json",
      column: customObjectTypeFields.relatedObjectFilter,
    },
    { name: "on_delete_behavior", type: "string", column: customObjectTypeFields.onDeleteBehavior },
    { name: "group_name", type: "string", column: customObjectTypeFields.groupName },
    { name: "search_weight", type: "integer", column: customObjectTypeFields.searchWeight },
    { name: "filter_logic", type: "string", column: customObjectTypeFields.filterLogic },
    { name: "ui_visible", type: "string", column: customObjectTypeFields.uiVisible },
    { name: "ui_editable", type: "string", column: customObjectTypeFields.uiEditable },
    { name: "weight", type: "integer", column: customObjectTypeFields.weight },
    { name: "is_cloneable", type: "boolean", column: customObjectTypeFields.isCloneable },
    { name: "schema_id", type: "integer", column: customObjectTypeFields.schemaId },
    { name: "deprecated", type: "boolean", column: customObjectTypeFields.deprecated },
    { name: "deprecated_since", type: "string", column: customObjectTypeFields.deprecatedSince },
    { name: "scheduled_removal", type: "string", column: customObjectTypeFields.scheduledRemoval },
    { name: "context", type: "boolean", column: customObjectTypeFields.context },
    { name: "related_name", type: "string", column: customObjectTypeFields.relatedName },
  ],
});

export const cotModel = defineModel({
  appLabel: APP_LABEL,
  model: COT_MODEL,
  verboseName: "custom object type",
  path: `${API_BASE}/custom-object-types`,
  table: customObjectTypes,
  tags: true,
  defaultOrdering: ["name"],
  display: (r) => r.verboseName || titleCase(r.name),
  fields: [
    { name: "name", type: "string", column: customObjectTypes.name, search: true, brief: true },
    { name: "slug", type: "slug", column: customObjectTypes.slug, search: true, brief: true },
    { name: "verbose_name", type: "string", column: customObjectTypes.verboseName },
    { name: "verbose_name_plural", type: "string", column: customObjectTypes.verboseNamePlural },
    { name: "version", type: "string", column: customObjectTypes.version },
    { name: "group_name", type: "string", column: customObjectTypes.groupName },
    {
      name: "description",
      type: "string",
      column: customObjectTypes.description,
      search: true,
      brief: true,
    },
    {
      name: "schema_document",
      type: "json",
      column: customObjectTypes.schemaDocument,
      nullable: true,
    },
    { name: "display_expression", type: "string", column: customObjectTypes.displayExpression },
    {
      name: "config_context_enabled",
      type: "boolean",
      column: customObjectTypes.configContextEnabled,
    },
    /**
     * Compound uniqueness: lists of field names, each a unique index (decision 0051), and
     * partial keys `{fields, condition}` (decision 0087).
     */
    { name: "unique_together", type: "json", column: customObjectTypes.uniqueTogether },
    /** Checks `{name, condition}` every row must match (decision 0087). */
    { name: "checks", type: "json", column: customObjectTypes.conditionalConstraints },
  ],
  // the types' fields, in a load's one read (decision 0166), as `decorate` reads them after
  decoratePlan(ctx, ids) {
    const own = typeof ids === "number" ? sql`${ids}` : ids;
    const fieldIds = sql`SELECT ${customObjectTypeFields.id} FROM ${customObjectTypeFields} WHERE ${customObjectTypeFields.customObjectTypeId} IN (${own})`;
    const fields = fieldModel.resource.loadPlan!(ctx, fieldIds);
    return {
      statement: [
        ctx.db
          .select({ id: objectTypes.id, appLabel: objectTypes.appLabel, model: objectTypes.model })
          .from(objectTypes)
          .where(
            sql`${objectTypes.id} IN (SELECT ${customObjectTypes.objectTypeId} FROM ${customObjectTypes} WHERE ${customObjectTypes.id} IN (${own}))`,
          ),
        fieldOrder(ctx.db, sql`${customObjectTypeFields.customObjectTypeId} IN (${own})`),
        ...fields.statements,
      ],
      decorated: (answers) => async (rows, records) => {
        const [types, order, ...loads] = answers as [
          ObjectTypeRow[],
          FieldOrderRow[],
          ...unknown[],
        ];
        const loaded = await fields.finish(
          loads,
          order.map((f) => f.id),
        );
        const byId = new Map(loaded.map((r) => [r.id as number, r]));
        const ots = new Map(types.map((t) => [t.id, t]));
        decorateTypes(rows, records, order, byId, ots);
      },
    };
  },
  async decorate(ctx, rows, records) {
    const ids = rows.map((r) => r.id as number);
    const fieldRows = ids.length
      ? await fieldOrder(ctx.db, inArray(customObjectTypeFields.customObjectTypeId, ids))
      : [];
    // Field records the caller already loaded in this context (the schema change log) are reused.
    const known = ctx.scratch?.get(PRELOADED_FIELDS);
    const missing = fieldRows.map((f) => f.id).filter((id) => !known?.has(id));
    const loaded = new Map(
      (missing.length ? await fieldModel.resource.load(ctx, missing) : []).map((r) => [
        r.id as number,
        r,
      ]),
    );
    const ots = await ctx.services.objectTypes.byIds(
      rows.map((r) => r.objectTypeId).filter((x) => x != null),
      ctx.db,
    );
    const fieldRecord = { get: (id: number) => known?.get(id) ?? loaded.get(id) };
    decorateTypes(rows, records, fieldRows, fieldRecord, ots);
  },
});

/** About what one embedded field record takes in a type's answer beyond its stored text (~730 B). */
const FIELD_RECORD_BYTES = 768;

/**
 * A type's record embeds its fields' records: the response budget weighs them with the type's
 * row (decision 0205), so a page of wide types (up to `MAX_COLUMNS_PER_TYPE` fields each) is
 * refused before it is read. Counted through the fields' type index.
 */
cotModel.resource.linkBytes = sql`(SELECT coalesce(sum(${FIELD_RECORD_BYTES} + ${
  rowBytes(fieldModel.resource) ?? sql`0`
}), 0) FROM ${customObjectTypeFields} WHERE ${customObjectTypeFields.customObjectTypeId} = ${customObjectTypes.id})`;

/**
 * A type's record embeds its fields' records: they are hidden as the field endpoint hides them
 * (a choice set the caller may not view is its id alone, decision 0194), in every answer that
 * hides a type's record (lists, GETs, write answers, change snapshots).
 */
cotModel.resource.hideNested = async (ctx, auth, records) => {
  const embedded = records.flatMap((r) =>
    Array.isArray(r.fields) ? (r.fields as ApiRecord[]) : [],
  );
  if (!embedded.length) return records;
  const hidden = await hideUnviewable(ctx, auth, fieldModel.resource, embedded);
  if (hidden.every((f, i) => f === embedded[i])) return records;
  const shown = new Map(embedded.map((f, i) => [f, hidden[i]!]));
  return records.map((r) =>
    Array.isArray(r.fields)
      ? { ...r, fields: (r.fields as ApiRecord[]).map((f) => shown.get(f) ?? f) }
      : r,
  );
};

/**
 * In the one-read GET and list: what `hideNested` asks of the embedded fields' related objects
 * (their choice sets, decision 0194), judged in the read, so a constrained reader's page stays
 * one round trip; the hiding then finds the answers (`relationsProved`) and asks nothing after.
 */
cotModel.resource.hideNestedPlan = async (ctx, auth, ids) => {
  const types = typeof ids === "number" ? sql`${ids}` : ids;
  const fields = sql`SELECT ${customObjectTypeFields.id} FROM ${customObjectTypeFields} WHERE ${customObjectTypeFields.customObjectTypeId} IN (${types})`;
  const judged = await relationViewStatements(ctx, auth, fieldModel.resource, fields);
  return judged.length ? judged : null;
};

const allowDestructive = (ctx: WriteContext) =>
  parseBool(ctx.params.get("allow_destructive") ?? "false") === true;

async function loadCot(ctx: WriteContext, id: number): Promise<CotRow> {
  const [cot] = await ctx.db.select().from(customObjectTypes).where(eq(customObjectTypes.id, id));
  if (!cot)
    throw new ValidationError({ custom_object_type: [`Custom object type ${id} does not exist.`] });
  return cot;
}

const siblingsOf = (ctx: WriteContext, cotId: number) =>
  ctx.db
    .select()
    .from(customObjectTypeFields)
    .where(eq(customObjectTypeFields.customObjectTypeId, cotId));

/** The tags a type's input names, those the caller may not view as unknown (decision 0064). */
async function typeTagsOf(ctx: WriteContext, input: ApiRecord, heldBy: number | null) {
  if (input.tags === undefined) return null;
  const { id: typeId } = await ctx.services.objectTypes.ensure(APP_LABEL, COT_MODEL, ctx.db);
  const nameable = await nameableTags(ctx, sql`${tagsTable.id}`, typeId, heldBy);
  const tags = await resolveTags(ctx, input.tags, APP_LABEL, COT_MODEL, nameable);
  if ("error" in tags) throw new ValidationError({ tags: [tags.error] });
  return tags;
}

export function cotResource(registry: CotRegistry): Resource {
  const base = cotModel.resource;
  return {
    ...base,
    // one read phase and one batch (decision 0108); tags, keys and checks take `create` below
    staged: stagedTypeWrites(registry),
    async create(ctx, input) {
      const { unique_together: together, checks, ...rest } = input;
      // a new type has no fields yet: only empty lists are possible
      if (together !== undefined || checks !== undefined)
        await setTypeConstraints(ctx.db, null, 0, together, checks, false); // no rows yet
      input = rest;
      const draft = await validateCot(ctx, input, null, false);
      const tags = await typeTagsOf(ctx, input, null);
      const cot = await createCot(ctx, draft);
      if (draft.configContextEnabled) await addLocalContextColumn(ctx.db, cot.id);
      if (tags)
        await setTags(
          ctx,
          (await ctx.services.objectTypes.ensure(APP_LABEL, COT_MODEL, ctx.db)).id,
          cot.id,
          tags.ids,
        );
      return cot.id;
    },
    async update(ctx, id, input, partial) {
      const [cot] = await ctx.db
        .select()
        .from(customObjectTypes)
        .where(eq(customObjectTypes.id, id));
      const { unique_together: together, checks, ...rest } = input;
      input = rest;
      const draft = await validateCot(ctx, input, cot!, partial);
      if (together !== undefined || checks !== undefined)
        await setTypeConstraints(
          ctx.db,
          cot!,
          id,
          together,
          checks,
          countsWithheldFor(ctx, cot!.slug),
        );
      const tags = await typeTagsOf(ctx, input, id);
      await updateCot(ctx, cot!, draft);
      if (tags)
        await setTags(
          ctx,
          (await ctx.services.objectTypes.ensure(APP_LABEL, COT_MODEL, ctx.db)).id,
          id,
          tags.ids,
        );
      registry.forget(id);
    },
    async delete(ctx, id) {
      const [cot] = await ctx.db
        .select()
        .from(customObjectTypes)
        .where(eq(customObjectTypes.id, id));
      await deleteCot(ctx, cot!);
      registry.forget(id);
    },
  };
}

export function fieldResource(): Resource {
  const base = fieldModel.resource;
  return {
    ...base,
    // one read phase and one batch (decision 0108); renames and retypes take `update` below
    staged: stagedFieldWrites(),
    async create(ctx, input) {
      const cotId = cotIdOf(input);
      if (cotId === null)
        throw new ValidationError({
          custom_object_type: ["This field is required (a custom object type id)."],
        });
      const cot = await loadCot(ctx, cotId);
      const { custom_object_type: _c, ...rest } = input;
      const draft = await validateField(ctx, rest, null, await siblingsOf(ctx, cot.id));
      await refuseCycle(ctx, cot, draft);
      const field = await addField(ctx, cot, draft);
      return field.id;
    },
    async update(ctx, id, input, _partial) {
      const [field] = await ctx.db
        .select()
        .from(customObjectTypeFields)
        .where(eq(customObjectTypeFields.id, id));
      const { custom_object_type: moved, ...rest } = input;
      if (moved !== undefined && cotIdOf(input) !== field!.customObjectTypeId) {
        throw new ValidationError({
          custom_object_type: ["A field cannot move to another custom object type."],
        });
      }
      const cot = await loadCot(ctx, field!.customObjectTypeId);
      const draft = await validateField(
        ctx,
        rest,
        field as FieldRow,
        await siblingsOf(ctx, cot.id),
      );
      // a retyped column of a compound key: the key's index goes first (SQLite will not drop an indexed column)
      const inKey =
        draft.type !== field!.type &&
        (cot.uniqueTogether ?? []).some((set) => set.includes(field!.name));
      if (inKey) await dropUniqueTogether(ctx.db, cot.id);
      const withheld = countsWithheldFor(ctx, cot.slug);
      await aroundFieldChange(
        ctx.db,
        cot,
        field as FieldRow,
        draft,
        () => alterField(ctx, cot, field as FieldRow, draft, allowDestructive(ctx)),
        withheld,
      );
      if (draft.name !== field!.name)
        await followFieldChange(ctx.db, cot.id, field!.name, draft.name);
      if (inKey)
        await setUniqueTogether(
          ctx.db,
          cot.id,
          normalizeTogether((await loadCot(ctx, cot.id)).uniqueTogether),
          withheld,
        );
    },
    async delete(ctx, id) {
      const [field] = await ctx.db
        .select()
        .from(customObjectTypeFields)
        .where(eq(customObjectTypeFields.id, id));
      const cot = await loadCot(ctx, field!.customObjectTypeId);
      refuseRemovingRead(cot, field as FieldRow);
      await followFieldChange(ctx.db, cot.id, field!.name, null);
      await removeField(ctx, cot, field as FieldRow);
    },
  };
}

type FieldOrderRow = { id: number; cot: number };

/** The fields of the types `where` picks, in the order a type lists them. */
const fieldOrder = (db: ReadContext["db"], where: SQL | undefined) =>
  db
    .select({ id: customObjectTypeFields.id, cot: customObjectTypeFields.customObjectTypeId })
    .from(customObjectTypeFields)
    .where(where)
    .orderBy(
      asc(customObjectTypeFields.groupName),
      asc(customObjectTypeFields.weight),
      asc(customObjectTypeFields.name),
    );

/** A type's record from its row and its fields' records: fields, keys, checks, object type. */
function decorateTypes(
  rows: Record<string, any>[],
  records: ApiRecord[],
  fieldRows: FieldOrderRow[],
  fieldRecord: { get(id: number): ApiRecord | undefined },
  ots: Map<number, ObjectTypeRow>,
) {
  // each type's fields, in order, grouped once: a page of 1,000 types filtered all its fields
  // for each type (decision 0210)
  const byType = new Map<unknown, ApiRecord[]>();
  for (const f of fieldRows) {
    const record = fieldRecord.get(f.id);
    if (!record) continue;
    const own = byType.get(record.custom_object_type);
    if (own) own.push(record);
    else byType.set(record.custom_object_type, [record]);
  }
  rows.forEach((row, i) => {
    const rec = records[i]!;
    rec.fields = byType.get(row.id) ?? [];
    const conditional = conditionalOf(row);
    rec.unique_together = mergedTogether(normalizeTogether(row.uniqueTogether), conditional);
    rec.checks = conditional.checks;
    const ot = ots.get(row.objectTypeId);
    rec.object_type = ot ? { id: ot.id, app_label: ot.appLabel, model: ot.model } : null;
  });
}
