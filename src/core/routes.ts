/** Core API routes: the `/api/` root, status, object types, users and the host models. */
import { Hono } from "hono";
import { eq } from "drizzle-orm";
import { objectTypes as objectTypesTable, users } from "../db/schema";
import { clientAddress, LoginThrottle, verifyLogin } from "./auth/login";
import { ISSUED_KEY, groupModel, permissionModel, tokenModel, userModel } from "./auth/models";
import { ownerGroupModel, ownerModel } from "./auth/owners";
import { requirePermission } from "./auth/permissions";
import { typeSight } from "./auth/type-sight";
import type { HonoEnv } from "./context";
import * as v from "valibot";
import { ApiError, notAuthenticated } from "./errors";
import { baseUrlOf } from "./http";
import { describeRoute, jsonBody, jsonObject } from "./validate";
import { NETBOX_VERSION } from "./api-version";
import { defineModel, type DefinedModel } from "./models/define";
import { choiceSetModel, tagModel } from "./models/extras";
import {
  deviceModel,
  ipAddressModel,
  prefixModel,
  siteModel,
  tenantModel,
} from "./models/inventory";
import { createOne, inStagedWrite, loadOneWithGuards, mountResource } from "./rest/handlers";
import { objectChangeModel } from "./changes/model";
import { mountRevertRoute } from "./changes/revert";
import { eventRuleModel, webhookModel } from "./events/models";
import { jobModel } from "./jobs/model";
import { refuseNetBoxFilters } from "./models/netbox-filters";
import { normalizeAppLabel } from "./object-types";
import { buildFilter, DEFAULT_LOOKUPS, type Lookup } from "./rest/query";

const objectTypeModel = defineModel({
  appLabel: "core",
  model: "objecttype",
  verboseName: "object type",
  path: "core/object-types",
  table: objectTypesTable as any,
  changeLogged: false,
  defaultOrdering: ["app_label", "model"],
  display: (r) => `${r.appLabel} | ${r.model}`,
  openapi: { omit: ["created", "last_updated"] },
  fields: [
    {
      name: "app_label",
      type: "string",
      column: objectTypesTable.appLabel,
      readOnly: true,
      brief: true,
      search: true,
    },
    {
      name: "model",
      type: "string",
      column: objectTypesTable.model,
      readOnly: true,
      brief: true,
      search: true,
    },
  ],
});
// object_types rows have no timestamps; drop the keys the generic serialiser adds.
const otLoad = objectTypeModel.resource.load;
objectTypeModel.resource.load = async (ctx, ids) =>
  (await otLoad(ctx, ids)).map(({ created: _c, last_updated: _l, ...rest }) => rest);
objectTypeModel.resource.list.orderings = {
  id: objectTypesTable.id,
  app_label: objectTypesTable.appLabel,
  model: objectTypesTable.model,
};
// `?app_label=netbox_custom_objects` (upstream's label, as pynetbox's extension and scripts
// look a type up) finds the custom_objects rows; lookups on part of the text compare it as sent
const appLabelFilter = objectTypeModel.resource.list.filters.app_label!;
const WHOLE_VALUE: ReadonlySet<Lookup> = new Set(["exact", "n", "ie", "nie"]);
objectTypeModel.resource.list.filters.app_label = {
  ...appLabelFilter,
  lookups: appLabelFilter.lookups ?? DEFAULT_LOOKUPS.string,
  build: (lookup, values) =>
    buildFilter(
      "app_label",
      appLabelFilter,
      lookup,
      WHOLE_VALUE.has(lookup) ? values.map(normalizeAppLabel) : values,
    ),
};
delete objectTypeModel.resource.list.filters.created;
delete objectTypeModel.resource.list.filters.last_updated;
// a custom object type the caller holds no permission on is not listed, counted or found (0187)
objectTypeModel.resource.scope = async (_user, ctx, auth) =>
  typeSight(ctx.services, auth).rows(objectTypesTable.appLabel, objectTypesTable.model);

/** Every core model with its `/api/` path. */
export const CORE_MODELS: DefinedModel[] = [
  siteModel,
  deviceModel,
  prefixModel,
  ipAddressModel,
  tenantModel,
  tagModel,
  choiceSetModel,
  userModel,
  groupModel,
  permissionModel,
  tokenModel,
  ownerModel,
  ownerGroupModel,
  objectTypeModel,
  objectChangeModel,
  jobModel,
  webhookModel,
  eventRuleModel,
];

// NetBox's filters Host does not model are refused, never ignored (decision 0203).
for (const m of CORE_MODELS)
  refuseNetBoxFilters(`${m.spec.appLabel}.${m.spec.model}`, m.resource.list);

