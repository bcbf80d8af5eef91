/**
 * CORS for browser front ends (`CORS_ORIGINS`): `hono/cors` with the allowed origins, the
 * methods of the REST API, the request's own headers on preflight, and `X-Request-Id` exposed.
 * Tokens travel in the `Authorization` header, never cookies, so credentials stay off.
 */
import { cors } from "hono/cors";
import type { MiddlewareHandler } from "hono";
import type { HonoEnv } from "./context";

const PREFLIGHT_MAX_AGE_SECONDS = 600;

const EXPOSED = ["X-Request-Id", "Allow", "WWW-Authenticate", "API-Version"];

/**
 * Only an OPTIONS carrying `Access-Control-Request-Method` is a preflight (Fetch standard); any
 * other OPTIONS (pynetbox's `.choices()`) goes on to the API's metadata answer, with the
 * headers an allowed origin gets on every answer.
 */
export function corsFor(origins: string[] | "*"): MiddlewareHandler<HonoEnv> {
  const allowed = origins === "*" ? null : new Set(origins);
  const allowOrigin = (origin: string) => (allowed ? (allowed.has(origin) ? origin : null) : "*");
  const preflightAndSimple = cors({
    origin: allowOrigin,
    allowMethods: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
    exposeHeaders: EXPOSED,
    maxAge: PREFLIGHT_MAX_AGE_SECONDS,
  });
  return async (c, next) => {
    if (c.req.method !== "OPTIONS" || c.req.header("access-control-request-method"))
      return preflightAndSimple(c, next);
    await next();
    const origin = allowOrigin(c.req.header("origin") ?? "");
    if (origin) {
      c.header("Access-Control-Allow-Origin", origin);
      c.header("Access-Control-Expose-Headers", EXPOSED.join(","));
    }
    if (allowed) c.header("Vary", "Origin", { append: true });
  };
}
