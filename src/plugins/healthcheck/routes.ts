/**
 * HTTP side of the plugin: `/plugins/host_healthcheck_plugin/healthcheck/` (HTML, JSON, health+json)
 * and the probes `/livez` and `/readyz` at the app root.
 */
import { Hono, type Context, type MiddlewareHandler } from "hono";
import type { HonoEnv, Services } from "../../core/context";
import { authenticate } from "../../core/auth/middleware";
import { tokenFromHeader } from "../../core/auth/tokens";
import { ApiError } from "../../core/errors";
import { createRedactor, secretsOf } from "../../services/redact";
import { negotiateFormat, SUPPORTED_MEDIA_TYPES } from "./negotiate";
import { renderHealthPage, toHealthJson, toJson } from "./render";
import { CheckRunner, type HealthReport } from "./runner";
import { resolveSettings, type HealthcheckSettings, type SelectedCheck } from "./settings";

/** The checks of one app, ready to run; concurrent callers share each check's run in flight. */
export interface HealthRunner {
  settings: HealthcheckSettings;
  version: string;
  /** Runs `checks` (default: every configured check). */
  run(checks?: SelectedCheck[]): Promise<HealthReport>;
  /** Check runs started, by dotted path. */
  runs: Map<string, number>;
}

const runners = new WeakMap<Services, HealthRunner>();

/** The runner of an app (one per `Services`, so tests with many apps never share state). */
export function runnerFor(services: Services, builtins: string[], version: string): HealthRunner {
  const existing = runners.get(services);
  if (existing) return existing;
  const settings = resolveSettings(services, builtins);
  const redact = createRedactor(secretsOf(services.config));
  const checks = new CheckRunner(services, { timeoutMs: settings.timeoutMs, warningsAsErrors: settings.warningsAsErrors, redact, cacheMs: 0 });
  const runner: HealthRunner = {
    settings,
    version,
    runs: checks.runs,
    run: (selected = settings.checks) => checks.run(selected),
  };
  runners.set(services, runner);
  return runner;
}

const NO_STORE = "no-store";

/** 401 with `WWW-Authenticate: Token` unless the request carries a valid API token. */
function requireToken(): MiddlewareHandler<HonoEnv> {
  const check = authenticate();
  return async (c, next) => {
    const refuse = (detail: string) => {
      c.header("WWW-Authenticate", 'Token realm="host"');
      c.header("Cache-Control", NO_STORE);
      return c.json({ detail }, 401);
    };
    if (tokenFromHeader(c.req.header("authorization")) === null) return refuse("Authentication credentials were not provided.");
    try {
      await check(c, async () => {});
    } catch (e) {
      if (e instanceof ApiError && (e.statusCode === 403 || e.statusCode === 401)) return refuse(String((e.body as { detail?: unknown }).detail ?? "Invalid token"));
      throw e;
    }
    if (!c.var.auth?.user) return refuse("Invalid token");
    await next();
  };
}

/**
 * The checks a request asks for: a group's (or all), less every `?exclude=<identifier>`.
 * An unknown group is 404, an unknown identifier 400 `{"exclude": […]}`.
 */
function selectionFor(c: Context<HonoEnv>, runner: HealthRunner, group: string | undefined): SelectedCheck[] | Response {
  let checks = runner.settings.checks;
  if (group !== undefined) {
    const members = runner.settings.groups.get(group);
    if (!members) return c.json({ detail: "Not found.", error: "not_found" }, 404);
    checks = members;
  }
  const excluded = c.req.queries("exclude") ?? [];
  if (excluded.length === 0) return checks;
  const known = new Set(runner.settings.checks.map((s) => s.identifier));
  const unknown = excluded.filter((id) => !known.has(id));
  if (unknown.length) {
    return c.json({ exclude: unknown.map((id) => `Unknown check "${id}"; choose from: ${[...known].join(", ")}.`) }, 400);
  }
  return checks.filter((s) => !excluded.includes(s.identifier));
}

/** `/healthcheck` and `/healthcheck/<group>` (the trailing slash is stripped by the app's routing). */
export function healthcheckRoutes(runner: HealthRunner): Hono<HonoEnv> {
  const router = new Hono<HonoEnv>();
  if (runner.settings.loginRequired) router.use("/healthcheck/*", requireToken());
  const page = async (c: Context<HonoEnv>, group: string | undefined) => {
    c.header("Cache-Control", NO_STORE);
    c.header("Vary", "Accept");
    const format = negotiateFormat(c.req.header("accept"), c.req.query("format"));
    if (!format) {
      return c.json({ detail: `Could not satisfy the request Accept header. Supported content types: ${SUPPORTED_MEDIA_TYPES.join(", ")}.` }, 406);
    }
    const checks = selectionFor(c, runner, group);
    if (checks instanceof Response) return checks;
    const report = await runner.run(checks);
    const status = report.criticalFailure ? 500 : 200;
    switch (format) {
      case "json":
        return c.json(toJson(report), status);
      case "health+json":
        return c.body(JSON.stringify(toHealthJson(report, runner.version)), status, { "Content-Type": "application/health+json" });
      case "html":
        c.header("X-Content-Type-Options", "nosniff");
        return c.html(await renderHealthPage(report), status);
    }
  };
  router.get("/healthcheck", (c) => page(c, undefined));
  router.get("/healthcheck/:group", (c) => page(c, c.req.param("group")));
  return router;
}

/**
 * `/livez`: the process answers (nothing else is touched). `/readyz`: the configured checks pass
 * (critical ones; 503 otherwise). Both stay anonymous for orchestrators; readyz names failing
 * checks only while the health page itself is public.
 */
export function probeRoutes(runner: HealthRunner): Hono<HonoEnv> {
  const router = new Hono<HonoEnv>();
  router.get("/livez", (c) => {
    c.header("Cache-Control", NO_STORE);
    return c.json({ status: "ok" });
  });
  router.get("/readyz", async (c) => {
    c.header("Cache-Control", NO_STORE);
    const checks = selectionFor(c, runner, undefined);
    if (checks instanceof Response) return checks;
    const report = await runner.run(checks);
    if (!report.criticalFailure) return c.json({ status: "ready" });
    const failing = report.results.filter((r) => !r.passed && r.critical).map((r) => r.identifier);
    return c.json(runner.settings.loginRequired ? { status: "not ready" } : { status: "not ready", failing }, 503);
  });
  return router;
}
