/** The GraphQL endpoint's limits (`engine.ts` applies them). */
/** The limits, documented in docs/decisions/0035-graphql.md. */
export const GRAPHQL_LIMITS = {
  maxDepth: 10,
  maxCost: 2000,
  maxAliases: 30,
  maxTokens: 5000,
  /** Rows one query's lists may return, each weighted by its page size (decision 0068). */
  maxRows: 5000,
  /**
   * Objects one answer may hold: page rows, related objects and tags, counted as they resolve
   * (decision 0190). Relation lists are not paged, so their rows multiply past `maxRows`.
   */
  maxObjects: 20_000,
} as const;
