/**
 * schema/preview, schema/apply and schema/export (§5.1). Apply runs, in this order:
 * document validation (400), stale-plan check (409), destructive guard (409), cycles (400),
 * unresolvable references (400), then every change in one transaction in dependency order.
 */
import { eq, inArray, sql } from "drizzle-orm";
import type { Executor } from "../../../db/client";
import { choiceSets, customObjectTypeFields, customObjectTypes } from "../../../db/schema";
import { ApiError, ValidationError, forbidden } from "../../../core/errors";
import {
  cotSlugsViewable,
  countsWithheld,
  type NameHolder,
  refuseHidden,
  refuseTakenNames,
  withoutHidden,
} from "./access";
import { restrictionFor, viewableRefs } from "../../../core/auth/restrict";
import { CHOICE_SET } from "../types/field-reads";
import type { ReadContext, WriteContext } from "../../../core/rest/resource";
import type { AuthState } from "../../../core/context";
import { parseBool } from "../../../core/rest/query";
import {
  REFERENCES_CHECKED,
  validateField,
  type CotDraft,
  type FieldDraft,
} from "../types/definitions";
import { circularDependency } from "../types/cycles";
import {
  addFields,
  alterField,
  completeStorage,
  createCot,
  removeField,
  updateCot,
} from "./operations";
import type { PendingStorage } from "../ddl";
import { createCotTable } from "../ddl";
import { fieldType } from "../field-types";
import { LINKABLE_APPS } from "../constants";
import type { FieldRow } from "../objects/values";
import type { CotRow } from "../objects/models";
import {
  parseDocument,
  parseDocumentWithTurns,
  type ParseResult,
  type SchemaDocument,
  type SchemaError,
  type TypeEntry,
} from "./document";
import {
  defaultLookups,
  diffDocument,
  type ChoiceSetRow,
  type DestructiveChange,
  type DiffLookups,
  type PrefetchedCounts,
  type TypeDiff,
} from "./diff";
import { clearLinksOutside } from "./impact";
import { buildUniqueTogether, dropUniqueTogether, normalizeTogether } from "./unique-together";
import { conditionalOf, mergedTogether, plainTogether, wantedConditional } from "./constraints";
import { applyConditional, dropConditionalFirst } from "./constraints-apply";
import { listTrash, removeType, trashField, type TrashRow } from "./trash";
import { sameValue } from "./state";
import { yieldWhenDue } from "../../../turns";
import {
  countTypes,
  type Refusal,
  refuseTypesPast,
  typeLimitRefusals,
  withinTypeLimit,
} from "../types/type-limit";
import {
  canonicalFromEntry,
  cotAttrsFromEntry,
  entryFromCanonical,
  loadDbTypes,
  loadReferences,
  stableJson,
  stableJsonWithTurns,
  COT_ATTR_DEFAULTS,
  type DbType,
  type Tombstone,
} from "./state";

export interface ApplyRequest {
  document: SchemaDocument;
  allowDestructive: boolean;
  expectedStateHash: string | null;
  /** A reviewed plan from schema/preview: apply exactly it, or 409 stale_plan. */
  planId: string | null;
  /** Drop removed fields and types at once instead of moving them to the trash. */
  purge: boolean;
  /** Slugs of existing types the caller may not view: to the apply they do not exist (0129). */
  hidden?: ReadonlySet<string>;
  /** The types holding the document's type names, seen or not by the caller (0137). */
  nameHolders?: readonly NameHolder[];
}

const invalid = (detail: string, errors: SchemaError[]) =>
  new ApiError(400, { error: "invalid_schema", detail, schema_errors: errors.slice(0, 20) });

/**
 * Accepts `{schema, allow_destructive?, expected_state_hash?}` or a bare document (options then
 * come from the query string). Throws 400 invalid_schema for anything else. The document is
 * validated a type a step, giving the event loop its turns when due (decision 0210).
 */
export async function readApplyRequest(
  body: unknown,
  params: URLSearchParams,
): Promise<ApplyRequest> {
  const { docInput, options } = applyOptions(body, params);
  return withDocument(await parseDocumentWithTurns(docInput), options);
}

/** `readApplyRequest` in one go, where nothing may wait (a job's claim reads its counts). */
export function readApplyRequestNow(body: unknown, params: URLSearchParams): ApplyRequest {
  const { docInput, options } = applyOptions(body, params);
  return withDocument(parseDocument(docInput), options);
}

function withDocument(parsed: ParseResult, options: Omit<ApplyRequest, "document">): ApplyRequest {
  if (!parsed.ok) throw invalid("The schema document is not valid.", parsed.errors);
  return { document: parsed.document, ...options };
}

/** The request's options and its document as sent, options checked (400 invalid_schema). */
function applyOptions(
  body: unknown,
  params: URLSearchParams,
): { docInput: unknown; options: Omit<ApplyRequest, "document"> } {
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw invalid('The body must be a schema document or {"schema": <document>}.', [
      { path: "$", message: "expected an object" },
    ]);
  const b = body as Record<string, unknown>;
  let docInput: unknown = b;
  let allow: unknown;
  let hash: unknown;
  let plan: unknown;
  let purge: unknown;
  if ("schema" in b) {
    const extra = Object.keys(b).filter(
      (k) =>
        !["schema", "allow_destructive", "expected_state_hash", "plan_id", "purge"].includes(k),
    );
    if (extra.length)
      throw invalid(
        "Unknown keys in the request body.",
        extra.map((k) => ({ path: `$.${k}`, message: "unknown key" })),
      );
    docInput = b.schema;
    allow = b.allow_destructive;
    hash = b.expected_state_hash;
    plan = b.plan_id;
    purge = b.purge;
  }
  if (purge !== undefined && typeof purge !== "boolean")
    throw invalid("purge must be a JSON boolean.", [
      { path: "$.purge", message: "expected a boolean" },
    ]);
  const queryPurge = params.get("purge");
  if (plan !== undefined && plan !== null && (typeof plan !== "string" || !PLAN_ID_RE.test(plan)))
    throw invalid("plan_id must be the plan_id a preview returned.", [
      { path: "$.plan_id", message: "expected a plan_id from schema/preview" },
    ]);
  const queryPlan = params.get("plan_id");
  if (queryPlan !== null && !PLAN_ID_RE.test(queryPlan))
    throw invalid("plan_id must be the plan_id a preview returned.", [
      { path: "plan_id", message: "expected a plan_id from schema/preview" },
    ]);
  if (allow !== undefined && typeof allow !== "boolean")
    throw invalid("allow_destructive must be a JSON boolean.", [
      { path: "$.allow_destructive", message: "expected a boolean" },
    ]);
  if (hash !== undefined && hash !== null && typeof hash !== "string")
    throw invalid("expected_state_hash must be a string.", [
      { path: "$.expected_state_hash", message: "expected a string" },
    ]);
  const queryAllow = params.get("allow_destructive");
  const options = {
    allowDestructive:
      allow === true ||
      (allow === undefined && queryAllow !== null && parseBool(queryAllow) === true),
    expectedStateHash: (hash as string | undefined) ?? params.get("expected_state_hash"),
    planId: (plan as string | undefined) ?? queryPlan,
    purge:
      purge === true ||
      (purge === undefined && queryPurge !== null && parseBool(queryPurge) === true),
  };
  return { docInput, options };
}

