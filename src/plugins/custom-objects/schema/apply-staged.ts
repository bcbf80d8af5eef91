/**
 * A schema apply as reads and one atomic batch (decision 0111), for the documents that add types
 * and fields, change attributes, names or types (0126), carry choice sets, compound keys and
 * checks (0119), or remove fields and types through the trash (0120), by constrained callers too
 * (0128); the rest keeps the transaction (`applySchema`).
 */
import { yieldWhenDue } from "../../../turns";
import { guardTypeCount, refuseTypesPast, typeCountQuery } from "../types/type-limit";
import { and, eq, inArray, sql, type SQL } from "drizzle-orm";
import { guardChanged, isWriteConflict, type Orm, WriteConflictError } from "../../../db/client";
import { ApiError, ValidationError } from "../../../core/errors";
import {
  countsWithheldFor,
  nameHoldersQuery,
  type NameHolder,
  protectedRefusal,
  withoutHidden,
} from "./access";
import {
  choiceSets,
  customObjectTypeFields,
  customObjectTypes,
  objectTypes,
  taggedItems,
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
  fieldColumns,
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
  firstNext,
  idTaken,
  reverseNameTaken,
  indexSchemaQuery,
  messages,
  nextIdQuery,
  objectTypeQuery,
  slugTaken,
} from "../types/staged";
import { newTypeRow, typeRecord, typeTags } from "../types/staged-types";
import { fieldRecord, stageSearchIndex } from "../types/staged-fields";
import {
  lostValues,
  overBound,
  overTogether,
  retypeReads,
  retypeRefusal,
  retypeSource,
  retypeStatements,
  type RetypeRead,
  type Retyped,
} from "../types/staged-retype";
import { nestedChoiceSet } from "../types/field-reads";
import { isFieldType } from "../field-types";
import { typeChangeRefused } from "../types/field-definition";
import { encodedDefault } from "./operations";
import { normalizeTogether, setsOfFields, togetherStatements } from "./unique-together";
import {
  asConditionalError,
  conditionalOf,
  conditionalStatements,
  plainTogether,
  readsField,
  wantedConditional,
  type Conditional,
} from "./constraints";
import type { SchemaDocument, TypeEntry } from "./document";
import { addedTogether, type ChoiceSetRow, type PrefetchedCounts, type TypeDiff } from "./diff";
import { addedConditional } from "./constraints-apply";
import {
  admittedBySlug,
  applyExplainer,
  guardWritten,
  refuseAsRead,
  type TypeLimits,
  typeLimits,
  viewLimit,
  type Written,
} from "./staged-limits";
import {
  clearLinksOutsideSql,
  existingRows,
  linksOutsideCountSql,
  rowsCountSql,
  valuesCountSql,
} from "./impact";
import {
  guardNothingPointsAt,
  pointingFieldsQuery,
  stageFieldRemoval,
  stageTypeRemoval,
  type GoingType,
} from "./trash-staged";
import {
  atPath,
  checkApply,
  choiceSetValues,
  choiceSetsQuery,
  cotDraft,
  dependencyOrder,
  documentSlugs,
  fieldInput,
  type ApplyRequest,
} from "./apply";
import { keepReadTypes } from "../../../core/object-types";
import {
  canonicalFromEntry,
  referenceQueries,
  stableJson,
  pointedTypes,
  pointedTypesQuery,
  referencesFromRows,
  typeRowQueries,
  typesFromRows,
  type DbType,
} from "./state";

/**
 * Gated changes the batch takes: removals (decision 0120) and lossy retypes (0126); keys and
 * checks over rows that break them, which answer the transaction's 400 (`keyViolation`, 0126);
 * a field made required over empty rows, which only its flag changes (0136); a relation's new
 * target, its links outside it cleared, and values outside a new choice set, which stay (0142).
 * Any other gated change keeps the transaction.
 */
const BATCHED_GATES = new Set([
  "field_removed",
  "type_removed",
  "lossy_type_change",
  "unique_over_duplicates",
  "check_over_violations",
  "required_over_empty_rows",
  "link_target_changed",
  "choices_in_use",
]);

/**
 * Whether the batch takes the document: no retype but those whose values the read holds, no
 * gated change but those `BATCHED_GATES` names, no swap of names.
 */
function batchable(
  doc: SchemaDocument,
  diffs: TypeDiff[],
  state: Map<string, DbType>,
  reads: Reads,
): boolean {
  // a slug both kept and removed: the transaction's order decides
  if ((doc.removed_types ?? []).some((r) => doc.types.some((t) => t.slug === r.slug))) return false;
  return doc.types.every((t, ti) => {
    const diff = diffs[ti]!;
    const db = state.get(t.slug);
    if (diff.destructive_changes.some((g) => !BATCHED_GATES.has(g.reason))) return false;
    return diff.field_changes.every((c) => {
      if (c.op === "remove" || c.op === "add") return true;
      const row = db?.fields.find((f) => f.schemaId === c.schema_id);
      if (c.changed_attrs?.type && !(row && reads.retyped(row.id))) return false;
      const rename = c.changed_attrs?.name;
      // a name another field still holds: freed first only when that field is renamed too
      // (`freeSwappedNames`, decision 0142); else the transaction's order decides
      const holder = db?.fields.find((f) => f.name === rename?.[1] && f.schemaId !== c.schema_id);
      return !rename || !holder || renamedIn(diff, holder.schemaId);
    });
  });
}

/** Whether the document renames field `schemaId` of its type. */
const renamedIn = (diff: TypeDiff, schemaId: number) =>
  diff.field_changes.some((c) => c.schema_id === schemaId && c.changed_attrs?.name);

type Applied = { applied: true; diffs: TypeDiff[]; trash: number[] } & Record<string, unknown>;

