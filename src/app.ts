/**
 * `createApp(deps)`: the one factory. Bun (`server.ts`), Workers (`worker.ts`) and the tests
 * build their dependencies and call it; it mounts the core API and the enabled plugins.
 */
import { errorBody } from "./api-error";
import { Hono } from "hono";
import { getPath } from "hono/utils/url";
import { and, eq } from "drizzle-orm";
import type { Config } from "./config";
import type { Database } from "./db/client";
import { inJsonList } from "./db/d1-limits";
import { taggedItems } from "./db/schema";
import type { HonoEnv, Services } from "./core/context";
import { authenticate } from "./core/auth/middleware";
import { ModelRegistry } from "./core/models/registry";
import { Slots } from "./core/slots";
import { ObjectTypeRegistry } from "./core/object-types";
import { CORE_MODELS, coreApiRoutes } from "./core/routes";
import { OpenApiDocuments } from "./openapi/generate";
import { isPublicDocsPath, openApiRoutes } from "./openapi/routes";
import { resolvePlugins, BUILTIN_PLUGINS } from "./plugins/registry";
import type { HostPlugin, InstalledPlugin } from "./plugins/types";
import type { Cache } from "./services/cache/types";
import { createLogger, type Logger } from "./services/logger";
import type { RedisClient } from "./services/redis-types";
import type { DeleteHook } from "./core/rest/resource";
import { protectRuleActions } from "./core/events/models";
import { WEBHOOK_TASK } from "./core/events/dispatch";
import { webhookHandler } from "./core/events/webhook";
import { TaskQueue, type TaskQueueOptions } from "./services/tasks/queue";
import { accessLog } from "./core/access-log";
import { corsFor } from "./core/cors";
import { optionsMetadata } from "./openapi/metadata";
import { answerMethodNotAllowed } from "./core/method-not-allowed";
import { protectHostDependants } from "./core/rest/dependants";
import { graphqlRoutes } from "./graphql/routes";
import { homeRoutes } from "./core/home";
import { errorHandler } from "./core/error-handler";
import { databaseIdentity } from "./db/identity";
import { namespacedCache } from "./services/cache/namespaced";
import { databaseFileGone } from "./db/health";
import { NETBOX_API_VERSION } from "./core/api-version";
import { mountPluginsRoot } from "./plugins/api-root";
import { BULK_WRITE_TASK, bulkWriteHandler } from "./core/rest/background";

export interface AppDeps {
  config: Config;
  db: Database;
  cache: Cache;
  redis?: { caching?: RedisClient; tasks?: RedisClient };
  /** Why a Redis role meant to exist is missing (`Services.redisDown`). */
  redisDown?: { caching?: string; tasks?: string };
  logger?: Logger;
  /** Plugins that exist (enabled ones are picked by `config.plugins`); default: the built-ins. */
  availablePlugins?: HostPlugin[];
  /**
   * Task queue tuning over `config.tasks` (tests use short timeouts); `webhookTimeoutMs` bounds
   * each delivery, `webhookPerTarget` the deliveries to one receiver at once (default 3).
   */
  tasks?: TaskQueueOptions & { webhookTimeoutMs?: number; webhookPerTarget?: number };
  /** The clock request durations are measured on (ms); default `performance.now`. */
  now?: () => number;
}

/** The Hono app, with the services and plugins it was built with. */
export type App = Hono<HonoEnv> & {
  readonly services: Services;
  readonly plugins: readonly InstalledPlugin[];
};

/** The services an app was built with: the task worker and the Workers cron use its queue. */
export function servicesOf(app: App): Services {
  return app.services;
}

/** An incoming `X-Request-Id` is kept when it is 1-64 word characters, dots or dashes; otherwise a UUID. */
const REQUEST_ID = /^[\w.-]{1,64}$/;

/**
 * Routes are declared without a trailing slash and requests route with it stripped, so
 * `/api/dcim/sites/` and `/api/dcim/sites` reach the same handler (§4).
 */
function routingPath(req: Request): string {
  const path = getPath(req);
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}

/** Generic references to a deleted object go with it. */
const dropTags: DeleteHook = async (ctx, target) => {
  const ot = await ctx.services.objectTypes.byLabel(target.appLabel, target.model, ctx.db);
  if (ot)
    await ctx.db
      .delete(taggedItems)
      .where(and(eq(taggedItems.objectTypeId, ot.id), eq(taggedItems.objectId, target.id)));
};
// staged (decision 0071): the object's tags go in the delete's batch
dropTags.stage = (ctx, _phase, target) => async () => {
  const ot =
    target.objectTypeId !== undefined
      ? { id: target.objectTypeId }
      : await ctx.services.objectTypes.byLabel(target.appLabel, target.model);
  return {
    write(batch) {
      if (ot)
        batch.add(
          ctx.services.db.orm
            .delete(taggedItems)
            .where(and(eq(taggedItems.objectTypeId, ot.id), eq(taggedItems.objectId, target.id))),
        );
    },
  };
};

