/** The host's own routes in the document: API indexes, status, the host models, tokens, and this document. */
import type { Services } from "../core/context";
import { tokenModel } from "../core/auth/models";
import { CORE_MODELS } from "../core/routes";
import type { OpenApiBuilder } from "./builder";
import { closedObject, ref, type JsonSchema } from "./json-schema";

const SECTION_TEXT: Record<string, string> = {
  core: "Object types, the change log and background jobs.",
  dcim: "Sites and devices.",
  extras: "Tags, custom-field choice sets, webhooks and event rules.",
  ipam: "Prefixes and IP addresses.",
  tenancy: "Tenants.",
  users: "Users, groups, object permissions and API tokens.",
};

const json = (schema: JsonSchema) => ({ "application/json": { schema } });
const endpointMap: JsonSchema = { type: "object", additionalProperties: { type: "string", format: "uri" }, description: "Endpoint name → absolute URL." };

export function describeCore(b: OpenApiBuilder, _services: Services) {
  b.tag("api", "API root, status and this description.");
  b.operation("get", "/api", {
    tags: ["api"],
    operationId: "api_root",
    summary: "API root: one URL per section",
    responses: { "200": { description: "Section name → URL.", content: json(endpointMap) }, "403": { $ref: "#/components/responses/Forbidden" } },
  });
  b.operation("get", "/api/status", {
    tags: ["api"],
    operationId: "status",
    summary: "Versions, runtime, database, cache and enabled plugins",
    responses: {
      "200": {
        description: "The status.",
        content: json({
          type: "object",
          properties: {
            "host-version": { type: "string" },
            "hono-version": { type: "string" },
            runtime: { type: "string" },
            "database-kind": { type: "string" },
            "cache-backend": { type: "string" },
            plugins: { type: "object", additionalProperties: { type: "string" }, description: "Plugin name → version." },
            "started-at": { type: "string", format: "date-time" },
          },
          required: ["host-version", "runtime", "plugins"],
        }),
      },
      "403": { $ref: "#/components/responses/Forbidden" },
    },
  });
  b.operation("get", "/api/plugins", {
    tags: ["api"],
    operationId: "plugins_root",
    summary: "API roots of the enabled plugins",
    responses: { "200": { description: "Plugin API base → URL.", content: json(endpointMap) }, "403": { $ref: "#/components/responses/Forbidden" } },
  });

  const sections = new Set<string>();
  for (const m of CORE_MODELS) {
    const section = m.spec.path.split("/")[0]!;
    sections.add(section);
    b.model(m, { path: `/api/${m.spec.path}`, tag: section });
  }
  for (const section of sections) {
    b.tag(section, SECTION_TEXT[section] ?? `The ${section} section.`);
    b.operation("get", `/api/${section}`, {
      tags: [section],
      operationId: `${section}_root`,
      summary: `Endpoints of the ${section} section`,
      responses: { "200": { description: "Endpoint name → URL.", content: json(endpointMap) }, "403": { $ref: "#/components/responses/Forbidden" } },
    });
  }

  // Tokens are shown once: creating one answers with its key.
  b.afterModels(() => {
    const token = b.schemas.Token as { properties: Record<string, JsonSchema>; required: string[] };
    const props = { ...token.properties, key: { type: "string", description: "The token key; shown only in this response." } };
    b.addSchemas({
      TokenCreated: closedObject(props, [...token.required, "key"]),
      TokenProvisionRequest: closedObject(
        {
          username: { type: "string" },
          password: { type: "string", writeOnly: true },
          ...Object.fromEntries(Object.entries((b.schemas.TokenRequest as { properties: Record<string, JsonSchema> }).properties).filter(([k]) => k !== "user")),
        },
        ["username", "password"],
      ),
    });
  });
  const tokenTag = tokenModel.spec.path.split("/")[0]!;
  b.operation("post", "/api/users/tokens", {
    tags: [tokenTag],
    operationId: "users_tokens_create",
    summary: "Create a token (one per request); the answer holds its key, shown this once",
    requestBody: { required: true, content: json(ref("TokenRequest")) },
    responses: {
      "201": { description: "The token, with its key.", content: json(ref("TokenCreated")) },
      "400": { $ref: "#/components/responses/BadRequest" },
      "403": { $ref: "#/components/responses/Forbidden" },
    },
  });
  b.operation("post", "/api/users/tokens/provision", {
    tags: [tokenTag],
    operationId: "users_tokens_provision",
    summary: "Exchange a username and password for a new token",
    security: [],
    requestBody: { required: true, content: json(ref("TokenProvisionRequest")) },
    responses: {
      "201": { description: "The token, with its key.", content: json(ref("TokenCreated")) },
      "400": { $ref: "#/components/responses/BadRequest" },
      "403": { description: "Invalid username/password.", content: json(ref("Error")) },
      "429": {
        description: "Too many failed logins for this username or client address (`error`: `rate_limited`); retry after `Retry-After` seconds.",
        headers: { "Retry-After": { description: "Seconds until the failure window ends.", schema: { type: "integer", minimum: 1 } } },
        content: json(ref("Error")),
      },
    },
  });

  // GraphQL (docs/decisions/0035-graphql.md): one endpoint; its schema is introspectable per caller.
  const graphqlRequest = {
    type: "object",
    required: ["query"],
    properties: { query: { type: "string" }, variables: { type: ["object", "null"] }, operationName: { type: ["string", "null"] } },
  };
  const graphqlResponses = {
    "200": {
      description: "A GraphQL result: `data` and/or `errors` (limits on depth, cost, aliases and tokens answer `errors`).",
      content: { "application/json": { schema: { type: "object", properties: { data: { type: ["object", "null"] }, errors: { type: "array", items: { type: "object" } } } } } },
    },
    "400": { description: "A request that is not GraphQL (no query, malformed JSON, a document that does not validate).", content: { "application/json": { schema: { type: "object" } } } },
    "403": { $ref: "#/components/responses/Forbidden" },
    "413": { description: "The body is larger than MAX_BODY_BYTES.", content: json(ref("Error")) },
  };
  b.operation("post", "/graphql", {
    tags: ["graphql"],
    operationId: "graphql_query",
    summary: "GraphQL: NetBox 4 queries for host models and custom_objects_<slug>[_list] for custom object types",
    description: "The schema holds only the models the caller may view; introspect it with a query on `__schema`.",
    requestBody: { required: true, content: { "application/json": { schema: graphqlRequest } } },
    responses: graphqlResponses,
  });
  b.operation("get", "/graphql", {
    tags: ["graphql"],
    operationId: "graphql_query_get",
    summary: "GraphQL over GET (`query`, `variables`, `operationName` in the query string); a browser asking for HTML gets the offline query page",
    parameters: [
      { name: "query", in: "query", schema: { type: "string" } },
      { name: "variables", in: "query", schema: { type: "string" } },
      { name: "operationName", in: "query", schema: { type: "string" } },
    ],
    responses: { ...graphqlResponses, "200": { ...graphqlResponses["200"], content: { ...graphqlResponses["200"].content, "text/html": { schema: { type: "string" } } } } },
  });

  b.operation("get", "/api/schema", {
    tags: ["api"],
    operationId: "schema_retrieve",
    summary: "This OpenAPI 3.1 document (JSON, or YAML with ?format=yaml)",
    description: "Generated from the models, the validation schemas and the custom object types in the database; it changes as soon as a type or field does.",
    parameters: [{ name: "format", in: "query", schema: { type: "string", enum: ["json", "yaml"] } }],
    responses: {
      "200": {
        description: "The OpenAPI document.",
        content: { "application/json": { schema: { type: "object" } }, "application/yaml": { schema: { type: "string" } } },
      },
      "403": { $ref: "#/components/responses/Forbidden" },
    },
  });
}

