/** The health check plugin: `/plugins/host_healthcheck_plugin/healthcheck/`. */
import type { HostPlugin } from "../types";

export const healthcheckPlugin: HostPlugin = {
  name: "host_healthcheck_plugin",
  version: "0.1.0",
};