/**
 * Statements that go last in the apply's batch, made from what it answers (a background job's
 * outcome, decision 0189): they commit with the apply or not at all.
 */
export type WithApplied = (applied: Applied) => ReturnType<Orm["run"]>[];

/**
 * Applies the document as reads and one batch; "transaction" when it needs more (the caller
 * then runs `applySchemaLogged` in a transaction). Every refusal is `applySchema`'s.
 */
export async function applyStaged(
  ctx: WriteContext,
  submitted: ApplyRequest,
  withApplied?: WithApplied,
): Promise<Applied | "transaction"> {
  const { document } = submitted;
  const slugs = documentSlugs(document);
  const limits = await typeLimits(ctx);
  const { state, references, sets, hidden, nameHolders, targets } = await readState(
    ctx,
    document,
    slugs,
    limits,
  );
  const request = { ...submitted, hidden, nameHolders };
  // read before the checks: the gate's counts of what removals take ride in it
  const reads = await readPhase(ctx, document, state, sets, targets);
  const { plan, diffs, graph } = await checkApply(
    ctx,
    request,
    state,
    references,
    sets,
    reads.counted,
  );
  if (!batchable(document, diffs, state, reads)) return "transaction";
  const going = goingTypes(document, state, reads);
  const maxTypes = ctx.services.config.maxCustomObjectTypes;
  const added = document.types.filter((t) => !state.has(t.slug)).length;
  refuseTypesPast(reads.typeCount(), added, going.length, maxTypes);
  const batch = new WriteBatch();
  const written: Written = { changed: [], added: [] };
  const ids = {
    cot: reads.nextCot(),
    ot: reads.nextOt(),
    field: reads.nextField(),
    trash: reads.nextTrash(),
  };
  const { known, nested } = stageChoiceSets(ctx, batch, document, reads);
  // the types the batch creates, by slug: fields staged after them may point at them (0136)
  const pending = new Map<string, number>();
  // the document index of each type by its id, for errors the batch reports by table
  const typeAt = new Map<number, number>();
  const changes: { cots: Change[]; fields: Change[] } = { cots: [], fields: [] };
  const explain: Step["explain"] = [];
  for (const t of dependencyOrder(document, graph)) {
    await yieldWhenDue(); // a type a step (decision 0205)
    const ti = document.types.indexOf(t);
    const at = `$.types[${ti}]`;
    const step = {
      ...{ ctx, batch, t, at, diff: diffs[ti]!, ids, changes, reads, known, nested, pending },
      targets,
      ...{ purge: request.purge, written, explain },
    };
    const existing = state.get(t.slug);
    typeAt.set(existing?.cot.id ?? ids.cot, ti);
    if (existing) await stageExisting(step, existing);
    else await stageNew(step);
  }
  // whole types last, as the transaction: the document's own types may drop fields pointing at them
  await refuseReferenced(ctx, going, document, state);
  const trash = await stageGoing(ctx, batch, going, { ids, changes, purge: request.purge, reads });
  const [cotOt, fieldOt] = [
    await ctx.services.objectTypes.ensure(APP_LABEL, COT_MODEL),
    await ctx.services.objectTypes.ensure(APP_LABEL, FIELD_MODEL),
  ];
  await stageChanges(ctx, batch, fieldModel.resource, fieldOt.id, reads.fieldRules, changes.fields);
  await stageChanges(ctx, batch, cotModel.resource, cotOt.id, reads.cotRules, changes.cots);
  const explainer = limits ? applyExplainer(ctx.services.db.orm, limits, written, document) : null;
  if (limits) guardWritten(batch, ctx.services.db.orm, limits, written);
  if (explainer) batch.explainWith(explainer.reads as never);
  if (added) guardTypeCount(batch, ctx.services.db.orm, maxTypes, reads.typeCount());
  const applied: Applied = { applied: true, diffs, ...(plan ?? {}), trash };
  for (const statement of withApplied?.(applied) ?? []) batch.add(statement);
  await runApply(ctx, batch, document, typeAt)
    .catch(async (e) => {
      // a keyed retype's counts first (decision 0135): its 400 or the race's conflict
      for (const answer of explain) await answer();
      throw e;
    })
    .catch((e) => (explainer ? explainer.explain(ctx, e) : Promise.reject(e)));
  for (const g of going)
    if (g.cot.objectTypeId) {
      const otId = g.cot.objectTypeId;
      ctx.onCommit?.(async () => ctx.services.objectTypes.forget(otId));
    }
  return applied;
}

