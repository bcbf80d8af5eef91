/**
 * Assembles the OpenAPI document from the app's own route table: which methods a path has comes
 * from the routes Hono actually mounted; what they mean comes from resource descriptions (the
 * §4 REST verbs over a model) and per-route operation descriptions. A mounted route nobody
 * described still appears, flagged `x-undocumented`, so the document never hides a route.
 */
import { yieldWhenDue } from "../turns";
import type { Services } from "../core/context";
import type { Queries } from "../db/client";
import type { DefinedModel } from "../core/models/define";
import { DEFAULT_LOOKUPS, type FilterSpec, type ListSpec } from "../core/rest/query";
import { ROUTE_DOC, type RouteDoc } from "../core/validate";
import { closedObject, ref, type JsonSchema, type ModelOpenApi } from "../core/json-schema";
import {
  hostModelName,
  modelNames,
  modelSchemas,
  paginated,
  type ModelNames,
} from "./model-schemas";
import { valibotSchema } from "./valibot";
import type { GenericSchema } from "valibot";

export type HttpMethod = "get" | "post" | "put" | "patch" | "delete";

/** What a plugin contributes to the document (`HostPlugin.openapi`). */
export interface PluginOpenApi {
  /**
   * A cheap fingerprint of the run-time state the plugin's part depends on, as one statement whose
   * first row's `k` it is (read with the others', and the request's guards, in one read); the
   * document is rebuilt whenever it changes. Omit it when the part is static.
   */
  fingerprint?(services: Services): Queries[number];
  describe(b: OpenApiBuilder, services: Services): Promise<void> | void;
}
export type Operation = Record<string, unknown>;
export type Parameter = Record<string, unknown>;

const METHODS: HttpMethod[] = ["get", "post", "put", "patch", "delete"];

/** A model served by the generic REST handlers (`mountResource`) at `path` and `path/{id}`. */
export interface ResourceDescription {
  /** Template path of the list route, no trailing slash: `/api/dcim/sites`. */
  path: string;
  tag: string;
  /** `site`, used in summaries. */
  verbose: string;
  /** `dcim_sites`: prefix of the operation ids. */
  operationPrefix: string;
  /** Between prefix and verb (default `_`); `.` where the prefix holds a user-chosen slug. */
  operationSeparator?: string;
  names: ModelNames;
  list: ListSpec;
  /** Methods of the list and detail routes when they are not in the route table (per-type paths). */
  methods?: { list: Set<HttpMethod>; detail: Set<HttpMethod> };
}

interface Registered {
  op: Operation;
  slash: boolean;
}

/** `/api/dcim/sites` → `dcim_sites`: operation ids start with the path below `/api/`. */
const operationPrefix = (path: string) =>
  path
    .replace(/^\/api\//, "")
    .replace(/[^A-Za-z0-9]+/g, "_")
    .replace(/^_|_$/g, "");

/** Hono's `/x/:id{[^/]+}` → OpenAPI's `/x/{id}`. */
export const templatePath = (honoPath: string) => honoPath.replace(/:(\w+)(\{[^}]*\})?/g, "{$1}");

/** How a documented path is written: NetBox style, with a trailing slash. */
const shown = (path: string, slash: boolean) => (slash && path !== "/" ? `${path}/` : path);

export class OpenApiBuilder {
  readonly schemas: Record<string, JsonSchema> = {};
  readonly tags = new Map<string, string>();
  #ops = new Map<string, Registered>();
  #resources = new Map<string, { desc: ResourceDescription; detail: boolean }>();
  #concrete: ResourceDescription[] = [];
  #expanders = new Map<string, (methods: Set<HttpMethod>) => void | Promise<void>>();

  #models: Array<{ model: DefinedModel; path: string; tag: string; extra?: ModelOpenApi }> = [];
  #labels = new Map<string, string>();
  #briefResolvers: Array<(label: string) => JsonSchema | null> = [];

  constructor(readonly options: { loginRequired: boolean }) {}

  /**
   * A `defineModel` model served at `path` (absolute template path, no trailing slash): its
   * schemas come from its field specs, its operations from the routes mounted there.
   */
  model(model: DefinedModel, options: { path: string; tag: string; extra?: ModelOpenApi }) {
    this.#models.push({ model, ...options });
    this.#labels.set(`${model.spec.appLabel}.${model.spec.model}`, hostModelName(model));
  }

