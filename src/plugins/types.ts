/**
 * The plugin contract (§2). A plugin is a plain description plus `setup(services)`, called once
 * per app by `createApp`: everything a plugin keeps (registries, runners, caches) lives in the
 * closure of that call, so two apps in one process never share state.
 */
import type { Hono } from "hono";
import type { HonoEnv, Services } from "../core/context";
import type { DeleteHook } from "../core/rest/resource";
import type { JobHandler } from "../services/tasks/queue";
import type { PeriodicTask } from "../services/tasks/worker";
import type { PluginOpenApi } from "../openapi/builder";
import type { MigrationStep } from "../db/migrate";

/**
 * A health check class, constructed once per run with the app's services. The health check
 * plugin (`src/plugins/healthcheck/backends.ts`) gives the base class to extend and runs them;
 * the contract names no plugin's type, so the host depends on none.
 */
type HealthCheckClass = new (services: Services) => object;

/** What `setup` hands back: everything the host mounts or calls for this plugin. */
interface PluginParts {
  /** Mounted at `/api/plugins/<apiBase>/` behind authentication. */
  apiRoutes?: Hono<HonoEnv>;
  /** Mounted at `/plugins/<name>/` (pages and endpoints outside `/api/`). */
  routes?: Hono<HonoEnv>;
  /** Mounted at the app root, for well-known paths only (the health plugin's `/livez`, `/readyz`). */
  rootRoutes?: Hono<HonoEnv>;
  /** Describes the plugin's routes in the OpenAPI document (`GET /api/schema/`). */
  openapi?: PluginOpenApi;
  /** Health checks this plugin offers, keyed by dotted path. */
  healthChecks?: Record<string, HealthCheckClass>;
  /** Whatever the plugin offers to code in the same process (benches, tools); the host never reads it. */
  exposes?: unknown;
  hooks?: {
    /** Run before an object is deleted (protect references, cascade links). */
    beforeDelete?: DeleteHook[];
    /** Background task handlers by task name (registered when a tasks Redis is configured). */
    tasks?: Record<string, JobHandler>;
    /** Periodic work (purges): run where retention runs, by the task worker and the Workers cron. */
    periodic?: PeriodicTask[];
    /** Runs once every enabled plugin is set up, with all of them (to validate settings against the others). */
    ready?: (plugins: InstalledPlugin[]) => void | Promise<void>;
  };
}

export interface HostPlugin {
  name: string;
  version: string;
  /** One line on what it does (`/api/plugins/installed-plugins/`). */
  description?: string;
  /** The API prefix `/api/plugins/<apiBase>/` of `apiRoutes`. */
  apiBase?: string;
  /** Static object types the plugin owns (`app_label.model`). */
  objectTypes?: Array<{ appLabel: string; model: string }>;
  /**
   * Data steps run after the SQL migrations on every start (idempotent), for what SQL migrations
   * cannot know, such as tables the plugin makes at run time. Run for every built-in plugin,
   * enabled or not, so a database stays upgradable whatever `PLUGINS` says today.
   */
  migrations?: MigrationStep[];
  /** Called once per app, after the host's models and object types exist. */
  setup?: (services: Services) => PluginParts | Promise<PluginParts>;
}

/** An enabled plugin of one app with what its `setup` returned. */
export interface InstalledPlugin {
  plugin: HostPlugin;
  parts: PluginParts;
}
