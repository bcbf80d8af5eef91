/**
 * What answers a GraphQL query (decision 0117): graphql-yoga with the limits and error masking,
 * the schema built per caller from what they may view and cached by the models' shape signature.
 * `routes.ts` loads this module on the first query, so a server nobody asks GraphQL of never
 * evaluates graphql, graphql-yoga and their dependencies.
 */
import { costLimitPlugin } from "@escape.tech/graphql-armor-cost-limit";
import { maxAliasesPlugin } from "@escape.tech/graphql-armor-max-aliases";
import { maxDepthPlugin } from "@escape.tech/graphql-armor-max-depth";
import { maxTokensPlugin } from "@escape.tech/graphql-armor-max-tokens";
import {
  __Schema,
  __Type,
  GraphQLBoolean,
  GraphQLError,
  type GraphQLField,
  GraphQLObjectType,
  GraphQLSchema,
} from "graphql";
import { createYoga } from "graphql-yoga";
import { hasPermission } from "../core/auth/permissions";
import type { Ctx, Services } from "../core/context";
import { ApiError } from "../core/errors";
import { jsonShapeExceeds, readBody } from "../core/http";
import { MAX_GRAPHQL_VALUES, MAX_JSON_DEPTH } from "../core/limits";
import { readContext } from "../core/rest/handlers";
import { databaseStamp } from "../core/database-stamp";
import { addGuard, guardFailure, hasGuards, onStale, settleGuards } from "../core/fresh-read";
import { responseTooLarge } from "../core/rest/budget";
import { GRAPHQL_LIMITS } from "./limits";
import { newWeight, tooManyObjectsMessage } from "./answer-weight";
import { pageCostPlugin } from "./page-cost";
import { Loaders, type GraphQLContext } from "./loaders";
import { buildSchema, customObjectNames, HOST_NAMES } from "./schema";
import type { Entry } from "./shared";
import { yieldWhenDue } from "../turns";

const SCHEMA_CACHE_SIZE = 64;

/**
 * Marks the context of a query this engine runs: only there are introspection's long lists
 * answered with turns (graphql-js's own executor takes no async list).
 */
const WITH_TURNS = Symbol("graphql.with-turns");
/** An introspection list longer than this is completed an item a step (decision 0217). */
const LONG_LIST = 64;

/** The items of `list`, a turn of the event loop given between two when due. */
async function* withTurns<T>(list: readonly T[]): AsyncGenerator<T> {
  for (const item of list) {
    await yieldWhenDue();
    yield item;
  }
}

/**
 * Introspection's long lists (`__schema.types`, a type's `fields` and `inputFields`) answered as
 * async lists, which graphql-yoga's executor completes an item at a time: at 1,000 custom object
 * types `{ __schema { types { name fields { name } } } }` held the event loop in one stretch of
 * synchronous resolvers. The same items in the same order, so the same answer. Introspection's
 * types are graphql-js's own, shared by every schema: done once per process, and only for a
 * context this engine made (`WITH_TURNS`).
 */
function introspectionWithTurns(): void {
  const fields = [
    __Schema.getFields().types,
    __Type.getFields().fields,
    __Type.getFields().inputFields,
  ] as Array<GraphQLField<unknown, unknown> & { [WITH_TURNS]?: true }>;
  for (const field of fields) {
    if (field[WITH_TURNS] || !field.resolve) continue;
    const resolve = field.resolve;
    field.resolve = (source, args, context, info) => {
      const out = resolve(source, args, context, info);
      const ours = !!context && typeof context === "object" && WITH_TURNS in context;
      return ours && Array.isArray(out) && out.length > LONG_LIST ? withTurns(out) : out;
    };
    field[WITH_TURNS] = true;
  }
}

/** Runs `work`, then settles the guards no read took along (before the answer leaves). */
async function settledAfter(c: Ctx, work: () => Promise<Response>): Promise<Response> {
  try {
    return await work();
  } finally {
    if (hasGuards(c)) await settleGuards(c);
  }
}

