/**
 * All settings of §3 in one valibot schema. This is the only module that reads raw
 * environment values; everything else receives a validated `Config`.
 */
import * as v from "valibot";
import { type Network, parseNetworks } from "./networks";

export type Runtime = "bun" | "workerd";

const boolString = v.pipe(
  v.string(),
  v.trim(),
  v.toLowerCase(),
  v.picklist(["true", "false", "1", "0", "yes", "no", "on", "off"], "must be true or false"),
  v.transform((s) => ["true", "1", "yes", "on"].includes(s)),
);

const intString = (min: number, max: number) =>
  v.pipe(
    v.string(),
    v.trim(),
    v.regex(/^\d+$/, "must be a whole number"),
    v.transform(Number),
    v.number(),
    v.minValue(min, `must be at least ${min}`),
    v.maxValue(max, `must be at most ${max}`),
  );

const jsonObject = v.pipe(
  v.string(),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    try {
      const parsed = JSON.parse(dataset.value);
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed))
        return parsed as Record<string, unknown>;
      addIssue({ message: "must be a JSON object" });
    } catch {
      addIssue({ message: "must be valid JSON (a JSON object)" });
    }
    return NEVER;
  }),
);

const url = (schemes: string[]) =>
  v.pipe(
    v.string(),
    v.trim(),
    v.check(
      (s) => {
        const scheme = s.split(":", 1)[0]?.toLowerCase() ?? "";
        return s.includes(":") && schemes.includes(scheme);
      },
      `must be a URL starting with ${schemes.map((s) => `${s}:`).join(", ")}`,
    ),
  );

const optionalNonEmpty = <T extends v.GenericSchema<string, unknown>>(schema: T) =>
  v.optional(
    v.union([
      v.pipe(
        v.literal(""),
        v.transform(() => undefined),
      ),
      schema,
    ]),
  );

const EnvSchema = v.object({
  PLUGINS: v.optional(v.string(), "custom_objects,host_healthcheck_plugin"),
  PLUGINS_CONFIG: v.optional(jsonObject, "{}"),
  DATABASE_URL: v.optional(
    url(["file", "libsql", "http", "https", "ws", "wss"]),
    "file:data/host.db",
  ),
  DATABASE_AUTH_TOKEN: optionalNonEmpty(v.string()),
  DATABASE_READ_POOL: v.optional(intString(0, 16), "2"),
  DATABASE_CACHE_MB: v.optional(intString(2, 65536), "4"),
  DATABASE_TIMEOUT_MS: v.optional(intString(100, 600_000), "15000"),
  REDIS_CACHING_URL: optionalNonEmpty(url(["http", "https", "redis", "rediss"])),
  REDIS_CACHING_TOKEN: optionalNonEmpty(v.string()),
  REDIS_TASKS_URL: optionalNonEmpty(url(["http", "https", "redis", "rediss"])),
  REDIS_TASKS_TOKEN: optionalNonEmpty(v.string()),
  CACHE_BACKEND: optionalNonEmpty(
    v.picklist(["memory", "database", "redis", "kv"], "must be one of memory, database, redis, kv"),
  ),
  HOST: v.optional(v.pipe(v.string(), v.trim(), v.minLength(1, "must not be empty")), "127.0.0.1"),
  PORT: v.optional(intString(0, 65535), "8000"),
  LOGIN_REQUIRED: v.optional(boolString, "true"),
  MAX_BODY_BYTES: v.optional(intString(1, 1024 * 1024 * 1024), "1048576"),
  MAX_RESPONSE_BYTES: v.optional(intString(65536, 1024 * 1024 * 1024), String(4 * 1048576)),
  TASK_WORKER: v.optional(v.picklist(["inline", "off"], "must be inline or off"), "inline"),
  TASK_VISIBILITY_TIMEOUT_MS: v.optional(intString(100, 24 * 3600 * 1000), "60000"),
  TASK_MAX_ATTEMPTS: v.optional(intString(1, 100), "5"),
  TASK_RETRY_BACKOFF_MS: v.optional(intString(1, 3600 * 1000), "2000"),
  // Every write of a watched type is matched against every enabled rule and queues a delivery
  // per matching webhook: the enabled rules in all bound that work, the per-user counts keep one
  // account from taking it all (decision 0196).
  MAX_EVENT_RULES: v.optional(intString(1, 100_000), "200"),
  MAX_EVENT_RULES_PER_USER: v.optional(intString(1, 100_000), "50"),
  MAX_WEBHOOKS_PER_USER: v.optional(intString(1, 100_000), "50"),
  // Every custom object type adds a table, a model, OpenAPI paths and GraphQL types that whole-
  // schema work (the documents, the type list, apply's plan) loops over (decision 0205).
  MAX_CUSTOM_OBJECT_TYPES: v.optional(intString(1, 100_000), "1000"),
  OPENAPI_CACHE_MB: v.optional(intString(1, 65_536), "256"),
  WEBHOOK_ALLOWED_NETWORKS: v.optional(
    v.pipe(
      v.string(),
      v.rawTransform(({ dataset, addIssue, NEVER }) => {
        try {
          return parseNetworks(dataset.value);
        } catch (e) {
          addIssue({
            message: `${(e as Error).message}; use comma-separated addresses or CIDR ranges such as 127.0.0.0/8,::1/128`,
          });
          return NEVER;
        }
      }),
    ),
    "",
  ),
  CHANGELOG_RETENTION_DAYS: v.optional(intString(0, 36500), "90"),
  JOB_RETENTION_DAYS: v.optional(intString(0, 36500), "90"),
  SCHEMA_TRASH_DAYS: v.optional(intString(0, 36500), "7"),
  LOG_LEVEL: v.optional(
    v.picklist(
      ["debug", "info", "warn", "error", "silent"],
      "must be debug, info, warn, error or silent",
    ),
    "info",
  ),
  LOG_SLOW_REQUEST_MS: v.optional(intString(1, 3600 * 1000), "1000"),
  CORS_ORIGINS: v.optional(v.string(), ""),
  LOGIN_FAILURES_PER_USERNAME: v.optional(intString(1, 1_000_000), "10"),
  LOGIN_FAILURES_PER_ADDRESS: v.optional(intString(1, 1_000_000), "30"),
  LOGIN_FAILURE_WINDOW_SECONDS: v.optional(intString(1, 7 * 24 * 3600), "900"),
  TRUSTED_PROXY_HOPS: v.optional(intString(0, 10), "0"),
});

