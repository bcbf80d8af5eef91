/**
 * The custom objects plugin (§5): user-defined object types with a REST endpoint each, their
 * fields, linked-object lookups and (in `schema/`) declarative schema documents.
 */
import { errorBody } from "../../api-error";
import { asc, eq, type SQL, sql } from "drizzle-orm";
import { Hono } from "hono";
import * as v from "valibot";
import { missingKeyMessages, query, repeated } from "../../core/validate";
import type {
  CachedModel,
  CachedModelRead,
  Ctx,
  Guard,
  HonoEnv,
  Services,
} from "../../core/context";
import { addGuard, foldsCredentials, freshRead } from "../../core/fresh-read";
import { ApiError, notFound } from "../../core/errors";
import { baseUrlOf } from "../../core/http";
import { hasPermission, holdsAnyPermission, requirePermission } from "../../core/auth/permissions";

import { inStagedWrite, inTransaction, mountResource, readContext } from "../../core/rest/handlers";
import { withRetry } from "./types/staged";
import { applyStaged } from "./schema/apply-staged";
import type { Resource } from "../../core/rest/resource";
import type { StagedOptions } from "../../core/context";
import { customObjectTypes } from "../../db/schema";
import { oneRow, Prebuilt } from "../../db/driver-internals";
import type { HostPlugin } from "../types";
import type { ModelInfo } from "../../core/models/registry";
import { API_BASE, APP_LABEL, COT_MODEL, FIELD_MODEL } from "./constants";
import { linkedObjects } from "./objects/linked";
import { CotRegistry, StaleModel } from "./objects/models";
import { onDeleteHook } from "./objects/on-delete";
import { cotModel, cotResource, fieldModel, fieldResource } from "./types/api";
import { exportSchema, previewSchema, readApplyRequest } from "./schema/apply";
import { exportInOneRead, refuseUnseen } from "./schema/export-read";
import { customObjectsOpenApi } from "./openapi";
import {
  enqueueSchemaApply,
  schemaApplyHandler,
  SCHEMA_APPLY_TASK,
  wantsBackground,
} from "./schema/jobs";
import { applySchemaLogged, asLongWrite } from "./schema/change-log";
import { cotsAllowed, countsWithheld } from "./schema/access";
import { documentAnswer, readSchemaBody, schemaAnswer } from "./schema/yaml-io";
import { mountTrashRoutes } from "./schema/trash-routes";
import { purgeExpiredTrash } from "./schema/trash";
import { RETENTION_EVERY_MS } from "../../services/tasks/retention";
import { databaseStamp } from "../../core/database-stamp";
import { flushSearchIndexesNow, searchFlusher, SEARCH_SWEEP_EVERY_MS } from "./search/flush";
import { addMissingCompanionColumns, dropUnwantedFieldIndexes } from "./ddl";
import { upgradeSearchIndexes } from "./search/search-index";
import { stagesSchemaWrites } from "../../db/policy";

/** The registry of one app's custom object types (made once, in `setup`). */
function cotRegistry(services: Services): CotRegistry {
  return new CotRegistry(
    services.db.orm,
    services.db.reader,
    async (ids, db, rows) => {
      const out = new Map<number, ModelInfo>();
      // the object types the registry read with the type, where it did (no read of its own)
      const types = rows
        ? new Map(ids.flatMap((id) => (rows.has(id) ? [[id, rows.get(id)!] as const] : [])))
        : await services.objectTypes.byIds(ids, db);
      for (const [id, ot] of types) {
        if (ot.appLabel === APP_LABEL) continue; // other COTs can change shape; they are fetched per request
        const info = await services.models.get(ot.appLabel, ot.model, {
          db,
          services,
          baseUrl: "",
        });
        if (info) out.set(id, info);
      }
      return out;
    },
    () => databaseStamp(services),
    (queries) => services.db.read(queries),
  );
}

/**
 * Writes re-read the COT's shape inside their own transaction: a schema change that committed
 * after the request resolved its slug is honoured instead of writing against the old shape.
 */
