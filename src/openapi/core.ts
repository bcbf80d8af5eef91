/** The host models and their derived token schemas, and GraphQL; the hand-written routes describe themselves (`src/core/validate.ts`). */
import type { Services } from "../core/context";
import { CORE_MODELS } from "../core/routes";
import type { OpenApiBuilder } from "./builder";
import { closedObject, type JsonSchema } from "../core/json-schema";

const SECTION_TEXT: Record<string, string> = {
  core: "Object types, the change log and background jobs.",
  dcim: "Sites and devices.",
  extras: "Tags, custom-field choice sets, webhooks and event rules.",
  ipam: "Prefixes and IP addresses.",
  tenancy: "Tenants.",
  users: "Users, groups, object permissions and API tokens.",
};

const json = (schema: JsonSchema) => ({ "application/json": { schema } });

export function describeCore(b: OpenApiBuilder, _services: Services) {
  b.tag("api", "API root, status and this description.");
  // The root, status, section indexes and token routes describe themselves (src/core/routes.ts).
  const sections = new Set<string>();
  for (const m of CORE_MODELS) {
    const section = m.spec.path.split("/")[0]!;
    sections.add(section);
    b.model(m, { path: `/api/${m.spec.path}`, tag: section });
  }
  for (const section of sections) {
    b.tag(section, SECTION_TEXT[section] ?? `The ${section} section.`);
  }

  // Tokens are shown once: creating one answers with its secret (`token`).
  b.afterModels(() => {
    const token = b.schemas.Token as { properties: Record<string, JsonSchema>; required: string[] };
    const props = {
      ...token.properties,
      token: {
        type: "string",
        description:
          "The secret; shown only in this response. v2: send `Bearer nbt_<key>.<token>`; v1: `Token <token>`.",
      },
    };
    b.addSchemas({
      TokenCreated: closedObject(props, [...token.required, "token"]),
      TokenProvisionRequest: closedObject(
        {
          username: { type: "string" },
          password: { type: "string", writeOnly: true },
          ...Object.fromEntries(
            Object.entries(
              (b.schemas.TokenRequest as { properties: Record<string, JsonSchema> }).properties,
            ).filter(([k]) => k !== "user"),
          ),
        },
        ["username", "password"],
      ),
    });
  });
}

/**
 * `/graphql/`: one endpoint; its own schema (introspection) describes the queries. GraphQL is
 * exempt from route schemas (it validates its own documents), so it is described here.
 */
export function describeGraphql(b: OpenApiBuilder) {
  b.tag(
    "graphql",
    "GraphQL over the same models, tokens and permissions (NetBox 4 naming); introspect it for the queries.",
  );
  const answer = {
    "200": {
      description:
        "A GraphQL response: `data` and/or `errors` (limits and bad input are GraphQL errors, never a 500).",
      content: json({
        type: "object",
        properties: {
          data: { type: ["object", "null"] },
          errors: { type: "array", items: { type: "object" } },
        },
      }),
    },
    "403": { $ref: "#/components/responses/Forbidden" },
  };
  const request = {
    query: { type: "string" },
    variables: { type: ["object", "null"] },
    operationName: { type: ["string", "null"] },
  };
  b.operation("post", "/graphql", {
    tags: ["graphql"],
    operationId: "graphql_post",
    summary: "Run a GraphQL query",
    requestBody: {
      required: true,
      content: json({ type: "object", properties: request, required: ["query"] }),
    },
    responses: answer,
  });
  b.operation("get", "/graphql", {
    tags: ["graphql"],
    operationId: "graphql_get",
    summary: "Run a GraphQL query given as `?query=` (read-only)",
    parameters: [
      {
        name: "query",
        in: "query",
        description: "The GraphQL document.",
        schema: { type: "string" },
      },
      {
        name: "variables",
        in: "query",
        description: "JSON object of variables.",
        schema: { type: "string" },
      },
      { name: "operationName", in: "query", schema: { type: "string" } },
    ],
    responses: answer,
  });
}