/**
 * The batch; existing values a new unique index refuses answer 400 on the field as the
 * transaction path does. A taken id, a type changed meanwhile or a foreign key refused (a field
 * now points at a removed type) is a conflict: `withRetry` runs the apply again against what won.
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
    // `withRetry` runs the apply again; a reverse name taken meanwhile answers its check (0156)
    if (idTaken(e) || isWriteConflict(e) || reverseNameTaken(e)) throw e;
    // a row the batch points at (or removes) moved since the read: run again from a fresh read
    if (/FOREIGN KEY constraint failed/i.test(messages(e))) throw new WriteConflictError();
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
async function readState(
  ctx: WriteContext,
  document: SchemaDocument,
  slugs: string[],
  limits: TypeLimits | null,
) {
  const orm = ctx.services.db.orm;
  const phase = new ReadPhase();
  // a constrained caller's types as they are (decision 0128), judged before any check as `requireCots`
  const removing = new Set((document.removed_types ?? []).map((r) => r.slug));
  const kept = slugs.filter((s) => !removing.has(s));
  const mayChange = admittedBySlug(orm, phase, kept, limits?.change);
  const mayDelete = admittedBySlug(orm, phase, [...removing], limits?.delete);
  // types the caller may not view are, to them, types that do not exist (decision 0129); their
  // names stay taken (0137)
  const view = await viewLimit(ctx);
  const mayView = admittedBySlug(orm, phase, slugs, view);
  const holders = phase.add(nameHoldersQuery(orm, document, view));
  const [cotsQ, fieldsQ, setsQ] = typeRowQueries(orm, slugs);
  const [cots, fields, sets] = [phase.add(cotsQ), phase.add(fieldsQ), phase.add(setsQ)];
  const [refCotsQ, refFieldsQ] = referenceQueries(orm);
  const [refCots, refFields] = [phase.add(refCotsQ), phase.add(refFieldsQ)];
  // the types those fields point at, in the same snapshot: no read of the registry's after it
  const pointedRows = phase.add(pointedTypesQuery(orm));
  // the custom object types the document points fields at (a retarget's new ones too, 0142)
  const targetRows = phase.add(documentTargetsQuery(orm, document));
  const named = phase.add(choiceSetsQuery(orm, document));
  await phase.run(ctx);
  const registry = ctx.services.objectTypes;
  const rows = { cots: cots() as CotRow[], fields: fields() as FieldRow[], sets: sets() };
  const pointed = pointedTypes([...pointedRows(), ...targetRows()]);
  // the change records of the fields name those types too (`define.ts`'s object type refs)
  keepReadTypes(ctx.scratch, pointed);
  const viewable = mayView();
  const hidden = new Set(
    rows.cots.filter((c) => viewable && !viewable.has(c.id)).map((c) => c.slug),
  );
  const seen = rows.cots.filter((c) => !hidden.has(c.slug));
  refuseAsRead(seen, removing, { change: mayChange(), delete: mayDelete() });
  return {
    hidden,
    nameHolders: holders() as NameHolder[],
    state: withoutHidden(await typesFromRows(rows, orm, registry, undefined, pointed), hidden),
    references: await referencesFromRows(refCots(), refFields(), orm, registry, pointed),
    sets: named() as ChoiceSetRow[],
    targets: targetsBySlug(targetRows()),
  };
}

/** The object types of the custom object types a document's fields name, for the first read. */
function documentTargetsQuery(orm: Orm, document: SchemaDocument) {
  const slugs = new Set<string>();
  for (const t of document.types)
    for (const f of t.fields)
      for (const ref of [f.related_object_type, ...(f.related_object_types ?? [])]) {
        const [app, model] = (ref ?? "").split("/");
        if ((app === "custom-objects" || app === APP_LABEL) && model) slugs.add(model);
      }
  return orm
    .select({ id: objectTypes.id, appLabel: objectTypes.appLabel, model: objectTypes.model })
    .from(objectTypes)
    .where(
      and(
        eq(objectTypes.appLabel, APP_LABEL),
        slugs.size ? inArray(objectTypes.model, [...slugs]) : sql`0`,
      ),
    );
}

const targetsBySlug = (rows: Array<{ id: number; model: string }>) =>
  new Map(rows.map((r) => [r.model, r.id]));

type Change = {
  action: "create" | "update" | "delete";
  id: number;
  prechange: ApiRecord | null;
  postchange: ApiRecord | null;
};

/**
 * The second read: next ids, the existing types' search indexes and tags, the event rules, what
 * removals take (counted for the gate) and what a removed type's trash entry keeps.
 */
async function readPhase(
  ctx: WriteContext,
  document: SchemaDocument,
  state: Map<string, DbType>,
  sets: ChoiceSetRow[],
  targets: ReadonlyMap<string, number>,
) {
  const orm = ctx.services.db.orm;
  const phase = new ReadPhase();
  const objectType = (ref: string) => targetId(ctx, targets, ref);
  const links = new Map<number, () => Array<{ n: number }>>();
  const cotRules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: COT_MODEL });
  const fieldRules = stageRules(ctx, phase, { appLabel: APP_LABEL, model: FIELD_MODEL });
  const nextCot = phase.add(nextIdQuery(orm, "custom_object_types"));
  const nextOt = phase.add(nextIdQuery(orm, "object_types"));
  const nextField = phase.add(nextIdQuery(orm, "custom_object_type_fields"));
  const nextSet = phase.add(nextIdQuery(orm, "custom_field_choice_sets"));
  const nextTrash = phase.add(nextIdQuery(orm, "custom_object_trash"));
  const typeCount = phase.add(typeCountQuery(orm));
  const values = new Map<number, () => Array<{ n: number }>>();
  const added = new Map<string, () => Array<{ n: number }>>();
  const retypes = new Map<number, { row: FieldRow; type: string; read: () => RetypeRead }>();
  const indexes = new Map<number, () => Array<{ name: string; sql: string }>>();
  const tags = new Map<number, () => ApiRecord[]>();
  const taken = new Map<string, () => Array<{ id: number }>>();
  for (const t of document.types) {
    await yieldWhenDue();
    const s = state.get(t.slug);
    if (!s) {
      taken.set(t.slug, phase.add(objectTypeQuery(orm, t.slug)));
      continue;
    }
    indexes.set(s.cot.id, phase.add(indexSchemaQuery(orm, s.cot.id)));
    tags.set(s.cot.id, await typeTags(ctx, phase, s.cot.id));
    for (const f of removedFields(t, s))
      values.set(f.id, phase.add(countQuery(orm, valuesCountSql(s.cot.id, f))));
    for (const item of addedKeys(t, s))
      if (item.count) added.set(`${s.cot.id}:${item.id}`, phase.add(countQuery(orm, item.count)));
    for (const { row, type } of stagedRetypes(t, s))
      retypes.set(row.id, { row, type, read: retypeReads(orm, phase, s.cot.id, row, type) });
    for (const { row, keep } of retargets(t, s, objectType))
      links.set(
        row.id,
        phase.add(countQuery(orm, sql`(${linksOutsideCountSql(s.cot.id, row, keep)})`)),
      );
  }
  const going = await goingReads(ctx, phase, document, state);
  await phase.run(ctx);
  const counted = (read?: () => Array<{ n: number }>) =>
    read ? Number(read()[0]?.n ?? 0) : undefined;
  // a retype's values, when a batch carries them, alone and with the document's other retypes
  // (over the bound: the transaction; D1 409)
  const heavy = overTogether([...retypes.values()].map((r) => ({ row: r.row, read: r.read() })));
  const retyped = (fieldId: number) => {
    const r = retypes.get(fieldId);
    const read = r?.read();
    if (read?.kind === "over") overBound(ctx.services.db, [r!.row]);
    if (r && heavy) overBound(ctx.services.db, heavy.fields);
    return r && read?.kind !== "over" && !heavy ? r : undefined;
  };
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
    nextTrash: () => firstNext(nextTrash()),
    typeCount: () => Number(typeCount()[0]?.n ?? 0),
    counted: {
      values: (fieldId: number) => counted(values.get(fieldId)),
      rows: (cotId: number) => counted(going.get(cotId)?.rows),
      added: (cotId: number, key: string) => counted(added.get(`${cotId}:${key}`)),
      links: (fieldId: number) => counted(links.get(fieldId)),
      objectType,
      lossy: (fieldId: number, type: string) => {
        const r = retyped(fieldId);
        return r && r.type === type ? lostValues(r.row, type, r.read()) : undefined;
      },
    } satisfies PrefetchedCounts,
    /** A staged retype's read (decisions 0126, 0135), or undefined: the transaction takes it. */
    retyped: (fieldId: number) => retyped(fieldId)?.read(),
    going: (cotId: number) => going.get(cotId),
  };
}
const countQuery = (orm: Orm, count: SQL) => orm.all<{ n: number }>(sql`SELECT ${count} AS n`);

