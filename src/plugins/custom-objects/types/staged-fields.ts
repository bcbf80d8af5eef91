/**
 * `custom-object-type-fields/` writes as one read phase and one atomic batch (decision 0108):
 * the field row, its columns, indexes or link table, the type's new shape (guarded on its
 * `last_updated`), the search index and the change record; a retype converts the values read in
 * a second read (decision 0121). A rename a key or check reads carries it (dropped and built
 * anew), a removal drops the compound keys holding the field (decision 0126); a retype carries
 * them too, with a rename, its failure counted over the converted values (decision 0135). Lists
 * of creates, updates and deletes: one read and one batch in order (decision 0142); a list's
 * retypes read their values together in one second read.
 */
import { objectNotFound } from "../../../core/rest/bulk-found";
import { and, eq, type SQL } from "drizzle-orm";
import type { Orm } from "../../../db/client";
import { guardChanged, WriteConflictError } from "../../../db/client";
import { nowIso } from "../../../db/schema/common";
import { customObjectTypeFields, customObjectTypes } from "../../../db/schema";
import { ValidationError } from "../../../core/errors";
import type { StagedChange } from "../../../core/changes/record";
import type {
  ApiRecord,
  StagedHook,
  StagedOptions,
  StagedUpdate,
  StagedWrites,
  StagedWritten,
  WriteContext,
} from "../../../core/context";
import { parseBool } from "../../../core/rest/query";
import {
  nextStamp,
  ReadPhase,
  type WriteBatch,
  WriteBatch as Batch,
} from "../../../core/rest/write-batch";
import { APP_LABEL, FIELD_MODEL } from "../constants";
import {
  alterFieldStatements,
  dropFieldStorageStatements,
  fieldStorageStatements,
  hasLinkTable,
} from "../ddl";
import type { CotRow } from "../objects/models";
import type { FieldRow } from "../objects/values";
import {
  asConditionalError,
  conditionalOf,
  conditionalStatements,
  readsField,
  renameInConditional,
  type Conditional,
} from "../schema/constraints";
import { refuseRemovingRead } from "../schema/constraints-api";
import { encodedDefault, lossyRetype } from "../schema/operations";
import { countsWithheldFor } from "../schema/access";
import { existingRows } from "../schema/impact";
import { normalizeTogether, setsOfFields, togetherStatements } from "../schema/unique-together";
import { syncIndexStatements } from "../search/search-index";
import { scheduleSearchFlush } from "../search/flush";
import { isFieldType } from "../field-types";
import { typeChangeRefused } from "./field-definition";
import { fieldModel } from "./api";
import { addToGraph, refuseCycle } from "./cycles";
import { type FieldsAhead, nestedSets, readAhead } from "./field-reads";
import { validateField } from "./definitions";
import {
  lostValues,
  overBound,
  overTogether,
  type RetypeRead,
  retypeReads,
  type RetypeRefusal,
  retypeRefusalReads,
  retypeSource,
  retypeStatements,
  type Retyped,
  type RetypedKeys,
} from "./staged-retype";
import {
  addStatements,
  asSchema,
  admissionReads,
  batchError,
  bumpType,
  explainLimited,
  guardAdmitted,
  type Limits,
  limitsOf,
  firstNext,
  idTaken,
  indexSchemaQuery,
  messages,
  nextIdQuery,
  perItem,
  phaseWithRules,
  refuseRepeat,
  reverseNameTaken,
  runWithHooks,
  stageChange,
  stageChangeList,
  stageHooks,
  typeOfField,
  typeReads,
  updateInTransaction,
  withRetry,
} from "./staged";

/** The id of the type a field input names (an id or `{id}`), or null. */
export function cotIdOf(input: Record<string, unknown>): number | null {
  const raw = input.custom_object_type;
  const id =
    raw && typeof raw === "object" && !Array.isArray(raw)
      ? (raw as Record<string, unknown>).id
      : raw;
  return typeof id === "number" && Number.isInteger(id) ? id : null;
}

/** A field's record as `load` answers it. */
export async function fieldRecord(
  ctx: WriteContext,
  row: FieldRow,
  choiceSets?: ReadonlyMap<number, ApiRecord>,
): Promise<ApiRecord> {
  const known = knownChoiceSets([row], choiceSets);
  const [record] = await fieldModel.serialize(ctx, [row], undefined, known, new Map());
  return record!;
}

