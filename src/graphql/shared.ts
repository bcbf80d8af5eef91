/**
 * What the GraphQL schema, its resolvers and its loaders share: the model entries, the lookup
 * names, the filter shape each filter input carries, and the bad-argument error.
 */
import { GraphQLError, type GraphQLInputObjectType } from "graphql";
import type { SQLWrapper } from "drizzle-orm";
import type { Resource } from "../core/context";

/** A model in the schema: its label, resource and the names it is served under. */
export interface Entry {
  label: string;
  resource: Resource;
  field: string;
  type: string;
}

/** GraphQL lookup names (strawberry-django's, as NetBox 4 filters use them) → Django lookups. */
export const LOOKUPS: Record<string, string> = {
  exact: "exact",
  i_exact: "iexact",
  contains: "contains",
  i_contains: "icontains",
  starts_with: "startswith",
  i_starts_with: "istartswith",
  ends_with: "endswith",
  i_ends_with: "iendswith",
  gt: "gt",
  gte: "gte",
  lt: "lt",
  lte: "lte",
  in_list: "in",
  is_null: "isnull",
};

/**
 * Per filter input: the record keys behind its GraphQL names, and its related filters: each the
 * relation's column and the entry it points at (a related filter reaches only the targets the
 * caller may view, decision 0178).
 */
export interface FilterShape {
  keys: Map<string, string>;
  related: Map<string, { entry: Entry; expr: SQLWrapper }>;
}

/** The `extensions` a filter input is built with: its shape rides on the type itself. */
export const filterShapeExtensions = (shape: FilterShape) => ({ filterShape: shape });

/** The shape a filter input was built with (`filterShapeExtensions`). */
export function filterShapeOf(type: GraphQLInputObjectType): FilterShape {
  return (type.extensions as { filterShape: FilterShape }).filterShape;
}

/** A clear GraphQL error for a bad argument (never a 500). */
export const badArgument = (message: string) =>
  new GraphQLError(message, { extensions: { code: "BAD_USER_INPUT" } });