const sha256 = async (text: string) => {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((x) => x.toString(16).padStart(2, "0")).join("");
};

type StateSnapshot = Array<
  | { slug: string; attrs: unknown; next: number; fields: unknown[]; tombstones: unknown[] }
  | { slug: string; absent: true }
>;
/** A snapshot's hash, written a type a step with turns between (decision 0210). */
const hashSnapshot = async (snapshot: StateSnapshot) => sha256(await stableJsonWithTurns(snapshot));

function snapshotOf(state: Map<string, DbType>, slugs: string[]): StateSnapshot {
  return [...new Set(slugs)].sort().map((slug) => {
    const s = state.get(slug);
    return s
      ? {
          slug,
          attrs: {
            ...s.attrs,
            unique_together: mergedTogether(
              normalizeTogether(s.cot.uniqueTogether),
              conditionalOf(s.cot),
            ),
            checks: conditionalOf(s.cot).checks,
          },
          next: s.cot.nextSchemaId,
          fields: [...s.canonical.values()],
          tombstones: s.tombstones,
        }
      : { slug, absent: true as const };
  });
}

/** The slugs a document touches: its types and its removed types. */
export const documentSlugs = (doc: SchemaDocument) => [
  ...doc.types.map((t) => t.slug),
  ...(doc.removed_types ?? []).map((r) => r.slug),
];

/**
 * The state hash the database will have once the document is applied, computed from the
 * document and the current state the same way `stateHash` reads it afterwards.
 */
async function projectedHash(
  document: SchemaDocument,
  state: Map<string, DbType>,
): Promise<string> {
  const slugs = documentSlugs(document);
  const projected = new Map<string, unknown>();
  for (const t of document.types) {
    await yieldWhenDue(); // a document of hundreds of types: turns between them (0210)
    const existing = state.get(t.slug);
    const listed = new Set([
      ...t.fields.map((f) => f.id),
      ...(t.removed_fields ?? []).map((r) => r.id),
    ]);
    const kept = existing ? [...existing.canonical.values()].filter((c) => !listed.has(c.id)) : [];
    const fields = [...t.fields.map(canonicalFromEntry), ...kept].sort((a, b) => a.id - b.id);
    const removed = new Map<number, Tombstone>();
    for (const r of [...(existing?.tombstones ?? []), ...(t.removed_fields ?? [])])
      removed.set(r.id, { ...removed.get(r.id), ...r });
    const highest = t.fields
      .filter((f) => !existing?.canonical.has(f.id))
      .reduce((m, f) => Math.max(m, f.id + 1), 0);
    const next = Math.max(existing?.cot.nextSchemaId ?? 1, highest);
    projected.set(t.slug, {
      slug: t.slug,
      attrs: {
        ...cotAttrsFromEntry(t),
        unique_together: mergedTogether(
          normalizeTogether(plainTogether(t.unique_together)),
          wantedConditional(t),
        ),
        checks: wantedConditional(t).checks,
      },
      next,
      fields,
      tombstones: [...removed.values()].sort((a, b) => a.id - b.id),
    });
  }
  const snapshot = [...new Set(slugs)]
    .sort()
    .map((slug) => projected.get(slug) ?? { slug, absent: true as const }) as StateSnapshot;
  return hashSnapshot(snapshot);
}

/**
 * A plan id binds a document to the state it was previewed against: `<document hash>.<binding>`
 * (32 hex each). Stateless, so it works on every runtime and never expires; a changed document
 * or a moved database no longer matches it.
 */
const PLAN_ID_RE = /^[0-9a-f]{32}\.[0-9a-f]{32}$/;
async function planIdOf(document: SchemaDocument, fromHash: string): Promise<string> {
  const docHash = (await sha256(await stableJsonWithTurns(document))).slice(0, 32);
  return `${docHash}.${(await sha256(`${docHash}:${fromHash}`)).slice(0, 32)}`;
}

export interface SchemaPlan {
  plan_id: string;
  from_state_hash: string;
  to_state_hash: string;
}

async function planOf(
  db: Executor,
  ctx: ReadContext,
  document: SchemaDocument,
  hidden?: ReadonlySet<string>,
  loaded?: Map<string, DbType>,
): Promise<SchemaPlan> {
  const slugs = documentSlugs(document);
  const state = loaded ?? (await loadDbTypes(db, ctx.services.objectTypes, slugs, hidden));
  const from = await hashSnapshot(snapshotOf(state, slugs));
  return {
    plan_id: await planIdOf(document, from),
    from_state_hash: from,
    to_state_hash: await projectedHash(document, state),
  };
}

async function diffOrThrow(
  db: Executor,
  ctx: ReadContext,
  document: SchemaDocument,
  hidden?: ReadonlySet<string>,
  loaded?: Map<string, DbType>,
  sets?: readonly ChoiceSetRow[],
  counted?: PrefetchedCounts,
  withheld?: (slug: string) => boolean,
  /** The caller, whose hidden choice sets the diff leaves out; none: a CLI's run sees all. */
  auth?: AuthState,
) {
  const objectTypes = ctx.services.objectTypes;
  const lookups0 = defaultLookups(db, objectTypes, document, sets);
  const base = auth ? viewedSets(ctx, auth, document, lookups0) : lookups0;
  // a batched apply's first read named the document's targets (decision 0142)
  const objectTypeId = async (ref: string) => counted?.objectType?.(ref) ?? base.objectTypeId(ref);
  const lookups = { ...base, objectTypeId, counted, withheld };
  const result = await diffDocument(db, objectTypes, document, hidden, lookups, loaded);
  if (result.errors.length)
    throw invalid("The schema document conflicts with the database.", result.errors);
  return result;
}

