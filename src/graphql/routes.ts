/**
 * `/graphql/` (POST, and GET with `query=`): GraphQL over the same models, tokens and
 * permissions as `/api/`, served by graphql-yoga on Bun and Workers (`engine.ts`). The schema is
 * built per caller from what they may view and cached by the models' shape signature, so a
 * custom object type changed anywhere shows in the next request. Depth, cost, aliases and tokens
 * are limited (graphql-armor), rows by page size and bytes by the response budget (decision
 * 0068); a request over a limit gets a GraphQL error, never a 500 or a hang. The engine and its
 * libraries are loaded apart from the routes (decision 0117): the Bun server loads them before it
 * serves (`loadGraphqlEngine`, decision 0217), elsewhere the first query does.
 */
import { errorBody } from "../api-error";
import { Hono } from "hono";
import { authenticate } from "../core/auth/middleware";
import type { Ctx, HonoEnv, Services } from "../core/context";
import { ApiError } from "../core/errors";
import { GRAPHQL_PAGE, GRAPHQL_PAGE_CSP } from "./page";

export { GRAPHQL_LIMITS } from "./limits";

type Engine = (c: Ctx) => Promise<Response>;

/** The engine's module: graphql, graphql-yoga and the limits' plugins evaluated on first use. */
const engineModule = () => import("./engine");

/**
 * Evaluates the engine's modules (~50 ms of the event loop in one stretch) and runs its pipeline
 * once (~18 ms more), which no request should wait behind (decision 0217). The Bun server calls
 * it before it serves; a worker leaves both to its first query (its CPU is per request).
 */
export async function loadGraphqlEngine(): Promise<void> {
  await (await engineModule()).warmUp();
}

/** The engine for `services`, loaded once on first use; a failed load is tried again next time. */
function lazyEngine(services: Services): () => Promise<Engine> {
  let loading: Promise<Engine> | null = null;
  return () => {
    loading ??= engineModule()
      .then((m) => m.graphqlEngine(services))
      .catch((e) => {
        loading = null;
        throw e;
      });
    return loading;
  };
}

export function graphqlRoutes(services: Services): Hono<HonoEnv> {
  const engine = lazyEngine(services);
  const app = new Hono<HonoEnv>();
  // A browser asking for the page gets it without a token; queries need one like /api/.
  app.get("/", async (c, next) => {
    if (!c.req.query("query") && /text\/html/.test(c.req.header("accept") ?? "")) {
      c.header("Content-Security-Policy", GRAPHQL_PAGE_CSP);
      return c.html(GRAPHQL_PAGE);
    }
    await next();
  });
  // GraphQL reads with POST too: when login is optional an anonymous POST may read. Every query
  // is a read: the token's guard rides in the first list's read, and the route settles it.
  app.use("*", authenticate({ exempt: () => !services.config.loginRequired, readsSettled: true }));
  app.on(["GET", "POST"], "/", async (c) => (await engine())(c));
  app.all("/", () => {
    throw new ApiError(405, errorBody("method_not_allowed", "Method not allowed."), {
      Allow: "GET, POST, HEAD",
    });
  });
  return app;
}
