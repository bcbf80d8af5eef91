/**
 * The typed Hono environment: `c.var.services` holds everything built once per process or
 * isolate; `c.var.auth` is the authenticated caller of this request.
 */
import type { Context } from "hono";
import type { Config } from "../config";
import type { Database } from "../db/client";
import type { Cache } from "../services/cache/types";
import type { RedisClient } from "../services/redis-types";
import type { Logger } from "../services/logger";
import type { ObjectTypeRegistry } from "./object-types";
import type { ModelRegistry } from "./models/registry";
import type { DeleteHooks } from "./rest/resource";
import type { TaskQueue } from "../services/tasks/queue";

export interface AuthUser {
  id: number;
  username: string;
  isSuperuser: boolean;
  /** Codenames `<app_label>.<action>_<model>` granted through object permissions. */
  permissions: Set<string>;
  /**
   * Constraint sets per codename, present only where every grant of that codename is
   * constrained (an unconstrained grant lifts the restriction). See `auth/restrict.ts`.
   */
  constraints?: Map<string, Record<string, unknown>[]>;
}

export interface AuthState {
  user: AuthUser | null;
  tokenId: number | null;
  writeEnabled: boolean;
}

/** An enabled plugin as the host sees it: no routes or state, just who it is. */
export interface PluginInfo {
  name: string;
  version: string;
  apiBase?: string;
}

export interface Services {
  config: Config;
  db: Database;
  cache: Cache;
  redis: { caching?: RedisClient; tasks?: RedisClient };
  logger: Logger;
  /** The enabled plugins, in `PLUGINS` order (what they mount is wired by `createApp`). */
  plugins: PluginInfo[];
  objectTypes: ObjectTypeRegistry;
  models: ModelRegistry;
  deleteHooks: DeleteHooks;
  /** The job queue on `REDIS['tasks']`; null when no tasks Redis is configured. */
  tasks: TaskQueue | null;
  /** Work plugins ask to repeat (`hooks.periodic`): run beside retention by the task worker and the Workers cron. */
  periodic: Array<{ name: string; everyMs: number; run(): Promise<unknown> }>;
  startedAt: Date;
}

export type HonoEnv = { Variables: { services: Services; auth: AuthState; requestId: string } };
export type Ctx = Context<HonoEnv>;
