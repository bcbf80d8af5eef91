/**
 * The health check plugin (§6): `/plugins/host_healthcheck_plugin/healthcheck/`, the probes
 * `/livez` and `/readyz`, the four built-in checks and the custom-check contract.
 */
import type { Services } from "../../core/context";
import type { HealthCheckClass, HostPlugin } from "../types";
import { CacheBackendHealthCheck } from "./checks/cache";
import { DatabaseHealthCheck } from "./checks/database";
import { HostRedisCacheHealthCheck, HostRedisTasksHealthCheck } from "./checks/redis";
import { describeHealthcheck } from "./openapi";
import { healthcheckRoutes, probeRoutes, runnerFor, type HealthRunner } from "./routes";
import { PLUGIN_NAME, resolveSettings } from "./settings";

export {
  BaseHealthCheckBackend,
  HealthCheckException,
  ServiceReturnedUnexpectedResult,
  ServiceUnavailable,
  ServiceWarning,
  ThresholdWarning,
  messageOf,
  type HealthCheckErrorKind,
  type Observation,
} from "./backends";

const VERSION = "0.1.0";

/** The built-in checks by dotted path; with no `checks` setting, these run in this order. */
export const BUILTIN_HEALTH_CHECKS: Record<string, HealthCheckClass> = {
  "health_check.Database": DatabaseHealthCheck,
  "health_check.cache.backends.CacheBackend": CacheBackendHealthCheck,
  "host_healthcheck_plugin.backends.redis.HostRedisCacheHealthCheck": HostRedisCacheHealthCheck,
  "host_healthcheck_plugin.backends.redis.HostRedisTasksHealthCheck": HostRedisTasksHealthCheck,
};

const BUILTIN_PATHS = Object.keys(BUILTIN_HEALTH_CHECKS);

export const healthcheckPlugin: HostPlugin = {
  name: PLUGIN_NAME,
  version: VERSION,
  healthChecks: BUILTIN_HEALTH_CHECKS,
  // Validates the settings and every dotted path before the app serves anything.
  onStartup: async (services) => {
    resolveSettings(services, BUILTIN_PATHS);
  },
  routes: (services) => healthcheckRoutes(runnerFor(services, BUILTIN_PATHS, VERSION)),
  rootRoutes: (services) => probeRoutes(runnerFor(services, BUILTIN_PATHS, VERSION)),
  openapi: { describe: (b, services) => describeHealthcheck(b, runnerFor(services, BUILTIN_PATHS, VERSION).settings) },
};

/** The health runner of an app's services (its settings, and check runs counted per dotted path). */
export function healthRunnerOf(services: Services): HealthRunner {
  return runnerFor(services, BUILTIN_PATHS, VERSION);
}