/**
 * The nested choice sets of `rows` for `serialize` when none or all are known (`choiceSets`, by
 * id: a batched apply's, decision 0119); undefined when one must be read.
 */
export function knownChoiceSets(rows: FieldRow[], choiceSets?: ReadonlyMap<number, ApiRecord>) {
  const ids = rows.map((r) => r.choiceSetId).filter((id): id is number => id != null);
  if (!ids.length) return new Map([["choice_set", new Map<number, ApiRecord>()]]);
  if (!choiceSets || ids.some((id) => !choiceSets.has(id))) return undefined;
  return new Map([["choice_set", new Map(choiceSets)]]);
}

/** The type's search index as the batch leaves its fields; a flush once it commits. */
export function stageSearchIndex(
  ctx: WriteContext,
  batch: WriteBatch,
  cotId: number,
  fields: FieldRow[],
  stored: Map<string, string>,
) {
  const plan = syncIndexStatements(
    cotId,
    [...fields].sort((a, b) => a.id - b.id),
    stored,
  );
  if (!plan) return;
  addStatements(batch, ctx.services.db.orm, plan.statements);
  if (plan.pending) ctx.onCommit?.(async () => scheduleSearchFlush(ctx.services, cotId));
}

/** The type's rows and search index schema, read with the write's rules. */
async function readType<T>(
  ctx: WriteContext,
  cotId: number | SQL,
  extra: (orm: Orm, phase: ReadPhase) => Promise<T>,
) {
  const orm = ctx.services.db.orm;
  const { phase, rules } = phaseWithRules(ctx, FIELD_MODEL);
  const reads = typeReads(orm, phase, cotId);
  const index = phase.add(indexSchemaQuery(orm, cotId));
  const more = await extra(orm, phase);
  await phase.run(ctx);
  return { orm, rules, cot: reads.cot(), fields: reads.fields(), stored: asSchema(index()), more };
}

async function createField(
  ctx: WriteContext,
  input: ApiRecord,
  options: StagedOptions,
  limits: Limits | undefined,
) {
  const cotId = cotIdOf(input);
  if (cotId === null)
    throw new ValidationError({
      custom_object_type: ["This field is required (a custom object type id)."],
    });
  // the checks' reads (the related type, its reverse name, the cycle's graph) in the same read
  const read = await readType(ctx, cotId, async (orm, phase) => ({
    next: phase.add(nextIdQuery(orm, "custom_object_type_fields")),
    ahead: await readAhead(ctx, phase, [{ input }]),
  }));
  const { orm, cot, fields } = read;
  if (!cot)
    throw new ValidationError({
      custom_object_type: [`Custom object type ${cotId} does not exist.`],
    });
  const { custom_object_type: _c, ...rest } = input;
  const ahead = read.more.ahead();
  const draft = await validateField(ctx, rest, null, fields, undefined, undefined, ahead);
  await refuseCycle(ctx, cot, draft, ahead.graph);
  const now = nowIso();
  const id = firstNext(read.more.next());
  const row: FieldRow = {
    ...draft,
    id,
    customObjectTypeId: cot.id,
    schemaId: cot.nextSchemaId,
    created: now,
    lastUpdated: now,
  };
  const record = await fieldRecord(ctx, row, nestedSets(ctx, ahead));
  const batch = new Batch();
  batch.add(orm.insert(customObjectTypeFields).values(row));
  if (limits) guardAdmitted(batch, orm, options.resource, id, limits.act);
  bumpType(batch, orm, cot, { nextSchemaId: cot.nextSchemaId + 1 });
  addStatements(batch, orm, fieldStorageStatements(cot.id, row, encodedDefault(draft)));
  stageSearchIndex(ctx, batch, cot.id, [...fields, row], read.stored);
  const texts = await stageChange(ctx, batch, options.resource, await read.rules(), {
    action: "create",
    id,
    prechange: null,
    postchange: record,
  });
  await runFieldBatch(ctx, batch, options, [draft.name]).catch((e) =>
    limits
      ? explainLimited(ctx, e, "add", [
          { table: customObjectTypes, id: cot.id, stamp: cot.lastUpdated },
        ])
      : Promise.reject(e),
  );
  const json = texts()[0];
  return { id, record: json ? JSON.parse(json) : record, json };
}

/**
 * Creates fields, a list in order (decision 0142: one read phase, one batch): each sees its type
 * as the items before left it; each type's shape and search index staged once after its last.
 */