/**
 * The diff's lookups with the stored choice sets the caller may not view left out: to them such
 * a set does not exist, so no gate tells which values it offers (decisions 0064, 0194). A set
 * the document carries answers with the document's choices, as before.
 */
function viewedSets(
  ctx: ReadContext,
  auth: AuthState,
  doc: SchemaDocument,
  base: DiffLookups,
): DiffLookups {
  const judged = new Map<number, Promise<boolean>>();
  const viewable = (id: number) => {
    let seen = judged.get(id);
    if (!seen) {
      seen = viewableRefs(ctx, auth, ...CHOICE_SET, [id]).then((ids) => ids.has(id));
      judged.set(id, seen);
    }
    return seen;
  };
  const choiceSet = async (name: string) => {
    const row = await base.choiceSet(name);
    return row && (await viewable(row.id)) ? row : undefined;
  };
  return {
    ...base,
    choiceSet,
    choices: async (name) => {
      const own = doc.choice_sets?.some((c) => c.name === name);
      return own || (await choiceSet(name)) ? base.choices(name) : null;
    },
  };
}

/**
 * The plan and diffs of a document. Types in `hidden` (those the caller may not view) are
 * previewed as if they did not exist: their rows are not counted and the state hashes say
 * nothing of them, so a preview cannot confirm guesses about a hidden type (decision 0064).
 * Types whose objects the caller may not all view (`withheld`) are gated without counts (0181).
 */
export async function previewSchema(
  ctx: ReadContext,
  body: unknown,
  hidden: ReadonlySet<string>,
  withheld?: (slug: string) => boolean,
  auth?: AuthState,
  mayApply = false,
): Promise<
  SchemaPlan & {
    diffs: TypeDiff[];
    destructive_changes: DestructiveChange[];
    refusals: Refusal[];
    state_hash: string;
  }
> {
  const { document } = await readApplyRequest(body, new URLSearchParams());
  // The state is read once, in one round trip, for both the diff and the plan.
  const slugs = documentSlugs(document);
  const state = await loadDbTypes(ctx.db, ctx.services.objectTypes, slugs, hidden, ctx.services.db);
  const { diffs, choice_set_changes } = await diffOrThrow(
    ctx.db,
    ctx,
    document,
    hidden,
    state,
    undefined,
    undefined,
    withheld,
    auth,
  );
  const plan = await planOf(ctx.db, ctx, document, hidden, state);
  return {
    ...plan,
    diffs,
    destructive_changes: [...diffs.flatMap((d) => d.destructive_changes), ...choice_set_changes],
    refusals: mayApply ? await previewRefusals(ctx, document, state) : [],
    state_hash: plan.from_state_hash,
  };
}

/**
 * The refusals an apply of the document would meet that the diff does not show (decision 0205:
 * the type cap), each as the apply's answer. Told only to a caller who may apply: the cap counts
 * every type, hidden ones too.
 */
async function previewRefusals(
  ctx: ReadContext,
  document: SchemaDocument,
  state: Map<string, DbType>,
): Promise<Refusal[]> {
  const added = document.types.filter((t) => !state.has(t.slug)).length;
  if (!added) return [];
  const removed = new Set(
    (document.removed_types ?? []).map((r) => r.slug).filter((s) => state.has(s)),
  ).size;
  const count = await countTypes(ctx.db);
  return typeLimitRefusals(count, added, removed, ctx.services.config.maxCustomObjectTypes);
}

// ---- references between types -----------------------------------------------------------

const refsOf = (
  fields: { type: string; related_object_type: string | null; related_object_types: string[] }[],
) =>
  fields
    .filter((f) => fieldType(f.type).takes.related)
    .flatMap((f) =>
      [f.related_object_type, ...f.related_object_types].filter((x): x is string => !!x),
    );

const cotSlugOf = (ref: string) =>
  ref.startsWith("custom-objects/") ? ref.slice("custom-objects/".length) : null;

/**
 * Edges slug → referenced slug for the document's types (`named`: their database state) and
 * every other COT in the database (`others`: each COT's references, `loadReferences`).
 */
async function referenceGraph(
  doc: SchemaDocument,
  named: Map<string, DbType>,
  others: Map<string, string[]>,
): Promise<Map<string, Set<string>>> {
  const graph = new Map<string, Set<string>>();
  const add = (from: string, to: string) => {
    if (from !== to) (graph.get(from) ?? graph.set(from, new Set()).get(from)!).add(to);
  };
  const docSlugs = new Set(doc.types.map((t) => t.slug));
  for (const t of doc.types) {
    await yieldWhenDue(); // a type a step (decision 0210)
    for (const ref of refsOf(t.fields.map(canonicalFromEntry))) {
      const target = cotSlugOf(ref);
      if (target) add(t.slug, target);
    }
    // fields the document leaves alone stay in the database and still point somewhere
    const db = named.get(t.slug);
    if (db) {
      const listed = new Set([
        ...t.fields.map((f) => f.id),
        ...(t.removed_fields ?? []).map((r) => r.id),
      ]);
      for (const ref of refsOf([...db.canonical.values()].filter((c) => !listed.has(c.id)))) {
        const target = cotSlugOf(ref);
        if (target) add(t.slug, target);
      }
    }
  }
  for (const [slug, refs] of others) {
    if (docSlugs.has(slug)) continue;
    for (const ref of refs) {
      const target = cotSlugOf(ref);
      if (target) add(slug, target);
    }
  }
  return graph;
}

function findCycle(graph: Map<string, Set<string>>): string[] | null {
  const state = new Map<string, 1 | 2>();
  const stack: string[] = [];
  const visit = (node: string): string[] | null => {
    state.set(node, 1);
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === 1) return [...stack.slice(stack.indexOf(next)), next];
      if (!state.has(next)) {
        const found = visit(next);
        if (found) return found;
      }
    }
    stack.pop();
    state.set(node, 2);
    return null;
  };
  for (const node of [...graph.keys()].sort()) {
    if (!state.has(node)) {
      const found = visit(node);
      if (found) return found;
    }
  }
  return null;
}

