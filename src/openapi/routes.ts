/**
 * `GET /api/schema/` (the OpenAPI document, JSON or `?format=yaml`) and `GET /api/docs/` (the
 * interactive reference over it). The document needs a token like every `/api/` route; the docs
 * page and its assets hold no data and are public (docs/decisions/0020-openapi-access.md).
 */
import { Hono } from "hono";
import type { HonoEnv } from "../core/context";
import * as v from "valibot";
import { ApiError, notAuthenticated, notFound } from "../core/errors";
import { describeRoute, query } from "../core/validate";
import { baseUrlOf } from "../core/http";
import { hasPermission } from "../core/auth/permissions";
import { DOCS_CSP, DOCS_HTML, docsAsset, docsAvailable } from "./docs-page";
import type { OpenApiDocuments } from "./generate";
import { freshRead } from "../core/fresh-read";
import type { Queries } from "../db/client";

/** Paths reachable without a token (the page shell and its static assets). */
export const isPublicDocsPath = (path: string) =>
  /^\/api\/docs(\/|\/assets\/[\w.-]+\/?)?$/.test(path);

const notOnThisRuntime = () =>
  ApiError.detail(
    501,
    "The API docs page is served on Bun only (its assets are not in the Worker bundle); load /api/schema/ into any OpenAPI viewer instead.",
    "not_implemented",
  );

const SchemaQuery = v.looseObject({
  format: v.optional(
    v.picklist(["json", "yaml", "yml", "openapi-json"], "Unknown format: use json or yaml."),
    undefined,
  ),
});

function wantsYaml(format: string | undefined, accept: string | undefined): boolean {
  if (format) return format === "yaml" || format === "yml";
  return /\bapplication\/(x-)?yaml\b|\bapplication\/vnd\.oai\.openapi(?!\+json)\b|\btext\/yaml\b/.test(
    accept ?? "",
  );
}

export function openApiRoutes(documents: OpenApiDocuments): Hono<HonoEnv> {
  const app = new Hono<HonoEnv>();

  app.get(
    "/schema",
    describeRoute({
      tags: ["api"],
      operationId: "schema_retrieve",
      summary: "This OpenAPI 3.1 document (JSON, or YAML with ?format=yaml)",
      description:
        "Generated from the models, the route schemas and the custom object types in the database; it changes as soon as a type or field does.",
      responses: {
        "200": {
          description: "The OpenAPI document.",
          content: {
            "application/json": { schema: { type: "object" } },
            "application/yaml": { schema: { type: "string" } },
          },
        },
        "403": { $ref: "#/components/responses/Forbidden" },
      },
    }),
    query(SchemaQuery),
    async (c) => {
      const yaml = wantsYaml(c.req.valid("query").format, c.req.header("accept"));
      // Types the caller may not view are left out entirely (§4: nothing they may not view is named).
      const canView = (slug: string) => hasPermission(c, "view", "custom_objects", slug);
      // the fingerprints ride with the request's guards (decision 0166)
      const read = (queries: Queries) => freshRead(c, () => queries);
      const text = await documents.text(baseUrlOf(c), yaml ? "yaml" : "json", canView, read);
      c.header("Cache-Control", "no-cache");
      c.header("Vary", "Accept, Authorization");
      // the kept bytes streamed: nothing written or encoded again per request (decision 0210)
      return c.body(text.body, 200, {
        "Content-Type": yaml ? "application/yaml; charset=utf-8" : "application/json",
        "Content-Length": String(text.length),
      });
    },
  );

  const notAvailable = {
    description:
      "Not available on this runtime (Workers): use /api/schema/ with any OpenAPI viewer.",
    content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
  };
  const docsPage = describeRoute({
    tags: ["api"],
    operationId: "docs_page",
    summary: "Interactive API reference (HTML), built from /api/schema/",
    security: [],
    responses: {
      "200": { description: "The page.", content: { "text/html": { schema: { type: "string" } } } },
      "501": notAvailable,
    },
  });
  const docsAssetDoc = describeRoute(
    {
      tags: ["api"],
      operationId: "docs_asset",
      summary: "A static asset of the docs page",
      security: [],
      responses: {
        "200": { description: "The asset (JavaScript, CSS or an image)." },
        "404": { $ref: "#/components/responses/NotFound" },
        "501": notAvailable,
      },
    },
    { slash: false },
  );
  app.get("/docs", docsPage, async (c) => {
    // `?format=openapi` (what pynetbox before NetBox 3.5 fetches): the document itself, with
    // /api/schema/'s access rule — this path is public only as the page shell.
    if (c.req.query("format") === "openapi") {
      if (!c.get("auth").user && c.get("services").config.loginRequired) throw notAuthenticated();
      const canView = (slug: string) => hasPermission(c, "view", "custom_objects", slug);
      c.header("Cache-Control", "no-cache");
      c.header("Vary", "Accept, Authorization");
      const text = await documents.text(baseUrlOf(c), "json", canView);
      return c.body(text.body, 200, {
        "Content-Type": "application/json",
        "Content-Length": String(text.length),
      });
    }
    if (!docsAvailable()) throw notOnThisRuntime();
    c.header("Content-Security-Policy", DOCS_CSP);
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Cache-Control", "no-cache");
    return c.html(DOCS_HTML);
  });
  app.get("/docs/assets/:name", docsAssetDoc, async (c) => {
    if (!docsAvailable()) throw notOnThisRuntime();
    const asset = await docsAsset(c.req.param("name"));
    if (!asset) throw notFound();
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Cache-Control", "public, max-age=3600");
    return c.body(asset.body as Uint8Array<ArrayBuffer> | string, 200, {
      "Content-Type": asset.type,
    });
  });
  return app;
}