async function createFields(
  ctx: WriteContext,
  inputs: ApiRecord[],
  options: StagedOptions,
  limits: Limits | undefined,
): Promise<StagedWritten[]> {
  const orm = ctx.services.db.orm;
  const { phase, rules } = phaseWithRules(ctx, FIELD_MODEL);
  const reads = inputs.map((input) => {
    const cotId = cotIdOf(input) ?? 0;
    return {
      cotId,
      id: 0,
      type: typeReads(orm, phase, cotId),
      index: phase.add(indexSchemaQuery(orm, cotId)),
      admitted: undefined,
    };
  });
  const nextField = phase.add(nextIdQuery(orm, "custom_object_type_fields"));
  const readChecks = await readAhead(
    ctx,
    phase,
    inputs.map((input) => ({ input })),
  );
  await phase.run(ctx);
  const ahead = readChecks();
  const sets = nestedSets(ctx, ahead);
  const batch = new Batch();
  const states = new TypeStates();
  const reverseNames = new Map<string, string>();
  let id = firstNext(nextField());
  const now = nowIso();
  const made = await perItem(options.bulk, inputs, async (input, i) => {
    if (cotIdOf(input) === null)
      throw new ValidationError({
        custom_object_type: ["This field is required (a custom object type id)."],
      });
    const state = states.of(reads[i]!);
    if (!state)
      throw new ValidationError({
        custom_object_type: [`Custom object type ${reads[i]!.cotId} does not exist.`],
      });
    const { custom_object_type: _c, ...rest } = input;
    const draft = await validateField(ctx, rest, null, state.fields, undefined, undefined, ahead);
    await refuseCycle(ctx, state.cot, draft, ahead.graph);
    const schemaId = state.set.nextSchemaId ?? state.read.nextSchemaId;
    const row: FieldRow = {
      ...draft,
      id: id++,
      customObjectTypeId: state.read.id,
      schemaId,
      created: now,
      lastUpdated: now,
    };
    claimReverseName(reverseNames, row, draft);
    // a later item closing a cycle through this one is refused as one by one
    addToGraph(ahead.graph, state.read.id, draft);
    batch.add(orm.insert(customObjectTypeFields).values(row));
    if (limits) guardAdmitted(batch, orm, options.resource, row.id, limits.act);
    addStatements(batch, orm, fieldStorageStatements(state.read.id, row, encodedDefault(draft)));
    state.set = { ...state.set, nextSchemaId: schemaId + 1 };
    state.fields = [...state.fields, row];
    const record = await fieldRecord(ctx, row, sets);
    return { row, change: { action: "create", id: row.id, prechange: null, postchange: record } };
  });
  states.finish(ctx, batch);
  const changes = made.map((m) => m.change as StagedChange);
  const texts = await stageChangeList(ctx, batch, options.resource, await rules(), changes);
  const names = made.map((m) => m.row.name);
  await runFieldBatch(ctx, batch, options, names).catch((e) =>
    limits ? explainLimited(ctx, e, "add", states.stamps()) : Promise.reject(e),
  );
  return made.map((m, i) => {
    const json = texts()[i];
    return { id: m.row.id, record: json ? JSON.parse(json) : m.change.postchange, json };
  });
}

/**
 * A field batch's failure: existing values not unique (on the item whose column it names), a
 * sibling's name taken meanwhile.
 */
async function runFieldBatch(
  ctx: WriteContext,
  batch: WriteBatch,
  options: StagedOptions,
  names: string[],
) {
  try {
    await batch.run(ctx);
  } catch (e) {
    const text = messages(e);
    const column = /UNIQUE constraint failed: co_\d+\.(\w+)/.exec(text);
    if (column) {
      const col = column[1]!;
      const at = Math.max(
        0,
        names.findIndex((n) => col === n || col.startsWith(`${n}_`)),
      );
      const refused = { unique: [`Existing values of "${names[at]}" are not unique.`] };
      throw new ValidationError(
        options.bulk ? names.map((_, i) => (i === at ? refused : {})) : refused,
      );
    }
    if (
      /UNIQUE constraint failed: custom_object_type_fields\.custom_object_type_id, custom_object_type_fields\.name/.test(
        text,
      )
    )
      throw new ValidationError({
        name: [`A field named "${names[0]}" already exists on this custom object type.`],
      });
    // `withRetry` runs the write again: an id, or a reverse name (decision 0156), taken meanwhile
    if (idTaken(e) || reverseNameTaken(e)) throw e;
    throw batchError(e, options.resource);
  }
}

