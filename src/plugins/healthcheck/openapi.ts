/** The health check plugin in the OpenAPI document: the health page and the `/livez`, `/readyz` probes. */
import type { OpenApiBuilder } from "../../openapi/builder";
import { PLUGIN_NAME, type HealthcheckSettings } from "./settings";

const TAG = "health";

export function describeHealthcheck(
  b: OpenApiBuilder,
  settings: Pick<HealthcheckSettings, "loginRequired" | "details">,
) {
  b.tag(TAG, "Health checks for uptime monitors and orchestrators.");
  const report = {
    type: "object",
    properties: {
      status: { type: "string", description: '"working" when every check passed.' },
      checks: {
        type: "object",
        additionalProperties: { type: "string" },
        description:
          'Check → "working" or "<kind>: <message>". Absent when the caller may not see details.',
      },
    },
    required: ["status"],
    additionalProperties: false,
  };
  const content = {
    "application/json": { schema: report },
    "application/health+json": {
      schema: {
        type: "object",
        properties: { status: { type: "string", enum: ["pass", "warn", "fail"] } },
        required: ["status"],
      },
    },
    "text/html": { schema: { type: "string" } },
    "application/openmetrics-text": {
      schema: {
        type: "string",
        description: "OpenMetrics gauges ending with # EOF (always HTTP 200).",
      },
    },
  };
  // Query and path parameters come from the routes' schemas (routes.ts); this part adds what depends on the settings.
  const details =
    settings.details === "always"
      ? ""
      : settings.details === "never"
        ? " Check details are never shown."
        : " Check details are shown to callers with an API token only.";
  const responses = {
    "200": {
      description:
        "Every critical check passed (with cache_seconds, the `Age` header says how old the result is).",
      content,
    },
    "500": { description: "A critical check failed.", content },
    ...(settings.loginRequired || settings.details === "authenticated"
      ? { "401": { $ref: "#/components/responses/Unauthorized" } }
      : {}),
    "400": {
      description: "An unknown identifier in `exclude`.",
      content: { "application/json": { schema: { type: "object" } } },
    },
    "406": {
      description: "No supported representation for the Accept header.",
      content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
    },
  };
  b.operation("get", `/plugins/${PLUGIN_NAME}/healthcheck`, {
    tags: [TAG],
    operationId: "healthcheck",
    summary: "Run the configured health checks",
    description: `JSON with \`Accept: application/json\` or \`?format=json\`; health+json, OpenMetrics and HTML likewise.${details}`,
    ...(settings.loginRequired ? {} : { security: [] }),
    responses,
  });
  b.operation("get", `/plugins/${PLUGIN_NAME}/healthcheck/{group}`, {
    tags: [TAG],
    operationId: "healthcheckGroup",
    summary: "Run the checks of one group (PLUGINS_CONFIG groups)",
    description: `Like the health page, limited to the group's checks; an unknown group is 404.${details}`,
    ...(settings.loginRequired ? {} : { security: [] }),
    responses: {
      ...responses,
      "404": {
        description: "No such group.",
        content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
      },
    },
  });
  const probe = (name: string, summary: string, codes: Record<string, string>) =>
    b.operation(
      "get",
      `/${name}`,
      {
        tags: [TAG],
        operationId: name,
        summary,
        security: [],
        responses: Object.fromEntries(
          Object.entries(codes).map(([code, description]) => [
            code,
            {
              description,
              content: {
                "application/json": {
                  schema: {
                    type: "object",
                    properties: { status: { type: "string" } },
                    required: ["status"],
                  },
                },
              },
            },
          ]),
        ),
      },
      { slash: false },
    );
  probe("livez", "Liveness: the process answers", { "200": "Alive." });
  probe("readyz", "Readiness: the critical checks pass", { "200": "Ready.", "503": "Not ready." });
}
