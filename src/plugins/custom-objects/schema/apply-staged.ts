/**
 * A schema apply as reads and one atomic batch (decision 0111), for the documents that add types
 * and fields, change attributes or names, carry choice sets, compound keys and checks (0119); the
 * rest keeps the transaction (`applySchema`).
 */
import { and, eq, type SQL } from "drizzle-orm";
import { guardChanged, isWriteConflict, WriteConflictError } from "../../../db/client";
import { ApiError, forbidden } from "../../../core/errors";
import { codename } from "../../../core/auth/permissions";
import { recordUrl } from "../../../core/models/define";
import {
  choiceSets,
  customObjectTypeFields,
  customObjectTypes,
  objectTypes,
} from "../../../db/schema";
import { nowIso } from "../../../db/schema/common";
import type { ApiRecord, WriteContext } from "../../../core/context";
import { stageRules } from "../../../core/events/dispatch";
import { stageChanges } from "../../../core/changes/record";
import { nextStamp, ReadPhase, WriteBatch } from "../../../core/rest/write-batch";
import { APP_LABEL, COT_MODEL, FIELD_MODEL } from "../constants";
import {
  alterFieldStatements,
  createCotTableStatements,
  fieldStorageStatements,
  hasLinkTable,
} from "../ddl";
import type { CotRow } from "../objects/models";
import type { FieldRow } from "../objects/values";
import { validateField, type KnownChoiceSets } from "../types/definitions";
import { cotModel, fieldModel } from "../types/api";
import {
  addStatements,
  asSchema,
  batchError,
  bumpType,
  constrained,
  firstNext,
  idTaken,
  indexSchemaQuery,
  messages,
  nextIdQuery,
  objectTypeQuery,
  slugTaken,
} from "../types/staged";
import { newTypeRow, typeRecord, typeTags } from "../types/staged-types";
import { fieldRecord, stageSearchIndex } from "../types/staged-fields";
import { encodedDefault } from "./operations";
import { normalizeTogether, setsOfFields, togetherStatements } from "./unique-together";
import {
  asConditionalError,
  conditionalOf,
  conditionalStatements,
  plainTogether,
  wantedConditional,
  type Conditional,
} from "./constraints";
import type { SchemaDocument, TypeEntry } from "./document";
import type { ChoiceSetRow, TypeDiff } from "./diff";
import {
  atPath,
  checkApply,
  choiceSetsQuery,
  cotDraft,
  dependencyOrder,
  documentSlugs,
  fieldInput,
  type ApplyRequest,
} from "./apply";
import {
  canonicalFromEntry,
  referenceQueries,
  stableJson,
  referencesFromRows,
  typeRowQueries,
  typesFromRows,
  type DbType,
} from "./state";

/** Field attributes whose change needs the transaction: a retype converts stored values. */
const TRANSACTION_ATTRS = ["type", "related_object_type", "related_object_types", "is_polymorphic"];

/**
 * Whether the batch takes the document: no removals, no retype or retarget, no gated change, no
 * swap of names, no relation to a type it creates.
 */
function batchable(doc: SchemaDocument, diffs: TypeDiff[], state: Map<string, DbType>): boolean {
  if (doc.removed_types?.length) return false;
  const creating = new Set(doc.types.filter((t) => !state.has(t.slug)).map((t) => t.slug));
  return doc.types.every((t, ti) => {
    const diff = diffs[ti]!;
    const db = state.get(t.slug);
    if (diff.destructive_changes.length) return false;
    if (
      t.fields.some((f) =>
        [canonicalFromEntry(f).related_object_type, ...canonicalFromEntry(f).related_object_types]
          .filter((r): r is string => !!r)
          .some((r) => r.startsWith("custom-objects/") && creating.has(r.slice(15))),
      )
    )
      return false;
    return diff.field_changes.every((c) => {
      if (c.op === "remove") return false;
      if (c.op === "add") return true;
      if (TRANSACTION_ATTRS.some((k) => c.changed_attrs?.[k])) return false;
      const rename = c.changed_attrs?.name;
      // a name another field still holds: the transaction frees it first
      return !rename || !db?.fields.some((f) => f.name === rename[1] && f.schemaId !== c.schema_id);
    });
  });
}