const none: Conditional = { unique: [], checks: [] };

/**
 * A rename's or retype's partial keys and checks (decisions 0126, 0135): those reading the field
 * dropped before the column moves, built after under its new name; after a rename alone the rows
 * met them already, after a retype a check is proven over the converted rows in the batch.
 * Answers the statements around the change and the constraints to store, or null.
 */
function followingConditional(cot: CotRow, field: FieldRow, next: FieldRow, fields: FieldRow[]) {
  const have = conditionalOf(cot);
  const moves = next.name !== field.name || next.type !== field.type;
  if (!moves || !readsField(have, field.name)) return null;
  const want = next.name === field.name ? have : renameInConditional(have, field.name, next.name);
  try {
    return {
      before: conditionalStatements(cot.id, have, [], none),
      after: conditionalStatements(cot.id, none, fields, want, next.type === field.type),
      want,
    };
  } catch (e) {
    throw asConditionalError(e);
  }
}

const inTogether = (cot: CotRow, name: string) =>
  (cot.uniqueTogether ?? []).some((set) => set.includes(name));

/**
 * The compound keys after a rename or retype of `field`: the stored sets renamed; for a retype
 * their indexes dropped before the column is replaced and built after (decision 0135; SQLite
 * renames an index's column by itself). Null when none holds the field.
 */
function followingTogether(cot: CotRow, field: FieldRow, next: FieldRow, fields: FieldRow[]) {
  if (!inTogether(cot, field.name) || (next.name === field.name && next.type === field.type))
    return null;
  const had = normalizeTogether(cot.uniqueTogether);
  const want = normalizeTogether(
    had.map((set) => set.map((n) => (n === field.name ? next.name : n))),
  );
  if (next.type === field.type) return { before: [], after: [], want };
  return {
    before: togetherStatements(cot.id, had.length, []),
    after: togetherStatements(cot.id, 0, setsOfFields(want, fields)),
    want,
  };
}

/**
 * The keys and checks around a field's rename or retype: statements before and after its
 * column moves, the type's stored sets, and what they build (null when none reads the field).
 */
function followingKeys(cot: CotRow, field: FieldRow, next: FieldRow, fields: FieldRow[]) {
  const conditional = followingConditional(cot, field, next, fields);
  const together = followingTogether(cot, field, next, fields);
  const built: RetypedKeys | null =
    conditional || together
      ? {
          together: together?.want ?? [],
          conditional: conditional?.want ?? none,
        }
      : null;
  return {
    before: [...(conditional?.before ?? []), ...(together?.before ?? [])],
    after: [...(conditional?.after ?? []), ...(together?.after ?? [])],
    set: {
      ...(together ? { uniqueTogether: together.want } : {}),
      ...(conditional ? { conditionalConstraints: conditional.want } : {}),
    },
    built,
  };
}

/**
 * A retype's storage (decisions 0121, 0135): values SQLite converts in the batch, or the values
 * read (a second read), a lossy change refused without `allow_destructive` (409), and the
 * statements that carry them. "transaction" over the values a batch carries (D1: 409).
 */
async function retypeStorage(
  ctx: WriteContext,
  cot: CotRow,
  field: FieldRow,
  draft: { name: string; type: string; unique: boolean },
  early?: EarlyRetype | null,
) {
  let values = early?.to === draft.type ? early.read : null;
  if (!values) {
    const phase = new ReadPhase();
    const read = retypeReads(ctx.services.db.orm, phase, cot.id, field, draft.type);
    if (phase.size) await phase.run(ctx);
    values = read();
  }
  if (values.kind === "over") return overBound(ctx.services.db, [field]);
  const lost = lostValues(field, draft.type, values);
  const allowed = parseBool(ctx.params.get("allow_destructive") ?? "false") === true;
  if (lost && !allowed) throw lossyRetype(ctx, cot, field, draft.type, lost);
  const source = retypeSource(field, draft.type, values);
  return { source, read: values, statements: retypeStatements(cot.id, field, draft, source) };
}

/** A list item's retype read ahead: the type it asks for and the values read. */
interface EarlyRetype {
  to: string;
  read: RetypeRead;
}

/**
 * A list's retypes read together, one second read for all (decision 0142): each item asking a
 * field as read for another type it may take has its values read (`retypeReads`, nothing when
 * SQLite converts them); an item whose validated type differs reads its own.
 */