/** Document types ordered so that every referenced type comes first. */
export function dependencyOrder(doc: SchemaDocument, graph: Map<string, Set<string>>): TypeEntry[] {
  const bySlug = new Map(doc.types.map((t) => [t.slug, t]));
  const done = new Set<string>();
  const out: TypeEntry[] = [];
  const visit = (slug: string) => {
    if (done.has(slug)) return;
    done.add(slug);
    for (const next of graph.get(slug) ?? []) if (bySlug.has(next)) visit(next);
    out.push(bySlug.get(slug)!);
  };
  for (const t of doc.types) visit(t.slug);
  return out;
}

/**
 * Every type's references without the custom object types the document newly points at that the
 * caller may not view: to them such a type does not exist, so a reference to it is unresolvable
 * as one to an absent type, and no cycle runs through it (decision 0064: a reference to what the
 * caller may not view answers as an unknown one). A target a field of the type already holds
 * may be sent back (an exported document applied again).
 */
async function withoutHiddenTargets(
  ctx: WriteContext,
  doc: SchemaDocument,
  db: Map<string, DbType>,
  all: Map<string, string[]>,
): Promise<Map<string, string[]>> {
  const docSlugs = new Set(doc.types.map((t) => t.slug));
  const wanted = new Set<string>();
  for (const t of doc.types) {
    await yieldWhenDue(); // a type a step (decision 0210)
    const held = db.get(t.slug)?.canonical;
    for (const f of t.fields) {
      const stored = held?.get(f.id);
      const kept = new Set(stored ? refsOf([stored]) : []);
      for (const ref of refsOf([canonicalFromEntry(f)])) {
        const slug = cotSlugOf(ref);
        if (slug !== null && !docSlugs.has(slug) && all.has(slug) && !kept.has(ref))
          wanted.add(slug);
      }
    }
  }
  const viewable = await cotSlugsViewable(ctx, ctx.auth, [...wanted]);
  const hidden = [...wanted].filter((slug) => !viewable.has(slug));
  if (!hidden.length) return all;
  return new Map([...all].filter(([slug]) => !hidden.includes(slug)));
}

async function unresolvable(
  ctx: WriteContext,
  doc: SchemaDocument,
  db: Map<string, DbType>,
  all: ReadonlyMap<string, unknown>,
  sets?: readonly ChoiceSetRow[],
): Promise<string[]> {
  const problems: string[] = [];
  const docSlugs = new Set(doc.types.map((t) => t.slug));
  const names = new Set<string>();
  for (const t of doc.types) {
    await yieldWhenDue(); // a type a step (decision 0210)
    for (const f of t.fields) {
      const c = canonicalFromEntry(f);
      for (const ref of refsOf([c])) {
        const slug = cotSlugOf(ref);
        if (slug !== null) {
          if (!docSlugs.has(slug) && !all.has(slug))
            problems.push(
              `${t.slug}.${f.name}: related type "${ref}" is neither in the database nor in the document`,
            );
          continue;
        }
        const [app, model] = ref.split("/") as [string, string];
        const ot = await ctx.services.objectTypes.byLabel(app, model, ctx.db);
        const info = ot ? await ctx.services.models.get(app, model, ctx) : null;
        if (!ot || !info || !LINKABLE_APPS.includes(app))
          problems.push(
            `${t.slug}.${f.name}: related type "${ref}" does not exist or cannot be linked`,
          );
      }
      if (c.choice_set) names.add(c.choice_set);
    }
  }
  if (names.size) {
    const rows =
      sets ??
      (await ctx.db
        .select({ id: choiceSets.id, name: choiceSets.name })
        .from(choiceSets)
        .where(inArray(choiceSets.name, [...names])));
    const found = new Set(rows.map((r) => r.name));
    const ownSets = new Set((doc.choice_sets ?? []).map((c) => c.name));
    const hidden = await hiddenChoiceSets(ctx, doc, db, rows, ownSets);
    for (const t of doc.types)
      for (const f of t.fields)
        if (
          f.choice_set &&
          !ownSets.has(f.choice_set) &&
          (!found.has(f.choice_set) || hidden.has(`${t.slug}.${f.id}`))
        )
          problems.push(`${t.slug}.${f.name}: choice set "${f.choice_set}" does not exist`);
  }
  return problems;
}

/**
 * The document's fields (`<slug>.<schema id>`) that newly name a stored choice set the caller may
 * not view: to them it does not exist (decisions 0064, 0194). A field holding the set already
 * may name it again (an exported document applied again); a set the document itself defines is
 * judged by the choice set permissions instead.
 */
async function hiddenChoiceSets(
  ctx: WriteContext,
  doc: SchemaDocument,
  db: Map<string, DbType>,
  rows: ReadonlyArray<{ id: number; name: string }>,
  ownSets: ReadonlySet<string>,
): Promise<Set<string>> {
  const idOf = new Map(rows.map((r) => [r.name, r.id]));
  const wanted = new Map<string, number>();
  for (const t of doc.types) {
    const held = db.get(t.slug)?.canonical;
    for (const f of t.fields) {
      const id = f.choice_set && !ownSets.has(f.choice_set) ? idOf.get(f.choice_set) : undefined;
      if (id !== undefined && held?.get(f.id)?.choice_set !== f.choice_set)
        wanted.set(`${t.slug}.${f.id}`, id);
    }
  }
  if (!wanted.size) return new Set();
  const viewable = await viewableRefs(ctx, ctx.auth, ...CHOICE_SET, [...new Set(wanted.values())]);
  return new Set([...wanted].filter(([, id]) => !viewable.has(id)).map(([field]) => field));
}

/** Every choice set a document names (its own and its fields'), for a read phase. */
export function choiceSetsQuery(db: Executor, doc: SchemaDocument) {
  const names = [
    ...new Set([
      ...(doc.choice_sets ?? []).map((c) => c.name),
      ...doc.types.flatMap((t) => t.fields.map((f) => f.choice_set)),
    ]),
  ].filter((n): n is string => typeof n === "string");
  return db
    .select()
    .from(choiceSets)
    .where(names.length ? inArray(choiceSets.name, names) : sql`0`);
}

// ---- applying ------------------------------------------------------------------------------

/** A document field as REST-style input for `validateField` (declarative: omitted = default). */
export function fieldInput(entry: TypeEntry["fields"][number]): Record<string, unknown> {
  const { id: _id, ...c } = canonicalFromEntry(entry);
  const dotted = (ref: string) => ref.replace("/", ".");
  return {
    ...c,
    related_object_type: c.related_object_type ? dotted(c.related_object_type) : null,
    related_object_types: c.related_object_types.map(dotted),
  };
}

