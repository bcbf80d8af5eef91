/** The plugin contract (§2): what a plugin module exports and how the host mounts it. */
import type { Hono } from "hono";
import type { HonoEnv, Services } from "../core/context";
import type { BaseHealthCheckBackend } from "./healthcheck/backends";
import type { PluginOpenApi } from "../openapi/builder";

/**
 * A health check class: a concrete subclass of `BaseHealthCheckBackend`, constructed once per run
 * with the app's services (see `src/plugins/healthcheck/backends.ts`).
 */
export type HealthCheckClass = new (services: Services) => BaseHealthCheckBackend;

export interface HostPlugin {
  name: string;
  version: string;
  /** Mounted at `/api/plugins/<apiBase>/` behind authentication. */
  apiBase?: string;
  apiRoutes?: (services: Services) => Hono<HonoEnv>;
  /** Mounted at `/plugins/<name>/` (pages and endpoints outside `/api/`). */
  routes?: (services: Services) => Hono<HonoEnv>;
  /** Mounted at the app root, for well-known paths only (the health plugin's `/livez`, `/readyz`). */
  rootRoutes?: (services: Services) => Hono<HonoEnv>;
  /** Health checks this plugin offers, keyed by dotted path. */
  healthChecks?: Record<string, HealthCheckClass>;
  /** Static object types the plugin owns (`app_label.model`). */
  objectTypes?: Array<{ appLabel: string; model: string }>;
  onStartup?: (services: Services) => Promise<void>;
  /** Describes the plugin's routes in the OpenAPI document (`GET /api/schema/`). */
  openapi?: PluginOpenApi;
}