/**
 * The object type id a document's `app/model` names, without a read: a custom object type from
 * the first read (`targets`), another from the registry's cache; undefined when neither knows.
 */
function targetId(ctx: WriteContext, targets: ReadonlyMap<string, number>, ref: string) {
  const [app, model] = ref.split("/") as [string, string];
  if (app === "custom-objects" || app === APP_LABEL) return targets.get(model);
  return ctx.services.objectTypes.cached(app, model)?.id;
}

/**
 * An existing type's relations the document moves to other targets (decision 0142), with the
 * targets a polymorphic one keeps: their links outside are counted in the second read, as the
 * diff's gate counts them (`countLinksOutside`). A target not known without a read: left to it.
 */
function retargets(
  t: TypeEntry,
  s: DbType,
  objectType: (ref: string) => number | undefined,
): Array<{ row: FieldRow; keep: number[] | null }> {
  const out: Array<{ row: FieldRow; keep: number[] | null }> = [];
  for (const entry of t.fields) {
    const row = s.fields.find((f) => f.schemaId === entry.id);
    if (!row || (row.relatedObjectTypeId == null && !row.relatedObjectTypeIds.length)) continue;
    const want = canonicalFromEntry(entry);
    if (want.is_polymorphic !== row.isPolymorphic) continue;
    const ids = (want.is_polymorphic ? want.related_object_types : [want.related_object_type])
      .filter((r): r is string => !!r)
      .map(objectType);
    if (ids.some((id) => id === undefined)) continue;
    const next = (ids as number[]).sort((a, b) => a - b);
    const have = row.isPolymorphic
      ? [...row.relatedObjectTypeIds].sort((a, b) => a - b)
      : [row.relatedObjectTypeId];
    if (JSON.stringify(next) === JSON.stringify(have)) continue;
    out.push({ row, keep: row.isPolymorphic ? next : null });
  }
  return out;
}

/**
 * The keys and checks the document adds to an existing type, with the counts the gate takes of
 * the rows they would refuse; none when a condition is one the diff will refuse (it says why).
 */
function addedKeys(t: TypeEntry, s: DbType) {
  try {
    const conditional = addedConditional(t, s);
    return [...addedTogether(t, s), ...conditional.keys, ...conditional.checks];
  } catch {
    return [];
  }
}

/**
 * The 400 the transaction answers when building an existing type's keys (`buildUniqueTogether`,
 * `conditionalViolation`, in their order) over rows that break one the document adds, from the
 * counts read ahead (a field the apply adds read as its default, decision 0142); null when none
 * does.
 */
function keyViolation(
  t: TypeEntry,
  s: DbType,
  reads: Reads,
  withheld: boolean,
): ValidationError | null {
  // a key or check over a retyped field is proven in the batch, over the converted values: a
  // count of the values before says nothing (`retypeExplainer` answers, decision 0135)
  const retyped = new Set(
    t.fields
      .filter((f) => s.fields.some((r) => r.schemaId === f.id && r.type !== f.type))
      .map((f) => f.name),
  );
  const count = (id: string, names: string[]) =>
    names.some((n) => retyped.has(n)) ? 0 : (reads.counted.added(s.cot.id, id) ?? 0);
  for (const item of addedTogether(t, s))
    if (count(item.id, item.set))
      return new ValidationError({
        unique_together: [
          `Existing rows share values of ${item.set.join(", ")}; they must make a unique set.`,
        ],
      });
  const { keys, checks } = addedConditional(t, s);
  for (const item of [...keys, ...checks]) {
    const one =
      "key" in item ? { unique: [item.key], checks: [] } : { unique: [], checks: [item.check] };
    const n = [...retyped].some((name) => readsField(one, name)) ? 0 : count(item.id, []);
    if (!n) continue;
    return "key" in item
      ? new ValidationError({
          unique_together: [
            `${existingRows(n, withheld)} matching the condition share values of ${item.key.fields.join(", ")}; they must make a unique set.`,
          ],
        })
      : new ValidationError({
          checks: [`${existingRows(n, withheld)} do not match the check "${item.check.name}".`],
        });
  }
  return null;
}