async function listRetypeReads(
  ctx: WriteContext,
  items: StagedUpdate[],
  reads: FieldRead[],
): Promise<Array<EarlyRetype | null>> {
  const phase = new ReadPhase();
  const asked = items.map((item, i) => {
    const to = item.input.type;
    const field = reads[i]!.type.fields().find((f) => f.id === item.id);
    if (!field || typeof to !== "string" || to === field.type || !isFieldType(to)) return null;
    if (typeChangeRefused(field.type, to)) return null;
    const read = retypeReads(ctx.services.db.orm, phase, field.customObjectTypeId, field, to);
    return { to, read };
  });
  if (phase.size) await phase.run(ctx);
  return asked.map((a) => a && { to: a.to, read: a.read() });
}

/**
 * A failed retype's answer as the transaction gives it, or null when none of its counts breaks
 * (`withheld`: the rows are not counted to the caller, decision 0183).
 */
function refusalError(refusal: RetypeRefusal | null, withheld: boolean): Error | null {
  switch (refusal?.kind) {
    case undefined:
      return null;
    case "race":
      return new WriteConflictError();
    case "unique":
      return new ValidationError({
        unique: [`Existing values of "${refusal.field.name}" are not unique.`],
      });
    case "partial":
      return new ValidationError({
        unique_together: [
          `${existingRows(refusal.rows, withheld)} matching the condition share values of ${refusal.key.fields.join(", ")}; they must make a unique set.`,
        ],
      });
    case "check":
      return new ValidationError({
        checks: [
          `${existingRows(refusal.rows, withheld)} do not match the check "${refusal.check.name}".`,
        ],
      });
    case "together":
      return new ValidationError({
        unique_together: [
          `${existingRows(refusal.rows, withheld)} share values of ${refusal.set.join(", ")}; they must make a unique set.`,
        ],
      });
  }
}

/**
 * The types a list of field writes touches, each as the list leaves it so far (decision 0142):
 * an item sees its siblings as the items before it left them; the type's new shape (guarded on
 * the stamp read) and its search index are staged once, after the last.
 */
class TypeStates {
  private readonly states = new Map<number, TypeState>();

  /** The type a field's reads found, as the list left it so far. */
  of(read: FieldRead): TypeState | null {
    const cot = read.type.cot();
    if (!cot) return null;
    let state = this.states.get(cot.id);
    if (!state) {
      const fields = read.type.fields();
      const stored = asSchema(read.index());
      state = {
        read: cot,
        cot,
        fields,
        readFields: fields,
        retyped: [],
        stored,
        indexGone: false,
        set: {},
      };
      this.states.set(cot.id, state);
    }
    return state;
  }

  /** Each type's new shape and search index, staged after its fields' statements. */
  finish(ctx: WriteContext, batch: WriteBatch) {
    for (const s of this.states.values()) {
      bumpType(batch, ctx.services.db.orm, s.read, s.set);
      stageSearchIndex(ctx, batch, s.read.id, s.fields, s.indexGone ? new Map() : s.stored);
    }
  }

  /** The stamps read, for a constrained caller's failed guard. */
  stamps() {
    return [...this.states.values()].map((s) => ({
      table: customObjectTypes,
      id: s.read.id,
      stamp: s.read.lastUpdated,
    }));
  }
}

interface TypeState {
  /** The type's row as read (its stamp guards the batch). */
  read: CotRow;
  /** The row as the list leaves it so far (its keys and checks). */
  cot: CotRow;
  fields: FieldRow[];
  stored: Map<string, string>;
  /** A column moved or went: the search index (its triggers name columns) is built anew. */
  indexGone: boolean;
  set: Partial<CotRow>;
  /** Its fields as read: the table's columns until the batch runs. */
  readFields: FieldRow[];
  /** The list's retypes of its fields so far, in order (a later one's table holds them). */
  retyped: Retyped[];
}

/** A field's type, its search index schema and the caller's admission, in a shared read phase. */
function readField(
  orm: Orm,
  phase: ReadPhase,
  id: number,
  options: StagedOptions,
  limits: Limits | undefined,
) {
  return {
    id,
    type: typeReads(orm, phase, typeOfField(id)),
    index: phase.add(indexSchemaQuery(orm, typeOfField(id))),
    admitted: limits && admissionReads(orm, phase, options.resource, id, limits),
  };
}

