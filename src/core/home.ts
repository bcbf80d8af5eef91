/**
 * `GET /`: where to go from here. A small page for a browser, the same links as JSON for an API
 * client; anonymous, and it names nothing but the app's own paths.
 */
import { Hono } from "hono";
import type { HonoEnv } from "./context";
import { baseUrlOf } from "./http";
import { describeRoute } from "./validate";

interface Link {
  rel: string;
  path: string;
  title: string;
}

function linksOf(pluginNames: string[]): Link[] {
  const links: Link[] = [
    { rel: "docs", path: "/api/docs/", title: "API reference (interactive)" },
    { rel: "api", path: "/api/", title: "REST API root" },
    { rel: "schema", path: "/api/schema/", title: "OpenAPI document" },
    { rel: "graphql", path: "/graphql/", title: "GraphQL" },
  ];
  if (pluginNames.includes("host_healthcheck_plugin"))
    links.push({
      rel: "health",
      path: "/plugins/host_healthcheck_plugin/healthcheck/",
      title: "Health report",
    });
  links.push(
    { rel: "livez", path: "/livez", title: "Liveness probe" },
    { rel: "readyz", path: "/readyz", title: "Readiness probe" },
  );
  return links;
}

function page(links: Link[]): string {
  const items = links.map(
    (l) => `<li><a href="${l.path}">${l.title}</a> <code>${l.path}</code></li>`,
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Host</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}code{color:#555}</style>
</head><body><h1>Host</h1>
<p>A network-inventory API. Start with the API reference; calls need a token
(<code>Authorization: Bearer …</code>).</p>
<ul>${items.join("")}</ul></body></html>`;
}

/** The routes of `GET /` for the plugins that are installed. */
export function homeRoutes(pluginNames: string[]): Hono<HonoEnv> {
  const links = linksOf(pluginNames);
  const html = page(links);
  const doc = describeRoute(
    {
      tags: ["api"],
      operationId: "home",
      summary: "Where to go from here: the docs, the API, GraphQL and health",
      security: [],
      responses: {
        "200": {
          description: "A page for a browser (`Accept: text/html`), else the same links as JSON.",
          content: {
            "application/json": {
              schema: {
                type: "object",
                properties: {
                  name: { type: "string" },
                  links: {
                    type: "object",
                    additionalProperties: { type: "string", format: "uri" },
                  },
                },
                required: ["name", "links"],
              },
            },
            "text/html": { schema: { type: "string" } },
          },
        },
      },
    },
    { slash: false },
  );
  return new Hono<HonoEnv>().get("/", doc, (c) => {
    if ((c.req.header("accept") ?? "").includes("text/html")) return c.html(html);
    const base = baseUrlOf(c);
    return c.json({
      name: "Host",
      links: Object.fromEntries(links.map((l) => [l.rel, `${base}${l.path}`])),
    });
  });
}