type Applied = { applied: true; diffs: TypeDiff[]; trash: number[] } & Record<string, unknown>;

/**
 * Applies the document as reads and one batch; "transaction" when it needs more (the caller
 * then runs `applySchemaLogged` in a transaction). Every refusal is `applySchema`'s.
 */
export async function applyStaged(
  ctx: WriteContext,
  request: ApplyRequest,
): Promise<Applied | "transaction"> {
  const { document } = request;
  const slugs = documentSlugs(document);
  const { state, references, sets } = await readState(ctx, document, slugs);
  const { plan, diffs, graph } = await checkApply(ctx, request, state, references, sets);
  if (!batchable(document, diffs, state)) return "transaction";
  if (
    (await constrained(ctx, cotModel.resource, "add")) ||
    (await constrained(ctx, cotModel.resource, "change")) ||
    (await constrained(ctx, fieldModel.resource, "add")) ||
    (await constrained(ctx, fieldModel.resource, "change"))
  )
    return "transaction";
  const reads = await readPhase(ctx, document, state, sets);
  const batch = new WriteBatch();
  const ids = { cot: reads.nextCot(), ot: reads.nextOt(), field: reads.nextField() };
  const { known, nested } = stageChoiceSets(ctx, batch, document, reads);
  // the document index of each type by its id, for errors the batch reports by table
  const typeAt = new Map<number, number>();
  const changes: { cots: Change[]; fields: Change[] } = { cots: [], fields: [] };
  for (const t of dependencyOrder(document, graph)) {
    const ti = document.types.indexOf(t);
    const at = `$.types[${ti}]`;
    const step = { ctx, batch, t, at, diff: diffs[ti]!, ids, changes, reads, known, nested };
    const existing = state.get(t.slug);
    typeAt.set(existing?.cot.id ?? ids.cot, ti);
    if (existing) await stageExisting(step, existing);
    else await stageNew(step);
  }
  const [cotOt, fieldOt] = [
    await ctx.services.objectTypes.ensure(APP_LABEL, COT_MODEL),
    await ctx.services.objectTypes.ensure(APP_LABEL, FIELD_MODEL),
  ];
  stageChanges(ctx, batch, fieldModel.resource, fieldOt.id, reads.fieldRules, changes.fields);
  stageChanges(ctx, batch, cotModel.resource, cotOt.id, reads.cotRules, changes.cots);
  await runApply(ctx, batch, document, typeAt);
  return { applied: true, diffs, ...(plan ?? {}), trash: [] };
}

/**
 * The batch; existing values a new unique index refuses answer 400 on the field as the
 * transaction path does. A taken id or a type changed meanwhile is rethrown: `withRetry` runs
 * the apply again against what won.
 */
async function runApply(
  ctx: WriteContext,
  batch: WriteBatch,
  document: SchemaDocument,
  typeAt: Map<number, number>,
) {
  try {
    await batch.run(ctx);
  } catch (e) {
    if (idTaken(e) || isWriteConflict(e)) throw e;
    // a choice set or compound key another write made meanwhile: the apply reruns and sees it
    if (lostToKey(messages(e), document, typeAt)) throw new WriteConflictError();
    const clash = /UNIQUE constraint failed: co_(\d+)\.(\w+)/.exec(messages(e));
    if (clash) {
      const ti = typeAt.get(Number(clash[1])) ?? -1;
      const fi = document.types[ti]?.fields.findIndex((f) => f.name === clash[2]) ?? -1;
      throw new ApiError(400, {
        error: "invalid_schema",
        detail: "The schema document conflicts with the database.",
        schema_errors: [
          {
            path: fi >= 0 ? `$.types[${ti}].fields[${fi}].unique` : "$.types",
            message: `Existing values of "${clash[2]}" are not unique.`,
          },
        ],
      });
    }
    throw batchError(e, cotModel.resource);
  }
}

/**
 * Whether a failed batch lost a race the gate would have answered: a choice set's name or id
 * taken meanwhile, or rows that now break a key the document adds (read 1 counted none).
 */
