/**
 * One structured access-log line per request: request id, method, route pattern, path, query
 * (secret-looking values redacted), status, duration and user id. Slow requests are logged at
 * `warn`, server errors at `error`, the rest at `info` (a client that closed its request too:
 * status 499), so `LOG_LEVEL` decides what is kept.
 */
import type { MiddlewareHandler } from "hono";
import { routePath } from "hono/route";
import type { HonoEnv } from "./context";
import { CLIENT_CLOSED_REQUEST } from "./http";

/** Query parameters whose values are never logged (tokens, keys, passwords, signatures…). */
const SECRET_PARAM =
  /key|token|secret|pass(word)?|auth|sig(nature)?|credential|session|cookie|code/i;

/** The query string with secret-looking values replaced by `***`; null when there is none. */
function redactQuery(url: string): string | null {
  const q = url.indexOf("?");
  if (q < 0 || q === url.length - 1) return null;
  const params = new URLSearchParams(url.slice(q + 1));
  const parts: string[] = [];
  for (const [k, v] of params)
    parts.push(`${encodeURIComponent(k)}=${SECRET_PARAM.test(k) ? "***" : encodeURIComponent(v)}`);
  return parts.join("&").slice(0, 512);
}

/** The path as the client sent it (the router sees it without its trailing slash). */
function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("://") + 3);
  if (start < 0) return "/";
  const end = url.indexOf("?", start);
  return url.slice(start, end < 0 ? undefined : end);
}

export interface AccessLogOptions {
  /** Requests slower than this are logged at `warn` with `slow: true`. */
  slowMs: number;
  /** Clock in ms (tests pass one they move); default `performance.now`. */
  now?: () => number;
}

/** The route pattern that answered (`/api/dcim/sites/:id`), or null when none did (404). */
function routeOf(c: Parameters<MiddlewareHandler<HonoEnv>>[0]): string | null {
  try {
    const path = routePath(c);
    // `:id{[^/]+}` reads as `:id`: the log names the parameter, not its pattern.
    return path && path !== "*" && path !== "/*" ? path.replace(/\{[^}]*\}/g, "") : null;
  } catch {
    return null;
  }
}

export function accessLog(options: AccessLogOptions): MiddlewareHandler<HonoEnv> {
  const now = options.now ?? (() => performance.now());
  return async (c, next) => {
    const started = now();
    await next();
    const durationMs = Math.round((now() - started) * 10) / 10;
    const status = c.res.status;
    const slow = durationMs >= options.slowMs;
    const { logger } = c.get("services");
    // A client that went away mid-request is its event, not the server's error (decision 0068).
    const closed = status === CLIENT_CLOSED_REQUEST;
    const level = closed ? "info" : status >= 500 ? "error" : slow ? "warn" : "info";
    // the line is built only to be written (parsing the query and route costs a GET's CPU)
    if (logger.enabled && !logger.enabled(level)) return;
    const line = {
      request_id: c.get("requestId"),
      method: c.req.method,
      route: routeOf(c),
      path: pathOf(c.req.url).slice(0, 512),
      query: redactQuery(c.req.url),
      status,
      duration_ms: durationMs,
      user_id: c.get("auth")?.user?.id ?? null,
      ...(slow ? { slow: true } : {}),
    };
    logger[level](closed ? "client closed the request" : "request", line);
  };
}
