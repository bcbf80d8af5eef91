/**
 * GraphQL cost weighted by page size (decision 0068): every `*_list` field costs the rows its
 * page may return (`pagination.limit`, variables resolved, default the maximum page), times the
 * pages it sits inside. A query whose rows pass the limit is refused before anything runs;
 * graphql-armor's cost limit counts fields, not rows, so 30 aliases of a 1,000-row page passed it.
 */
import {
  GraphQLError,
  Kind,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from "graphql";
import type { Plugin } from "graphql-yoga";
import { MAX_LIMIT } from "../core/rest/query";

type Variables = Record<string, unknown> | null | undefined;

/** A literal or variable integer, else null. */
function intOf(node: ValueNode | undefined, variables: Variables): number | null {
  if (!node) return null;
  if (node.kind === Kind.INT) return Number(node.value);
  if (node.kind === Kind.VARIABLE) {
    const v = variables?.[node.name.value];
    return typeof v === "number" ? v : null;
  }
  return null;
}

/** The page size a list field asks for: its `pagination.limit`, or the maximum page. */
function pageSize(field: FieldNode, variables: Variables): number {
  const arg = field.arguments?.find((a) => a.name.value === "pagination");
  let limit: number | null = null;
  if (arg?.value.kind === Kind.OBJECT) {
    const f = arg.value.fields.find((x) => x.name.value === "limit");
    limit = intOf(f?.value, variables);
  } else if (arg?.value.kind === Kind.VARIABLE) {
    const p = variables?.[arg.value.name.value] as { limit?: unknown } | null | undefined;
    limit = typeof p?.limit === "number" ? p.limit : null;
  }
  if (limit === null || !Number.isFinite(limit)) return MAX_LIMIT;
  return Math.min(MAX_LIMIT, Math.max(1, Math.trunc(limit)));
}

const isList = (field: FieldNode) =>
  field.name.value.endsWith("_list") ||
  !!field.arguments?.some((a) => a.name.value === "pagination");

/** Rows a selection may return, each list multiplying what it holds. */
function rowsOf(
  set: SelectionSetNode | undefined,
  pages: number,
  fragments: Map<string, FragmentDefinitionNode>,
  variables: Variables,
  seen: Set<string>,
): number {
  let rows = 0;
  for (const sel of set?.selections ?? []) {
    if (sel.kind === Kind.FIELD) {
      const size = isList(sel) ? pageSize(sel, variables) : 1;
      if (isList(sel)) rows += pages * size;
      rows += rowsOf(sel.selectionSet, pages * size, fragments, variables, seen);
    } else if (sel.kind === Kind.INLINE_FRAGMENT) {
      rows += rowsOf(sel.selectionSet, pages, fragments, variables, seen);
    } else {
      const name = sel.name.value;
      if (seen.has(name)) continue; // a cycle: validation refuses it anyway
      seen.add(name);
      rows += rowsOf(fragments.get(name)?.selectionSet, pages, fragments, variables, seen);
      seen.delete(name);
    }
  }
  return rows;
}

/** Rows the executed operation of `document` may return. */
function operationRows(
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Variables,
): number {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions)
    if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const op = document.definitions.find(
    (d) =>
      d.kind === Kind.OPERATION_DEFINITION && (!operationName || d.name?.value === operationName),
  );
  if (!op || op.kind !== Kind.OPERATION_DEFINITION) return 0;
  return rowsOf(op.selectionSet, 1, fragments, variables, new Set());
}

/** Refuses, before execution, an operation whose lists may return more than `maxRows` rows. */
export function pageCostPlugin(maxRows: number): Plugin {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const rows = operationRows(args.document, args.operationName, args.variableValues);
      if (rows <= maxRows) return;
      setResultAndStopExecution({
        errors: [
          new GraphQLError(
            `Query may return ${rows} rows, more than the limit of ${maxRows}: ask for smaller pages (pagination.limit) or fewer lists.`,
            { extensions: { code: "COST_LIMIT_EXCEEDED", rows, limit: maxRows } },
          ),
        ],
      });
    },
  };
}
