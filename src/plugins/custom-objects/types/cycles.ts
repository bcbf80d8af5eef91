/**
 * Circular references between custom object types (§5.1: length ≥ 2; a self-reference is
 * fine), for the REST field API: a new object/multiobject field must not close a cycle that
 * schema apply would refuse. Answers as apply does: 400 `circular_dependency` with the cycle.
 */
import { ApiError } from "../../../core/errors";
import type { WriteContext } from "../../../core/rest/resource";
import { fieldType } from "../field-types";
import type { FieldDraft } from "./definitions";
import type { CotRow } from "../objects/models";
import { graphCotsQuery, graphFieldsQuery, type ReferenceGraph } from "./field-reads";
import { cotSlugsViewable } from "../schema/access";

/** Stands in a cycle's answer for a run of types the caller may not view (decision 0064). */
const HIDDEN_IN_CYCLE = "…";

/** A cycle through `start` in `graph` (slug → referenced slugs), as a path, or null. */
function cycleThrough(graph: Map<string, Set<string>>, start: string): string[] | null {
  const path: string[] = [];
  const seen = new Set<string>();
  const visit = (node: string): string[] | null => {
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      if (next === node) continue;
      if (next === start) return [...path, start];
      if (!seen.has(next)) {
        seen.add(next);
        const found = visit(next);
        if (found) return found;
      }
    }
    path.pop();
    return null;
  };
  return visit(start);
}

/** The object types a field points at. */
const targetsOf = (draft: FieldDraft) =>
  draft.isPolymorphic
    ? draft.relatedObjectTypeIds
    : draft.relatedObjectTypeId != null
      ? [draft.relatedObjectTypeId]
      : [];

/**
 * Refuses a new field of `cot` whose targets lead back to `cot` through other types; `graph`, the
 * types and references the write's read phase read (`readAhead`), else they are read here.
 */
export async function refuseCycle(
  ctx: WriteContext,
  cot: CotRow,
  draft: FieldDraft,
  read?: ReferenceGraph,
): Promise<void> {
  if (!fieldType(draft.type).takes.related) return;
  const targets = targetsOf(draft);
  const cots = read?.cots ?? (await graphCotsQuery(ctx.db));
  const slugOfType = new Map(
    cots.filter((c) => c.objectTypeId != null).map((c) => [c.objectTypeId!, c.slug]),
  );
  if (!targets.some((id) => slugOfType.has(id) && slugOfType.get(id) !== cot.slug)) return;
  const slugOfCot = new Map(cots.map((c) => [c.id, c.slug]));
  const graph = new Map<string, Set<string>>();
  const add = (from: string | undefined, typeId: number | null) => {
    const to = typeId == null ? undefined : slugOfType.get(typeId);
    if (from && to) (graph.get(from) ?? graph.set(from, new Set()).get(from)!).add(to);
  };
  const fields = read?.fields ?? (await graphFieldsQuery(ctx.db));
  for (const f of fields) {
    const from = slugOfCot.get(f.cotId);
    add(from, f.one);
    for (const id of f.many ?? []) add(from, id);
  }
  for (const id of targets) add(cot.slug, id);
  const found = cycleThrough(graph, cot.slug);
  if (found) throw await circularDependency(ctx, found);
}

/** The 400 refusing `cycle` (slugs, its first again last), as the caller may be told it. */
export async function circularDependency(ctx: WriteContext, found: string[]): Promise<ApiError> {
  const cycle = await cycleAsViewed(ctx, found);
  return ApiError.detail(
    400,
    `Circular dependency between custom object types: ${cycle.join(" → ")}.`,
    "circular_dependency",
    { cycle },
  );
}

/**
 * `cycle` as the caller may be told it: each run of types they may not view (reached through
 * fields of other hidden types) one `HIDDEN_IN_CYCLE`, so neither their slugs nor their number
 * show. The refusal stays: the cycle is there whoever looks.
 */
async function cycleAsViewed(ctx: WriteContext, cycle: string[]): Promise<string[]> {
  const viewable = await cotSlugsViewable(ctx, ctx.auth, [...new Set(cycle)]);
  const out: string[] = [];
  for (const slug of cycle) {
    const shown = viewable.has(slug) ? slug : HIDDEN_IN_CYCLE;
    if (shown !== HIDDEN_IN_CYCLE || out.at(-1) !== HIDDEN_IN_CYCLE) out.push(shown);
  }
  return out;
}

/** A list's field, once made, in the graph its later items are checked against (0142). */
export function addToGraph(graph: ReferenceGraph | undefined, cotId: number, draft: FieldDraft) {
  if (!graph || !fieldType(draft.type).takes.related) return;
  graph.fields.push({ cotId, one: null, many: targetsOf(draft) });
}