export function cotDraft(t: TypeEntry, tombstones: Tombstone[]): CotDraft {
  const removed = new Map<number, Tombstone>();
  for (const r of [...tombstones, ...(t.removed_fields ?? [])])
    removed.set(r.id, { ...removed.get(r.id), ...r });
  const schemaDocument: Record<string, unknown> = { ...t };
  if (removed.size)
    schemaDocument.removed_fields = [...removed.values()].sort((a, b) => a.id - b.id);
  const attrs = cotAttrsFromEntry(t);
  return {
    name: attrs.name,
    slug: t.slug,
    verboseName: attrs.verbose_name,
    verboseNamePlural: attrs.verbose_name_plural,
    version: attrs.version,
    groupName: attrs.group_name,
    description: attrs.description,
    schemaDocument,
  };
}

/** Re-raises a definition error with the document path of the field it concerns. */
export async function atPath<T>(path: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ValidationError && !Array.isArray(e.fields)) {
      throw invalid(
        "The schema document conflicts with the database.",
        Object.entries(e.fields).map(([k, msgs]) => ({
          path: `${path}.${k}`,
          message: Array.isArray(msgs) ? msgs.join(" ") : String(msgs),
        })),
      );
    }
    throw e;
  }
}

const fieldsOf = (db: Executor, cotId: number) =>
  db
    .select()
    .from(customObjectTypeFields)
    .where(eq(customObjectTypeFields.customObjectTypeId, cotId)) as Promise<FieldRow[]>;

/**
 * Applies one type's changes. New types' tables and existing types' new columns are not created
 * here but pushed to `deferred`, which the caller creates after every type's records: DDL drops
 * the connection's prepared statements, so interleaving it with the records re-prepared every
 * statement for each type, and every type's new columns then take one schema edit (issue 30).
 */
async function applyType(
  ctx: WriteContext,
  t: TypeEntry,
  ti: number,
  diff: TypeDiff,
  existing: DbType | undefined,
  request: ApplyRequest,
  deferred: Deferred,
) {
  const at = `$.types[${ti}]`;
  const { cot, isNew } = await upsertCot(ctx, t, at, diff, existing);
  const step: TypeStep = {
    ctx,
    t,
    at,
    cot,
    indexOf: (schemaId) => t.fields.findIndex((f) => f.id === schemaId),
  };
  // The type's field rows, read once and kept current below (a new type has none yet).
  let rows: FieldRow[] = isNew ? [] : await fieldsOf(ctx.db, cot.id);

  const rebuildTogether = !isNew && (await dropTogetherFirst(step, existing, diff));
  const rebuildConditional =
    !isNew && (await dropConditionalFirst(ctx.db, cot, t, diff.field_changes));
  const removes = diff.field_changes.filter((c) => c.op === "remove");
  for (const change of removes) {
    const row = rows.find((f) => f.schemaId === change.schema_id);
    if (!row) continue;
    if (request.purge) await removeField(ctx, cot, row);
    else await trashField(ctx, cot, row, ctx.services.config.schemaTrashDays);
  }
  const alters = diff.field_changes.filter((c) => c.op === "alter");
  if (removes.length) rows = await fieldsOf(ctx.db, cot.id);
  await freeRenamedNames(step, rows, alters);
  await retargetRelations(step, rows, alters, diff);
  await alterFields(step, alters, request.allowDestructive);
  if (alters.length) rows = await fieldsOf(ctx.db, cot.id);

  const drafts = await draftAddedFields(step, diff, rows);
  const added = await addFields(ctx, cot, drafts, {
    storage: !isNew,
    atField: (i, fn) => atPath(`${at}.fields[${step.indexOf(drafts[i]!.schemaId)}]`, fn),
    // Every type's new columns go in one schema edit after the loop (issue 30).
    defer: (pending) => deferred.storage.push(pending),
  });
  // A new type's table is created once, with every column inline.
  if (isNew) deferred.tables.push(() => createCotTable(ctx.db, cot.id, added));
  // Keys read columns: after a new table or the deferred new columns, or now when neither.
  const later = isNew || drafts.length > 0;
  await rebuildKeys(step, { isNew, later, rebuildTogether, rebuildConditional }, deferred);
}

/** What the steps of one type's apply share. */
interface TypeStep {
  ctx: WriteContext;
  t: TypeEntry;
  /** The type's path in the document, for errors. */
  at: string;
  cot: CotRow;
  /** A field's index in the document by its schema id. */
  indexOf: (schemaId: number) => number;
}

type FieldChanges = TypeDiff["field_changes"];

/** Creates the type (without its table) or updates its record, and answers its current row. */
async function upsertCot(
  ctx: WriteContext,
  t: TypeEntry,
  at: string,
  diff: TypeDiff,
  existing: DbType | undefined,
): Promise<{ cot: CotRow; isNew: boolean }> {
  const cot = existing?.cot;
  const draft = cotDraft(t, existing?.tombstones ?? []);
  if (!cot)
    return {
      cot: await atPath(at, () => createCot(ctx, draft, { table: false, capped: false })),
      isNew: true,
    };
  if (diff.has_changes || !sameDoc(cot.schemaDocument, draft.schemaDocument))
    await atPath(at, () => updateCot(ctx, cot, draft));
  const [fresh] = await ctx.db
    .select()
    .from(customObjectTypes)
    .where(eq(customObjectTypes.id, cot.id));
  return { cot: fresh!, isNew: false };
}

/**
 * Compound keys are dropped before any of their columns moves (SQLite refuses to drop an
 * indexed column) and rebuilt at the end: when they change, or a column of one is retyped.
 * Answers whether they were dropped.
 */
async function dropTogetherFirst(
  { ctx, t, cot }: TypeStep,
  existing: DbType | undefined,
  diff: TypeDiff,
): Promise<boolean> {
  const haveTogether = normalizeTogether(existing?.cot.uniqueTogether);
  const retyped = new Set(
    diff.field_changes
      .filter((c) => c.op === "alter" && c.changed_attrs?.type)
      .map((c) => c.db_name),
  );
  const rebuild =
    !sameValue(normalizeTogether(plainTogether(t.unique_together)), haveTogether) ||
    haveTogether.some((set) => set.some((n) => retyped.has(n)));
  if (rebuild) await dropUniqueTogether(ctx.db, cot.id);
  return rebuild;
}