export interface RedisSettings {
  url: string;
  token?: string;
}

export interface Config {
  plugins: string[];
  pluginsConfig: Record<string, Record<string, unknown>>;
  /**
   * `readPool`: async read connections of a local file database (Bun; 0 = off, decisions 0057,
   * 0060); `cacheMb`: SQLite's page caches of its connections together (decision 0117);
   * `timeoutMs`: a remote database's round trip is given up after it (decision 0202).
   */
  database: {
    url: string;
    authToken?: string;
    readPool: number;
    cacheMb: number;
    timeoutMs: number;
  };
  redis: { caching?: RedisSettings; tasks?: RedisSettings };
  cacheBackend: "memory" | "database" | "redis" | "kv";
  host: string;
  port: number;
  loginRequired: boolean;
  maxBodyBytes: number;
  /** Bytes of stored values one REST or GraphQL answer may carry (decision 0068). */
  maxResponseBytes: number;
  taskWorker: "inline" | "off";
  /** Job queue tuning: lease length, attempts before giving up, first retry delay (doubling). */
  tasks: { visibilityTimeoutMs: number; maxAttempts: number; backoffBaseMs: number };
  /** Networks webhooks may reach although they are not public (decision 0067); default none. */
  webhookAllowedNetworks: Network[];
  /** How many event rules and webhooks there may be (decision 0196). */
  eventRuleLimits: { enabledRules: number; rulesPerUser: number; webhooksPerUser: number };
  /** Custom object types there may be in all (`MAX_CUSTOM_OBJECT_TYPES`, decision 0205). */
  maxCustomObjectTypes: number;
  /**
   * Serialised OpenAPI texts kept across the callers' visibility sets, in bytes
   * (`OPENAPI_CACHE_MB`, decision 0210): past it, other sets' texts are dropped and made again.
   */
  openApiCacheBytes: number;
  /** Days change records and finished jobs are kept; 0 keeps them for good. */
  retention: { changelogDays: number; jobDays: number };
  /** Days removed custom object fields and types stay in the trash (0: purged at the next run). */
  schemaTrashDays: number;
  logLevel: "debug" | "info" | "warn" | "error" | "silent";
  /** Requests slower than this are logged at warn (access log). */
  slowRequestMs: number;
  /** Origins allowed by CORS: none (default), a list, or `*` for any. */
  corsOrigins: string[] | "*";
  /**
   * Token provisioning (`POST /api/users/tokens/provision/`): failed logins allowed per username
   * and per client address within a window, counted on the cache (docs/decisions/0010-login.md).
   */
  login: { failuresPerUsername: number; failuresPerAddress: number; windowSeconds: number };
  /** Proxies in front of the app whose X-Forwarded-For entries are believed; 0 = none. */
  trustedProxyHops: number;
  runtime: Runtime;
}

