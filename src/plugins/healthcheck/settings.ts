/**
 * `PLUGINS_CONFIG.host_healthcheck_plugin`: validated once, and the dotted check paths resolved
 * against the checks that the enabled plugins offer. Any problem is a `ConfigError`.
 */
import * as v from "valibot";
import { ConfigError } from "../../config";
import type { Services } from "../../core/context";
import type { InstalledPlugin } from "../types";
import type { BaseHealthCheckBackend } from "./backends";

/** A check class as this plugin runs it (the contract's `HealthCheckClass`, narrowed to the base class). */
export type HealthCheckClass = new (services: Services) => BaseHealthCheckBackend;

export const PLUGIN_NAME = "host_healthcheck_plugin";

/** A check selected to run: its dotted path, class and identifier (its key in `checks`). */
export interface SelectedCheck {
  path: string;
  check: HealthCheckClass;
  identifier: string;
  /** Slower than this (ms) reads `warning`; unset: no such warning. */
  warnMs?: number;
}

/** Thresholds of the tasks check's queue figures (`queue` setting). */
export interface QueueThresholds {
  /** More messages waiting on Redis than this is a problem. */
  maxDepth: number;
  /** The oldest pending job waiting longer than this is a problem. */
  maxPendingAgeSeconds: number;
  /** No worker heartbeat for this long (or never, while jobs wait) is a problem. */
  workerStaleSeconds: number;
  /** A problem reads `warning` (HTTP 200) or fails the check. */
  onProblem: "warning" | "fail";
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
  queue: QueueThresholds;
  /** Named subsets of `checks` (`/healthcheck/<group>/`), in `checks` order. */
  groups: Map<string, SelectedCheck[]>;
}

const DEFAULT_TIMEOUT_MS = 3_000;
const MAX_TIMEOUT_MS = 60_000;
const MAX_CACHE_SECONDS = 3_600;
const GROUP_NAME = /^[a-z0-9]+([_-][a-z0-9]+)*$/;
const isPlainObject = (x: unknown) => typeof x === "object" && x !== null && !Array.isArray(x);
const KNOWN_KEYS = [
  "checks",
  "timeout_ms",
  "login_required",
  "warnings_as_errors",
  "groups",
  "details",
  "cache_seconds",
  "queue",
  "warn_ms",
];

const WARN_MS_SHAPE =
  "must be a number of milliseconds, or an object mapping check identifiers to one";
const WarnMs = v.pipe(
  v.number("must be a number of milliseconds"),
  v.integer("must be a whole number of milliseconds"),
  v.minValue(1, "must be at least 1"),
);

const seconds = (min: number, fallback: number) =>
  v.optional(
    v.pipe(
      v.number("must be a number of seconds"),
      v.minValue(min, `must be at least ${min}`),
      v.maxValue(30 * 86_400, "must be at most 2592000 (30 days)"),
    ),
    fallback,
  );

const QueueSchema = v.strictObject(
  {
    max_depth: v.optional(
      v.pipe(
        v.number("must be a number of jobs"),
        v.integer("must be a whole number of jobs"),
        v.minValue(1, "must be at least 1"),
      ),
      1_000,
    ),
    max_pending_age_seconds: seconds(1, 300),
    // The Bun loops beat every 5 s; the Workers cron runs every minute.
    worker_stale_seconds: seconds(10, 180),
    on_problem: v.optional(v.picklist(["warning", "fail"], "must be warning or fail"), "warning"),
  },
  "must be an object (max_depth, max_pending_age_seconds, worker_stale_seconds, on_problem)",
);

/** The `queue` thresholds from the plugin's raw settings (validated at start-up; defaults otherwise). */
export function queueThresholdsOf(services: Services): QueueThresholds {
  const raw = (services.config.pluginsConfig[PLUGIN_NAME] as { queue?: unknown } | undefined)
    ?.queue;
  const parsed = v.safeParse(QueueSchema, raw ?? {});
  const q = parsed.success ? parsed.output : v.parse(QueueSchema, {});
  return {
    maxDepth: q.max_depth,
    maxPendingAgeSeconds: q.max_pending_age_seconds,
    workerStaleSeconds: q.worker_stale_seconds,
    onProblem: q.on_problem,
  };
}