type FieldRead = ReturnType<typeof readField>;

/** The field a read names and its type's state; 404 when either is gone (or named twice). */
function foundField(states: TypeStates, read: FieldRead, seen: Set<number>) {
  const state = states.of(read);
  const field = state?.fields.find((f) => f.id === read.id);
  if (!state || !field || seen.has(read.id))
    throw objectNotFound("custom object type field", read.id);
  seen.add(read.id);
  read.admitted?.();
  return { state, field };
}

type FieldPlan = Exclude<Awaited<ReturnType<typeof planFieldUpdate>>, "transaction">;

/**
 * A failed batch's answer from the first retype building keys or checks again that breaks one,
 * counted as the transaction counts it (`retypeRefusalReads`, all in one read): over the table
 * as read with the list's earlier retypes of its type and its own converted, renames followed;
 * in a list, in that item's place.
 */
async function explainRetypes(
  ctx: WriteContext,
  e: unknown,
  plans: FieldPlan[],
  bulk: boolean,
): Promise<never> {
  const phase = new ReadPhase();
  const refusals = plans.map((p) => {
    if (!p.retype || !p.keys.built) return () => null;
    const own = { row: p.current, source: p.retype.source };
    const fields = { before: p.readFields, after: p.fieldsAfter };
    const orm = ctx.services.db.orm;
    return retypeRefusalReads(orm, phase, p.cot.id, [own], fields, p.keys.built, p.earlier);
  });
  if (phase.size) await phase.run(ctx);
  for (const [i, refusal] of refusals.entries()) {
    const err = refusalError(refusal(), countsWithheldFor(ctx, plans[i]!.cot.slug));
    if (!err) continue;
    const own = err instanceof ValidationError ? err.fields : null;
    if (!bulk || !own || Array.isArray(own)) throw err;
    throw new ValidationError(plans.map((_, j) => (j === i ? own : {})));
  }
  throw e;
}

/**
 * A reverse relation name taken by an earlier item of the same list (decision 0142): the stored
 * rows do not show it yet, so `validateField`'s check cannot; the same 400.
 */
function claimReverseName(
  taken: Map<string, string>,
  current: FieldRow,
  draft: { relatedName: string; relatedObjectTypeId: number | null; isPolymorphic: boolean },
) {
  if (!draft.relatedName || draft.relatedObjectTypeId == null || draft.isPolymorphic) return;
  const key = `${draft.relatedObjectTypeId} ${draft.relatedName}`;
  const holder = taken.get(key);
  if (holder !== undefined)
    throw new ValidationError({
      related_name: [
        `Reverse relation name "${draft.relatedName}" is already used by field "${holder}" in this list.`,
      ],
    });
  taken.set(key, current.name);
}

/** One field's update staged in the batch; "transaction" when it cannot be staged. */
async function planFieldUpdate(
  ctx: WriteContext,
  batch: WriteBatch,
  found: {
    state: TypeState;
    field: FieldRow;
    reverseNames: Map<string, string>;
    early?: EarlyRetype | null;
    ahead: FieldsAhead;
  },
  item: StagedUpdate,
  options: StagedOptions,
  limits: Limits | undefined,
) {
  const orm = ctx.services.db.orm;
  const { state, field: current } = found;
  options.admit?.(current);
  options.precondition?.(current.lastUpdated);
  const { custom_object_type: moved, ...rest } = item.input;
  if (moved !== undefined && cotIdOf(item.input) !== current.customObjectTypeId)
    throw new ValidationError({
      custom_object_type: ["A field cannot move to another custom object type."],
    });
  const draft = await validateField(
    ctx,
    rest,
    current,
    state.fields,
    undefined,
    undefined,
    found.ahead,
  );
  claimReverseName(found.reverseNames, current, draft);
  const retyped = draft.type !== current.type;
  // a retype's values: a second read, a list's read together ahead (`listRetypeReads`)
  const retype = retyped ? await retypeStorage(ctx, state.cot, current, draft, found.early) : null;
  if (retype === "transaction") return "transaction";
  const storage = retype ? retype.statements : alterFieldStatements(state.cot.id, current, draft);
  const after: FieldRow = { ...current, ...draft, lastUpdated: nextStamp(current.lastUpdated) };
  const sets = nestedSets(ctx, found.ahead);
  const prechange = await fieldRecord(ctx, current, sets);
  const postchange = await fieldRecord(ctx, after, sets);
  const fieldsAfter = state.fields.map((f) => (f.id === current.id ? after : f));
  const keys = followingKeys(state.cot, current, after, fieldsAfter);
  addStatements(batch, orm, keys.before);
  batch.add(
    orm
      .update(customObjectTypeFields)
      .set({ ...draft, lastUpdated: after.lastUpdated })
      .where(
        and(
          eq(customObjectTypeFields.id, current.id),
          eq(customObjectTypeFields.lastUpdated, current.lastUpdated),
        ),
      ),
  );
  batch.add(guardChanged(orm));
  if (limits) guardAdmitted(batch, orm, options.resource, current.id, limits.act);
  addStatements(batch, orm, [...storage, ...keys.after]);
  const cot = state.cot;
  state.cot = { ...state.cot, ...keys.set };
  state.set = { ...state.set, ...keys.set };
  state.fields = fieldsAfter;
  // a renamed or retyped column dropped the search index (its triggers name it): made anew
  if ((draft.name !== current.name && !hasLinkTable(current)) || retyped) state.indexGone = true;
  // a later retype's failure is counted over the table with this one's values converted
  const earlier = state.retyped;
  if (retype) state.retyped = [...earlier, { row: current, source: retype.source }];
  const change = { action: "update" as const, id: current.id, prechange, postchange };
  const { readFields } = state;
  return { change, name: draft.name, current, cot, readFields, fieldsAfter, keys, retype, earlier };
}