/** Raised when a setting is invalid; `message` is the one line to print. */
export class ConfigError extends Error {
  constructor(
    readonly setting: string,
    detail: string,
  ) {
    super(`invalid setting ${setting}: ${detail}`);
    this.name = "ConfigError";
  }
}

/**
 * Validates raw settings (process.env on Bun, bindings on Workers).
 * @example loadConfig({ PORT: "9000" }, "bun").port === 9000
 */
export function loadConfig(env: Record<string, unknown>, runtime: Runtime = "bun"): Config {
  const raw: Record<string, unknown> = {};
  for (const key of Object.keys(EnvSchema.entries)) {
    const value = env[key];
    if (value !== undefined && value !== null)
      raw[key] = typeof value === "string" ? value : JSON.stringify(value);
  }
  const result = v.safeParse(EnvSchema, raw);
  if (!result.success) {
    const issue = result.issues[0];
    const setting = v.getDotPath(issue) ?? "settings";
    throw new ConfigError(
      setting,
      issue.message.startsWith("Invalid type") ? "has the wrong type" : issue.message,
    );
  }
  const e = result.output;
  const plugins = [
    ...new Set(
      e.PLUGINS.split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  for (const [name, value] of Object.entries(e.PLUGINS_CONFIG)) {
    if (!value || typeof value !== "object" || Array.isArray(value)) {
      throw new ConfigError(
        "PLUGINS_CONFIG",
        `the entry for ${JSON.stringify(name)} must be a JSON object`,
      );
    }
  }
  const redis: Config["redis"] = {};
  if (e.REDIS_CACHING_URL)
    redis.caching = { url: e.REDIS_CACHING_URL, token: e.REDIS_CACHING_TOKEN };
  if (e.REDIS_TASKS_URL) redis.tasks = { url: e.REDIS_TASKS_URL, token: e.REDIS_TASKS_TOKEN };
  const cacheBackend =
    e.CACHE_BACKEND ?? (runtime === "workerd" ? "kv" : redis.caching ? "redis" : "memory");
  if (cacheBackend === "redis" && !redis.caching) {
    throw new ConfigError("CACHE_BACKEND", "is redis but REDIS_CACHING_URL is not set");
  }
  return {
    plugins,
    pluginsConfig: e.PLUGINS_CONFIG as Config["pluginsConfig"],
    database: {
      url: e.DATABASE_URL,
      authToken: e.DATABASE_AUTH_TOKEN,
      readPool: e.DATABASE_READ_POOL,
      cacheMb: e.DATABASE_CACHE_MB,
      timeoutMs: e.DATABASE_TIMEOUT_MS,
    },
    redis,
    cacheBackend,
    host: e.HOST,
    port: e.PORT,
    loginRequired: e.LOGIN_REQUIRED,
    maxBodyBytes: e.MAX_BODY_BYTES,
    maxResponseBytes: e.MAX_RESPONSE_BYTES,
    taskWorker: e.TASK_WORKER,
    tasks: {
      visibilityTimeoutMs: e.TASK_VISIBILITY_TIMEOUT_MS,
      maxAttempts: e.TASK_MAX_ATTEMPTS,
      backoffBaseMs: e.TASK_RETRY_BACKOFF_MS,
    },
    webhookAllowedNetworks: e.WEBHOOK_ALLOWED_NETWORKS,
    eventRuleLimits: {
      enabledRules: e.MAX_EVENT_RULES,
      rulesPerUser: e.MAX_EVENT_RULES_PER_USER,
      webhooksPerUser: e.MAX_WEBHOOKS_PER_USER,
    },
    maxCustomObjectTypes: e.MAX_CUSTOM_OBJECT_TYPES,
    openApiCacheBytes: e.OPENAPI_CACHE_MB * 1024 * 1024,
    retention: { changelogDays: e.CHANGELOG_RETENTION_DAYS, jobDays: e.JOB_RETENTION_DAYS },
    schemaTrashDays: e.SCHEMA_TRASH_DAYS,
    logLevel: e.LOG_LEVEL,
    slowRequestMs: e.LOG_SLOW_REQUEST_MS,
    corsOrigins: parseCorsOrigins(e.CORS_ORIGINS),
    login: {
      failuresPerUsername: e.LOGIN_FAILURES_PER_USERNAME,
      failuresPerAddress: e.LOGIN_FAILURES_PER_ADDRESS,
      windowSeconds: e.LOGIN_FAILURE_WINDOW_SECONDS,
    },
    trustedProxyHops: e.TRUSTED_PROXY_HOPS,
    runtime,
  };
}

/** `CORS_ORIGINS`: empty (no CORS), `*`, or a comma list of origins (`scheme://host[:port]`). */
function parseCorsOrigins(raw: string): string[] | "*" {
  const items = raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 1 && items[0] === "*") return "*";
  return items.map((item) => {
    let u: URL | null = null;
    try {
      u = new URL(item);
    } catch {}
    if (
      !u ||
      u.origin === "null" ||
      u.pathname !== "/" ||
      u.search ||
      u.hash ||
      u.username ||
      u.password
    ) {
      throw new ConfigError(
        "CORS_ORIGINS",
        "must be * or a comma list of origins like https://app.example.com (scheme, host and port only)",
      );
    }
    return u.origin;
  });
}

/** Strips credentials from a URL so it can be shown in logs and health output. */
export function redactUrl(raw: string): string {
  // Local files carry no credentials; URL parsing would turn `file:data/x.db` into `file:///data/x.db`.
  if (/^file:/i.test(raw) || raw === ":memory:") return raw.split("?")[0]!;
  try {
    const u = new URL(raw);
    if (u.username || u.password) {
      u.username = u.username ? "***" : "";
      u.password = u.password ? "***" : "";
    }
    for (const key of [...u.searchParams.keys()]) {
      if (/token|key|secret|password|auth/i.test(key)) u.searchParams.set(key, "***");
    }
    return u.toString();
  } catch {
    return "<unparseable url>";
  }
}

/** Prefixes of our settings: an unknown name with one of them is most likely a typo. */
const OUR_PREFIXES = ["HOST_", "DATABASE_", "REDIS_", "CACHE_", "LOG_", "LOGIN_", "PLUGINS"];
/** Settings read outside `loadConfig`: by `npm start`, the CLI and the tools. */
const READ_ELSEWHERE = new Set([
  "HOST_LOCAL_REDIS",
  "HOST_SUPERUSER_PASSWORD",
  "HOST_TOKEN",
  "HOST_SKIP_GATE",
  "REDIS_BRIDGE_PORT",
  "REDIS_BRIDGE_REDIS_URL",
  "REDIS_BRIDGE_TOKEN",
]);

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(
        prev[j]! + 1,
        row[j - 1]! + 1,
        prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    prev = row;
  }
  return prev[b.length]!;
}

/**
 * Names in `env` that look like ours but that nothing reads (`LOGIN_REQUIRD`), each with the
 * known setting it most likely meant, for one warning line at start.
 * @example unknownSettings({ LOGIN_REQUIRD: "false" }) // ["LOGIN_REQUIRD (did you mean LOGIN_REQUIRED?)"]
 */
export function unknownSettings(env: Record<string, unknown>): string[] {
  const known = [...Object.keys(EnvSchema.entries), ...READ_ELSEWHERE];
  const out: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!OUR_PREFIXES.some((p) => name.startsWith(p)) || known.includes(name)) continue;
    const best = known.map((k) => ({ k, d: editDistance(name, k) })).sort((x, y) => x.d - y.d)[0];
    out.push(best && best.d <= 3 ? `${name} (did you mean ${best.k}?)` : name);
  }
  return out;
}