interface ServerContext {
  schema: GraphQLSchema;
  graphql: GraphQLContext;
}

/** The host models GraphQL serves (those registered statically; a disabled plugin's are absent). */
function hostEntriesOf(services: Services): Entry[] {
  const hostEntries: Entry[] = [];
  for (const [label, names] of Object.entries(HOST_NAMES)) {
    const [app, model] = label.split(".") as [string, string];
    const info = services.models
      .staticModels()
      .find((m) => m.appLabel === app && m.model === model);
    if (info?.resource)
      hostEntries.push({ label, resource: info.resource, field: names.field, type: names.type });
  }
  return hostEntries;
}

/**
 * The caller's schema: their visible models, cached by shape signature and visible set. Where
 * there is no change stamp, the signature comes from the registry's cache under a guard that
 * the first list's read carries (decision 0085).
 */
function schemaSource(services: Services): (c: Ctx) => Promise<GraphQLSchema> {
  // a schema under way is shared too: queries arriving while it builds (with turns) wait for it
  // instead of each building their own (decision 0205); a failed build is not kept
  const cache = new Map<string, Promise<GraphQLSchema>>();
  const hostEntries = hostEntriesOf(services);
  let names: { signature: string; names: Map<number, string> } | null = null;
  return async (c) => {
    const ctx = readContext(c);
    const guarded = databaseStamp(services) === null;
    const dynamic = await services.models.dynamicModels(
      ctx,
      guarded ? (g) => addGuard(c, g) : undefined,
    );
    // the custom object types' names, worked out once per shape signature
    if (names?.signature !== dynamic.signature) {
      const cots = dynamic.models.map((m) => ({ id: m.catalogId ?? 0, slug: m.model }));
      names = { signature: dynamic.signature, names: customObjectNames(cots) };
    }
    const entries = visibleEntries(c, hostEntries, dynamic.models, names.names);
    const key = `${dynamic.signature}|${entries.map((e) => e.label).join(",")}`;
    let schema = cache.get(key);
    if (!schema) {
      schema = relationTargetLabels(services, ctx, entries).then((labels) =>
        buildSchema(entries, labels),
      );
      if (cache.size >= SCHEMA_CACHE_SIZE) cache.delete(cache.keys().next().value!);
      cache.set(key, schema);
      schema.catch(() => {
        if (cache.get(key) === schema) cache.delete(key);
      });
    }
    return schema;
  };
}

type DynamicModel = Awaited<ReturnType<Services["models"]["dynamicModels"]>>["models"][number];

/** The host and custom object entries the caller may view, in schema order. */
function visibleEntries(
  c: Ctx,
  hostEntries: Entry[],
  dynamic: DynamicModel[],
  cotNames: Map<number, string>,
): Entry[] {
  const entries = hostEntries.filter((e) => {
    const [app, model] = e.label.split(".") as [string, string];
    return hasPermission(c, "view", app, model);
  });
  for (const m of dynamic) {
    if (!m.resource || !hasPermission(c, "view", m.appLabel, m.model)) continue;
    const field = cotNames.get(m.catalogId ?? 0)!;
    entries.push({
      label: `${m.appLabel}.${m.model}`,
      resource: m.resource,
      field,
      type: `CustomObject_${field.slice("custom_objects_".length)}`,
    });
  }
  return entries;
}

/** "app.model" of every object type the entries' relations point at, by type id. */
async function relationTargetLabels(
  services: Services,
  ctx: ReturnType<typeof readContext>,
  entries: Entry[],
): Promise<Map<number, string>> {
  const typeIds = new Set<number>();
  for (const e of entries)
    for (const r of e.resource.relations ?? [])
      for (const id of [r.targetTypeId, ...(r.targetTypeIds ?? [])])
        if (id != null) typeIds.add(id);
  const labelsById = new Map<number, string>();
  for (const [id, ot] of await services.objectTypes.byIds([...typeIds], ctx.db))
    labelsById.set(id, `${ot.appLabel}.${ot.model}`);
  return labelsById;
}