const SettingsSchema = v.strictObject({
  checks: v.optional(
    v.pipe(
      v.array(
        v.pipe(
          v.string("must be a list of dotted paths"),
          v.trim(),
          v.minLength(1, "must not contain empty paths"),
        ),
        "must be a list of dotted paths",
      ),
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
    v.pipe(
      v.number("must be a number of seconds"),
      v.minValue(0, "must be at least 0"),
      v.maxValue(MAX_CACHE_SECONDS, `must be at most ${MAX_CACHE_SECONDS}`),
    ),
    0,
  ),
  queue: v.optional(QueueSchema),
  warn_ms: v.optional(
    v.union(
      [
        WarnMs,
        v.pipe(
          v.unknown(),
          v.check(isPlainObject, WARN_MS_SHAPE),
          v.record(v.string(), WarnMs, WARN_MS_SHAPE),
        ),
      ],
      WARN_MS_SHAPE,
    ),
  ),
  details: v.optional(
    v.picklist(["always", "authenticated", "never"], "must be one of always, authenticated, never"),
    "always",
  ),
  groups: v.optional(
    v.pipe(
      v.unknown(),
      v.check(
        isPlainObject,
        "must be an object mapping a group name to a list of check identifiers",
      ),
      v.record(
        v.pipe(
          v.string(),
          v.regex(
            GROUP_NAME,
            'group names must be lowercase letters, digits, - and _ (e.g. "live", "core-db")',
          ),
          v.maxLength(64, "group names must be at most 64 characters"),
        ),
        v.pipe(
          v.array(
            v.pipe(
              v.string("must be a list of check identifiers"),
              v.minLength(1, "must not contain empty identifiers"),
            ),
            "must be a list of check identifiers",
          ),
          v.minLength(1, "must list at least one check identifier"),
        ),
        "must be an object mapping a group name to a list of check identifiers",
      ),
    ),
    {},
  ),
});

/** Every check the enabled plugins offer, by dotted path; a path offered twice is an error. */
function availableChecks(plugins: readonly InstalledPlugin[]): Map<string, HealthCheckClass> {
  const out = new Map<string, HealthCheckClass>();
  for (const { parts } of plugins) {
    for (const [path, offered] of Object.entries(parts.healthChecks ?? {})) {
      const check = offered as HealthCheckClass;
      const existing = out.get(path);
      if (existing && existing !== check) {
        throw new ConfigError(
          "PLUGINS_CONFIG",
          `${PLUGIN_NAME}: health check "${path}" is offered by more than one plugin`,
        );
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
export function resolveSettings(
  services: Services,
  builtins: string[],
  plugins: readonly InstalledPlugin[],
): HealthcheckSettings {
  const raw = services.config.pluginsConfig[PLUGIN_NAME] ?? {};
  const parsed = v.safeParse(SettingsSchema, raw);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const key = v.getDotPath(issue);
    if (issue.type === "strict_object" && issue.expected === "never" && issue.path?.length) {
      const unknownKey = issue.path.at(-1)?.key;
      const inQueue = issue.path.length > 1;
      const where = inQueue ? `${PLUGIN_NAME}.queue` : PLUGIN_NAME;
      const known = inQueue ? Object.keys(QueueSchema.entries) : KNOWN_KEYS;
      throw new ConfigError(
        "PLUGINS_CONFIG",
        `${where}: unknown key ${JSON.stringify(String(unknownKey))} (known: ${known.join(", ")})`,
      );
    }
    throw new ConfigError(
      "PLUGINS_CONFIG",
      `${PLUGIN_NAME}.${key ?? ""}: ${issue.message}`.replace(/\.:/, ":"),
    );
  }
  const settings = parsed.output;
  const available = availableChecks(plugins);
  const paths = [...new Set(settings.checks ?? builtins)];
  const checks = paths.map((path) => {
    const check = available.get(path);
    if (!check) {
      throw new ConfigError(
        "PLUGINS_CONFIG",
        `${PLUGIN_NAME}.checks: unknown health check "${path}" (available: ${[...available.keys()].join(", ")})`,
      );
    }
    let identifier: string;
    try {
      identifier = new check(services).identifier();
    } catch (e) {
      throw new ConfigError(
        "PLUGINS_CONFIG",
        `${PLUGIN_NAME}.checks: health check "${path}" cannot be built (${e instanceof Error ? e.message : String(e)})`,
      );
    }
    return { path, check, identifier };
  });
  const byId = new Map<string, SelectedCheck>();
  for (const selected of checks) {
    const other = byId.get(selected.identifier);
    if (other)
      throw new ConfigError(
        "PLUGINS_CONFIG",
        `${PLUGIN_NAME}.checks: "${other.path}" and "${selected.path}" both report as "${selected.identifier}"`,
      );
    byId.set(selected.identifier, selected);
  }
  const unknownId = (where: string, id: string) =>
    new ConfigError(
      "PLUGINS_CONFIG",
      `${PLUGIN_NAME}.${where}: unknown check identifier "${id}" (checks: ${[...byId.keys()].join(", ")})`,
    );
  // warn_ms: one number for every check, or per identifier; each below the timeout.
  const warnFor = new Map<string, number>();
  if (typeof settings.warn_ms === "number")
    for (const id of byId.keys()) warnFor.set(id, settings.warn_ms);
  else
    for (const [id, ms] of Object.entries(settings.warn_ms ?? {})) {
      if (!byId.has(id)) throw unknownId("warn_ms", id);
      warnFor.set(id, ms);
    }
  for (const [id, ms] of warnFor) {
    if (ms >= settings.timeout_ms) {
      throw new ConfigError(
        "PLUGINS_CONFIG",
        `${PLUGIN_NAME}.warn_ms: ${ms} for "${id}" must be below timeout_ms (${settings.timeout_ms}), or the check times out before it warns`,
      );
    }
    byId.get(id)!.warnMs = ms;
  }
  const groups = new Map<string, SelectedCheck[]>();
  for (const [name, ids] of Object.entries(settings.groups)) {
    for (const id of ids) if (!byId.has(id)) throw unknownId(`groups.${name}`, id);
    groups.set(
      name,
      checks.filter((c) => ids.includes(c.identifier)),
    );
  }
  return {
    checks,
    timeoutMs: settings.timeout_ms,
    loginRequired: settings.login_required,
    warningsAsErrors: settings.warnings_as_errors,
    details: settings.details,
    cacheSeconds: settings.cache_seconds,
    queue: queueThresholdsOf(services),
    groups,
  };
}