  /** Resolves nested forms of models known only at run time (custom object types). */
  briefResolver(fn: (label: string) => JsonSchema | null) {
    this.#briefResolvers.push(fn);
  }

  /** The nested form `{id, url, display, …}` of the model `app_label.model`. */
  brief(label: string): JsonSchema {
    const name = this.#labels.get(label);
    if (name) return ref(`Brief${name}`);
    for (const fn of this.#briefResolvers) {
      const found = fn(label);
      if (found) return found;
    }
    return ref("NestedObject");
  }

  #afterModels: Array<() => void | Promise<void>> = [];

  /** Runs once every model's schemas exist (for schemas derived from them). */
  afterModels(fn: () => void | Promise<void>) {
    this.#afterModels.push(fn);
  }

  async #buildModels() {
    for (const { model, path, tag, extra } of this.#models.splice(0)) {
      await yieldWhenDue();
      const names = modelNames(hostModelName(model));
      const schemas = modelSchemas(model, names, (label) => this.brief(label), extra);
      this.addSchemas({ ...schemas, ...bulkSchemas(names, schemas) });
      this.resource({
        path,
        tag,
        verbose: model.spec.verboseName,
        operationPrefix: operationPrefix(path),
        names,
        list: model.resource.list,
      });
    }
    for (const fn of this.#afterModels.splice(0)) await fn();
  }

  /** Adds component schemas; a name defined twice with different content is a bug. */
  addSchemas(schemas: Record<string, JsonSchema>) {
    for (const [name, schema] of Object.entries(schemas)) {
      const existing = this.schemas[name];
      if (existing && JSON.stringify(existing) !== JSON.stringify(schema))
        throw new Error(`OpenAPI component ${name} defined twice`);
      this.schemas[name] = schema;
    }
  }

  tag(name: string, description: string) {
    if (!this.tags.has(name)) this.tags.set(name, description);
  }

  /** Describes one route (template path without trailing slash). `slash: false` for `/livez`-style paths. */
  operation(method: HttpMethod, path: string, op: Operation, options: { slash?: boolean } = {}) {
    this.#ops.set(`${method} ${path}`, { op, slash: options.slash ?? true });
  }

  /** Describes a model's list and detail routes. */
  resource(desc: ResourceDescription) {
    if (desc.methods) this.#concrete.push(desc);
    else {
      this.#resources.set(desc.path, { desc, detail: false });
      this.#resources.set(`${desc.path}/{id}`, { desc, detail: true });
    }
  }

  /** Routes whose path has a run-time part (`/{slug}`): `fn` describes each concrete path. */
  expand(path: string, fn: (methods: Set<HttpMethod>) => void | Promise<void>) {
    this.#expanders.set(path, fn);
  }

  /** Security for an operation: public, or the token schemes (anonymous reads when login is optional). */
  security(kind: "token" | "public", method: HttpMethod): unknown[] | undefined {
    if (kind === "public") return [];
    if (!this.options.loginRequired && method === "get")
      return [{ tokenAuth: [] }, { bearerAuth: [] }, {}];
    return undefined; // the document-wide default
  }