/** graphql-yoga with the limits and the error masking (ApiError as BAD_REQUEST, the rest hidden). */
function createServer(services: Pick<Services, "logger">) {
  return createYoga<ServerContext>({
    schema: (sc) => sc.schema,
    context: (sc) => sc.graphql,
    graphqlEndpoint: "/graphql/",
    graphiql: false,
    landingPage: false,
    batching: false,
    multipart: false,
    logging: false,
    maskedErrors: {
      maskError(error, message) {
        const original = (error as GraphQLError).originalError ?? error;
        if (original instanceof ApiError) {
          const body = original.body as { detail?: string };
          return new GraphQLError(body.detail ?? JSON.stringify(body), {
            extensions: { code: "BAD_REQUEST", status: original.statusCode },
          });
        }
        if (
          error instanceof GraphQLError &&
          !(error.originalError && !(error.originalError instanceof GraphQLError))
        )
          return error;
        services.logger.error("graphql resolver failed", {
          error: String((original as Error)?.message ?? original),
        });
        return new GraphQLError(message);
      },
    },
    plugins: [
      maxTokensPlugin({ n: GRAPHQL_LIMITS.maxTokens }),
      maxDepthPlugin({
        n: GRAPHQL_LIMITS.maxDepth,
        ignoreIntrospection: true,
        flattenFragments: true,
      }),
      maxAliasesPlugin({ n: GRAPHQL_LIMITS.maxAliases }),
      costLimitPlugin({
        maxCost: GRAPHQL_LIMITS.maxCost,
        ignoreIntrospection: true,
        flattenFragments: true,
      }),
      pageCostPlugin(GRAPHQL_LIMITS.maxRows),
    ],
  });
}

type Server = ReturnType<typeof createServer>;

/** Runs one GET or POST query, again once if a guard found a cache stale, within the budget. */
async function answerQuery(
  c: Ctx,
  yoga: Server,
  schemaFor: (c: Ctx) => Promise<GraphQLSchema>,
): Promise<Response> {
  const url = new URL(c.req.url);
  url.pathname = "/graphql/";
  let body: ArrayBuffer | undefined;
  if (c.req.method === "POST") {
    body = await readBody(c);
  }
  const refused = variablesRefusal(c, body);
  if (refused) return refusedAnswer(c, refused, refused.code);
  const ctx = readContext(c);
  let weight = newWeight();
  const run = async () => {
    const request = new Request(url, { method: c.req.method, headers: c.req.raw.headers, body });
    weight = newWeight();
    const graphql: GraphQLContext & { [WITH_TURNS]: true } = {
      ctx,
      auth: c.get("auth"),
      loaders: new Loaders(ctx, c.get("auth"), c),
      http: c,
      weight,
      [WITH_TURNS]: true,
    };
    const schema = await schemaFor(c);
    // the caller's entries were picked from every model: the query runs in a stretch of its own
    await yieldWhenDue();
    return yoga.fetch(request, { schema, graphql });
  };
  // A guard found its cache stale (the caller's grants, a type's shape): the schema and the
  // resolvers were built on it, so the query runs again on the refreshed caches (once).
  let stale = false;
  onStale(c, () => {
    stale = true;
  });
  let answer = await settledAfter(c, run);
  if (stale) {
    await answer.body?.cancel();
    const failure = guardFailure(c);
    if (failure) throw failure;
    if (ctx.budget) ctx.budget.used = 0;
    answer = await settledAfter(c, run);
  }
  if (weight.over) {
    await answer.body?.cancel();
    return refusedAnswer(c, tooManyObjects(), "TOO_MANY_OBJECTS");
  }
  // Lists that would pass the response budget stopped before reading their rows: the whole
  // answer is the §4 error (with a GraphQL `errors` entry), not a partial result.
  const budget = ctx.budget;
  if (budget && budget.used > budget.limit) {
    await answer.body?.cancel();
    return refusedAnswer(c, responseTooLarge(budget.limit), "RESPONSE_TOO_LARGE");
  }
  return answer;
}