function lostToKey(text: string, document: SchemaDocument, typeAt: Map<number, number>): boolean {
  if (/UNIQUE constraint failed: custom_field_choice_sets\.(name|id)\b/.test(text)) return true;
  const clash = /UNIQUE constraint failed: co_(\d+)\.(\w+)(, co_\d+\.\w+)*/.exec(text);
  if (!clash) return false;
  const t = document.types[typeAt.get(Number(clash[1])) ?? -1];
  if (!t) return false;
  if (clash[3]) return true; // several columns: only a compound key (or partial one) spans them
  return wantedConditional(t).unique.some((k) => k.fields.length === 1 && k.fields[0] === clash[2]);
}

/**
 * The first read (with the caller's token): the document's types, every type's references and
 * the choice sets the document names.
 */
async function readState(ctx: WriteContext, document: SchemaDocument, slugs: string[]) {
  const orm = ctx.services.db.orm;
  const phase = new ReadPhase();
  const [cotsQ, fieldsQ, setsQ] = typeRowQueries(orm, slugs);
  const [cots, fields, sets] = [phase.add(cotsQ), phase.add(fieldsQ), phase.add(setsQ)];
  const [refCotsQ, refFieldsQ] = referenceQueries(orm);
  const [refCots, refFields] = [phase.add(refCotsQ), phase.add(refFieldsQ)];
  const named = phase.add(choiceSetsQuery(orm, document));
  await phase.run(ctx);
  const registry = ctx.services.objectTypes;
  const rows = { cots: cots() as CotRow[], fields: fields() as FieldRow[], sets: sets() };
  return {
    state: await typesFromRows(rows, orm, registry),
    references: await referencesFromRows(refCots(), refFields(), orm, registry),
    sets: named() as ChoiceSetRow[],
  };
}

type Change = {
  action: "create" | "update";
  id: number;
  prechange: ApiRecord | null;
  postchange: ApiRecord;
};

/** The second read: next ids, the existing types' search indexes and tags, the event rules. */
async function readPhase(
  ctx: WriteContext,
  document: SchemaDocument,
  state: Map<string, DbType>,
  sets: ChoiceSetRow[],
) {
  const orm = ctx.services.db.orm;
  const phase = new ReadPhase();
  const cotRules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: COT_MODEL });
  const fieldRules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: FIELD_MODEL });
  const nextCot = phase.add(nextIdQuery(orm, "custom_object_types"));
  const nextOt = phase.add(nextIdQuery(orm, "object_types"));
  const nextField = phase.add(nextIdQuery(orm, "custom_object_type_fields"));
  const nextSet = phase.add(nextIdQuery(orm, "custom_field_choice_sets"));
  const indexes = new Map<number, () => Array<{ name: string; sql: string }>>();
  const tags = new Map<number, () => ApiRecord[]>();
  const taken = new Map<string, () => Array<{ id: number }>>();
  for (const t of document.types) {
    const s = state.get(t.slug);
    if (!s) {
      taken.set(t.slug, phase.add(objectTypeQuery(orm, t.slug)));
      continue;
    }
    indexes.set(s.cot.id, phase.add(indexSchemaQuery(orm, s.cot.id)));
    tags.set(s.cot.id, await typeTags(ctx, phase, s.cot.id));
  }
  await phase.run(ctx);
  return {
    cotRules: await cotRules(),
    fieldRules: await fieldRules(),
    nextCot: () => firstNext(nextCot()),
    nextOt: () => firstNext(nextOt()),
    nextField: () => firstNext(nextField()),
    nextSet: () => firstNext(nextSet()),
    sets: () => sets,
    nestedBefore: (c: WriteContext) =>
      new Map(sets.map((r) => [r.id, nestedChoiceSet(c, r.id, r)])),
    index: (cotId: number) => asSchema(indexes.get(cotId)?.() ?? []),
    tags: (cotId: number) => tags.get(cotId)?.() ?? [],
    slugTaken: (slug: string) => (taken.get(slug)?.() ?? []).length > 0,
  };
}