/**
 * When a rename lands on a name another field still holds (a swap), every renamed field
 * first moves to a free name, so the final names can be taken in any order.
 */
async function freeRenamedNames({ ctx, cot }: TypeStep, rows: FieldRow[], alters: FieldChanges) {
  const renames = alters.filter((c) => c.changed_attrs?.name);
  if (
    !renames.some((c) =>
      rows.some((r) => r.name === String(c.schema_def.name) && r.schemaId !== c.schema_id),
    )
  )
    return;
  for (const change of renames) {
    const current = await fieldsOf(ctx.db, cot.id);
    const row = current.find((f) => f.schemaId === change.schema_id)!;
    let temp = `tmp${row.schemaId}`;
    for (let i = 0; current.some((r) => r.name === temp); i++) temp = `tmp${row.schemaId}x${i}`;
    await alterField(ctx, cot, row, { ...row, name: temp }, false);
  }
}

/**
 * A related type changed (REST refuses that; a document may): links to the old type are
 * cleared when there were some (gated, so allowed), then the field points at the new type.
 */
async function retargetRelations(
  { ctx, t, cot, indexOf }: TypeStep,
  rows: FieldRow[],
  alters: FieldChanges,
  diff: TypeDiff,
) {
  const idOf = async (ref: string) => {
    const [app, model] = ref.split("/") as [string, string];
    return (
      (
        await ctx.services.objectTypes.byLabel(
          app === "custom-objects" ? "custom_objects" : app,
          model,
          ctx.db,
        )
      )?.id ?? null
    );
  };
  for (const change of alters) {
    if (!change.changed_attrs?.related_object_type && !change.changed_attrs?.related_object_types)
      continue;
    const row = rows.find((f) => f.schemaId === change.schema_id)!;
    const want = canonicalFromEntry(t.fields[indexOf(change.schema_id)]!);
    if (want.is_polymorphic !== row.isPolymorphic) continue; // refused by the field's validation
    const keep = (await Promise.all(want.related_object_types.map(idOf))).filter(
      (x): x is number => x !== null,
    );
    if (
      diff.destructive_changes.some(
        (g) => g.reason === "link_target_changed" && g.field === change.db_name,
      )
    )
      await clearLinksOutside(ctx.db, cot.id, row, want.is_polymorphic ? keep : null);
    const target = want.related_object_type ? await idOf(want.related_object_type) : null;
    await ctx.db
      .update(customObjectTypeFields)
      .set(want.is_polymorphic ? { relatedObjectTypeIds: keep } : { relatedObjectTypeId: target })
      .where(eq(customObjectTypeFields.id, row.id));
  }
}

/** Alters each changed field, validated against the type's current fields. */
async function alterFields(step: TypeStep, alters: FieldChanges, allowDestructive: boolean) {
  const { ctx, t, at, cot, indexOf } = step;
  // Primary flags are switched off before another field takes one.
  alters.sort(
    (a, b) =>
      Number(a.changed_attrs?.primary?.[1] === true) -
      Number(b.changed_attrs?.primary?.[1] === true),
  );
  for (const change of alters) {
    const fi = indexOf(change.schema_id);
    const current = await fieldsOf(ctx.db, cot.id);
    const row = current.find((f) => f.schemaId === change.schema_id)!;
    await atPath(`${at}.fields[${fi}]`, async () => {
      const fieldDraft = await validateField(ctx, fieldInput(t.fields[fi]!), row, current);
      await alterField(ctx, cot, row, fieldDraft, allowDestructive);
    });
  }
}

/** Added fields: each validated against the fields before it, to be inserted all at once. */
async function draftAddedFields(
  { ctx, t, at, cot, indexOf }: TypeStep,
  diff: TypeDiff,
  rows: FieldRow[],
) {
  const adds = diff.field_changes.filter((c) => c.op === "add");
  const siblings = [...rows];
  const drafts: Array<{ draft: FieldDraft; schemaId: number }> = [];
  for (const change of adds) {
    // a hundred drafts are ~6 ms of JavaScript and no statement: a thousand would stall the loop
    await yieldWhenDue();
    const fi = indexOf(change.schema_id);
    const fieldDraft = await atPath(`${at}.fields[${fi}]`, () =>
      validateField(ctx, fieldInput(t.fields[fi]!), null, siblings),
    );
    drafts.push({ draft: fieldDraft, schemaId: change.schema_id });
    // stands in for the row until it is inserted (only names, columns and flags are compared)
    siblings.push({
      ...fieldDraft,
      id: -drafts.length,
      customObjectTypeId: cot.id,
      schemaId: change.schema_id,
      created: "",
      lastUpdated: "",
    } as FieldRow);
  }
  return drafts;
}

/** (Re)builds compound keys, partial keys and checks, now or (`later`) once the columns exist. */
async function rebuildKeys(
  { ctx, t, at, cot }: TypeStep,
  when: { isNew: boolean; later: boolean; rebuildTogether: boolean; rebuildConditional: boolean },
  deferred: Deferred,
) {
  const want = normalizeTogether(plainTogether(t.unique_together));
  if (when.rebuildTogether || (when.isNew && want.length)) {
    const build = async () => {
      const fields = await fieldsOf(ctx.db, cot.id);
      await ctx.db
        .update(customObjectTypes)
        .set({ uniqueTogether: want })
        .where(eq(customObjectTypes.id, cot.id));
      await atPath(at, () =>
        buildUniqueTogether(
          ctx.db,
          cot.id,
          want.map((set) => set.map((n) => fields.find((f) => f.name === n)!)),
        ),
      );
    };
    if (when.later) deferred.tables.push(build);
    else await build();
  }
  // Partial keys and checks (decision 0087), once the columns they read exist.
  const wantConditional = wantedConditional(t);
  if (
    when.rebuildConditional ||
    (when.isNew && (wantConditional.unique.length || wantConditional.checks.length))
  ) {
    const build = () => atPath(at, () => applyConditional(ctx, cot.id, t));
    if (when.later) deferred.tables.push(build);
    else await build();
  }
}

/** DDL an apply runs after every type's records: new columns first, then tables and keys. */
interface Deferred {
  storage: PendingStorage[];
  tables: Array<() => Promise<void>>;
}

const sameDoc = (a: unknown, b: unknown) => stableJson(a ?? null) === stableJson(b ?? null);