/** Models the API only reads (writes answer 405). */
const READ_ONLY_MODELS = new Set<DefinedModel>([objectTypeModel, objectChangeModel, jobModel]);

export const HOST_VERSION = "0.1.0";

const json = (schema: unknown) => ({ "application/json": { schema } });
const FORBIDDEN = { $ref: "#/components/responses/Forbidden" };
const endpointMap = v.pipe(
  v.record(v.string(), v.pipe(v.string(), v.url())),
  v.description("Endpoint name → absolute URL."),
);

/** `GET /api/status/`: what it answers. */
const StatusSchema = v.object({
  "netbox-version": v.pipe(
    v.string(),
    v.description("The NetBox release whose REST API Host follows (as `API-Version`)."),
  ),
  "host-version": v.string(),
  "hono-version": v.optional(v.string()),
  runtime: v.string(),
  "database-kind": v.optional(v.string()),
  "cache-backend": v.optional(v.string()),
  plugins: v.pipe(v.record(v.string(), v.string()), v.description("Plugin name → version.")),
  "started-at": v.optional(v.pipe(v.string(), v.isoTimestamp())),
});

/** `POST /api/users/tokens/`: one token per request (its fields are the token model's, checked by the model). */
const TokenCreateBody = jsonObject({}, "Create one token per request (a JSON object).");

/** `POST /api/users/tokens/provision/`: credentials plus the token model's writable fields. */
const PROVIDE = "Provide username and password.";
const ProvisionBody = jsonObject(
  {
    username: v.string(PROVIDE),
    password: v.pipe(v.string(PROVIDE), v.metadata({ writeOnly: true })),
  },
  PROVIDE,
);

const tokenCreated = {
  "201": {
    description: "The token, with its key.",
    content: json({ $ref: "#/components/schemas/TokenCreated" }),
  },
};

export function coreApiRoutes(): Hono<HonoEnv> {
  const api = new Hono<HonoEnv>();
  mountInfoRoutes(api);
  mountSectionIndexes(api);
  mountTokenCreate(api);
  mountTokenProvision(api);
  mountRevertRoute(api);
  for (const m of CORE_MODELS) {
    mountResource(api, `/${m.spec.path}`, () => m.resource, { readOnly: READ_ONLY_MODELS.has(m) });
  }
  return api;
}

/** `/api/`, `/api/status/` and `/api/authentication-check/`. */
function mountInfoRoutes(api: Hono<HonoEnv>): void {
  api.get(
    "/",
    describeRoute({
      tags: ["api"],
      operationId: "api_root",
      summary: "API root: one URL per section",
      responses: {
        "200": { description: "Section name → URL.", content: json(endpointMap) },
        "403": FORBIDDEN,
      },
    }),
    (c) => {
      const base = `${baseUrlOf(c)}/api`;
      return c.json({
        core: `${base}/core/`,
        dcim: `${base}/dcim/`,
        extras: `${base}/extras/`,
        ipam: `${base}/ipam/`,
        plugins: `${base}/plugins/`,
        status: `${base}/status/`,
        tenancy: `${base}/tenancy/`,
        users: `${base}/users/`,
      });
    },
  );

  api.get(
    "/status",
    describeRoute({
      tags: ["api"],
      operationId: "status",
      summary: "Versions, runtime, database, cache and enabled plugins",
      responses: {
        "200": { description: "The status.", content: json(StatusSchema) },
        "403": FORBIDDEN,
      },
    }),
    (c) => {
      const { plugins, config, startedAt } = c.get("services");
      return c.json({
        "netbox-version": NETBOX_VERSION,
        "host-version": HOST_VERSION,
        "hono-version": "4",
        runtime:
          config.runtime === "bun"
            ? `bun ${typeof Bun !== "undefined" ? Bun.version : "?"}`
            : "workerd",
        "database-kind": c.get("services").db.kind,
        "cache-backend": config.cacheBackend,
        plugins: Object.fromEntries(plugins.map((p) => [p.name, p.version])),
        "started-at": startedAt.toISOString(),
      });
    },
  );

  // NetBox 4.7: who the credentials belong to (403 without them, even when LOGIN_REQUIRED is off).
  api.get(
    "/authentication-check",
    describeRoute({
      tags: ["api"],
      operationId: "authentication_check",
      summary: "The user the request's token authenticates",
      responses: {
        "200": { description: "The user.", content: json({ $ref: "#/components/schemas/User" }) },
        "403": FORBIDDEN,
      },
    }),
    async (c) => {
      const user = c.get("auth").user;
      if (!user) throw notAuthenticated();
      return c.json(await loadOneWithGuards(c, userModel.resource, user.id));
    },
  );
}

