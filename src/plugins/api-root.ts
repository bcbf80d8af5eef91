/**
 * `/api/plugins/`: the enabled plugins' API roots, and NetBox's `installed-plugins/` (what
 * pynetbox's `nb.plugins.installed_plugins()` reads; superusers only, as upstream; decision 0200).
 */
import type { Hono } from "hono";
import type { HonoEnv } from "../core/context";
import { forbidden, notAuthenticated } from "../core/errors";
import { baseUrlOf } from "../core/http";
import { describeRoute } from "../core/validate";
import type { HostPlugin } from "./types";

const urlMap = {
  "application/json": {
    schema: { type: "object", additionalProperties: { type: "string", format: "uri" } },
  },
};

const installedPlugin = {
  type: "object",
  properties: Object.fromEntries(
    ["name", "package", "author", "author_email", "description", "version", "release_track"].map(
      (k) => [k, { type: "string" }],
    ),
  ),
};

/** NetBox's record of an installed plugin (netbox/plugins/views.py), from what Host knows of it. */
const describePlugin = (p: HostPlugin) => ({
  name: p.name,
  package: p.name,
  author: "",
  author_email: "",
  description: p.description ?? "",
  version: p.version,
  release_track: "",
});

/** Mounts `/plugins/` and `/plugins/installed-plugins/` on the API app. */
export function mountPluginsRoot(api: Hono<HonoEnv>, plugins: HostPlugin[]): void {
  const rootRoute = describeRoute({
    tags: ["api"],
    operationId: "plugins_root",
    summary: "API roots of the enabled plugins",
    responses: {
      "200": { description: "Plugin API base → URL.", content: urlMap },
      "403": { $ref: "#/components/responses/Forbidden" },
    },
  });
  api.get("/plugins", rootRoute, (c) => {
    const origin = baseUrlOf(c);
    return c.json({
      "installed-plugins": `${origin}/api/plugins/installed-plugins/`,
      ...Object.fromEntries(
        plugins
          .filter((p) => p.apiBase)
          .map((p) => [p.apiBase!, `${origin}/api/plugins/${p.apiBase}/`]),
      ),
    });
  });
  const installedRoute = describeRoute({
    tags: ["api"],
    operationId: "plugins_installed_plugins",
    summary: "The enabled plugins (superusers only)",
    responses: {
      "200": {
        description: "One record per enabled plugin.",
        content: { "application/json": { schema: { type: "array", items: installedPlugin } } },
      },
      "403": { $ref: "#/components/responses/Forbidden" },
    },
  });
  api.get("/plugins/installed-plugins", installedRoute, (c) => {
    const user = c.get("auth").user;
    if (!user) throw notAuthenticated();
    if (!user.isSuperuser) throw forbidden();
    return c.json(plugins.map(describePlugin));
  });
}