interface Step {
  ctx: WriteContext;
  batch: WriteBatch;
  t: TypeEntry;
  at: string;
  diff: TypeDiff;
  ids: { cot: number; ot: number; field: number };
  changes: { cots: Change[]; fields: Change[] };
  reads: Awaited<ReturnType<typeof readPhase>>;
  known: KnownChoiceSets;
  /** The choice sets' nested forms by id, as the batch leaves them (for the records). */
  nested: ReadonlyMap<number, ApiRecord>;
}

/**
 * The document's choice sets created or changed in the batch (as `upsertChoiceSets`: no change
 * record, unchanged ones left alone; a change guarded on the set's stamp), and every set its
 * fields name, by name, for their validation.
 */
function stageChoiceSets(
  ctx: WriteContext,
  batch: WriteBatch,
  document: SchemaDocument,
  reads: Awaited<ReturnType<typeof readPhase>>,
): { known: KnownChoiceSets; nested: ReadonlyMap<number, ApiRecord> } {
  const orm = ctx.services.db.orm;
  const rows = reads.sets();
  const known = new Map(rows.map((r) => [r.name, { id: r.id, extraChoices: r.extraChoices }]));
  const nested = new Map(rows.map((r) => [r.id, nestedChoiceSet(ctx, r.id, r)]));
  let nextId = reads.nextSet();
  const user = ctx.auth.user;
  for (const set of document.choice_sets ?? []) {
    const current = rows.find((r) => r.name === set.name);
    const action = current ? "change" : "add";
    if (
      !user?.isSuperuser &&
      !user?.permissions.has(codename("extras", action, "customfieldchoiceset"))
    )
      throw forbidden(
        `You do not have permission to ${action} the choice set "${set.name}" the document carries.`,
      );
    const values = {
      name: set.name,
      description: set.description ?? "",
      extraChoices: set.extra_choices as [string, string][],
      orderAlphabetically: set.order_alphabetically ?? false,
    };
    if (!current) {
      batch.add(orm.insert(choiceSets).values({ id: nextId, ...values }));
      nested.set(nextId, nestedChoiceSet(ctx, nextId, values));
      known.set(set.name, { id: nextId++, extraChoices: values.extraChoices });
      continue;
    }
    known.set(set.name, { id: current.id, extraChoices: values.extraChoices });
    nested.set(current.id, nestedChoiceSet(ctx, current.id, values));
    const same =
      stableJson([current.description, current.extraChoices, current.orderAlphabetically]) ===
      stableJson([values.description, values.extraChoices, values.orderAlphabetically]);
    if (same) continue;
    batch.add(
      orm
        .update(choiceSets)
        .set({ ...values, lastUpdated: nextStamp(current.lastUpdated) })
        .where(and(eq(choiceSets.id, current.id), eq(choiceSets.lastUpdated, current.lastUpdated))),
    );
    batch.add(guardChanged(orm));
  }
  return { known, nested };
}

/** A choice set's nested form, as a field's record carries it. */
const nestedChoiceSet = (
  ctx: WriteContext,
  id: number,
  set: { name: string; description: string },
): ApiRecord => ({
  id,
  url: recordUrl(ctx.baseUrl, "extras/custom-field-choice-sets", id),
  display: set.name,
  name: set.name,
  description: set.description,
});

/** Added fields validated one after another against the fields before them, as rows. */
async function addedRows(step: Step, cotId: number, siblings: FieldRow[], now: string) {
  const { ctx, t, at, diff } = step;
  const rows: FieldRow[] = [];
  const current = [...siblings];
  for (const change of diff.field_changes.filter((c) => c.op === "add")) {
    const fi = t.fields.findIndex((f) => f.id === change.schema_id);
    const draft = await atPath(`${at}.fields[${fi}]`, () =>
      validateField(ctx, fieldInput(t.fields[fi]!), null, current, step.known),
    );
    const row: FieldRow = {
      ...draft,
      id: step.ids.field++,
      customObjectTypeId: cotId,
      schemaId: change.schema_id,
      created: now,
      lastUpdated: now,
    };
    rows.push(row);
    current.push(row);
  }
  return rows;
}

/** The type's next schema id once `rows` are added (as `addFields` moves it). */
const highestNext = (have: number, rows: FieldRow[]) =>
  Math.max(have, ...rows.map((r) => r.schemaId + 1));