/**
 * Updates fields, one or a list in order (decision 0142: one read phase, one batch); retypes
 * read their values in a second read, a list's all together; "transaction" for what is not
 * staged.
 */
async function updateFields(
  ctx: WriteContext,
  items: StagedUpdate[],
  options: StagedOptions,
  limits: Limits | undefined,
): Promise<StagedWritten[] | "transaction"> {
  const orm = ctx.services.db.orm;
  const { phase, rules } = phaseWithRules(ctx, FIELD_MODEL);
  const reads = items.map((item) => readField(orm, phase, item.id, options, limits));
  // the checks' reads (a reverse name's holder, a related type named) in the same read
  const readChecks = await readAhead(
    ctx,
    phase,
    items.map((item) => ({ input: item.input, fieldId: item.id })),
  );
  await phase.run(ctx);
  const ahead = readChecks();
  const early = options.bulk ? await listRetypeReads(ctx, items, reads) : [];
  const batch = new Batch();
  const states = new TypeStates();
  const seen = new Set<number>();
  const reverseNames = new Map<string, string>();
  const plans = await perItem(options.bulk, items, (item, i) => {
    // named twice: a 400 on the later item (a delete's is not found, as one by one)
    refuseRepeat(seen, item.id);
    const found = {
      ...foundField(states, reads[i]!, new Set()),
      ...{ reverseNames, early: early[i], ahead },
    };
    return planFieldUpdate(ctx, batch, found, item, options, limits);
  });
  const staged = plans.filter((p) => p !== "transaction");
  if (staged.length !== plans.length) return "transaction";
  // the list's values weighed together under one batch's bound (decision 0135)
  const over = overTogether(
    staged.flatMap((p) => (p.retype ? [{ row: p.current, read: p.retype.read }] : [])),
  );
  if (over) return overBound(ctx.services.db, over.fields);
  states.finish(ctx, batch);
  const texts = await stageChangeList(
    ctx,
    batch,
    options.resource,
    await rules(),
    staged.map((p) => p.change),
  );
  await runFieldBatch(
    ctx,
    batch,
    options,
    staged.map((p) => p.name),
  )
    .catch((e) => explainRetypes(ctx, e, staged, options.bulk))
    .catch((e) =>
      limits
        ? explainLimited(ctx, e, "change", [
            ...staged.map((p) => ({
              table: customObjectTypeFields,
              id: p.current.id,
              stamp: p.current.lastUpdated,
            })),
            ...states.stamps(),
          ])
        : Promise.reject(e),
    );
  return staged.map((p, i) => {
    const json = texts()[i];
    return { id: p.current.id, record: json ? JSON.parse(json) : p.change.postchange, json };
  });
}

/**
 * A removal's compound keys (decision 0126), as `followFieldChange` leaves them: the sets holding
 * the field dropped, the others built again, before its column goes. Null when none holds it.
 */
