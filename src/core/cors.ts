/**
 * CORS for browser front ends (`CORS_ORIGINS`): `hono/cors` with the allowed origins, the
 * methods of the REST API, the request's own headers on preflight, and `X-Request-Id` exposed.
 * Tokens travel in the `Authorization` header, never cookies, so credentials stay off.
 */
import { cors } from "hono/cors";
import type { MiddlewareHandler } from "hono";
import type { HonoEnv } from "./context";

const PREFLIGHT_MAX_AGE_SECONDS = 600;

export function corsFor(origins: string[] | "*"): MiddlewareHandler<HonoEnv> {
  const allowed = origins === "*" ? null : new Set(origins);
  return cors({
    origin: allowed ? (origin) => (allowed.has(origin) ? origin : null) : "*",
    allowMethods: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
    exposeHeaders: ["X-Request-Id", "Allow", "WWW-Authenticate"],
    maxAge: PREFLIGHT_MAX_AGE_SECONDS,
  });
}