function liveResource(
  registry: CotRegistry,
  cotId: number,
  slug: string,
  resolved: Resource,
  checked: boolean,
): Resource {
  // One check per transaction (or read context): a write's create and its answer share it.
  const seen = new WeakMap<object, Resource>();
  const current = async (ctx: { db: Parameters<CotRegistry["byId"]>[0] }) => {
    const known = seen.get(ctx);
    if (known) return known;
    let model = await registry.byId(ctx.db, cotId);
    // Gone, or renamed since the request resolved its slug: the slug may name another COT now.
    if (!model || model.cot.slug !== slug) model = await registry.bySlug(ctx.db, slug);
    if (!model) throw notFound();
    seen.set(ctx, model.resource);
    return model.resource;
  };
  /**
   * A create starts from the cached model: its first statement re-checks that model's shape (see
   * `StaleModel`), so the COT need not be read separately unless the model is stale.
   */
  const cachedFirst = async <T>(
    ctx: Parameters<typeof current>[0],
    op: (r: Resource) => Promise<T>,
  ): Promise<T> => {
    if (!seen.has(ctx)) {
      try {
        const out = await op(resolved);
        seen.set(ctx, resolved);
        return out;
      } catch (e) {
        if (!(e instanceof StaleModel)) throw e;
      }
    }
    return op(await current(ctx));
  };
  return {
    ...resolved,
    // a model taken from the cache unchecked is re-read before it serialises anything
    load: checked ? resolved.load : async (ctx, ids) => (await current(ctx)).load(ctx, ids),
    createLoaded: (ctx, input) => cachedFirst(ctx, (r) => r.createLoaded!(ctx, input)),
    createMany: (ctx, inputs) => cachedFirst(ctx, (r) => r.createMany!(ctx, inputs)),
    create: async (ctx, input) => (await current(ctx)).create(ctx, input),
    update: async (ctx, id, input, partial) => (await current(ctx)).update(ctx, id, input, partial),
    delete: async (ctx, id) => (await current(ctx)).delete(ctx, id),
    staged: {
      create: (ctx, inputs, options) =>
        stagedFirst(ctx, options, (raw, o) => raw.staged!.create!(ctx, inputs, o)),
      update: (ctx, items, partial, options) =>
        stagedFirst(ctx, options, (raw, o) => raw.staged!.update!(ctx, items, partial, o)),
      delete: (ctx, ids, options) =>
        stagedFirst(ctx, options, (raw, o) => raw.staged!.delete(ctx, ids, o)),
      tagEdits: true,
    },
  };

  /**
   * A staged write starts from the resolved model; its read phase and its batch check the type's
   * shape (`StaleModel`), and it starts again once on the type as it now is, held to the limits of
   * the type as it now is.
   */
  async function stagedFirst<T>(
    ctx: Parameters<typeof current>[0],
    options: StagedOptions,
    op: (raw: Resource, options: StagedOptions) => Promise<T>,
  ): Promise<T> {
    try {
      return await op(resolved, options);
    } catch (e) {
      if (!(e instanceof StaleModel)) throw e;
    }
    const fresh = await current(ctx);
    const routed = liveResource(registry, cotId, slug, fresh, true);
    return op(fresh, { ...options, resource: routed });
  }
}

/** A type's id and shape version by slug: the guard every remote read of its objects sends. */
const shapeBySlug = new Prebuilt<{ shape: string }[]>((orm) =>
  orm
    // one value (`oneRow`): a remote read carries it as a column of its own statement
    .select({
      shape: sql<string>`${customObjectTypes.id} || ':' || ${customObjectTypes.shapeVersion}`,
    })
    .from(customObjectTypes)
    .where(eq(customObjectTypes.slug, sql.placeholder("slug")))
    .limit(1),
);

/**
 * A cached model's checked `liveResource` for guarded reads, kept with the model (decision 0214):
 * it holds nothing of a request (what it learns it keys by the request's context), so every read
 * of the model may share it rather than build it anew. A model replaced in the cache is a new key.
 */
const guardedLives = new WeakMap<Resource, Map<string, Resource>>();

function guardedLive(registry: CotRegistry, cotId: number, slug: string, model: Resource) {
  const bySlug = guardedLives.get(model) ?? guardedLives.set(model, new Map()).get(model)!;
  let live = bySlug.get(slug);
  if (!live) bySlug.set(slug, (live = liveResource(registry, cotId, slug, model, true)));
  return live;
}

/** Resources a read resolved from the registry's cache under a guard, per request. */
const resolvedUnderGuard = new WeakMap<Ctx, Resource>();