  /** The `paths` object for a route table, plus the routes nobody described. */
  async paths(routes: ReadonlyArray<RouteEntry>): Promise<{
    paths: Record<string, Record<string, Operation>>;
    undocumented: string[];
  }> {
    await this.#buildModels();
    const table = new Map<string, Set<HttpMethod>>();
    const routeDocs = new Map<string, RouteDoc[]>();
    for (const r of routes) {
      const method = r.method.toLowerCase() as HttpMethod;
      if (!METHODS.includes(method)) continue; // middleware and 405 catch-alls
      const path = templatePath(r.path);
      (table.get(path) ?? table.set(path, new Set()).get(path)!).add(method);
      const doc = routeDocOf(r.handler);
      if (doc)
        (
          routeDocs.get(`${method} ${path}`) ??
          routeDocs.set(`${method} ${path}`, []).get(`${method} ${path}`)!
        ).push(doc);
    }
    const out: Record<string, Record<string, Operation>> = {};
    const undocumented: string[] = [];
    const put = (path: string, method: HttpMethod, op: Operation) => {
      (out[path] ??= {})[method] = op;
    };

    for (const [path, methods] of table) {
      const expander = this.#expanders.get(path);
      if (expander) {
        await expander(methods);
        continue;
      }
      for (const method of METHODS) {
        if (!methods.has(method)) continue;
        const docs = routeDocs.get(`${method} ${path}`);
        const described = this.#ops.get(`${method} ${path}`);
        // A route's own schemas win; a plugin's part may add what only it knows at run time (settings-dependent text).
        const registered = docs
          ? {
              op: routeOperation(path, docs, described?.op),
              slash: (described?.slash ?? true) && docs.every((d) => d.slash !== false),
            }
          : described;
        if (registered) {
          const anonymousReads =
            registered.op.security === undefined ? this.security("token", method) : undefined;
          put(
            shown(path, registered.slash),
            method,
            anonymousReads ? { ...registered.op, security: anonymousReads } : registered.op,
          );
          continue;
        }
        const resource = this.#resources.get(path);
        const op = resource && resourceOperation(this, resource.desc, resource.detail, method);
        if (op) {
          put(shown(path, true), method, op);
          continue;
        }
        undocumented.push(`${method.toUpperCase()} ${path}`);
        put(shown(path, true), method, {
          summary: "Undocumented route",
          "x-undocumented": true,
          responses: { default: { description: "Not described." } },
        });
      }
    }
    // one set of operations per custom object type: turns between types (decision 0205)
    for (const desc of this.#concrete) {
      await yieldWhenDue();
      for (const [detail, methods] of [
        [false, desc.methods!.list],
        [true, desc.methods!.detail],
      ] as const) {
        for (const method of METHODS) {
          if (!methods.has(method)) continue;
          const op = resourceOperation(this, desc, detail, method);
          if (op) put(shown(detail ? `${desc.path}/{id}` : desc.path, true), method, op);
        }
      }
    }
    const sorted = Object.fromEntries(
      Object.keys(out)
        .sort()
        .map((p) => [p, out[p]!]),
    );
    return { paths: sorted, undocumented };
  }
}

// ---- routes that describe themselves (src/core/validate.ts) -----------------------------------

/** A row of Hono's route table; `handler` carries the route's schemas. */
export interface RouteEntry {
  method: string;
  path: string;
  handler?: unknown;
}

/** The description on a handler, looking through the wrapper `app.route()` adds around a sub-app with its own error handler. */
function routeDocOf(handler: unknown): RouteDoc | undefined {
  let h = handler as Record<string | symbol, unknown> | undefined;
  for (let i = 0; h && i < 8; i++) {
    if (h[ROUTE_DOC]) return h[ROUTE_DOC] as RouteDoc;
    h = h.__COMPOSED_HANDLER as Record<string | symbol, unknown> | undefined;
  }
  return undefined;
}

/** The operation of a route from its descriptions and schemas: query parameters, request body, path parameters. */
function routeOperation(path: string, docs: RouteDoc[], base: Operation = {}): Operation {
  const op: Operation = { ...base };
  for (const d of docs) Object.assign(op, d.operation);
  const fromSchemas: Parameter[] = [];
  for (const d of docs) {
    if (d.query) fromSchemas.push(...queryParameters(valibotSchema(d.query)));
    if (d.body && !op.requestBody)
      op.requestBody = {
        required: true,
        content: { "application/json": { schema: valibotSchema(d.body) } },
      };
  }
  const key = (p: Parameter) => `${p.in} ${p.name}`;
  const own = new Set(fromSchemas.map(key));
  const parameters = [
    ...((op.parameters as Parameter[] | undefined) ?? []).filter((p) => !own.has(key(p))),
    ...fromSchemas,
  ];
  const named = new Set(parameters.map(key));
  for (const [, name] of [...path.matchAll(/\{(\w+)\}/g)].reverse()) {
    if (!named.has(`path ${name}`))
      parameters.unshift({ name, in: "path", required: true, schema: { type: "string" } });
  }
  const validated = docs.some((d) => d.query || d.body);
  if (parameters.length) op.parameters = parameters;
  const responses: Record<string, unknown> = {};
  for (const [code, r] of Object.entries(
    (op.responses as Record<string, Record<string, unknown>>) ?? {},
  )) {
    const content = r.content as Record<string, { schema?: unknown }> | undefined;
    responses[code] = content
      ? {
          ...r,
          content: Object.fromEntries(
            Object.entries(content).map(([type, c]) => [
              type,
              isValibot(c.schema) ? { ...c, schema: valibotSchema(c.schema) } : c,
            ]),
          ),
        }
      : r;
  }
  if (validated && !responses["400"])
    responses["400"] = { $ref: "#/components/responses/BadRequest" };
  op.responses = Object.fromEntries(
    Object.keys(responses)
      .sort()
      .map((k) => [k, responses[k]]),
  );
  return op;
}