/**
 * The fields of an existing type whose type the document changes (renamed too, keys and checks
 * reading them too, decisions 0126, 0135): their values are read. A retype is one column made
 * another (`typeChangeRefused`).
 */
function stagedRetypes(t: TypeEntry, s: DbType): Array<{ row: FieldRow; type: string }> {
  const out: Array<{ row: FieldRow; type: string }> = [];
  for (const f of t.fields) {
    const row = s.fields.find((r) => r.schemaId === f.id);
    if (!row || row.type === f.type || !isFieldType(f.type) || typeChangeRefused(row.type, f.type))
      continue;
    out.push({ row, type: f.type });
  }
  return out;
}

/** The fields of an existing type that its document entry removes (`removed_fields`). */
function removedFields(t: TypeEntry, s: DbType): FieldRow[] {
  const removed = new Set((t.removed_fields ?? []).map((r) => r.id));
  return s.fields.filter(
    (f) => removed.has(f.schemaId) && !t.fields.some((x) => x.id === f.schemaId),
  );
}

/** For each type the document removes: its rows, object type, objects' tags, own tags, pointers. */
async function goingReads(
  ctx: WriteContext,
  phase: ReadPhase,
  document: SchemaDocument,
  state: Map<string, DbType>,
) {
  const orm = ctx.services.db.orm;
  const out = new Map<number, Awaited<ReturnType<typeof goingRead>>>();
  for (const r of document.removed_types ?? []) {
    const s = state.get(r.slug);
    if (s && !out.has(s.cot.id)) out.set(s.cot.id, await goingRead(ctx, orm, phase, s.cot));
  }
  return out;
}

async function goingRead(ctx: WriteContext, orm: Orm, phase: ReadPhase, cot: CotRow) {
  const ot = cot.objectTypeId ?? -1;
  return {
    rows: phase.add(countQuery(orm, rowsCountSql(cot.id))),
    objectType: phase.add(orm.select().from(objectTypes).where(eq(objectTypes.id, ot))),
    objectTags: phase.add(orm.select().from(taggedItems).where(eq(taggedItems.objectTypeId, ot))),
    typeTags: await typeTags(ctx, phase, cot.id),
    pointing: phase.add(pointingFieldsQuery(orm, ot)),
  };
}

type Reads = Awaited<ReturnType<typeof readPhase>>;
type Going = GoingType & {
  typeTags: ApiRecord[];
  pointing: Array<{ id: number; name: string; cotId: number }>;
};

/** The types the document removes, with what their trash entries keep. */
function goingTypes(document: SchemaDocument, state: Map<string, DbType>, reads: Reads): Going[] {
  const out: Going[] = [];
  for (const r of document.removed_types ?? []) {
    const s = state.get(r.slug);
    const read = s && reads.going(s.cot.id);
    if (!s || !read || out.some((g) => g.cot.id === s.cot.id)) continue;
    out.push({
      cot: s.cot,
      fields: [...s.fields].sort((a, b) => a.id - b.id),
      objectType: read.objectType()[0] ?? null,
      tags: read.objectTags(),
      typeTags: read.typeTags(),
      pointing: read.pointing(),
    });
  }
  return out;
}

/**
 * A removed type other types still point at is refused (409 `protected`, as `removeType`):
 * fields of types the document also removes, or fields it removes, do not count.
 */
async function refuseReferenced(
  ctx: WriteContext,
  going: Going[],
  document: SchemaDocument,
  state: Map<string, DbType>,
) {
  const goingIds = new Set(going.map((g) => g.cot.id));
  const removedIds = new Set(
    document.types.flatMap((t) => {
      const s = state.get(t.slug);
      return s ? removedFields(t, s).map((f) => f.id) : [];
    }),
  );
  for (const g of going) {
    const refs = g.pointing.filter((f) => !goingIds.has(f.cotId) && !removedIds.has(f.id));
    if (refs.length) throw await protectedRefusal(ctx, g.cot.slug, refs);
  }
}

/**
 * The removed types, after the document's own (which may drop the fields pointing at them):
 * each to a trash entry or purged, its records logged as deletes; then the guards that nothing
 * points at them. Answers the trash entries made, as the transaction does.
 */
async function stageGoing(
  ctx: WriteContext,
  batch: WriteBatch,
  going: Going[],
  step: Pick<Step, "ids" | "changes" | "purge" | "reads">,
): Promise<number[]> {
  const orm = ctx.services.db.orm;
  const days = ctx.services.config.schemaTrashDays;
  const trash: number[] = [];
  for (const g of going) {
    const entry = step.purge ? null : step.ids.trash++;
    stageTypeRemoval(batch, orm, g, entry === null ? null : { entry, days });
    if (entry !== null) trash.push(entry);
    for (const f of g.fields)
      step.changes.fields.push({
        action: "delete",
        id: f.id,
        prechange: await fieldRecord(ctx, f, step.reads.nestedBefore(ctx)),
        postchange: null,
      });
    step.changes.cots.push({
      action: "delete",
      id: g.cot.id,
      prechange: await typeRecord(ctx, g.cot, g.fields, g.typeTags, step.reads.nestedBefore(ctx)),
      postchange: null,
    });
  }
  for (const g of going)
    if (g.cot.objectTypeId) guardNothingPointsAt(batch, orm, g.cot.objectTypeId);
  return trash;
}