/**
 * A read where no change stamp proves the cached model current (remote, D1): the cached model,
 * with a guard that reads the type's id and shape version in the request's one read
 * (`core/fresh-read.ts`, decision 0085). A stale model is dropped and read again, and the
 * request's statements are built again on it. Null where the model must be read first.
 */
function guardedRead(c: Ctx, registry: CotRegistry, slug: string): Resource | null {
  const services = c.get("services");
  if (c.req.method !== "GET" && c.req.method !== "HEAD") return null;
  if (services.db.changeStamp() !== null) return null;
  const known = resolvedUnderGuard.get(c);
  if (known) return known;
  const cached = registry.cachedBySlug(slug);
  if (!cached) return null;
  const resource = guardedLive(registry, cached.cot.id, slug, cached.resource);
  resolvedUnderGuard.set(c, resource);
  addGuard(c, {
    name: `shape of ${slug}`,
    statements: [oneRow(shapeBySlug.with(services.db.reader, { slug }))],
    async settle([rows]) {
      const [row] = rows as { shape: string }[];
      if (row?.shape === `${cached.cot.id}:${cached.cot.shapeVersion}`) return true;
      registry.forget(cached.cot.id);
      resolvedUnderGuard.delete(c);
      return false;
    },
  });
  return resource;
}

/**
 * The id, slug and shape version of the type of object type `objectTypeId` (SQL: a value, or a
 * subquery where the type is not known yet, decision 0154): what a cached model's guard settles on.
 */
const shapeRead = (services: Services, objectTypeId: SQL) =>
  services.db.reader
    .select({
      id: customObjectTypes.id,
      slug: customObjectTypes.slug,
      v: customObjectTypes.shapeVersion,
    })
    .from(customObjectTypes)
    .where(sql`${customObjectTypes.objectTypeId} = ${objectTypeId}`)
    .limit(1);

/**
 * A type's model from the registry's cache by its object type id (a change record names no slug),
 * with a guard that reads the type's id, slug and shape version in the request's next read: a
 * stale model is dropped, and the request runs again on the type as it now is (decision 0118).
 */
function cachedModel(
  services: Services,
  registry: CotRegistry,
  objectTypeId: number,
): CachedModel | null {
  const cached = registry.cachedByObjectType(objectTypeId);
  if (!cached) return null;
  const { id, slug, shapeVersion } = cached.cot;
  const guard: Guard = {
    name: `shape of type ${objectTypeId}`,
    statements: [shapeRead(services, sql`${objectTypeId}`)],
    // a write with nothing else to read carries it instead (decision 0139: a revert with no read)
    batch: [
      services.db.orm.run(
        sql`INSERT INTO write_guard (ok) SELECT EXISTS (SELECT 1 FROM ${customObjectTypes} WHERE ${customObjectTypes.objectTypeId} = ${objectTypeId} AND ${customObjectTypes.id} = ${id} AND ${customObjectTypes.slug} = ${slug} AND ${customObjectTypes.shapeVersion} = ${shapeVersion})`,
      ),
    ],
    async settle([rows]) {
      const [row] = rows as { id: number; slug: string; v: number }[];
      if (row && row.id === id && row.slug === slug && row.v === shapeVersion) return true;
      // the type as it now is, read at once (one round trip): the request runs again on it
      if (row) await registry.refresh(row.id, row.v);
      else registry.forget(id);
      return false;
    },
  };
  return { label: `${APP_LABEL}.${slug}`, objectTypeId, info: cached.info, guard };
}

/**
 * Whether a change record of custom object type `cotId` (SQL naming its row's id) or of one of its
 * fields came after change record `since`: every change of a type's shape or names leaves one in
 * its own batch (decisions 0154, 0160).
 */
function typeChangedSince(cotId: SQL, since: number): SQL<number> {
  const typeOf = (model: string) =>
    sql`(SELECT o."id" FROM "object_types" o WHERE o."app_label" = ${APP_LABEL} AND o."model" = ${model})`;
  return sql<number>`EXISTS (SELECT 1 FROM "object_changes" l WHERE l."id" > ${since} AND ((l."changed_object_type_id" = ${typeOf(COT_MODEL)} AND l."changed_object_id" = ${cotId}) OR (l."changed_object_type_id" = ${typeOf(FIELD_MODEL)} AND l."changed_object_id" IN (SELECT f."id" FROM "custom_object_type_fields" f WHERE f."custom_object_type_id" = ${cotId}))))`;
}