/**
 * Every refusal an apply makes before it writes, in its order: stale plan (409), destructive
 * guard (409), cycles (400), unresolvable references (400). `state`: the document's types;
 * `references`: every type's (`loadReferences`), read here when not given; `sets`: the choice
 * sets the document names (`choiceSetsQuery`), read here when not given; `counted`: what
 * removals take, when read ahead.
 */
export async function checkApply(
  ctx: WriteContext,
  request: ApplyRequest,
  state: Map<string, DbType>,
  references?: Map<string, string[]>,
  sets?: readonly ChoiceSetRow[],
  counted?: PrefetchedCounts,
) {
  const { document, allowDestructive, expectedStateHash, planId } = request;
  // The plan is worked out only when the request binds to one (hashing a large document costs).
  const plan =
    planId || expectedStateHash ? await planOf(ctx.db, ctx, document, undefined, state) : null;
  if (plan && planId) {
    if (planId.slice(0, 32) !== plan.plan_id.slice(0, 32)) {
      throw ApiError.detail(
        409,
        "This document is not the one the plan was previewed for; preview it and apply its plan_id.",
        "plan_mismatch",
        { plan_id: planId },
      );
    }
    if (planId !== plan.plan_id) {
      throw ApiError.detail(
        409,
        "The database changed since this plan was previewed; nothing was changed. Preview again and re-apply.",
        "stale_plan",
        { plan_id: planId, state_hash: plan.from_state_hash },
      );
    }
  }
  if (plan && expectedStateHash && plan.from_state_hash !== expectedStateHash) {
    throw ApiError.detail(
      409,
      "The database changed since this plan was previewed; preview again and re-apply.",
      "stale_plan",
      { state_hash: plan.from_state_hash },
    );
  }
  const { diffs, db, choice_set_changes } = await diffOrThrow(
    ctx.db,
    ctx,
    document,
    request.hidden,
    state,
    sets,
    counted,
    countsWithheld(ctx.auth, ctx.services.config.loginRequired),
    ctx.auth,
  );
  const gated = [...diffs.flatMap((d) => d.destructive_changes), ...choice_set_changes];
  if (gated.length && !allowDestructive) {
    throw ApiError.detail(
      409,
      `The document contains changes that lose or reject data (${gated.map((g) => `${g.slug}.${g.field ?? "*"}: ${g.reason}, ${g.rows ?? "some"} row(s)`).join("; ")}); repeat with allow_destructive=true to apply them.`,
      "destructive_changes",
      {
        destructive_slugs: [...new Set(gated.map((g) => g.slug))],
        destructive_changes: gated,
      },
    );
  }
  const all = await withoutHiddenTargets(
    ctx,
    document,
    db,
    references ?? (await loadReferences(ctx.db, ctx.services.objectTypes)),
  );
  ctx.scratch.set(REFERENCES_CHECKED, true);
  const graph = await referenceGraph(document, db, all);
  const cycle = findCycle(graph);
  if (cycle) throw await circularDependency(ctx, cycle);
  const problems = await unresolvable(ctx, document, db, all, sets);
  if (problems.length)
    throw ApiError.detail(
      400,
      `Unresolvable references: ${problems.join("; ")}.`,
      "unresolvable_reference",
      { references: problems },
    );
  // last, where a new slug outside the caller's add constraints is refused (after the writes)
  // a clash the writes would meet with a type the caller may view, then the hidden ones (0137)
  refuseTakenNames(document, request.nameHolders);
  refuseHidden(document, state, request.hidden, request.nameHolders);
  return { plan, diffs, db, graph };
}

/** Runs inside the caller's write transaction; throws ApiError for every refusal. */
export async function applySchema(
  ctx: WriteContext,
  request: ApplyRequest,
): Promise<{ applied: true; diffs: TypeDiff[]; trash: number[] } & Partial<SchemaPlan>> {
  const { document } = request;
  // The types' state, read once for the plan (when the request binds to one) and the diff.
  const state = withoutHidden(
    await loadDbTypes(ctx.db, ctx.services.objectTypes, documentSlugs(document)),
    request.hidden,
  );
  const { plan, diffs, db, graph } = await checkApply(ctx, request, state);
  const adds = await refuseApplyPastLimit(ctx, document, db);
  await upsertChoiceSets(ctx, document);
  const deferred: Deferred = { storage: [], tables: [] };
  for (const t of dependencyOrder(document, graph)) {
    const ti = document.types.indexOf(t);
    await applyType(ctx, t, ti, diffs[ti]!, db.get(t.slug), request, deferred);
  }
  await completeStorage(ctx, deferred.storage);
  for (const create of deferred.tables) await create();
  // Whole types last: the document's own types may have dropped the fields pointing at them.
  const going = (document.removed_types ?? [])
    .map((r) => db.get(r.slug))
    .filter((x): x is DbType => !!x);
  const alsoGoing = new Set(going.map((g) => g.cot.id));
  const trash: number[] = [];
  for (const g of going) {
    const entry = await removeType(ctx, g.cot, {
      days: ctx.services.config.schemaTrashDays,
      purge: request.purge,
      alsoGoing,
    });
    if (entry !== null) trash.push(entry);
  }
  // proven on what the transaction leaves, its removals counted as the staged path counts them
  if (adds) await withinTypeLimit(ctx.db, ctx.services.config.maxCustomObjectTypes);
  return { applied: true, diffs, ...(plan ?? {}), trash };
}

/**
 * The cap (decision 0205) before the transaction writes: the types there are, with the document's
 * new ones and without its removed ones. Answers whether it adds any.
 */
async function refuseApplyPastLimit(
  ctx: WriteContext,
  document: SchemaDocument,
  db: Map<string, DbType>,
): Promise<boolean> {
  const added = document.types.filter((t) => !db.has(t.slug)).length;
  if (!added) return false;
  const removed = new Set(
    (document.removed_types ?? []).map((r) => r.slug).filter((s) => db.has(s)),
  );
  refuseTypesPast(
    await countTypes(ctx.db),
    added,
    removed.size,
    ctx.services.config.maxCustomObjectTypes,
  );
  return true;
}

/** Slugs an export reads by name; more are read as every type's rows, in pages (decision 0217). */
const EXPORT_BY_NAME = 250;

