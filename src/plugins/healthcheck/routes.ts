/**
 * HTTP side of the plugin: `/plugins/host_healthcheck_plugin/healthcheck/` (HTML, JSON, health+json)
 * and the probes `/livez` and `/readyz` at the app root.
 */
import { errorBody } from "../../api-error";
import { Hono, type Context, type MiddlewareHandler } from "hono";
import type { HonoEnv, Services } from "../../core/context";
import { authenticate } from "../../core/auth/middleware";
import { isDraining } from "../../core/lifecycle";
import { credentialFromHeader } from "../../core/auth/tokens";
import * as v from "valibot";
import { ApiError } from "../../core/errors";
import { query, repeated } from "../../core/validate";
import { createRedactor, secretsOf } from "../../services/redact";
import { OPENMETRICS_CONTENT_TYPE, toOpenMetrics } from "./metrics";
import { negotiateFormat, SUPPORTED_MEDIA_TYPES } from "./negotiate";
import { overallStatus, renderHealthPage, toHealthJson, toJson } from "./render";
import { CheckRunner, type HealthReport } from "./runner";
import type { InstalledPlugin } from "../types";
import type { BaseHealthCheckBackend } from "./backends";
import { resolveSettings, type HealthcheckSettings, type SelectedCheck } from "./settings";

/** The checks of one app, ready to run; concurrent callers share each check's run in flight. */
export interface HealthRunner {
  settings: HealthcheckSettings;
  version: string;
  /** Runs `checks` (default: every configured check). */
  run(checks?: SelectedCheck[]): Promise<HealthReport>;
  /** Check runs started, by dotted path. */
  runs: Map<string, number>;
  /** Results asked for (started, joined or cached), by dotted path. */
  asked: Map<string, number>;
}

/**
 * The runner of one app, made once its plugins are all set up (the settings may name checks any
 * of them offers); an invalid setting throws `ConfigError` and stops start-up.
 */
export function createRunner(
  services: Services,
  builtins: string[],
  version: string,
  plugins: readonly InstalledPlugin[],
  now: () => number,
): HealthRunner {
  const settings = resolveSettings(services, builtins, plugins);
  const redact = createRedactor(secretsOf(services.config));
  const checks = new CheckRunner(services, {
    timeoutMs: settings.timeoutMs,
    warningsAsErrors: settings.warningsAsErrors,
    redact,
    cacheMs: settings.cacheSeconds * 1000,
    now,
  });
  const runner: HealthRunner = {
    settings,
    version,
    runs: checks.runs,
    asked: checks.asked,
    run: (selected = settings.checks) => checks.run(selected),
  };
  return runner;
}

const NO_STORE = "no-store";

/** 401 with `WWW-Authenticate: Token`, so a probe never mistakes refusal for health. */
function refuse(c: Context<HonoEnv>, detail: string): Response {
  c.header("WWW-Authenticate", 'Token realm="host"');
  c.header("Cache-Control", NO_STORE);
  return c.json({ detail }, 401);
}

/**
 * Who is calling: `anonymous` (no token), `authenticated` (a valid API token), or the 401 a
 * present but bad token answers.
 */
async function callerOf(
  c: Context<HonoEnv>,
  check: MiddlewareHandler<HonoEnv>,
): Promise<"anonymous" | "authenticated" | Response> {
  if (credentialFromHeader(c.req.header("authorization")) === null) return "anonymous";
  try {
    await check(c, async () => {});
  } catch (e) {
    if (e instanceof ApiError && (e.statusCode === 403 || e.statusCode === 401))
      return refuse(c, String((e.body as { detail?: unknown }).detail ?? "Invalid token"));
    throw e;
  }
  return c.get("auth")?.user ? "authenticated" : refuse(c, "Invalid token");
}

/**
 * Sets `showDetails` for the page: 401 unless the request carries a valid API token when
 * `login_required`; with `details: authenticated`, only a valid token sees the checks (a bad
 * one is refused rather than silently shown less).
 */
function gate(settingsOf: () => HealthcheckSettings): MiddlewareHandler<HealthEnv> {
  const check = authenticate() as MiddlewareHandler<HonoEnv>;
  return async (c, next) => {
    const settings = settingsOf();
    const needsCaller = settings.loginRequired || settings.details === "authenticated";
    const caller = needsCaller
      ? await callerOf(c as unknown as Context<HonoEnv>, check)
      : "anonymous";
    if (caller instanceof Response) return caller;
    if (settings.loginRequired && caller !== "authenticated")
      return refuse(
        c as unknown as Context<HonoEnv>,
        "Authentication credentials were not provided.",
      );
    c.set(
      "showDetails",
      settings.details === "always" ||
        (settings.details === "authenticated" && caller === "authenticated"),
    );
    await next();
  };
}

type HealthEnv = { Variables: HonoEnv["Variables"] & { showDetails: boolean } };

/**
 * The checks a request asks for: a group's (or all), less every `?exclude=<identifier>`.
 * An unknown group is 404, an unknown identifier 400 `{"exclude": […]}`.
 */