/** `CachedLookup.changedSince`: `typeChangedSince` of the type whose object type `objectTypeId` names. */
const changedSince = (objectTypeId: SQL, since: number) =>
  typeChangedSince(
    sql`(SELECT t."id" FROM "custom_object_types" t WHERE t."object_type_id" = ${objectTypeId})`,
    since,
  );

/**
 * `ModelRegistry.cachedSince` (decision 0154): the shape guard's read, by SQL naming the object
 * type, with whether the type changed after `since` (`typeChangedSince`; a field removed shows in
 * the record's keys, which the caller compares).
 */
function cachedSince(
  services: Services,
  registry: CotRegistry,
  objectTypeId: SQL,
  since: number,
): CachedModelRead {
  // qualified by hand: a select list's columns are rendered bare, which the subquery would take
  // for its own
  const changed = typeChangedSince(sql.raw(`"custom_object_types"."id"`), since);
  const statement = services.db.reader
    .select({
      id: customObjectTypes.id,
      slug: customObjectTypes.slug,
      v: customObjectTypes.shapeVersion,
      changed,
    })
    .from(customObjectTypes)
    .where(sql`${customObjectTypes.objectTypeId} = ${objectTypeId}`)
    .limit(1);
  return {
    statements: [statement],
    async settle(id, [rows]) {
      const cached = cachedModel(services, registry, id);
      if (!cached || !(await cached.guard.settle([rows]))) return null;
      return (rows as Array<{ changed: unknown }>)[0]?.changed ? null : cached;
    },
  };
}

/** Slugs of the existing types the caller may not view. */
async function hiddenSlugs(
  ctx: ReturnType<typeof readContext>,
  auth: HonoEnv["Variables"]["auth"],
): Promise<Set<string>> {
  if (auth.user?.isSuperuser) return new Set();
  const rows = await ctx.db
    .select({ id: customObjectTypes.id, slug: customObjectTypes.slug })
    .from(customObjectTypes);
  const allowed = await cotsAllowed(
    ctx,
    auth,
    "view",
    rows.map((r) => r.id),
  );
  return new Set(rows.filter((r) => !allowed.has(r.id)).map((r) => r.slug));
}

const methodNotAllowed = (allow: string) => () => {
  throw new ApiError(405, errorBody("method_not_allowed", "Method not allowed."), { Allow: allow });
};