interface Step {
  ctx: WriteContext;
  batch: WriteBatch;
  t: TypeEntry;
  at: string;
  diff: TypeDiff;
  ids: { cot: number; ot: number; field: number; trash: number };
  changes: { cots: Change[]; fields: Change[] };
  reads: Reads;
  /** Removals are dropped at once instead of moved to the trash. */
  purge: boolean;
  /** The types the batch writes, for a constrained caller's guards (decision 0128). */
  written: Written;
  known: KnownChoiceSets;
  /** The choice sets' nested forms by id, as the batch leaves them (for the records). */
  nested: ReadonlyMap<number, ApiRecord>;
  /** The object type ids of the types created so far, by slug (`dependencyOrder`: targets first). */
  pending: Map<string, number>;
  /** The object type ids of the existing custom object types the document names, by slug. */
  targets: ReadonlyMap<string, number>;
  /** What answers a failed batch first: keyed retypes' counts (decision 0135), in order. */
  explain: Array<() => Promise<void>>;
}

/**
 * A type's keyed retypes' part in a failed batch's answer (`retypeRefusal`, one read over every
 * converted column): the race's conflict (the apply reruns), or the transaction's 400 at its
 * path — a field's `unique`, then the compound keys, then the partial keys and checks, in the
 * order `applyType` builds them.
 */