// with no read (a create's revert, decision 0139): where the object's type is known to the process
dropTags.stageAssumed = (ctx, target) => {
  const ot =
    target.objectTypeId !== undefined
      ? { id: target.objectTypeId }
      : ctx.services.objectTypes.cached(target.appLabel, target.model);
  if (!ot) return null;
  return {
    write(batch) {
      batch.add(
        ctx.services.db.orm
          .delete(taggedItems)
          .where(and(eq(taggedItems.objectTypeId, ot.id), eq(taggedItems.objectId, target.id))),
      );
    },
  };
};

// a cascade's objects of one type (decision 0155): their tags in one statement, ids bound as JSON
dropTags.stageCascaded = (ctx, targets) => ({
  write(batch) {
    const ids = inJsonList(taggedItems.objectId, targets.ids);
    batch.add(
      ctx.services.db.orm
        .delete(taggedItems)
        .where(and(eq(taggedItems.objectTypeId, targets.objectTypeId), ids)),
    );
  },
});

// many objects of one type (decision 0184): no read; their tags in one statement after
dropTags.stageMany = (ctx, _phase, targets) => ({
  async admit() {},
  async part() {
    const ot =
      targets.objectTypeId !== undefined
        ? { id: targets.objectTypeId }
        : await ctx.services.objectTypes.byLabel(targets.appLabel, targets.model);
    if (!ot) return { write() {} };
    return dropTags.stageCascaded!(ctx, { ...targets, objectTypeId: ot.id })!;
  },
});

const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export async function createApp(deps: AppDeps): Promise<App> {
  const { config } = deps;
  const logger = deps.logger ?? createLogger(config.logLevel);
  const plugins = resolvePlugins(config.plugins, deps.availablePlugins ?? BUILTIN_PLUGINS);
  const services = await buildServices(deps, logger, plugins);
  for (const m of CORE_MODELS) services.models.register(m.info);
  // One statement for every static object type: a cold isolate on Turso pays one round trip, not dozens.
  await services.objectTypes.ensureMany([
    ...CORE_MODELS.map((m) => ({ appLabel: m.spec.appLabel, model: m.spec.model })),
    ...plugins.flatMap((p) => p.objectTypes ?? []),
  ]);
  const installed = await installPlugins(plugins, services);

  const app = new Hono<HonoEnv>({ getPath: routingPath });
  useRequestMiddleware(app, services, deps);
  app.onError(errorHandler(services));
  app.notFound((c) => c.json(errorBody("not_found", "Not found."), 404));

  app.route("/api", apiRoutes(app, services, installed));
  app.route("/graphql", graphqlRoutes(services));
  app.route("/", homeRoutes(installed.map(({ plugin }) => plugin.name)));
  for (const { plugin, parts } of installed) {
    if (parts.routes) app.route(`/plugins/${plugin.name}`, parts.routes);
    if (parts.rootRoutes) app.route("/", parts.rootRoutes);
  }
  // `?background=true` bulk writes: the job replays the request through this very app.
  services.tasks?.register(
    BULK_WRITE_TASK,
    bulkWriteHandler(async (request, env) => app.fetch(request, env)),
  );
  return Object.assign(app, { services, plugins: installed });
}

/** The services every request and task sees, with the webhook task registered on the queue. */
async function buildServices(
  deps: AppDeps,
  logger: Logger,
  plugins: readonly HostPlugin[],
): Promise<Services> {
  const { config, db } = deps;
  // State outside the database (cache keys, the task queue) belongs to this database (0069).
  const identity = await databaseIdentity(db.orm);
  const services: Services = {
    config,
    db,
    cache: namespacedCache(deps.cache, `${identity}:`),
    redis: deps.redis ?? {},
    ...(deps.redisDown ? { redisDown: deps.redisDown } : {}),
    logger,
    plugins: plugins.map(({ name, version, apiBase }) => ({
      name,
      version,
      ...(apiBase ? { apiBase } : {}),
    })),
    objectTypes: new ObjectTypeRegistry(db),
    models: new ModelRegistry(),
    deleteHooks: [protectHostDependants(CORE_MODELS), dropTags, protectRuleActions],
    tasks: deps.redis?.tasks
      ? new TaskQueue(db, deps.redis.tasks, logger, {
          afterCommit: config.runtime === "workerd" ? "deferred" : "now",
          prefix: `host:tasks:${identity}`,
          ...config.tasks,
          ...deps.tasks,
        })
      : null,
    periodic: [],
    startedAt: new Date(),
    state: new Slots(),
  };
  services.tasks?.register(
    WEBHOOK_TASK,
    webhookHandler(services, {
      timeoutMs: deps.tasks?.webhookTimeoutMs,
      perTarget: deps.tasks?.webhookPerTarget,
    }),
  );
  return services;
}