/** The docs page and its assets: public, no data in them (the page loads the document with a token). */
export function describeDocs(b: OpenApiBuilder) {
  b.operation("get", "/api/docs", {
    tags: ["api"],
    operationId: "docs_page",
    summary: "Interactive API reference (HTML), built from /api/schema/",
    security: [],
    responses: {
      "200": { description: "The page.", content: { "text/html": { schema: { type: "string" } } } },
      "501": { description: "Not available on this runtime (Workers): use /api/schema/ with any OpenAPI viewer.", content: json(ref("Error")) },
    },
  });
  b.operation("get", "/api/docs/assets/{name}", {
    tags: ["api"],
    operationId: "docs_asset",
    summary: "A static asset of the docs page",
    security: [],
    parameters: [{ name: "name", in: "path", required: true, schema: { type: "string" } }],
    responses: {
      "200": { description: "The asset (JavaScript, CSS or an image)." },
      "404": { $ref: "#/components/responses/NotFound" },
      "501": { description: "Not available on this runtime (Workers).", content: json(ref("Error")) },
    },
  }, { slash: false });
  describeGraphql(b);
}

/** `/graphql/`: one endpoint; its own schema (introspection) describes the queries. */
function describeGraphql(b: OpenApiBuilder) {
  b.tag("graphql", "GraphQL over the same models, tokens and permissions (NetBox 4 naming); introspect it for the queries.");
  const answer = {
    "200": {
      description: "A GraphQL response: `data` and/or `errors` (limits and bad input are GraphQL errors, never a 500).",
      content: json({ type: "object", properties: { data: { type: ["object", "null"] }, errors: { type: "array", items: { type: "object" } } } }),
    },
    "403": { $ref: "#/components/responses/Forbidden" },
  };
  const request = { query: { type: "string" }, variables: { type: ["object", "null"] }, operationName: { type: ["string", "null"] } };
  b.operation("post", "/graphql", {
    tags: ["graphql"],
    operationId: "graphql_post",
    summary: "Run a GraphQL query",
    requestBody: { required: true, content: json({ type: "object", properties: request, required: ["query"] }) },
    responses: answer,
  });
  b.operation("get", "/graphql", {
    tags: ["graphql"],
    operationId: "graphql_get",
    summary: "Run a GraphQL query given as `?query=` (read-only)",
    parameters: [
      { name: "query", in: "query", description: "The GraphQL document.", schema: { type: "string" } },
      { name: "variables", in: "query", description: "JSON object of variables.", schema: { type: "string" } },
      { name: "operationName", in: "query", schema: { type: "string" } },
    ],
    responses: answer,
  });
}