function retypeExplainer(
  step: Step,
  cotId: number,
  retypes: Retyped[],
  fields: { before: FieldRow[]; after: FieldRow[] },
  keys: ReturnType<typeof keyChanges>,
) {
  const { ctx, t, at } = step;
  const wanted = { ...keys.want, togetherFirst: true };
  const withheld = countsWithheldFor(ctx, t.slug);
  return async () => {
    const refusal = await retypeRefusal(ctx, cotId, retypes, fields, wanted);
    const fail = (e: ValidationError, path = at) => atPath(path, () => Promise.reject(e));
    if (!refusal) return;
    if (refusal.kind === "race") throw new WriteConflictError();
    if (refusal.kind === "unique") {
      const fi = t.fields.findIndex((f) => f.id === refusal.field.schemaId);
      const message = `Existing values of "${refusal.field.name}" are not unique.`;
      await fail(new ValidationError({ unique: [message] }), `${at}.fields[${fi}]`);
    }
    if (refusal.kind === "together")
      await fail(
        new ValidationError({
          unique_together: [
            `Existing rows share values of ${refusal.set.join(", ")}; they must make a unique set.`,
          ],
        }),
      );
    if (refusal.kind === "partial")
      await fail(
        new ValidationError({
          unique_together: [
            `${existingRows(refusal.rows, withheld)} matching the condition share values of ${refusal.key.fields.join(", ")}; they must make a unique set.`,
          ],
        }),
      );
    if (refusal.kind === "check")
      await fail(
        new ValidationError({
          checks: [
            `${existingRows(refusal.rows, withheld)} do not match the check "${refusal.check.name}".`,
          ],
        }),
      );
  };
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
  reads: Reads,
): { known: KnownChoiceSets; nested: ReadonlyMap<number, ApiRecord> } {
  const orm = ctx.services.db.orm;
  const rows = reads.sets();
  const known = new Map(rows.map((r) => [r.name, { id: r.id, extraChoices: r.extraChoices }]));
  const nested = new Map(rows.map((r) => [r.id, nestedChoiceSet(ctx, r.id, r)]));
  let nextId = reads.nextSet();
  for (const set of document.choice_sets ?? []) {
    const current = rows.find((r) => r.name === set.name);
    const values = choiceSetValues(ctx, set, current !== undefined);
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

/**
 * Records naming types the batch creates (decision 0136): serialized without them (they do not
 * exist yet, and a read would find nothing), then named as they will be once the batch lands.
 */
function pendingRecords(pending: ReadonlyMap<string, number>) {
  const slugs = new Map([...pending].map(([slug, id]) => [id, slug]));
  const without = (f: FieldRow): FieldRow => ({
    ...f,
    relatedObjectTypeId: slugs.has(f.relatedObjectTypeId ?? -1) ? null : f.relatedObjectTypeId,
    relatedObjectTypeIds: (f.relatedObjectTypeIds ?? []).filter((id) => !slugs.has(id)),
  });
  const named = (id: number, serialized?: unknown) => {
    const slug = slugs.get(id);
    return slug === undefined ? serialized : { id, app_label: APP_LABEL, model: slug };
  };
  const patch = (record: ApiRecord, f: FieldRow): ApiRecord => {
    const listed = (record.related_object_types as Array<{ id: number }> | undefined) ?? [];
    const byId = new Map(listed.map((r) => [r.id, r]));
    const single = f.relatedObjectTypeId;
    return {
      ...record,
      ...(single != null && slugs.has(single) ? { related_object_type: named(single) } : {}),
      ...((f.relatedObjectTypeIds ?? []).some((id) => slugs.has(id))
        ? { related_object_types: f.relatedObjectTypeIds.map((id) => named(id, byId.get(id))) }
        : {}),
    };
  };
  return {
    field: async (step: Step, f: FieldRow) =>
      patch(await fieldRecord(step.ctx, without(f), step.nested), f),
    type: async (step: Step, cot: CotRow, fields: FieldRow[], tags: ApiRecord[]) => {
      const record = await typeRecord(step.ctx, cot, fields.map(without), tags, step.nested);
      const rows = new Map(fields.map((f) => [f.id, f]));
      const listed = record.fields as ApiRecord[] | undefined;
      if (!Array.isArray(listed)) return record;
      const patched = (r: ApiRecord) => {
        const f = rows.get(r.id as number);
        return f ? patch(r, f) : r;
      };
      return { ...record, fields: listed.map(patched) };
    },
  };
}

/** Added fields validated one after another against the fields before them, as rows. */
async function addedRows(step: Step, cotId: number, siblings: FieldRow[], now: string) {
  const { ctx, t, at, diff } = step;
  const rows: FieldRow[] = [];
  const current = [...siblings];
  for (const change of diff.field_changes.filter((c) => c.op === "add")) {
    const fi = t.fields.findIndex((f) => f.id === change.schema_id);
    const draft = await atPath(`${at}.fields[${fi}]`, () =>
      validateField(ctx, fieldInput(t.fields[fi]!), null, current, step.known, step.pending),
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
  step.pending.set(t.slug, base.objectTypeId!);
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
  step.written.added.push(row);
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
      postchange: await pendingRecords(step.pending).field(step, f),
    });
  step.changes.cots.push({
    action: "create",
    id: row.id,
    prechange: null,
    postchange: await pendingRecords(step.pending).type(step, row, fields, []),
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
  const kept = await stageRemovals(step, existing);
  const { current, moved, retypes } = await stageAlters(step, existing, kept.fields);
  const added = await addedRows(step, cot.id, current, nowIso());
  for (const f of added) {
    batch.add(orm.insert(customObjectTypeFields).values(f));
    addStatements(batch, orm, fieldStorageStatements(cot.id, f, encodedDefault(f)));
    step.changes.fields.push({
      action: "create",
      id: f.id,
      prechange: null,
      postchange: await pendingRecords(step.pending).field(step, f),
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
  step.written.changed.push({ before: cot, after: afterCot });
  const fieldsAfter = [...current, ...added];
  if (keys.together || keys.conditional) {
    // keys over rows that break them (allowed by the gate): the transaction's 400, nothing written
    const broken = keyViolation(t, existing, step.reads, countsWithheldFor(step.ctx, t.slug));
    if (broken instanceof ValidationError) await atPath(step.at, () => Promise.reject(broken));
    const built = await keyStatements(step.at, cot.id, none, fieldsAfter, keys.want, false);
    if (keys.together) addStatements(batch, orm, togetherStatements(cot.id, 0, built.sets));
    if (keys.conditional) addStatements(batch, orm, built.conditional);
    // retypes under them: a failure counted over every converted column, as the transaction's
    const fields = { before: existing.fields, after: fieldsAfter };
    if (retypes.length) step.explain.push(retypeExplainer(step, cot.id, retypes, fields, keys));
  }
  // a renamed or retyped column dropped the search index (its triggers name it): made anew
  const stored = moved || kept.dropped ? new Map<string, string>() : step.reads.index(cot.id);
  stageSearchIndex(ctx, batch, cot.id, fieldsAfter, stored);
  const tags = step.reads.tags(cot.id);
  step.changes.cots.push({
    action: "update",
    id: cot.id,
    // before: the sets as they were (read when the document changes one)
    prechange: await typeRecord(ctx, cot, existing.fields, tags, step.reads.nestedBefore(ctx)),
    postchange: await pendingRecords(step.pending).type(step, afterCot, fieldsAfter, tags),
  });
}

/**
 * The removed fields, first (as the transaction removes them): each to a trash entry, or dropped
 * with `purge`. Answers the fields left and whether the search index was dropped.
 */
async function stageRemovals(step: Step, existing: DbType) {
  const { ctx, batch, diff } = step;
  const orm = ctx.services.db.orm;
  let fields = [...existing.fields];
  let dropped = false;
  for (const change of diff.field_changes.filter((c) => c.op === "remove")) {
    const row = fields.find((f) => f.schemaId === change.schema_id);
    if (!row) continue;
    const days = ctx.services.config.schemaTrashDays;
    const trash = step.purge ? null : { entry: step.ids.trash++, days };
    dropped = stageFieldRemoval(batch, orm, existing.cot, row, trash) || dropped;
    fields = fields.filter((f) => f.id !== row.id);
    step.changes.fields.push({
      action: "delete",
      id: row.id,
      prechange: await fieldRecord(ctx, row, step.reads.nestedBefore(ctx)),
      postchange: null,
    });
  }
  return { fields, dropped };
}

/**
 * The altered fields, each validated against the type's fields as the ones before it left
 * them (primary flags switched off first), guarded on its stamp; a retype carries the values
 * read (decision 0126) or has SQLite convert them (0135). Answers the fields after them, whether
 * a column was renamed or replaced, and the retypes.
 */
async function stageAlters(step: Step, existing: DbType, fields: FieldRow[]) {
  const { ctx, batch, t, at, diff } = step;
  const orm = ctx.services.db.orm;
  const alters = diff.field_changes
    .filter((c) => c.op === "alter")
    .sort(
      (a, b) =>
        Number(a.changed_attrs?.primary?.[1] === true) -
        Number(b.changed_attrs?.primary?.[1] === true),
    );
  let current = freeSwappedNames(step, existing.cot.id, alters, fields);
  let moved = current !== fields;
  const original = new Map(fields.map((f) => [f.id, f]));
  const retypes: Retyped[] = [];
  for (const change of alters) {
    const fi = t.fields.findIndex((f) => f.id === change.schema_id);
    const row = current.find((f) => f.schemaId === change.schema_id)!;
    const retarget = await retargetOf(step, change, row);
    const next = await atPath(`${at}.fields[${fi}]`, () =>
      validateField(
        ctx,
        fieldInput(t.fields[fi]!),
        retarget?.row ?? row,
        current,
        step.known,
        // the types the first read named and those the batch creates resolve without a read
        new Map([...step.targets, ...step.pending]),
      ),
    );
    if (retarget) addStatements(batch, orm, [retarget.statement(existing.cot.id)]);
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
    const retyped = next.type !== row.type;
    // a retype carries the values read or SQLite converts them (`batchable` saw them carried)
    const source = retyped ? retypeSource(row, next.type, step.reads.retyped(row.id)!) : null;
    const storage = source
      ? retypeStatements(existing.cot.id, row, next, source)
      : alterFieldStatements(existing.cot.id, row, next);
    addStatements(batch, orm, storage);
    // explained after a failure, over the rows as they are: the field under its name of today
    if (source) retypes.push({ row: original.get(row.id) ?? row, source });
    moved ||= (next.name !== row.name && !hasLinkTable(row)) || retyped;
    current = current.map((f) => (f.id === row.id ? after : f));
    step.changes.fields.push({
      action: "update",
      id: row.id,
      prechange: await fieldRecord(ctx, original.get(row.id) ?? row, step.reads.nestedBefore(ctx)),
      postchange: await fieldRecord(ctx, after, step.nested),
    });
  }
  return { current, moved, retypes };
}

/**
 * Names the document moves between fields (a swap, decision 0142): each renamed field whose name
 * another renamed field takes is first moved to a free name (as `freeRenamedNames` picks one),
 * row and columns, in the batch; the renames then run from there, as the transaction does. The rows keep their stamps (their updates are guarded on them). Answers the
 * fields as the batch leaves them (the same array when nothing moved).
 */
function freeSwappedNames(
  step: Step,
  cotId: number,
  alters: TypeDiff["field_changes"],
  fields: FieldRow[],
): FieldRow[] {
  const orm = step.ctx.services.db.orm;
  const wanted = new Set(alters.map((c) => c.changed_attrs?.name?.[1]).filter(Boolean));
  const freed = fields.filter((f) => wanted.has(f.name) && renamedIn(step.diff, f.schemaId));
  if (!freed.length) return fields;
  const temporary = new Map<number, FieldRow>();
  // free names, as the transaction picks them: none a field, its columns or the document holds
  const taken = new Set([...wanted, ...fields.flatMap((f) => [f.name, ...fieldColumns(f)])]);
  for (const row of freed) {
    let name = `tmp${row.schemaId}`;
    for (let i = 0; taken.has(name); i++) name = `tmp${row.schemaId}x${i}`;
    taken.add(name);
    const temp = { ...row, name };
    step.batch.add(
      orm
        .update(customObjectTypeFields)
        // the stamp kept: the rename from here is guarded on it
        .set({ name: temp.name, lastUpdated: row.lastUpdated })
        .where(
          and(
            eq(customObjectTypeFields.id, row.id),
            eq(customObjectTypeFields.lastUpdated, row.lastUpdated),
          ),
        ),
    );
    step.batch.add(guardChanged(orm));
    addStatements(step.batch, orm, alterFieldStatements(cotId, row, temp));
    temporary.set(row.id, temp);
  }
  return fields.map((f) => temporary.get(f.id) ?? f);
}

/**
 * A relation's new target (decision 0142; REST refuses one, a document may): the row as
 * validation sees it (pointing at the new target), and the statement for its links outside
 * it — cleared when the gate allowed it, else a guard that none appeared since the gate's count
 * (one that did fails the batch and the apply reruns to its gate). Null when no target changes;
 * a polymorphism change is the validation's 400.
 */
async function retargetOf(step: Step, change: TypeDiff["field_changes"][number], row: FieldRow) {
  const attrs = change.changed_attrs;
  if (!attrs?.related_object_type && !attrs?.related_object_types) return null;
  const want = canonicalFromEntry(step.t.fields.find((f) => f.id === change.schema_id)!);
  if (want.is_polymorphic !== row.isPolymorphic) return null;
  const idOf = async (ref: string) => {
    const [app, model] = ref.split("/") as [string, string];
    if (app === "custom-objects" && step.pending.has(model)) return step.pending.get(model)!;
    const known = targetId(step.ctx, step.targets, ref);
    if (known !== undefined) return known;
    const label = app === "custom-objects" ? APP_LABEL : app;
    return (await step.ctx.services.objectTypes.byLabel(label, model, step.ctx.db))?.id ?? null;
  };
  const keep = (await Promise.all(want.related_object_types.map(idOf))).filter(
    (x): x is number => x !== null,
  );
  const target = want.related_object_type ? await idOf(want.related_object_type) : null;
  const allowed = step.diff.destructive_changes.some(
    (g) => g.reason === "link_target_changed" && g.field === change.db_name,
  );
  const kept = want.is_polymorphic ? keep : null;
  return {
    row: want.is_polymorphic
      ? { ...row, relatedObjectTypeIds: keep }
      : { ...row, relatedObjectTypeId: target },
    statement: (cotId: number) =>
      allowed
        ? clearLinksOutsideSql(cotId, row, kept)
        : sql`INSERT INTO write_guard (ok) SELECT n = 0 FROM (${linksOutsideCountSql(cotId, row, kept)})`,
  };
}

const none: Conditional = { unique: [], checks: [] };

/** The compound keys, partial keys and checks a document's type entry asks for. */
const wantedKeys = (t: TypeEntry) => ({
  together: normalizeTogether(plainTogether(t.unique_together)),
  conditional: wantedConditional(t),
});

/**
 * Which of an existing type's keys the apply replaces, as `applyType` decides: compound keys
 * when they change or hold a retyped field; partial keys and checks when they change, or any
 * field changes while the type has some.
 */
function keyChanges(existing: DbType, t: TypeEntry, diff: TypeDiff) {
  const had = {
    together: normalizeTogether(existing.cot.uniqueTogether),
    conditional: conditionalOf(existing.cot),
  };
  const want = wantedKeys(t);
  const hasConditional = had.conditional.unique.length > 0 || had.conditional.checks.length > 0;
  // a retyped column leaves its compound keys' indexes first (SQLite keeps an indexed column)
  const retyped = new Set(
    diff.field_changes
      .filter((c) => c.op === "alter" && c.changed_attrs?.type)
      .map((c) => c.db_name),
  );
  return {
    had,
    want,
    together:
      stableJson(want.together) !== stableJson(had.together) ||
      had.together.some((set) => set.some((n) => retyped.has(n))),
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