export const customObjectsPlugin: HostPlugin = {
  name: "custom_objects",
  version: "0.1.0",
  description: "Custom object types and fields defined at run time, with an API per type.",
  apiBase: "custom-objects",
  objectTypes: [
    { appLabel: APP_LABEL, model: COT_MODEL },
    { appLabel: APP_LABEL, model: FIELD_MODEL },
  ],
  migrations: [
    // Custom object tables are made at run time: their index policy (decision 0055).
    async (db) => {
      await dropUnwantedFieldIndexes(db.orm);
    },
    // Per-type full-text indexes (decisions 0050, 0056) move to the shared one (decision 0130).
    async (db) => {
      await upgradeSearchIndexes(db);
    },
    // url fields made before link titles get their `<name>_title` column (decision 0100).
    async (db) => {
      await addMissingCompanionColumns(db.orm);
    },
  ],
  setup(services) {
    const registry = cotRegistry(services);
    services.models.register(cotModel.info);
    services.models.register(fieldModel.info);
    services.models.addResolver(
      APP_LABEL,
      async (model, ctx) => (await registry.bySlug(ctx.db, model))?.info ?? null,
    );
    // Upstream's internal model name of a type (`table<id>model`) names its object type too.
    services.objectTypes.addModelAlias(APP_LABEL, async (model, db) => {
      const id = /^table(\d{1,15})model$/.exec(model)?.[1];
      if (!id) return null;
      const [row] = await db
        .select({ objectTypeId: customObjectTypes.objectTypeId })
        .from(customObjectTypes)
        .where(eq(customObjectTypes.id, Number(id)));
      return row?.objectTypeId ?? null;
    });
    services.models.addCachedLookup({
      byObjectType: (objectTypeId) => cachedModel(services, registry, objectTypeId),
      byLabel(label) {
        const slug = label.startsWith(`${APP_LABEL}.`) ? label.slice(APP_LABEL.length + 1) : null;
        const cached = slug === null ? null : registry.cachedBySlug(slug);
        const objectTypeId = cached?.cot.objectTypeId;
        return objectTypeId ? cachedModel(services, registry, objectTypeId) : null;
      },
      cachedSince: (objectTypeId, since) => cachedSince(services, registry, objectTypeId, since),
      changedSince,
    });
    services.models.addCatalog(APP_LABEL, async (ctx, guard) => {
      const cached = guard ? registry.allGuarded() : null;
      if (cached) guard!(cached.guard);
      const { signature, models } = cached?.all ?? (await registry.all(ctx.db));
      return { signature, models: models.map((m) => ({ ...m.info, catalogId: m.cot.id })) };
    });
    return {
      apiRoutes: apiRoutes(registry),
      openapi: customObjectsOpenApi(registry),
      hooks: {
        beforeDelete: [onDeleteHook(registry)],
        tasks: { [SCHEMA_APPLY_TASK]: schemaApplyHandler(services) },
        periodic: [
          {
            name: "schema-trash",
            everyMs: RETENTION_EVERY_MS,
            run: () => purgeExpiredTrash(services.db),
          },
          // rows other processes or plain SQL marked pending in the full-text index (decision 0056)
          {
            name: "search-index",
            everyMs: SEARCH_SWEEP_EVERY_MS,
            run: () => flushSearchIndexesNow(services),
          },
        ],
        // Start-up: rows left pending by an earlier run are indexed shortly (not on Workers: the cron does).
        ready: () => {
          if (services.config.runtime !== "workerd") searchFlusher(services).schedule();
        },
      },
    };
  },
};

/** `linked-objects/?object_type=<app_label>.<model>&object_id=<id>` (the page parameters are the §4 list ones). */
const REQUIRED = {
  object_type: "This parameter is required (<app_label>.<model>).",
  object_id: "This parameter is required.",
};
const LinkedObjectsQuery = v.looseObject(
  {
    object_type: v.pipe(
      v.string(REQUIRED.object_type),
      v.trim(),
      v.nonEmpty(REQUIRED.object_type),
      v.description("`<app_label>.<model>` of the target."),
    ),
    object_id: v.pipe(
      v.string(REQUIRED.object_id),
      v.trim(),
      v.nonEmpty(REQUIRED.object_id),
      v.regex(/^\d{1,15}$/, "A valid integer is required."),
      v.description("The target's id."),
    ),
  },
  missingKeyMessages(REQUIRED),
);

/** `schema/export/?slug=a&slug=b` or `?slug=a,b`; none exports every type the caller may view. */
const ExportQuery = v.looseObject({
  slug: v.optional(
    v.pipe(
      repeated(v.string()),
      v.description("Types to export (repeat or comma-separate; none = all)."),
    ),
  ),
});