/** A new type: its object type, row, table with every column inline, fields, search index. */
async function stageNew(step: Step) {
  const { ctx, batch, t, at } = step;
  const orm = ctx.services.db.orm;
  if (step.reads.slugTaken(t.slug)) await atPath(at, async () => Promise.reject(slugTaken(t.slug)));
  const now = nowIso();
  const draft = cotDraft(t, []);
  const base = newTypeRow(step.ids.cot++, step.ids.ot++, draft, now);
  const fields = await addedRows(step, base.id, [], now);
  const keys = wantedKeys(t);
  const row = {
    ...base,
    nextSchemaId: highestNext(1, fields),
    uniqueTogether: keys.together,
    conditionalConstraints: keys.conditional,
  } as CotRow;
  batch.add(
    orm.insert(objectTypes).values({ id: row.objectTypeId!, appLabel: APP_LABEL, model: row.slug }),
  );
  batch.add(orm.insert(customObjectTypes).values(row));
  // a row a statement: D1 binds at most 100 values in one
  for (const f of fields) batch.add(orm.insert(customObjectTypeFields).values(f));
  addStatements(batch, orm, createCotTableStatements(row.id, fields));
  // its keys over the empty table: nothing to prove
  const built = await keyStatements(at, row.id, none, fields, keys, true);
  addStatements(batch, orm, [...togetherStatements(row.id, 0, built.sets), ...built.conditional]);
  stageSearchIndex(ctx, batch, row.id, fields, new Map());
  for (const f of fields)
    step.changes.fields.push({
      action: "create",
      id: f.id,
      prechange: null,
      postchange: await fieldRecord(ctx, f, step.nested),
    });
  step.changes.cots.push({
    action: "create",
    id: row.id,
    prechange: null,
    postchange: await typeRecord(ctx, row, fields, [], step.nested),
  });
}

/** An existing type: its record, altered and renamed fields, added fields with their columns. */
async function stageExisting(step: Step, existing: DbType) {
  const { ctx, batch, t, diff } = step;
  const orm = ctx.services.db.orm;
  const cot = existing.cot;
  const draft = cotDraft(t, existing.tombstones);
  const docChanged = stableJson(cot.schemaDocument ?? null) !== stableJson(draft.schemaDocument);
  if (!diff.has_changes && !diff.field_changes.length && !docChanged) return;
  const keys = keyChanges(existing, t, diff);
  // dropped before any column moves, built again once the columns exist (as `applyType`)
  if (keys.together)
    addStatements(batch, orm, togetherStatements(cot.id, keys.had.together.length, []));
  if (keys.conditional)
    addStatements(batch, orm, conditionalStatements(cot.id, keys.had.conditional, [], none));
  const { current, renamed } = await stageAlters(step, existing);
  const added = await addedRows(step, cot.id, current, nowIso());
  for (const f of added) {
    batch.add(orm.insert(customObjectTypeFields).values(f));
    addStatements(batch, orm, fieldStorageStatements(cot.id, f, encodedDefault(f)));
    step.changes.fields.push({
      action: "create",
      id: f.id,
      prechange: null,
      postchange: await fieldRecord(ctx, f, step.nested),
    });
  }
  // the type's record as `updateCot` and `addFields` leave it, guarded on its stamp
  const set = {
    ...draft,
    nextSchemaId: highestNext(cot.nextSchemaId, added),
    ...(keys.together ? { uniqueTogether: keys.want.together } : {}),
    ...(keys.conditional ? { conditionalConstraints: keys.want.conditional } : {}),
  };
  const afterCot = { ...cot, ...set, lastUpdated: nextStamp(cot.lastUpdated) } as CotRow;
  bumpType(batch, orm, cot, { ...set, lastUpdated: afterCot.lastUpdated } as Partial<CotRow>);
  const fieldsAfter = [...current, ...added];
  if (keys.together || keys.conditional) {
    const built = await keyStatements(step.at, cot.id, none, fieldsAfter, keys.want, false);
    if (keys.together) addStatements(batch, orm, togetherStatements(cot.id, 0, built.sets));
    if (keys.conditional) addStatements(batch, orm, built.conditional);
  }
  // a renamed column dropped the search index (its triggers name the column): made anew
  const stored = renamed ? new Map<string, string>() : step.reads.index(cot.id);
  stageSearchIndex(ctx, batch, cot.id, fieldsAfter, stored);
  const tags = step.reads.tags(cot.id);
  step.changes.cots.push({
    action: "update",
    id: cot.id,
    // before: the sets as they were (read when the document changes one)
    prechange: await typeRecord(ctx, cot, existing.fields, tags, step.reads.nestedBefore(ctx)),
    postchange: await typeRecord(ctx, afterCot, fieldsAfter, tags, step.nested),
  });
}

