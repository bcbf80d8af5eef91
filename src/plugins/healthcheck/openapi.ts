/** The health check plugin in the OpenAPI document: the health page and the `/livez`, `/readyz` probes. */
import type { OpenApiBuilder } from "../../openapi/builder";
import { PLUGIN_NAME, type HealthcheckSettings } from "./settings";

const TAG = "health";

export function describeHealthcheck(b: OpenApiBuilder, settings: Pick<HealthcheckSettings, "loginRequired">) {
  b.tag(TAG, "Health checks for uptime monitors and orchestrators.");
  const report = {
    type: "object",
    properties: {
      status: { type: "string", description: '"working" when every check passed.' },
      checks: { type: "object", additionalProperties: { type: "string" }, description: 'Check → "working" or "<kind>: <message>".' },
    },
    required: ["status", "checks"],
    additionalProperties: false,
  };
  const content = {
    "application/json": { schema: report },
    "application/health+json": { schema: { type: "object", properties: { status: { type: "string", enum: ["pass", "warn", "fail"] } }, required: ["status"] } },
    "text/html": { schema: { type: "string" } },
  };
  b.operation("get", `/plugins/${PLUGIN_NAME}/healthcheck`, {
    tags: [TAG],
    operationId: "healthcheck",
    summary: "Run the configured health checks",
    description: "JSON with `Accept: application/json` or `?format=json`; HTML otherwise.",
    ...(settings.loginRequired ? {} : { security: [] }),
    parameters: [{ name: "format", in: "query", schema: { type: "string", enum: ["json"] } }],
    responses: {
      "200": { description: "Every critical check passed.", content },
      "500": { description: "A critical check failed.", content },
      ...(settings.loginRequired ? { "401": { $ref: "#/components/responses/Unauthorized" } } : {}),
      "406": { description: "No supported representation for the Accept header.", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } },
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
          Object.entries(codes).map(([code, description]) => [code, { description, content: { "application/json": { schema: { type: "object", properties: { status: { type: "string" } }, required: ["status"] } } } }]),
        ),
      },
      { slash: false },
    );
  probe("livez", "Liveness: the process answers", { "200": "Alive." });
  probe("readyz", "Readiness: the critical checks pass", { "200": "Ready.", "503": "Not ready." });
}
