/**
 * `GET /api/schema/` (the OpenAPI document, JSON or `?format=yaml`) and `GET /api/docs/` (the
 * interactive reference over it). The document needs a token like every `/api/` route; the docs
 * page and its assets hold no data and are public (docs/decisions/0020-openapi-access.md).
 */
import { Hono } from "hono";
import type { HonoEnv } from "../core/context";
import { ApiError, notFound } from "../core/errors";
import { baseUrlOf } from "../core/http";
import { hasPermission } from "../core/auth/permissions";
import { DOCS_CSP, DOCS_HTML, docsAsset, docsAvailable } from "./docs-page";
import type { OpenApiDocuments } from "./generate";

/** Paths reachable without a token (the page shell and its static assets). */
export const isPublicDocsPath = (path: string) => /^\/api\/docs(\/|\/assets\/[\w.-]+\/?)?$/.test(path);

const notOnThisRuntime = () =>
  ApiError.detail(501, "The API docs page is served on Bun only (its assets are not in the Worker bundle); load /api/schema/ into any OpenAPI viewer instead.", "not_implemented");

function wantsYaml(format: string | undefined, accept: string | undefined): boolean {
  if (format) {
    if (format === "yaml" || format === "yml") return true;
    if (format === "json" || format === "openapi-json") return false;
    throw ApiError.detail(400, `Unknown format "${format}": use json or yaml.`, "invalid_format");
  }
  return /\bapplication\/(x-)?yaml\b|\bapplication\/vnd\.oai\.openapi(?!\+json)\b|\btext\/yaml\b/.test(accept ?? "");
}

export function openApiRoutes(documents: OpenApiDocuments): Hono<HonoEnv> {
  const app = new Hono<HonoEnv>();

  app.get("/schema", async (c) => {
    const yaml = wantsYaml(c.req.query("format"), c.req.header("accept"));
    // Types the caller may not view are left out entirely (§4: nothing they may not view is named).
    const canView = (slug: string) => hasPermission(c, "view", "custom_objects", slug);
    const text = await documents.text(baseUrlOf(c), yaml ? "yaml" : "json", canView);
    c.header("Cache-Control", "no-cache");
    c.header("Vary", "Accept, Authorization");
    return c.body(text, 200, { "Content-Type": yaml ? "application/yaml; charset=utf-8" : "application/json" });
  });

  app.get("/docs", (c) => {
    if (!docsAvailable()) throw notOnThisRuntime();
    c.header("Content-Security-Policy", DOCS_CSP);
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Cache-Control", "no-cache");
    return c.html(DOCS_HTML);
  });
  app.get("/docs/assets/:name", async (c) => {
    if (!docsAvailable()) throw notOnThisRuntime();
    const asset = await docsAsset(c.req.param("name"));
    if (!asset) throw notFound();
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Cache-Control", "public, max-age=3600");
    return c.body(asset.body as Uint8Array<ArrayBuffer> | string, 200, { "Content-Type": asset.type });
  });
  return app;
}