const isValibot = (s: unknown): s is GenericSchema =>
  !!s && typeof s === "object" && (s as { kind?: unknown }).kind === "schema" && "~standard" in s;

/** One query parameter per property of an object schema; a value-or-list becomes a repeatable array. */
function queryParameters(schema: JsonSchema): Parameter[] {
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((schema.required as string[] | undefined) ?? []);
  return Object.entries(properties).map(([name, s]) => {
    const { description, ...rest } = s;
    const list = (rest.anyOf as JsonSchema[] | undefined)?.find((x) => x.type === "array");
    return {
      name,
      in: "query",
      ...(required.has(name) ? { required: true } : {}),
      ...(typeof description === "string" ? { description } : {}),
      ...(list ? { schema: list, style: "form", explode: true } : { schema: rest }),
    };
  });
}

// ---- the §4 verbs over a resource ------------------------------------------------------------

const json = (schema: JsonSchema) => ({ "application/json": { schema } });
const body = (schema: JsonSchema, description?: string) => ({
  required: true,
  ...(description ? { description } : {}),
  content: json(schema),
});
const ok = (description: string, schema: JsonSchema) => ({ description, content: json(schema) });
const errors = (...codes: string[]) =>
  Object.fromEntries(
    codes.map((c) => [c, { $ref: `#/components/responses/${ERROR_RESPONSES[c]}` }]),
  );

/** Status code → component response name. */
export const ERROR_RESPONSES: Record<string, string> = {
  "400": "BadRequest",
  "401": "Unauthorized",
  "403": "Forbidden",
  "404": "NotFound",
  "405": "MethodNotAllowed",
  "409": "Conflict",
  "412": "PreconditionFailed",
  "413": "PayloadTooLarge",
  "415": "UnsupportedMediaType",
  "503": "ServiceUnavailable",
};

/** The operation for one method on a resource's list or detail route, or null if not a §4 verb. */
function resourceOperation(
  b: OpenApiBuilder,
  d: ResourceDescription,
  detail: boolean,
  method: HttpMethod,
): Operation | null {
  const n = d.names;
  const idParam = LIST_PARAMETERS.id;
  const common = {
    tags: [d.tag],
    ...(b.security("token", method) ? { security: b.security("token", method) } : {}),
  };
  const bulkItems = (name: string) => ({ type: "array", minItems: 1, items: ref(name) });
  // NetBox 4.7: a bulk write with `?background=true` is queued (202) rather than run.
  const queued = { "202": { $ref: "#/components/responses/Queued" }, ...errors("503") };
  const background = LIST_PARAMETERS.background;
  const ifMatch = LIST_PARAMETERS.ifMatch;
  const id = (verb: string) => `${d.operationPrefix}${d.operationSeparator ?? "_"}${verb}`;
  if (!detail) {
    switch (method) {
      case "get":
        return {
          ...common,
          operationId: id("list"),
          summary: `List ${d.verbose} objects`,
          parameters: [...LIST_QUERY_PARAMETERS, ...filterParameters(d.list)],
          responses: {
            "200": ok(
              `A page of ${d.verbose} objects; with \`?brief\`, each result is the nested form (\`${n.brief}\`).`,
              {
                anyOf: [ref(n.list), { ...paginated(n.brief), title: `${n.list} (brief)` }],
              },
            ),
            ...errors("400", "403"),
          },
        };
      case "post":
        return {
          ...common,
          operationId: id("create"),
          summary: `Create one ${d.verbose} (an object) or several (a list, all or nothing)`,
          parameters: [...PROJECTION_PARAMETERS, background],
          requestBody: body({ oneOf: [ref(n.request), bulkItems(n.request)] }),
          responses: {
            "201": ok("The created object (or list of objects).", {
              oneOf: [ref(n.record), { type: "array", items: ref(n.record) }],
            }),
            ...queued,
            ...errors("400", "403", "413", "415"),
          },
        };
      case "put":
      case "patch":
        return {
          ...common,
          operationId: id(`bulk_${method === "put" ? "update" : "partial_update"}`),
          summary: `${method === "put" ? "Replace" : "Update"} several ${d.verbose} objects (a list of objects with an id, all or nothing)`,
          parameters: [...PROJECTION_PARAMETERS, background],
          requestBody: body(bulkItems(`${method === "put" ? n.request : n.patched}Bulk`)),
          responses: {
            "200": ok("The updated objects.", { type: "array", items: ref(n.record) }),
            ...queued,
            ...errors("400", "403", "404", "413", "415"),
          },
        };
      case "delete":
        return {
          ...common,
          operationId: id("bulk_destroy"),
          summary: `Delete several ${d.verbose} objects (a list of {id}, all or nothing)`,
          parameters: [background],
          requestBody: body(ref("BulkDestroyRequest")),
          responses: {
            "204": { description: "Deleted." },
            ...queued,
            ...errors("400", "403", "404", "409"),
          },
        };
    }
  }
  switch (method) {
    case "get":
      return {
        ...common,
        operationId: id("retrieve"),
        summary: `Get a ${d.verbose}`,
        parameters: [idParam, ...PROJECTION_PARAMETERS],
        responses: {
          "200": ok(`The ${d.verbose}; with \`?brief\`, its nested form.`, {
            anyOf: [ref(n.record), ref(n.brief)],
          }),
          ...errors("403", "404"),
        },
      };
    case "put":
    case "patch":
      return {
        ...common,
        operationId: id(method === "put" ? "update" : "partial_update"),
        summary: `${method === "put" ? "Replace" : "Update"} a ${d.verbose}`,
        parameters: [idParam, ifMatch, ...PROJECTION_PARAMETERS],
        requestBody: body(ref(method === "put" ? n.request : n.patched)),
        responses: {
          "200": ok(`The ${d.verbose}.`, ref(n.record)),
          ...errors("400", "403", "404", "409", "412", "413", "415"),
        },
      };
    case "delete":
      return {
        ...common,
        operationId: id("destroy"),
        summary: `Delete a ${d.verbose}`,
        parameters: [idParam, ifMatch],
        responses: { "204": { description: "Deleted." }, ...errors("403", "404", "409", "412") },
      };
    default:
      return null;
  }
}