/**
 * The variables' text, GET's or a JSON or form body's: measured before graphql-js coerces them.
 * Only these carry variables (multipart is off: no upload scalar).
 */
function variablesText(c: Ctx, body: ArrayBuffer | undefined): string {
  if (!body) return c.req.query("variables") ?? "";
  const text = new TextDecoder().decode(body);
  const type = c.req.header("content-type") ?? "";
  if (/^application\/x-www-form-urlencoded\b/i.test(type.trim()))
    return new URLSearchParams(text).get("variables") ?? "";
  return text;
}

/** 400 for variables past `MAX_GRAPHQL_VALUES` values or `MAX_JSON_DEPTH` levels (decision 0196). */
function variablesRefusal(c: Ctx, body: ArrayBuffer | undefined) {
  const over = jsonShapeExceeds(variablesText(c, body), MAX_JSON_DEPTH, MAX_GRAPHQL_VALUES);
  if (over === "items")
    return Object.assign(
      ApiError.detail(
        400,
        `GraphQL variables hold at most ${MAX_GRAPHQL_VALUES} values (items of lists and objects).`,
        "too_many_values",
        { limit: MAX_GRAPHQL_VALUES },
      ),
      { code: "TOO_MANY_VALUES" },
    );
  if (over === "depth")
    return Object.assign(
      ApiError.detail(
        400,
        `JSON nests deeper than the limit of ${MAX_JSON_DEPTH} levels of arrays and objects.`,
        "json_too_deep",
        { limit: MAX_JSON_DEPTH },
      ),
      { code: "JSON_TOO_DEEP" },
    );
  return null;
}

/** The 400 answer at `max_objects`: the §4 body naming the limit (decision 0190). */
const tooManyObjects = () =>
  ApiError.detail(400, tooManyObjectsMessage(GRAPHQL_LIMITS.maxObjects), "too_many_objects", {
    limit: GRAPHQL_LIMITS.maxObjects,
  });

/** A query stopped at a limit: the §4 error with a GraphQL `errors` entry, no partial data. */
function refusedAnswer(c: Ctx, error: ApiError, code: string): Response {
  const body = error.body as { detail: string; limit: number };
  return c.json(
    { ...body, errors: [{ message: body.detail, extensions: { code, limit: body.limit } }] },
    400,
  );
}

/**
 * Runs `{ ok __typename }` once through a server of the same plugins over a one-field schema,
 * before the Bun server serves (decision 0217): graphql-yoga's pipeline run for the first time
 * in a process (its code compiled as it goes) held the event loop ~18 ms at any number of types,
 * in the first query's stretch. Touches no database; its resolver answers nothing but `true`.
 */
export async function warmUp(): Promise<void> {
  const quiet = { error: () => {} } as unknown as Services["logger"];
  const yoga = createServer({ logger: quiet });
  const schema = new GraphQLSchema({
    query: new GraphQLObjectType({
      name: "Query",
      fields: { ok: { type: GraphQLBoolean, resolve: () => true } },
    }),
  });
  const request = new Request("http://warm.up/graphql/", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ query: "{ ok __typename }" }),
  });
  const answer = await yoga.fetch(request, { schema, graphql: {} as GraphQLContext });
  await answer.text();
}

/** Answers GET and POST queries for `services` (one yoga server and schema cache per app). */
export function graphqlEngine(services: Services): (c: Ctx) => Promise<Response> {
  introspectionWithTurns();
  const schemaFor = schemaSource(services);
  const yoga = createServer(services);
  return (c) => answerQuery(c, yoga, schemaFor);
}