/** Each plugin is set up once for this app; what it returns is all the host wires in. */
async function installPlugins(
  plugins: readonly HostPlugin[],
  services: Services,
): Promise<InstalledPlugin[]> {
  const installed: InstalledPlugin[] = [];
  for (const plugin of plugins)
    installed.push({ plugin, parts: (await plugin.setup?.(services)) ?? {} });
  for (const { parts } of installed) {
    services.deleteHooks.push(...(parts.hooks?.beforeDelete ?? []));
    // Plugin tasks (schema applies) are the app's own work: their lane never waits behind webhooks.
    for (const [name, handler] of Object.entries(parts.hooks?.tasks ?? {}))
      services.tasks?.register(name, handler, "internal");
    services.periodic.push(...(parts.hooks?.periodic ?? []));
  }
  for (const { parts } of installed) await parts.hooks?.ready?.(installed);
  return installed;
}

/** Middleware every request passes, in order: services, file health, request id, logs, headers, CORS. */
function useRequestMiddleware(app: Hono<HonoEnv>, services: Services, deps: AppDeps): void {
  const { config, db } = deps;
  // One middleware for what every request does first (five before, decision 0214: each layer is
  // an async frame and a dispatch per request), in their order: the services; a local file
  // deleted or replaced under the server, whose writes would land in the old, unlinked file and
  // be lost at restart, refuses writes while reads go on (decision 0079); the request id (an
  // incoming one kept when it is 1-64 word characters, dots or dashes), echoed; the API version.
  app.use("*", async (c, next) => {
    c.set("services", services);
    if (!READ_METHODS.has(c.req.method) && db.fileHealth.fileProblem()) throw databaseFileGone();
    const incoming = c.req.header("x-request-id");
    const id = incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    c.set("requestId", id);
    // Set before the answer exists, the header is in the one Response the handler makes: set
    // after it, Hono makes the Response again around its body (decision 0132). Afterwards only
    // for an answer made without the context (a raw Response), which the header would miss.
    c.header("X-Request-Id", id);
    // The NetBox REST API version these answers follow; pynetbox reads it (`nb.version`), errors
    // included. (Its own middleware after the access log before: the log reads neither header.)
    const api = c.req.path === "/api" || c.req.path.startsWith("/api/");
    if (api) c.header("API-Version", NETBOX_API_VERSION);
    await next();
    if (api && !c.res.headers.has("API-Version")) c.header("API-Version", NETBOX_API_VERSION);
    if (!c.res.headers.has("X-Request-Id")) c.header("X-Request-Id", id);
    // Workers: the outbox rows this request committed are relayed after the response.
    const relay = services.tasks?.outbox.takeDeferred(id);
    if (relay) {
      try {
        c.executionCtx.waitUntil(relay());
      } catch {
        void relay(); // no execution context (tests calling app.request)
      }
    }
  });
  app.use("*", accessLog({ slowMs: config.slowRequestMs, now: deps.now }));
  // Before authentication, so a browser's preflight is answered without a token.
  if (config.corsOrigins.length) app.use("*", corsFor(config.corsOrigins));
  app.use("*", answerMethodNotAllowed(app));
}

/** `/api`: authentication, then the core API, the OpenAPI documents and the plugins' APIs. */
function apiRoutes(
  app: Hono<HonoEnv>,
  services: Services,
  installed: readonly InstalledPlugin[],
): Hono<HonoEnv> {
  const api = new Hono<HonoEnv>();
  api.use(
    "*",
    authenticate({
      // GET and HEAD only: a stale cached token found after the answer was built answers again
      again: async (c) => app.fetch(c.req.raw, c.env),
      exempt: (path, method) =>
        (method === "POST" && /\/api\/users\/tokens\/provision\/?$/.test(path)) ||
        (method === "GET" && isPublicDocsPath(path)),
    }),
  );
  // The OpenAPI document describes the routes this app actually mounted.
  const documents = new OpenApiDocuments({
    services,
    parts: installed.map(({ plugin, parts }) => ({ name: plugin.name, openapi: parts.openapi })),
    routes: () => app.routes,
  });
  // OPTIONS on a described endpoint: DRF metadata (pynetbox's `.choices()`), after authentication.
  api.use("*", optionsMetadata(documents));
  api.route("/", coreApiRoutes());
  api.route("/", openApiRoutes(documents));
  mountPluginsRoot(
    api,
    installed.map(({ plugin }) => plugin),
  );
  for (const { plugin, parts } of installed) {
    if (plugin.apiBase && parts.apiRoutes) api.route(`/plugins/${plugin.apiBase}`, parts.apiRoutes);
  }
  return api;
}