function selectionFor(
  c: Context<HonoEnv>,
  runner: HealthRunner,
  group: string | undefined,
  showDetails: boolean,
): SelectedCheck[] | Response {
  let checks = runner.settings.checks;
  if (group !== undefined) {
    const members = runner.settings.groups.get(group);
    if (!members) return c.json(errorBody("not_found", "Not found."), 404);
    checks = members;
  }
  const excluded = (c.req.valid as (t: "query") => HealthQuery)("query").exclude ?? [];
  if (excluded.length === 0) return checks;
  const known = new Set(runner.settings.checks.map((s) => s.identifier));
  const unknown = excluded.filter((id) => !known.has(id));
  if (unknown.length) {
    // The list of checks is a detail too.
    const choices = showDetails ? `; choose from: ${[...known].join(", ")}` : "";
    return c.json({ exclude: unknown.map((id) => `Unknown check "${id}"${choices}.`) }, 400);
  }
  return checks.filter((s) => !excluded.includes(s.identifier));
}

/** The query string of the health page and `/readyz` (unknown `exclude` identifiers are refused by `selectionFor`). */
const HealthQuery = v.looseObject({
  // Any other value is a 406 (negotiate.ts), so the enum is documentation only.
  format: v.optional(
    v.pipe(
      v.string(),
      v.metadata({ enum: ["json", "html", "health+json", "openmetrics"] }),
      v.description("Wins over the Accept header."),
    ),
  ),
  exclude: v.optional(
    v.pipe(repeated(v.string()), v.description("Check identifiers to skip (repeatable).")),
  ),
});
type HealthQuery = v.InferOutput<typeof HealthQuery>;

/** `/healthcheck` and `/healthcheck/<group>` (the trailing slash is stripped by the app's routing). */
export function healthcheckRoutes(runnerOf: () => HealthRunner): Hono<HonoEnv> {
  const router = new Hono<HealthEnv>();
  router.use(
    "/healthcheck/*",
    gate(() => runnerOf().settings),
  );
  const page = async (c: Context<HealthEnv>, group: string | undefined) => {
    const runner = runnerOf();
    c.header("Cache-Control", NO_STORE);
    c.header("Vary", "Accept");
    const format = negotiateFormat(
      c.req.header("accept"),
      (c.req.valid as (t: "query") => HealthQuery)("query").format,
    );
    if (!format) {
      return c.json(
        {
          detail: `Could not satisfy the request Accept header. Supported content types: ${SUPPORTED_MEDIA_TYPES.join(", ")}.`,
        },
        406,
      );
    }
    const showDetails = c.get("showDetails");
    const checks = selectionFor(c as unknown as Context<HonoEnv>, runner, group, showDetails);
    if (checks instanceof Response) return checks;
    const report = await runner.run(checks);
    const status = report.criticalFailure ? 500 : 200;
    // A shared result says how old it is (whole seconds, as HTTP's Age header counts).
    if (runner.settings.cacheSeconds > 0) c.header("Age", String(Math.floor(report.ageMs / 1000)));
    switch (format) {
      case "json":
        return c.json(showDetails ? toJson(report) : { status: overallStatus(report) }, status);
      case "health+json":
        return c.body(
          JSON.stringify(
            toHealthJson(report, runner.version, showDetails, runner.settings.cacheSeconds > 0),
          ),
          status,
          { "Content-Type": "application/health+json" },
        );
      case "html":
        c.header("X-Content-Type-Options", "nosniff");
        return c.html(await renderHealthPage(report, showDetails), status);
      case "openmetrics":
        // Always 200: a scrape that fails loses every figure; `host_health_up` carries the verdict.
        return c.body(
          toOpenMetrics(report, { showDetails, cached: runner.settings.cacheSeconds > 0 }),
          200,
          { "Content-Type": OPENMETRICS_CONTENT_TYPE },
        );
    }
  };
  router.get("/healthcheck", query(HealthQuery), (c) => page(c, undefined));
  router.get("/healthcheck/:group", query(HealthQuery), (c) => page(c, c.req.param("group")));
  return router as unknown as Hono<HonoEnv>;
}

/**
 * `/livez`: the process answers (nothing else is touched). `/readyz`: the configured checks pass
 * (critical ones; 503 otherwise). Both stay anonymous for orchestrators; readyz names failing
 * checks only while the health page itself is public.
 */
/** Whether a check's dependency is set up (custom checks that are not backends count as set up). */
function isConfigured(selected: SelectedCheck, services: Services): boolean {
  const check = new selected.check(services) as Partial<BaseHealthCheckBackend>;
  return typeof check.configured === "function" ? check.configured() : true;
}

export function probeRoutes(runnerOf: () => HealthRunner): Hono<HonoEnv> {
  const router = new Hono<HonoEnv>();
  router.get("/livez", (c) => {
    c.header("Cache-Control", NO_STORE);
    return c.json({ status: "ok" });
  });
  router.get("/readyz", query(HealthQuery), async (c) => {
    const runner = runnerOf();
    c.header("Cache-Control", NO_STORE);
    // Shutting down: no new work, whatever the checks say (decision 0080).
    if (isDraining(c.get("services"))) return c.json({ status: "not ready", draining: true }, 503);
    // Probes carry no token: they name failing checks only when the health page is public.
    const public_ = runner.settings.details === "always" && !runner.settings.loginRequired;
    const selected = selectionFor(c, runner, undefined, public_);
    if (selected instanceof Response) return selected;
    const checks = selected.filter((s) => isConfigured(s, c.get("services")));
    const report = await runner.run(checks);
    if (!report.criticalFailure) return c.json({ status: "ready" });
    const failing = report.results.filter((r) => !r.passed && r.critical).map((r) => r.identifier);
    return c.json(public_ ? { status: "not ready", failing } : { status: "not ready" }, 503);
  });
  return router;
}