/** The database as schema documents; re-applying them changes nothing. */
export async function exportSchema(
  ctx: ReadContext,
  slugs: string[] | null,
): Promise<SchemaDocument> {
  const state = await exportState(ctx, slugs);
  refuseMissing(state, slugs);
  const setNames = choiceSetNames(state);
  const sets = setNames.length
    ? await ctx.db.select().from(choiceSets).where(inArray(choiceSets.name, setNames))
    : [];
  return await exportDocument(state, slugs, sets, slugs ? [] : await listTrash(ctx.db));
}

/**
 * The state of the types `slugs` names (all when null). A long list (every type a caller may
 * view but a few) is read as every type's rows, in pages, and kept to it: the one statement
 * by name read 1,000 rows at once (decision 0217). The export orders its types by id either way.
 */
async function exportState(ctx: ReadContext, slugs: string[] | null) {
  if (slugs === null || slugs.length <= EXPORT_BY_NAME)
    return loadDbTypes(ctx.db, ctx.services.objectTypes, slugs);
  const wanted = new Set(slugs);
  const every = await loadDbTypes(ctx.db, ctx.services.objectTypes, null);
  return new Map([...every].filter(([slug]) => wanted.has(slug)));
}

/** 404 for a slug asked for that names no type. */
export function refuseMissing(state: Map<string, DbType>, slugs: string[] | null) {
  const missing = (slugs ?? []).filter((s) => !state.has(s));
  if (missing.length)
    throw ApiError.detail(
      404,
      `No custom object type with slug ${missing.map((s) => JSON.stringify(s)).join(", ")}.`,
      "not_found",
    );
}

/** The names of the choice sets the types' fields use, sorted. */
const choiceSetNames = (state: Map<string, DbType>) =>
  [
    ...new Set(
      [...state.values()].flatMap((s) =>
        [...s.canonical.values()].map((c) => c.choice_set).filter((x): x is string => !!x),
      ),
    ),
  ].sort();

/** A type as a document entry: its attributes not at their defaults, fields, constraints. */
function typeEntry(s: DbType): Record<string, unknown> {
  const entry: Record<string, unknown> = { name: s.attrs.name, slug: s.cot.slug };
  for (const key of Object.keys(COT_ATTR_DEFAULTS) as (keyof typeof COT_ATTR_DEFAULTS)[])
    if (s.attrs[key]) entry[key] = s.attrs[key];
  entry.fields = [...s.canonical.values()].sort((a, b) => a.id - b.id).map(entryFromCanonical);
  if (s.tombstones.length) entry.removed_fields = s.tombstones;
  const together = mergedTogether(normalizeTogether(s.cot.uniqueTogether), conditionalOf(s.cot));
  if (together.length) entry.unique_together = together;
  if (conditionalOf(s.cot).checks.length) entry.checks = conditionalOf(s.cot).checks;
  return entry;
}

/**
 * The document of `state` (the types `slugs` names, or every type): its choice sets those of
 * `sets` its fields use, and (for every type) the types `trash` holds as removed. Written a type
 * a step with turns between (decision 0217): 1,000 types' entries in one go held the loop.
 */
export async function exportDocument(
  state: Map<string, DbType>,
  slugs: string[] | null,
  sets: Array<typeof choiceSets.$inferSelect>,
  trash: TrashRow[],
): Promise<SchemaDocument> {
  const types: Record<string, unknown>[] = [];
  for (const s of [...state.values()].sort((a, b) => a.cot.id - b.cot.id)) {
    await yieldWhenDue();
    types.push(typeEntry(s));
  }
  const out: Record<string, unknown> = { schema_version: "1", types };
  // The choice sets the exported fields use, so the document stands alone.
  const setNames = new Set(choiceSetNames(state));
  if (setNames.size)
    out.choice_sets = sets
      .filter((r) => setNames.has(r.name))
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((r) => ({
        name: r.name,
        ...(r.description ? { description: r.description } : {}),
        extra_choices: r.extraChoices,
        ...(r.orderAlphabetically ? { order_alphabetically: true } : {}),
      }));
  // Types in the trash stay removed when the export is applied elsewhere.
  if (!slugs) {
    const gone = [
      ...new Set(trash.filter((r) => r.kind === "type" && !state.has(r.slug)).map((r) => r.slug)),
    ].sort();
    if (gone.length) out.removed_types = gone.map((slug) => ({ slug }));
  }
  return out as unknown as SchemaDocument;
}

type ChoiceSetEntry = NonNullable<SchemaDocument["choice_sets"]>[number];

/**
 * The row a document's choice set asks for, once the caller is known to hold the right to add it
 * (`exists` false) or change it; shared by the direct and the staged apply. A document matches
 * sets by name, past any constraint: only a caller whose rights are whole carries them (an
 * existing set: view and change unconstrained; a new one: add) — anyone else is refused as one
 * without the permission, whether the set is hidden, visible or new (decision 0194), and edits
 * sets through their endpoints, where constraints are judged row by row.
 */
export function choiceSetValues(
  ctx: Pick<WriteContext, "auth" | "services">,
  set: ChoiceSetEntry,
  exists: boolean,
) {
  const action = exists ? "change" : "add";
  const whole = (a: "view" | "add" | "change") =>
    restrictionFor(ctx.auth, ctx.services.config.loginRequired, a, ...CHOICE_SET).kind === "all";
  if (!whole(action) || (exists && !whole("view")))
    throw forbidden(
      `You do not have permission to ${action} the choice set "${set.name}" the document carries.`,
    );
  return {
    name: set.name,
    description: set.description ?? "",
    extraChoices: set.extra_choices as [string, string][],
    orderAlphabetically: set.order_alphabetically ?? false,
  };
}

/** Creates or updates the document's choice sets (same transaction); unchanged ones are left alone. */
async function upsertChoiceSets(ctx: WriteContext, document: SchemaDocument) {
  const sets = document.choice_sets ?? [];
  if (!sets.length) return;
  for (const set of sets) {
    const [current] = await ctx.db.select().from(choiceSets).where(eq(choiceSets.name, set.name));
    const values = choiceSetValues(ctx, set, current !== undefined);
    if (!current) await ctx.db.insert(choiceSets).values(values);
    else if (
      !sameValue(
        { d: current.description, c: current.extraChoices, o: current.orderAlphabetically },
        { d: values.description, c: values.extraChoices, o: values.orderAlphabetically },
      )
    ) {
      await ctx.db
        .update(choiceSets)
        .set({ ...values, lastUpdated: new Date().toISOString() })
        .where(eq(choiceSets.id, current.id));
    }
  }
}