function removalTogether(cot: CotRow, field: FieldRow, left: FieldRow[]) {
  if (!inTogether(cot, field.name)) return null;
  const had = normalizeTogether(cot.uniqueTogether);
  const kept = had.filter((set) => !set.includes(field.name));
  return {
    statements: togetherStatements(cot.id, had.length, setsOfFields(kept, left)),
    kept,
  };
}

/**
 * Deletes fields, one or a list in order (decision 0142: one read phase, one batch): each its
 * row (guarded on its stamp), storage and compound keys; its type's shape and search index once.
 */
async function deleteFields(
  ctx: WriteContext,
  ids: number[],
  options: StagedOptions,
  limits: Limits | undefined,
): Promise<"transaction" | undefined> {
  const orm = ctx.services.db.orm;
  const { phase, rules } = phaseWithRules(ctx, FIELD_MODEL);
  const reads = ids.map((id) => ({
    ...readField(orm, phase, id, options, limits),
    hookParts: stageHooks(ctx, phase, { appLabel: APP_LABEL, model: FIELD_MODEL, id }),
  }));
  if (reads.some((r) => !r.hookParts)) return "transaction";
  await phase.run(ctx);
  const batch = new Batch();
  const states = new TypeStates();
  const seen = new Set<number>();
  const hooks: StagedHook[] = [];
  const changes: StagedChange[] = [];
  for (const read of reads) {
    // the row as read is one the caller may delete; the batch is guarded on its stamp
    const { state, field } = foundField(states, read, seen);
    options.admit?.(field);
    options.precondition?.(field.lastUpdated);
    // a partial key or check reading it: the transaction's 400
    refuseRemovingRead(state.cot, field);
    const prechange = await fieldRecord(ctx, field);
    for (const part of read.hookParts!) {
      const hook = await part();
      hook.write(batch);
      hooks.push(hook);
    }
    stageFieldRemoval(batch, orm, state, field);
    changes.push({ action: "delete", id: field.id, prechange, postchange: null });
  }
  states.finish(ctx, batch);
  await stageChangeList(ctx, batch, options.resource, await rules(), changes);
  return runWithHooks(ctx, batch, options.resource, hooks);
}

/** A field's row, storage and compound keys removed in the batch; its type's state follows. */
function stageFieldRemoval(batch: WriteBatch, orm: Orm, state: TypeState, field: FieldRow) {
  batch.add(
    orm
      .delete(customObjectTypeFields)
      .where(
        and(
          eq(customObjectTypeFields.id, field.id),
          eq(customObjectTypeFields.lastUpdated, field.lastUpdated),
        ),
      ),
  );
  batch.add(guardChanged(orm));
  const left = state.fields.filter((f) => f.id !== field.id);
  const together = removalTogether(state.cot, field, left);
  if (together) addStatements(batch, orm, together.statements);
  addStatements(batch, orm, dropFieldStorageStatements(state.cot.id, field));
  if (together) {
    state.cot = { ...state.cot, uniqueTogether: together.kept };
    state.set = { ...state.set, uniqueTogether: together.kept };
  }
  state.fields = left;
  // a column's removal dropped the index (its triggers name the column): it is built anew
  if (!hasLinkTable(field)) state.indexGone = true;
}

export function stagedFieldWrites(): StagedWrites {
  // a caller whose permissions carry constraints stays staged: the row read, the row written
  // guarded (decision 0121); lists of updates and deletes too (decision 0142)
  return {
    async create(ctx, inputs, options) {
      const limits = await limitsOf(ctx, options.resource, "add");
      // a list in one read phase and one batch (decision 0142)
      if (options.bulk || inputs.length !== 1)
        return withRetry(ctx, (attempt) => createFields(attempt, inputs, options, limits));
      return [await withRetry(ctx, (attempt) => createField(attempt, inputs[0]!, options, limits))];
    },
    async update(ctx, items, partial, options) {
      const limits = await limitsOf(ctx, options.resource, "change");
      // a reverse name taken after the read: read and checked again (its 400), decision 0156
      const written = await withRetry(
        ctx,
        (attempt) => updateFields(attempt, items, options, limits),
        reverseNameTaken,
      );
      return written === "transaction"
        ? updateInTransaction(ctx, items, partial, options)
        : written;
    },
    async delete(ctx, ids, options) {
      return deleteFields(ctx, ids, options, await limitsOf(ctx, options.resource, "delete"));
    },
  };
}
