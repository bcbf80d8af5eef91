/**
 * 405 with `Allow` (§4) when a path exists but not for the method: `hono/method-not-allowed`
 * over the app's own route table, answering in the §4 error shape. Only answers the router's own
 * 404 (no route for the method); a handler's 404 (an unknown id or slug) stays a 404, and so does
 * everything auth refused before routing.
 */
import { errorBody } from "../api-error";
import type { Hono, MiddlewareHandler } from "hono";
import { methodNotAllowed } from "hono/method-not-allowed";
import type { HonoEnv } from "./context";

export function answerMethodNotAllowed(app: Hono<HonoEnv>): MiddlewareHandler<HonoEnv> {
  return methodNotAllowed({
    app,
    onMethodNotAllowed: (c, methods) =>
      c.json(errorBody("method_not_allowed", `Method "${c.req.method}" not allowed.`), 405, {
        Allow: methods.join(", "),
      }),
  }) as MiddlewareHandler<HonoEnv>;
}
