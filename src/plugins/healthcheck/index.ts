/**
 * The health check plugin (§6): `/plugins/host_healthcheck_plugin/healthcheck/`, the probes
 * `/livez` and `/readyz`, the four built-in checks and the custom-check contract.
 */
import type { Services } from "../../core/context";
import type { HostPlugin, InstalledPlugin } from "../types";
import { CacheBackendHealthCheck } from "./checks/cache";
import { DatabaseHealthCheck } from "./checks/database";
import { HostRedisCacheHealthCheck, HostRedisTasksHealthCheck } from "./checks/redis";
import { describeHealthcheck } from "./openapi";
import { createRunner, healthcheckRoutes, probeRoutes, type HealthRunner } from "./routes";
import { PLUGIN_NAME, type HealthCheckClass } from "./settings";

export {
  BaseHealthCheckBackend,
  ServiceReturnedUnexpectedResult,
  ServiceUnavailable,
  ServiceWarning,
} from "./backends";

const VERSION = "0.1.0";

/** The built-in checks by dotted path; with no `checks` setting, these run in this order. */
const BUILTIN_HEALTH_CHECKS: Record<string, HealthCheckClass> = {
  "health_check.Database": DatabaseHealthCheck,
  "health_check.cache.backends.CacheBackend": CacheBackendHealthCheck,
  "host_healthcheck_plugin.backends.redis.HostRedisCacheHealthCheck": HostRedisCacheHealthCheck,
  "host_healthcheck_plugin.backends.redis.HostRedisTasksHealthCheck": HostRedisTasksHealthCheck,
};

const BUILTIN_PATHS = Object.keys(BUILTIN_HEALTH_CHECKS);

/** Epoch ms that never steps back with the wall clock, with sub-ms precision for durations. */
const epochNow = () => performance.timeOrigin + performance.now();

type Parts = Awaited<ReturnType<NonNullable<HostPlugin["setup"]>>>;

/** The plugin; `now` is the clock its checks are timed and cached on (tests move their own). */
export function createHealthcheckPlugin(options: { now?: () => number } = {}): HostPlugin {
  return {
    name: PLUGIN_NAME,
    version: VERSION,
    description: "A health endpoint running the configured checks.",
    setup: (services) => setupHealthcheck(services, options.now ?? epochNow),
  };
}

export const healthcheckPlugin: HostPlugin = createHealthcheckPlugin();

/** What the plugin mounts for one app; its runner is made once every plugin is set up. */
function setupHealthcheck(services: Services, now: () => number): Parts {
  // A local file's integrity check: now (in the background) and daily (decision 0079).
  const file = services.db.fileHealth;
  file.attach((level, msg, fields) => services.logger[level](msg, fields));
  file.scheduleIntegrity();
  // Made once every plugin is set up: the settings may name the checks any of them offers.
  let runner: HealthRunner | null = null;
  const runnerOf = () => {
    if (!runner) throw new Error(`${PLUGIN_NAME} used before the app finished starting`);
    return runner;
  };
  return {
    healthChecks: BUILTIN_HEALTH_CHECKS,
    exposes: { runner: runnerOf },
    routes: healthcheckRoutes(runnerOf),
    rootRoutes: probeRoutes(runnerOf),
    openapi: { describe: (b) => describeHealthcheck(b, runnerOf().settings) },
    hooks: {
      // Validates the settings and every dotted path before the app serves anything.
      ready: (plugins) => {
        runner = createRunner(services, BUILTIN_PATHS, VERSION, plugins, now);
      },
    },
  };
}

/** The health runner of an app (its settings, and check runs counted per dotted path), for benches. */
export function healthRunnerOf(app: { plugins: readonly InstalledPlugin[] }): HealthRunner {
  const mine = app.plugins.find((p) => p.plugin.name === PLUGIN_NAME);
  if (!mine) throw new Error(`${PLUGIN_NAME} is not enabled`);
  return (mine.parts.exposes as { runner: () => HealthRunner }).runner();
}