/** App indexes: `/api/dcim/` lists its endpoints, like NetBox. */
function mountSectionIndexes(api: Hono<HonoEnv>): void {
  const sections = new Map<string, string[]>();
  for (const m of CORE_MODELS) {
    const [section, endpoint] = m.spec.path.split("/") as [string, string];
    (sections.get(section) ?? sections.set(section, []).get(section)!).push(endpoint);
  }
  for (const [section, endpoints] of sections) {
    const doc = describeRoute({
      tags: [section],
      operationId: `${section}_root`,
      summary: `Endpoints of the ${section} section`,
      responses: {
        "200": { description: "Endpoint name → URL.", content: json(endpointMap) },
        "403": FORBIDDEN,
      },
    });
    api.get(`/${section}`, doc, (c) =>
      c.json(Object.fromEntries(endpoints.map((e) => [e, `${baseUrlOf(c)}/api/${section}/${e}/`]))),
    );
  }
}

const tokenTag = () => tokenModel.spec.path.split("/")[0]!;

/** `POST /api/users/tokens/`: one token per request, answered with its key. */
function mountTokenCreate(api: Hono<HonoEnv>): void {
  // Tokens are shown once, so creating one answers with its key (and bulk creation is refused).
  // The permission is checked before the body is read (403 before 415/413/400).
  api.post(
    "/users/tokens",
    describeRoute({
      tags: [tokenTag()],
      operationId: "users_tokens_create",
      summary: "Create a token (one per request); the answer holds its key, shown this once",
      requestBody: { required: true, content: json({ $ref: "#/components/schemas/TokenRequest" }) },
      responses: { ...tokenCreated, "403": FORBIDDEN },
    }),
    async (c, next) => {
      await requirePermission(c, "add", tokenModel.resource);
      await next();
    },
    jsonBody(TokenCreateBody),
    async (c) => {
      const r = tokenModel.resource;
      // A token is for its creator unless a superuser names another user (NetBox 4); the owner
      // scope of tokens refuses any other user for everyone else.
      const input = { ...c.req.valid("json") } as Record<string, unknown>;
      const caller = c.get("auth").user;
      if (!Object.hasOwn(input, "user") && caller) input.user = caller.id;
      let token = "";
      const record = await createOne(c, r, input, (ctx) => {
        token = ctx.scratch.get(ISSUED_KEY) ?? "";
      });
      return c.json({ ...record, token }, 201);
    },
  );
}

/** `POST /api/users/tokens/provision/`: a username and password for a new token, throttled. */
function mountTokenProvision(api: Hono<HonoEnv>): void {
  // NetBox's provisioning endpoint: exchange a username and password for a new token.
  api.post(
    "/users/tokens/provision",
    describeRoute({
      tags: [tokenTag()],
      operationId: "users_tokens_provision",
      summary: "Exchange a username and password for a new token",
      security: [],
      requestBody: {
        required: true,
        content: json({ $ref: "#/components/schemas/TokenProvisionRequest" }),
      },
      responses: {
        ...tokenCreated,
        "403": {
          description: "Invalid username/password.",
          content: json({ $ref: "#/components/schemas/Error" }),
        },
        "429": {
          description:
            "Too many failed logins for this username or client address (`error`: `rate_limited`); retry after `Retry-After` seconds.",
          headers: {
            "Retry-After": {
              description: "Seconds until the failure window ends.",
              schema: { type: "integer", minimum: 1 },
            },
          },
          content: json({ $ref: "#/components/schemas/Error" }),
        },
      },
    }),
    jsonBody(ProvisionBody),
    async (c) => {
      const { username, password, ...rest } = c.req.valid("json");
      const services = c.get("services");
      // 429 once this username or this client has failed too often; unknown users and wrong
      // passwords cost the same hash and count the same (src/core/auth/login.ts).
      const throttle = await LoginThrottle.for(
        services,
        username,
        clientAddress(c, services.config),
      );
      await throttle.begin();
      const [user] = await services.db.orm
        .select()
        .from(users)
        .where(eq(users.username, username))
        .limit(1);
      const valid = await verifyLogin(services, password, user?.passwordHash);
      if (!user?.isActive || !valid) {
        throw ApiError.detail(403, "Invalid username/password", "invalid_credentials");
      }
      await throttle.succeeded();
      const r = tokenModel.resource;
      let token = "";
      // one read and one atomic write (decision 0092); the login above is what authorises it
      const [written] = await inStagedWrite(c, async (ctx) => {
        const made = await r.staged!.create!(ctx, [{ ...rest, user: user.id }], {
          resource: r,
          bulk: false,
          authorised: true,
        });
        token = ctx.scratch.get(ISSUED_KEY) ?? "";
        return made;
      });
      return c.json({ ...written!.record, token }, 201);
    },
  );
}
