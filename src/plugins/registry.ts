/** Which plugins exist and which `PLUGINS` enables. A plugin left out mounts nothing at all. */
import { ConfigError } from "../config";
import type { HostPlugin } from "./types";
import { customObjectsPlugin } from "./custom-objects";
import { healthcheckPlugin } from "./healthcheck";

export const BUILTIN_PLUGINS: HostPlugin[] = [customObjectsPlugin, healthcheckPlugin];

/** Picks the enabled plugins, in `PLUGINS` order; an unknown name stops start-up. */
export function resolvePlugins(
  enabled: string[],
  available: HostPlugin[] = BUILTIN_PLUGINS,
): HostPlugin[] {
  const byName = new Map(available.map((p) => [p.name, p]));
  return enabled.map((name) => {
    const plugin = byName.get(name);
    if (!plugin)
      throw new ConfigError(
        "PLUGINS",
        `unknown plugin "${name}" (available: ${[...byName.keys()].join(", ")})`,
      );
    return plugin;
  });
}
