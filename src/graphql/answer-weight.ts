/**
 * What a query's answer holds, weighed while it resolves (decision 0190): the objects it places
 * (page rows, related objects, tags) against `maxObjects`, and the bytes of the related objects
 * against the response budget. Relation lists nest, so their size is known only as they load.
 */
import {
  GraphQLError,
  Kind,
  type FieldNode,
  type GraphQLResolveInfo,
  type SelectionSetNode,
} from "graphql";
import { approxBytes } from "../core/approx-bytes";
import { responseTooLarge } from "../core/rest/budget";
import type { ApiRecord } from "../core/rest/resource";
import { yieldWhenDue } from "../turns";
import { GRAPHQL_LIMITS } from "./limits";
import type { GraphQLContext } from "./loaders";

/** Objects one answer has placed so far; `over` once it passed the limit. */
export interface AnswerWeight {
  objects: number;
  over: boolean;
}

export const newWeight = (): AnswerWeight => ({ objects: 0, over: false });

/** The message of an answer past the object limit (the §4 `detail` and the GraphQL error). */
export const tooManyObjectsMessage = (limit: number) =>
  `The answer would hold more than ${limit} objects: ask for smaller pages (pagination.limit) or fewer nested relation lists.`;

/**
 * Counts `n` more objects in the answer; the one that passes the limit throws (the route answers
 * 400 with no data), and false after it: the rest resolve to nothing, no error each. Gives the
 * event loop its turns: a large answer's relations resolve as a long run of settled promises
 * that would otherwise hold it.
 */
export async function placeObjects(g: GraphQLContext, n: number): Promise<boolean> {
  const weight = g.weight;
  if (weight.over) return false;
  weight.objects += n;
  if (weight.objects > GRAPHQL_LIMITS.maxObjects) {
    weight.over = true;
    throw stopped();
  }
  await yieldWhenDue();
  return true;
}

const stopped = () =>
  new GraphQLError(tooManyObjectsMessage(GRAPHQL_LIMITS.maxObjects), {
    extensions: { code: "TOO_MANY_OBJECTS", limit: GRAPHQL_LIMITS.maxObjects },
  });

// the names a field's selection asks of each object, once per selection
const selections = new WeakMap<readonly FieldNode[], ReadonlySet<string>>();

/** The field names `info`'s selection asks of the objects it resolves, fragments followed. */
function selectedNames(info: GraphQLResolveInfo): ReadonlySet<string> {
  let names = selections.get(info.fieldNodes);
  if (!names) {
    const out = new Set<string>();
    const seen = new Set<string>();
    const walk = (set: SelectionSetNode | undefined) => {
      for (const sel of set?.selections ?? []) {
        if (sel.kind === Kind.FIELD) out.add(sel.name.value);
        else if (sel.kind === Kind.INLINE_FRAGMENT) walk(sel.selectionSet);
        else if (!seen.has(sel.name.value)) {
          seen.add(sel.name.value);
          walk(info.fragments[sel.name.value]?.selectionSet);
        }
      }
    };
    for (const node of info.fieldNodes) walk(node.selectionSet);
    selections.set(info.fieldNodes, (names = out));
  }
  return names;
}

// the bytes of a record's values, once per record object and key (loaders share the objects)
const bytesOf = new WeakMap<object, Map<string, number>>();

/**
 * Charges related `records` to the response budget, each as often as the answer repeats it, by
 * the values the selection asks of them (a page's rows were charged before they were read); a
 * relation's nested objects are weighed where they are placed. Throws `response_too_large`.
 */
export function chargeRelated(
  g: GraphQLContext,
  info: GraphQLResolveInfo,
  records: ReadonlyArray<ApiRecord | null>,
  relationKeys: (rec: ApiRecord) => ReadonlySet<string>,
): void {
  const budget = g.ctx.budget;
  if (!budget) return;
  const names = selectedNames(info);
  for (const rec of records) {
    if (!rec) continue;
    let known = bytesOf.get(rec);
    if (!known) bytesOf.set(rec, (known = new Map()));
    const skip = relationKeys(rec);
    for (const name of names) {
      if (skip.has(name) || !Object.hasOwn(rec, name)) continue;
      let bytes = known.get(name);
      if (bytes === undefined) known.set(name, (bytes = approxBytes(rec[name], budget.limit)));
      budget.used += name.length + bytes;
    }
  }
  if (budget.used > budget.limit) throw responseTooLarge(budget.limit);
}