function apiRoutes(registry: CotRegistry): Hono<HonoEnv> {
  const app = new Hono<HonoEnv>();
  const cots = cotResource(registry);
  const fields = fieldResource();

  app.get("/", async (c) => {
    const base = `${baseUrlOf(c)}/api/${API_BASE}`;
    // the slugs in one read with the request's guards (decision 0166)
    const [rows] = await freshRead(c, () => [
      c
        .get("services")
        .db.reader.select({ slug: customObjectTypes.slug })
        .from(customObjectTypes)
        .orderBy(asc(customObjectTypes.slug)),
    ]);
    // Only the types whose objects the caller may view are named.
    const visible = rows.filter((r) => hasPermission(c, "view", APP_LABEL, r.slug));
    return c.json(Object.fromEntries(visible.map((r) => [r.slug, `${base}/${r.slug}/`])));
  });
  mountResource(app, "/custom-object-types", () => cots);
  mountResource(app, "/custom-object-type-fields", () => fields);
  app.get("/linked-objects", query(LinkedObjectsQuery), (c) => linkedObjects(c, registry));
  app.all("/linked-objects", methodNotAllowed("GET, HEAD"));

  const cotTarget = { appLabel: APP_LABEL, model: COT_MODEL };
  // A preview reads types and counts their rows: it needs view on custom object types, and a
  // type the caller may not view is previewed as if it did not exist (decision 0064).
  app.post("/schema/preview", async (c) => {
    await requirePermission(c, "view", cotTarget);
    const ctx = readContext(c);
    const body = await readSchemaBody(c);
    const hidden = await hiddenSlugs(ctx, c.get("auth"));
    const withheld = countsWithheld(c.get("auth"), c.get("services").config.loginRequired);
    // the refusals an apply would meet are told to a caller who may apply (decision 0205)
    const mayApply =
      hasPermission(c, "add", APP_LABEL, COT_MODEL) &&
      hasPermission(c, "change", APP_LABEL, COT_MODEL);
    const auth = c.get("auth");
    return schemaAnswer(c, await previewSchema(ctx, body, hidden, withheld, auth, mayApply));
  });
  // A batched apply (decision 0111) proves the cached grants and event rules in its read phase
  // and batch; when they moved under it, the route runs again on fresh ones (decision 0110).
  app.post(
    "/schema/apply",
    foldsCredentials(async (c) => {
      await requirePermission(c, "add", cotTarget);
      await requirePermission(c, "change", cotTarget);
      if (wantsBackground(c)) return enqueueSchemaApply(c);
      const request = await readApplyRequest(
        await readSchemaBody(c),
        new URL(c.req.url).searchParams,
      );
      // Off a local file, the documents the batch takes are one read phase and one batch
      // (decision 0111); the rest, and every apply on a local file, keep the long write.
      if (stagesSchemaWrites(c.get("services").db)) {
        const staged = await inStagedWrite(c, (ctx) =>
          withRetry(ctx, (a) => applyStaged(a, request)),
        );
        if (staged !== "transaction") return schemaAnswer(c, staged);
      }
      return schemaAnswer(
        c,
        await asLongWrite(c.get("services"), () =>
          inTransaction(c, null, (ctx) => applySchemaLogged(ctx, request)),
        ),
      );
    }),
  );
  app.get("/schema/export", query(ExportQuery), async (c) => {
    await requirePermission(c, "view", cotTarget);
    const slugs =
      c.req
        .valid("query")
        .slug?.flatMap((s) => s.split(","))
        .filter(Boolean) ?? [];
    // one read where a read costs a round trip (decision 0166)
    if (databaseStamp(c.get("services")) === null)
      return documentAnswer(c, await exportInOneRead(c, slugs));
    const ctx = readContext(c);
    // Types the caller may not view are left out, and asking for one is a 404 like a missing slug.
    const rows = await ctx.db
      .select({ id: customObjectTypes.id, slug: customObjectTypes.slug })
      .from(customObjectTypes);
    const allowed = await cotsAllowed(
      ctx,
      c.get("auth"),
      "view",
      rows.map((r) => r.id),
    );
    const visible = rows.filter((r) => allowed.has(r.id)).map((r) => r.slug);
    if (slugs.length) {
      refuseUnseen(slugs, visible);
      return documentAnswer(c, await exportSchema(ctx, slugs));
    }
    if (visible.length === rows.length) return documentAnswer(c, await exportSchema(ctx, null));
    return documentAnswer(
      c,
      visible.length ? await exportSchema(ctx, visible) : { schema_version: "1", types: [] },
    );
  });
  mountTrashRoutes(app);
  app.all("/schema/preview", methodNotAllowed("POST"));
  app.all("/schema/apply", methodNotAllowed("POST"));
  app.all("/schema/export", methodNotAllowed("GET, HEAD"));

  mountResource(app, "/:slug", async (c) => {
    const slug = c.req.param("slug") ?? "";
    // a type the caller holds no permission on answers as a missing slug, unread (0178)
    if (!holdsAnyPermission(c, APP_LABEL, slug)) throw notFound();
    const guarded = guardedRead(c, registry, slug);
    if (guarded) return guarded;
    // Reads check the shape version now; writes may start from the cached model because
    // they check id, version and slug again inside their own transaction.
    const write = c.req.method !== "GET" && c.req.method !== "HEAD";
    const cached = write ? registry.cachedBySlug(slug) : null;
    const model = cached ?? (await registry.bySlug(c.get("services").db.reader, slug));
    if (!model) throw notFound();
    return liveResource(registry, model.cot.id, slug, model.resource, !cached);
  });
  return app;
}
