/**
 * `PLUGINS_CONFIG.host_healthcheck_plugin`: validated once, and the dotted check paths resolved
 * against the checks that the enabled plugins offer. Any problem is a `ConfigError`.
 */
import * as v from "valibot";
import { ConfigError } from "../../config";
import type { Services } from "../../core/context";
import type { HealthCheckClass } from "../types";

export const PLUGIN_NAME = "host_healthcheck_plugin";

/** A check selected to run: its dotted path, class and identifier (its key in `checks`). */
export interface SelectedCheck {
  path: string;
  check: HealthCheckClass;
  identifier: string;
}

/** The plugin's settings after validation. */
export interface HealthcheckSettings {
  checks: SelectedCheck[];
  timeoutMs: number;
  loginRequired: boolean;
  warningsAsErrors: boolean;
  /** How long a check's result is handed out again before the check runs anew (0: never). */
  cacheSeconds: number;
  /** Who sees each check and its message: everyone, API-token holders, or nobody. */
  details: "always" | "authenticated" | "never";
  /** Named subsets of `checks` (`/healthcheck/<group>/`), in `checks` order. */
  groups: Map<string, SelectedCheck[]>;
}

export const DEFAULT_TIMEOUT_MS = 3_000;
const MAX_TIMEOUT_MS = 60_000;
const MAX_CACHE_SECONDS = 3_600;
const GROUP_NAME = /^[a-z0-9]+([_-][a-z0-9]+)*$/;
const isPlainObject = (x: unknown) => typeof x === "object" && x !== null && !Array.isArray(x);
const KNOWN_KEYS = ["checks", "timeout_ms", "login_required", "warnings_as_errors", "groups", "details", "cache_seconds"];

const SettingsSchema = v.strictObject(
  {
    checks: v.optional(
      v.pipe(
        v.array(v.pipe(v.string("must be a list of dotted paths"), v.trim(), v.minLength(1, "must not contain empty paths")), "must be a list of dotted paths"),
        v.minLength(1, "must list at least one check (leave it out to run the built-in checks)"),
      ),
    ),
    timeout_ms: v.optional(
      v.pipe(
        v.number("must be a number of milliseconds"),
        v.integer("must be a whole number of milliseconds"),
        v.minValue(1, "must be at least 1"),
        v.maxValue(MAX_TIMEOUT_MS, `must be at most ${MAX_TIMEOUT_MS}`),
      ),
      DEFAULT_TIMEOUT_MS,
    ),
    login_required: v.optional(v.boolean("must be true or false"), false),
    warnings_as_errors: v.optional(v.boolean("must be true or false"), true),
    cache_seconds: v.optional(
      v.pipe(v.number("must be a number of seconds"), v.minValue(0, "must be at least 0"), v.maxValue(MAX_CACHE_SECONDS, `must be at most ${MAX_CACHE_SECONDS}`)),
      0,
    ),
    details: v.optional(v.picklist(["always", "authenticated", "never"], "must be one of always, authenticated, never"), "always"),
    groups: v.optional(
      v.pipe(
        v.unknown(),
        v.check(isPlainObject, "must be an object mapping a group name to a list of check identifiers"),
        v.record(
        v.pipe(v.string(), v.regex(GROUP_NAME, "group names must be lowercase letters, digits, - and _ (e.g. \"live\", \"core-db\")"), v.maxLength(64, "group names must be at most 64 characters")),
        v.pipe(
          v.array(v.pipe(v.string("must be a list of check identifiers"), v.minLength(1, "must not contain empty identifiers")), "must be a list of check identifiers"),
          v.minLength(1, "must list at least one check identifier"),
        ),
        "must be an object mapping a group name to a list of check identifiers",
        ),
      ),
      {},
    ),
  },
);

/** Every check the enabled plugins offer, by dotted path; a path offered twice is an error. */
export function availableChecks(services: Services): Map<string, HealthCheckClass> {
  const out = new Map<string, HealthCheckClass>();
  for (const plugin of services.plugins) {
    for (const [path, check] of Object.entries(plugin.healthChecks ?? {})) {
      const existing = out.get(path);
      if (existing && existing !== check) {
        throw new ConfigError("PLUGINS_CONFIG", `${PLUGIN_NAME}: health check "${path}" is offered by more than one plugin`);
      }
      out.set(path, check);
    }
  }
  return out;
}

/**
 * Validates the plugin's settings and resolves its `checks` (none given: the built-ins, in
 * `builtins` order). Unknown paths, bad values and unknown keys throw `ConfigError`.
 */
export function resolveSettings(services: Services, builtins: string[]): HealthcheckSettings {
  const raw = services.config.pluginsConfig[PLUGIN_NAME] ?? {};
  const parsed = v.safeParse(SettingsSchema, raw);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const key = v.getDotPath(issue);
    if (issue.type === "strict_object" && issue.path?.length) {
      const unknownKey = issue.path[0]?.key;
      throw new ConfigError("PLUGINS_CONFIG", `${PLUGIN_NAME}: unknown key ${JSON.stringify(String(unknownKey))} (known: ${KNOWN_KEYS.join(", ")})`);
    }
    throw new ConfigError("PLUGINS_CONFIG", `${PLUGIN_NAME}.${key ?? ""}: ${issue.message}`.replace(/\.:/, ":"));
  }
  const settings = parsed.output;
  const available = availableChecks(services);
  const paths = [...new Set(settings.checks ?? builtins)];
  const checks = paths.map((path) => {
    const check = available.get(path);
    if (!check) {
      throw new ConfigError("PLUGINS_CONFIG", `${PLUGIN_NAME}.checks: unknown health check "${path}" (available: ${[...available.keys()].join(", ")})`);
    }
    let identifier: string;
    try {
      identifier = new check(services).identifier();
    } catch (e) {
      throw new ConfigError("PLUGINS_CONFIG", `${PLUGIN_NAME}.checks: health check "${path}" cannot be built (${e instanceof Error ? e.message : String(e)})`);
    }
    return { path, check, identifier };
  });
  const byId = new Map<string, SelectedCheck>();
  for (const selected of checks) {
    const other = byId.get(selected.identifier);
    if (other) throw new ConfigError("PLUGINS_CONFIG", `${PLUGIN_NAME}.checks: "${other.path}" and "${selected.path}" both report as "${selected.identifier}"`);
    byId.set(selected.identifier, selected);
  }
  const unknownId = (where: string, id: string) =>
    new ConfigError("PLUGINS_CONFIG", `${PLUGIN_NAME}.${where}: unknown check identifier "${id}" (checks: ${[...byId.keys()].join(", ")})`);
  const groups = new Map<string, SelectedCheck[]>();
  for (const [name, ids] of Object.entries(settings.groups)) {
    for (const id of ids) if (!byId.has(id)) throw unknownId(`groups.${name}`, id);
    groups.set(name, checks.filter((c) => ids.includes(c.identifier)));
  }
  return { checks, timeoutMs: settings.timeout_ms, loginRequired: settings.login_required, warningsAsErrors: settings.warnings_as_errors, details: settings.details, cacheSeconds: settings.cache_seconds, groups };
}
