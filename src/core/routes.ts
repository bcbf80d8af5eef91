/** Core API routes: the `/api/` root, status, object types, users and the host models. */
import { Hono } from "hono";
import { eq } from "drizzle-orm";
import { objectTypes as objectTypesTable, users } from "../db/schema";
import { clientAddress, LoginThrottle, verifyLogin } from "./auth/login";
import { issuedKeys, groupModel, permissionModel, tokenModel, userModel } from "./auth/models";
import { requirePermission } from "./auth/permissions";
import type { HonoEnv } from "./context";
import { ApiError, ValidationError } from "./errors";
import { baseUrlOf, readJson } from "./http";
import { defineModel, type DefinedModel } from "./models/define";
import { choiceSetModel, tagModel } from "./models/extras";
import { deviceModel, ipAddressModel, prefixModel, siteModel, tenantModel } from "./models/inventory";
import { createChecked, createRecord, inTransaction, mountResource, readContext } from "./rest/handlers";
import { objectChangeModel } from "./changes/model";
import { eventRuleModel, webhookModel } from "./events/models";
import { jobModel } from "./jobs/model";

export const objectTypeModel = defineModel({
  appLabel: "core",
  model: "objecttype",
  verboseName: "object type",
  path: "core/object-types",
  table: objectTypesTable as any,
  defaultOrdering: ["app_label", "model"],
  display: (r) => `${r.appLabel} | ${r.model}`,
  openapi: { omit: ["created", "last_updated"] },
  fields: [
    { name: "app_label", type: "string", column: objectTypesTable.appLabel, readOnly: true, brief: true, search: true },
    { name: "model", type: "string", column: objectTypesTable.model, readOnly: true, brief: true, search: true },
  ],
});
// object_types rows have no timestamps; drop the keys the generic serialiser adds.
const otLoad = objectTypeModel.resource.load;
objectTypeModel.resource.load = async (ctx, ids) =>
  (await otLoad(ctx, ids)).map(({ created: _c, last_updated: _l, ...rest }) => rest);
objectTypeModel.resource.list.orderings = { id: objectTypesTable.id, app_label: objectTypesTable.appLabel, model: objectTypesTable.model };
delete objectTypeModel.resource.list.filters.created;
delete objectTypeModel.resource.list.filters.last_updated;

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
  objectTypeModel,
  objectChangeModel,
  jobModel,
  webhookModel,
  eventRuleModel,
];

/** Models the API only reads (writes answer 405). */
const READ_ONLY_MODELS = new Set<DefinedModel>([objectTypeModel, objectChangeModel, jobModel]);

export const HOST_VERSION = "0.1.0";

export function coreApiRoutes(): Hono<HonoEnv> {
  const api = new Hono<HonoEnv>();

  api.get("/", (c) => {
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
  });

  api.get("/status", (c) => {
    const { plugins, config, startedAt } = c.var.services;
    return c.json({
      "host-version": HOST_VERSION,
      "hono-version": "4",
      runtime: config.runtime === "bun" ? `bun ${typeof Bun !== "undefined" ? Bun.version : "?"}` : "workerd",
      "database-kind": c.var.services.db.kind,
      "cache-backend": config.cacheBackend,
      plugins: Object.fromEntries(plugins.map((p) => [p.name, p.version])),
      "started-at": startedAt.toISOString(),
    });
  });

  // App indexes: `/api/dcim/` lists its endpoints, like NetBox.
  const sections = new Map<string, string[]>();
  for (const m of CORE_MODELS) {
    const [section, endpoint] = m.spec.path.split("/") as [string, string];
    (sections.get(section) ?? sections.set(section, []).get(section)!).push(endpoint);
  }
  for (const [section, endpoints] of sections) {
    api.get(`/${section}`, (c) => c.json(Object.fromEntries(endpoints.map((e) => [e, `${baseUrlOf(c)}/api/${section}/${e}/`]))));
  }

  // Tokens are shown once, so creating one answers with its key (and bulk creation is refused).
  api.post("/users/tokens", async (c) => {
    const r = tokenModel.resource;
    await requirePermission(c, "add", r);
    const body = await readJson(c);
    if (!body || typeof body !== "object" || Array.isArray(body)) {
      throw new ValidationError({ non_field_errors: ["Create one token per request (a JSON object)."] });
    }
    // A token is for its creator unless a superuser names another user (NetBox 4); the owner
    // scope of tokens refuses any other user for everyone else.
    const input = { ...(body as Record<string, unknown>) };
    if (!Object.hasOwn(input, "user") && c.var.auth.user) input.user = c.var.auth.user.id;
    let key = "";
    const id = await inTransaction(c, r, async (ctx) => {
      const created = (await createChecked(ctx, r, input)).id;
      key = issuedKeys.get(ctx) ?? "";
      return created;
    });
    const [record] = await r.load(readContext(c), [id]);
    return c.json({ ...record, key }, 201);
  });

  // NetBox's provisioning endpoint: exchange a username and password for a new token.
  api.post("/users/tokens/provision", async (c) => {
    const body = (await readJson(c)) as Record<string, unknown>;
    const { username, password, ...rest } = body && typeof body === "object" && !Array.isArray(body) ? body : ({} as Record<string, unknown>);
    if (typeof username !== "string" || typeof password !== "string") {
      throw new ValidationError({ non_field_errors: ["Provide username and password."] });
    }
    const services = c.var.services;
    // 429 once this username or this client has failed too often; unknown users and wrong
    // passwords cost the same hash and count the same (src/core/auth/login.ts).
    const throttle = await LoginThrottle.for(services, username, clientAddress(c, services.config));
    await throttle.begin();
    const [user] = await services.db.orm.select().from(users).where(eq(users.username, username)).limit(1);
    const valid = await verifyLogin(services, password, user?.passwordHash);
    if (!user || !user.isActive || !valid) {
      throw ApiError.detail(403, "Invalid username/password", "invalid_credentials");
    }
    await throttle.succeeded();
    const r = tokenModel.resource;
    let key = "";
    const id = await inTransaction(c, r, async (ctx) => {
      const created = (await createRecord(ctx, r, { ...rest, user: user.id })).id;
      key = issuedKeys.get(ctx) ?? "";
      return created;
    });
    const [record] = await r.load(readContext(c), [id]);
    return c.json({ ...record, key }, 201);
  });

  for (const m of CORE_MODELS) {
    mountResource(api, `/${m.spec.path}`, () => m.resource, { readOnly: READ_ONLY_MODELS.has(m) });
  }
  return api;
}

export { ApiError };