/** Bulk item schemas (`<Request>Bulk`): the request keys plus the object's id. */
export function bulkSchemas(
  names: ModelNames,
  schemas: Record<string, JsonSchema>,
): Record<string, JsonSchema> {
  const withId = (name: string, requiredToo: boolean) => {
    const s = schemas[name] as { properties: Record<string, JsonSchema>; required: string[] };
    return closedObject({ id: { type: "integer", minimum: 1 }, ...s.properties }, [
      "id",
      ...(requiredToo ? s.required : []),
    ]);
  };
  return {
    [`${names.request}Bulk`]: withId(names.request, true),
    [`${names.patched}Bulk`]: withId(names.patched, false),
  };
}

// ---- list parameters ---------------------------------------------------------------------------

/** The §4 list and projection parameters, as components. */
export const LIST_PARAMETERS: Record<string, Parameter> = {
  limit: {
    name: "limit",
    in: "query",
    description: "Page size (default 50, at most 1000; 0 means 1000).",
    schema: { type: "integer", minimum: 0 },
  },
  offset: {
    name: "offset",
    in: "query",
    description: "Index of the first result.",
    schema: { type: "integer", minimum: 0 },
  },
  start: {
    name: "start",
    in: "query",
    description:
      "Cursor pagination (NetBox 4.6): the first id to return; results in id order, `count` null, `next` continues. Not with `offset` or `ordering`.",
    schema: { type: "integer", minimum: 0 },
  },
  ordering: {
    name: "ordering",
    in: "query",
    description: "Comma-separated fields; `-` for descending (e.g. `-name,id`).",
    schema: { type: "string" },
  },
  q: {
    name: "q",
    in: "query",
    description: "Search the model's search fields (contains, case-insensitive).",
    schema: { type: "string" },
  },
  brief: {
    name: "brief",
    in: "query",
    description: "Only the brief fields of each object.",
    schema: { type: "boolean" },
  },
  fields: {
    name: "fields",
    in: "query",
    description: "Comma-separated keys to return.",
    schema: { type: "string" },
  },
  omit: {
    name: "omit",
    in: "query",
    description: "Comma-separated keys to leave out.",
    schema: { type: "string" },
  },
  background: {
    name: "background",
    in: "query",
    description:
      "NetBox 4.7: with a list body, queue the bulk write as a job and answer 202 (not with `If-Match`).",
    schema: { type: "boolean" },
  },
  ifMatch: {
    name: "If-Match",
    in: "header",
    description:
      "NetBox 4.6: write only if the object's current `ETag` is one of these (`*`: it exists); else 412.",
    schema: { type: "string" },
  },
  id: {
    name: "id",
    in: "path",
    required: true,
    description: "The object's id.",
    schema: { type: "integer", minimum: 1 },
  },
};
// Operations carry their parameters inline, as drf-spectacular writes NetBox's: pynetbox's
// `strict_filters` reads each one's `name` and fails on a `$ref` (decision 0200).
const LIST_QUERY_PARAMETERS = [
  "limit",
  "offset",
  "start",
  "ordering",
  "q",
  "brief",
  "fields",
  "omit",
].map((p) => LIST_PARAMETERS[p]!);
const PROJECTION_PARAMETERS = ["brief", "fields", "omit"].map((p) => LIST_PARAMETERS[p]!);