/**
 * The altered fields, each validated against the type's fields as the ones before it left
 * them (primary flags switched off first), guarded on its stamp. Answers the fields after them
 * and whether a column was renamed.
 */
async function stageAlters(step: Step, existing: DbType) {
  const { ctx, batch, t, at, diff } = step;
  const orm = ctx.services.db.orm;
  const alters = diff.field_changes
    .filter((c) => c.op === "alter")
    .sort(
      (a, b) =>
        Number(a.changed_attrs?.primary?.[1] === true) -
        Number(b.changed_attrs?.primary?.[1] === true),
    );
  let current = [...existing.fields];
  let renamed = false;
  for (const change of alters) {
    const fi = t.fields.findIndex((f) => f.id === change.schema_id);
    const row = current.find((f) => f.schemaId === change.schema_id)!;
    const next = await atPath(`${at}.fields[${fi}]`, () =>
      validateField(ctx, fieldInput(t.fields[fi]!), row, current, step.known),
    );
    const after: FieldRow = { ...row, ...next, lastUpdated: nextStamp(row.lastUpdated) };
    batch.add(
      orm
        .update(customObjectTypeFields)
        .set({ ...next, lastUpdated: after.lastUpdated })
        .where(
          and(
            eq(customObjectTypeFields.id, row.id),
            eq(customObjectTypeFields.lastUpdated, row.lastUpdated),
          ),
        ),
    );
    batch.add(guardChanged(orm));
    addStatements(batch, orm, alterFieldStatements(existing.cot.id, row, next));
    renamed ||= next.name !== row.name && !hasLinkTable(row);
    current = current.map((f) => (f.id === row.id ? after : f));
    step.changes.fields.push({
      action: "update",
      id: row.id,
      prechange: await fieldRecord(ctx, row, step.reads.nestedBefore(ctx)),
      postchange: await fieldRecord(ctx, after, step.nested),
    });
  }
  return { current, renamed };
}

const none: Conditional = { unique: [], checks: [] };

/** The compound keys, partial keys and checks a document's type entry asks for. */
const wantedKeys = (t: TypeEntry) => ({
  together: normalizeTogether(plainTogether(t.unique_together)),
  conditional: wantedConditional(t),
});

/**
 * Which of an existing type's keys the apply replaces, as `applyType` decides: compound keys
 * when they change; partial keys and checks when they change, or any field changes while the
 * type has some.
 */
function keyChanges(existing: DbType, t: TypeEntry, diff: TypeDiff) {
  const had = {
    together: normalizeTogether(existing.cot.uniqueTogether),
    conditional: conditionalOf(existing.cot),
  };
  const want = wantedKeys(t);
  const hasConditional = had.conditional.unique.length > 0 || had.conditional.checks.length > 0;
  return {
    had,
    want,
    together: stableJson(want.together) !== stableJson(had.together),
    conditional:
      stableJson(want.conditional) !== stableJson(had.conditional) ||
      (diff.field_changes.length > 0 && hasConditional),
  };
}

/** The keys' fields and the statements that build the conditional ones, at the type's path. */
async function keyStatements(
  at: string,
  cotId: number,
  had: Conditional,
  fields: FieldRow[],
  want: ReturnType<typeof wantedKeys>,
  counted: boolean,
): Promise<{ sets: FieldRow[][]; conditional: SQL[] }> {
  return atPath(at, async () => {
    try {
      return {
        sets: setsOfFields(want.together, fields),
        conditional: conditionalStatements(cotId, had, fields, want.conditional, counted),
      };
    } catch (e) {
      throw asConditionalError(e);
    }
  });
}