const LOOKUP_TEXT: Record<string, string> = {
  exact: "equals",
  n: "differs from",
  ic: "contains (case-insensitive)",
  nic: "does not contain (case-insensitive)",
  isw: "starts with (case-insensitive)",
  nisw: "does not start with (case-insensitive)",
  iew: "ends with (case-insensitive)",
  niew: "does not end with (case-insensitive)",
  ie: "equals (case-insensitive)",
  nie: "differs from (case-insensitive)",
  gt: "is greater than",
  gte: "is at least",
  lt: "is less than",
  lte: "is at most",
  empty: "is empty (true) or set (false)",
};

function valueSchema(kind: FilterSpec["kind"]): JsonSchema {
  switch (kind) {
    case "number":
      return { type: "number" };
    case "boolean":
      return { type: "boolean" };
    case "date":
      return { type: "string", format: "date" };
    case "datetime":
      return { type: "string", description: "ISO 8601 date or date-time" };
    default:
      return { type: "string" };
  }
}

/** One query parameter per filter and lookup (`name`, `name__ic`, …); values repeat as OR. */
function filterParameters(list: ListSpec): Parameter[] {
  const out: Parameter[] = [];
  const reserved = new Set([
    "limit",
    "offset",
    "start",
    "background",
    "ordering",
    "q",
    "brief",
    "fields",
    "omit",
    "format",
  ]);
  for (const [name, spec] of Object.entries(list.filters)) {
    if (spec.alias) continue; // described under the filter's own name
    const lookups = spec.lookups ?? DEFAULT_LOOKUPS[spec.kind];
    const bare = spec.bareLookup && spec.bareLookup !== "exact" ? spec.bareLookup : null;
    for (const lookup of lookups) {
      const param = lookup === "exact" ? (bare ? `${name}__exact` : name) : `${name}__${lookup}`;
      if (reserved.has(param)) continue;
      // a per-type filter names its type: a caller who may not see it gets no such parameter
      // (`withoutTypes` drops it by this text; the name holds only the type's id)
      const named = spec.targetLabel ? `\`${name}\` (ids of ${spec.targetLabel})` : `\`${name}\``;
      const text =
        lookup === "exact" && spec.description
          ? `${named}: ${spec.description}`
          : `${named} ${LOOKUP_TEXT[lookup] ?? lookup}`;
      out.push(
        queryParam(
          param,
          text,
          lookup === "empty" ? { type: "boolean" } : valueSchema(spec.kind),
          lookup !== "empty" && !spec.oneValue?.includes(lookup),
        ),
      );
    }
    if (bare && !lookups.includes(bare)) continue;
    if (bare)
      out.push(
        queryParam(name, `\`${name}\` ${LOOKUP_TEXT[bare] ?? bare}`, valueSchema(spec.kind), true),
      );
  }
  return out;
}

function queryParam(
  name: string,
  description: string,
  schema: JsonSchema,
  repeatable: boolean,
): Parameter {
  return repeatable
    ? {
        name,
        in: "query",
        // repeatable as its array schema and `explode` say (decision 0210: not written again in
        // each of a type's ~70 filters)
        description,
        schema: { type: "array", items: schema },
        style: "form",
        explode: true,
      }
    : { name, in: "query", description, schema };
}
