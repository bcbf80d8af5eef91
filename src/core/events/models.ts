/** `/api/extras/webhooks/` and `/api/extras/event-rules/` as declarative host models (§7). */
import { and, count, eq, inArray, or, sql } from "drizzle-orm";
import { eventRuleObjectTypes, eventRules, webhooks } from "../../db/schema";
import { ApiError, type ErrorCollector, ValidationError } from "../errors";
import { defineModel, recordUrl } from "../models/define";
import { closedObject, orNull, ref } from "../json-schema";
import { label as otLabel } from "../object-types";
import type { Executor } from "../../db/client";
import { inIds } from "../../db/d1-limits";
import type { ApiRecord, DeleteHook, ReadContext, WriteContext } from "../rest/resource";
import type { StagedModelPart } from "../models/staged";
import type { ReadPhase } from "../rest/write-batch";
import { conditionError } from "./conditions";
import { mayWatch } from "./scope";
import { writerSight } from "../auth/type-sight";
import { refViewWhere, restrictionFor, viewableColumn, viewableRefs } from "../auth/restrict";
import { headerTemplates } from "./render";
import { refusedTarget } from "./targets";
import { ownedLimit, withinOwnedLimit, type OwnedTable } from "./owned-limit";
import type { Services } from "../context";

const HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;
const EVENT_TYPES = ["object_created", "object_updated", "object_deleted"] as const;

function checkUrl(value: unknown): string | null {
  try {
    const u = new URL(String(value));
    return u.protocol === "http:" || u.protocol === "https:"
      ? null
      : "Enter an http:// or https:// URL.";
  } catch {
    return "Enter a valid URL.";
  }
}

export const webhookModel = defineModel({
  appLabel: "extras",
  model: "webhook",
  verboseName: "webhook",
  path: "extras/webhooks",
  table: webhooks,
  tags: true,
  customFields: true,
  defaultOrdering: ["name"],
  display: (r) => r.name,
  fields: [
    {
      name: "name",
      type: "string",
      column: webhooks.name,
      required: true,
      maxLength: 150,
      search: true,
      brief: true,
    },
    {
      name: "description",
      type: "string",
      column: webhooks.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    {
      name: "payload_url",
      type: "string",
      column: webhooks.payloadUrl,
      required: true,
      maxLength: 500,
      search: true,
      check: checkUrl,
    },
    {
      name: "http_method",
      type: "string",
      column: webhooks.httpMethod,
      check: (v) =>
        (HTTP_METHODS as readonly string[]).includes(String(v))
          ? null
          : `Choose one of ${HTTP_METHODS.join(", ")}.`,
    },
    {
      name: "http_content_type",
      type: "string",
      column: webhooks.httpContentType,
      maxLength: 100,
      check: (v) => (v ? null : "This field may not be blank."),
    },
    {
      name: "additional_headers",
      type: "text",
      column: webhooks.additionalHeaders,
      maxLength: 4000,
      check: (v) => {
        const parsed = headerTemplates(String(v));
        return "error" in parsed ? parsed.error : null;
      },
    },
    { name: "body_template", type: "text", column: webhooks.bodyTemplate, maxLength: 65536 },
    { name: "secret", type: "string", column: webhooks.secret, writeOnly: true, maxLength: 255 },
    { name: "ssl_verification", type: "boolean", column: webhooks.sslVerification },
    {
      name: "user",
      type: "fk",
      related: "users.user",
      column: webhooks.userId,
      nullable: true,
      readOnly: true,
    },
    {
      name: "timeout",
      type: "integer",
      column: webhooks.timeout,
      nullable: true,
      // NetBox 4.7: seconds to wait for the receiver; null is the task queue's default
      check: (v) =>
        typeof v === "number" && v >= 1 && v <= 3600
          ? null
          : "Ensure this value is between 1 and 3600 (seconds).",
    },
  ],
  // the owner is the writer and the target is checked as written (DNS at delivery): nothing is
  // read, so webhook writes are staged (one read, one batch; decision 0092)
  validateReadsNothing: true,
  writerFields: ["user"],
  validate: async (ctx, values, _existing, errors) => checkWebhook(ctx, values, errors),
  // not staged: a write in its own transaction (tag edits) counts as it leaves them
  afterWrite: (ctx) => withinOwnedLimit(ctx, webhookLimit(ctx.services)),
  // staged: the writer's webhooks counted in the read phase (decision 0196)
  async stage(ctx, phase) {
    const limit = ownedLimit(ctx, phase, webhookLimit(ctx.services));
    return (): StagedModelPart => ({
      async validate(values, existing, _links, errors) {
        checkWebhook(ctx, values, errors);
        if (errors.empty) limit.admit(values, existing);
      },
      write: (batch) => limit.write(batch),
      explain: () => limit.explain(),
    });
  },
});

/** A webhook's owner is its writer; its target is checked as written (DNS at delivery). */
function checkWebhook(ctx: WriteContext, values: Record<string, unknown>, errors: ErrorCollector) {
  values.userId = ctx.auth.user?.id ?? null;
  if (typeof values.payloadUrl === "string") {
    const refused = refusedTarget(values.payloadUrl, ctx.services.config.webhookAllowedNetworks);
    if (refused) errors.add("payload_url", refused);
  }
}

const webhookLimit = (services: Services): OwnedTable => ({
  table: webhooks,
  user: webhooks.userId,
  noun: "webhooks",
  perUser: services.config.eventRuleLimits.webhooksPerUser,
});

const ruleLimit = (services: Services): OwnedTable => ({
  table: eventRules,
  user: eventRules.userId,
  enabled: eventRules.enabled,
  noun: "event rules",
  perUser: services.config.eventRuleLimits.rulesPerUser,
  enabledInAll: services.config.eventRuleLimits.enabledRules,
});

export const eventRuleModel = defineModel({
  appLabel: "extras",
  model: "eventrule",
  verboseName: "event rule",
  path: "extras/event-rules",
  table: eventRules,
  tags: true,
  customFields: true,
  defaultOrdering: ["name"],
  display: (r) => r.name,
  fields: [
    {
      name: "name",
      type: "string",
      column: eventRules.name,
      required: true,
      maxLength: 150,
      search: true,
      brief: true,
    },
    {
      name: "description",
      type: "string",
      column: eventRules.description,
      maxLength: 200,
      search: true,
      brief: true,
    },
    { name: "enabled", type: "boolean", column: eventRules.enabled, brief: true },
    {
      name: "object_types",
      type: "object_types",
      required: true,
      link: {
        table: eventRuleObjectTypes,
        own: eventRuleObjectTypes.eventRuleId,
        other: eventRuleObjectTypes.objectTypeId,
      },
    },
    {
      name: "event_types",
      type: "json",
      column: eventRules.eventTypes,
      required: true,
      check: (v) =>
        Array.isArray(v) &&
        v.length &&
        v.every((e) => (EVENT_TYPES as readonly unknown[]).includes(e)) &&
        new Set(v).size === v.length
          ? null
          : `Provide a non-empty list of distinct event types (${EVENT_TYPES.join(", ")}).`,
    },
    {
      name: "conditions",
      type: "json",
      column: eventRules.conditions,
      nullable: true,
      check: conditionError,
    },
    {
      name: "action_type",
      type: "choice",
      column: eventRules.actionType,
      choices: [["webhook", "Webhook"]],
    },
    {
      name: "action_object_type",
      type: "object_type_ref",
      column: eventRules.actionObjectTypeId,
      required: true,
    },
    {
      name: "action_object_id",
      type: "integer",
      column: eventRules.actionObjectId,
      required: true,
    },
    {
      name: "user",
      type: "fk",
      related: "users.user",
      column: eventRules.userId,
      nullable: true,
      readOnly: true,
    },
  ],
  async validate(ctx, values, existing, errors) {
    // Whoever writes a rule answers for it: it delivers only what they may view (decision 0066).
    values.userId = ctx.auth.user?.id ?? null;
    const typeId = (values.actionObjectTypeId ?? existing?.actionObjectTypeId) as
      | number
      | undefined;
    const objectId = (values.actionObjectId ?? existing?.actionObjectId) as number | undefined;
    const webhookType = await ctx.services.objectTypes.ensure("extras", "webhook", ctx.db);
    if (typeId !== webhookType.id) {
      errors.add(
        "action_object_type",
        'The action object type of a "webhook" action must be extras.webhook.',
      );
      return;
    }
    const [hook] = await ctx.db
      .select({ id: webhooks.id })
      .from(webhooks)
      .where(eq(webhooks.id, objectId ?? -1));
    // a webhook the writer may not view is not found, unless the rule holds it (0064, 0194)
    const named =
      hook &&
      (existing?.actionObjectId === hook.id ||
        (await viewableRefs(ctx, ctx.auth, "extras", "webhook", [hook.id])).has(hook.id));
    if (!named) errors.add("action_object_id", `No webhook with id ${objectId}.`);
  },
  async afterWrite(ctx, id) {
    const [{ n }] = (await ctx.db
      .select({ n: count() })
      .from(eventRuleObjectTypes)
      .where(eq(eventRuleObjectTypes.eventRuleId, id))) as [{ n: number }];
    if (!n) throw new ValidationError({ object_types: ["Select at least one object type."] });
    await requireWatchable(ctx, id);
    await withinOwnedLimit(ctx, ruleLimit(ctx.services));
  },
  // validate, afterWrite and decorate from one read phase: rule writes are staged (0092)
  stage: stageEventRule,
  writerFields: ["user"],
  openapi: {
    record: {
      action_object_type: orNull(ref("ObjectTypeLabel")),
      action_object: orNull(
        closedObject({
          id: { type: "integer" },
          url: { type: "string", format: "uri" },
          display: { type: "string" },
          name: { type: "string" },
        }),
      ),
    },
  },
  // the webhooks the rules name, in a load's one read (decision 0143)
  decoratePlan(ctx, ids) {
    const own = typeof ids === "number" ? sql`${ids}` : ids;
    const statement = ctx.db
      .select({ id: webhooks.id, name: webhooks.name })
      .from(webhooks)
      .where(
        sql`${webhooks.id} IN (SELECT ${eventRules.actionObjectId} FROM ${eventRules} WHERE ${eventRules.id} IN (${own}))`,
      );
    return {
      statement,
      decorated: (answer) => (rows, records) => {
        const hooks = answer as Array<{ id: number; name: string }>;
        return decorateRules(ctx, rows, records, new Map(hooks.map((h) => [h.id, h])));
      },
    };
  },
  async decorate(ctx, rows, records) {
    const hookIds = [...new Set(rows.map((r) => r.actionObjectId as number))];
    const hooks = hookIds.length
      ? await ctx.db
          .select({ id: webhooks.id, name: webhooks.name })
          .from(webhooks)
          .where(inArray(webhooks.id, hookIds))
      : [];
    await decorateRules(ctx, rows, records, new Map(hooks.map((h) => [h.id, h])));
  },
});

// A rule's webhook is a relation: a caller who may not view it sees its id alone (decision 0191;
// NetBox names it), in every answer and in the one read that judges relations.
eventRuleModel.resource.relations = [
  ...(eventRuleModel.resource.relations ?? []),
  { name: "action_object", target: "extras.webhook", expr: eventRules.actionObjectId },
];

type Row = Record<string, any>;

/** A rule's `action_object_type` and `action_object` from the webhooks read for it. */
async function decorateRules(
  ctx: ReadContext,
  rows: Row[],
  records: ApiRecord[],
  byId: Map<number, { id: number; name: string }>,
) {
  const types = await ctx.services.objectTypes.byIds(
    rows.map((r) => r.actionObjectTypeId as number),
  );
  rows.forEach((row, i) => {
    const rec = records[i]!;
    const ot = types.get(row.actionObjectTypeId);
    rec.action_object_type = ot ? otLabel(ot) : null;
    const hook = byId.get(row.actionObjectId);
    rec.action_object = hook
      ? {
          id: hook.id,
          url: recordUrl(ctx.baseUrl, "extras/webhooks", hook.id),
          display: hook.name,
          name: hook.name,
        }
      : null;
  });
}

/**
 * An event rule's staged part (decision 0092): the webhooks its inputs and stored rows name are
 * read in the write's read phase; `validate` and `afterWrite`'s checks run on the rule as the
 * write leaves it, and the batch is guarded against its webhook having gone since.
 */
async function stageEventRule(
  ctx: WriteContext,
  phase: ReadPhase,
  inputs: ApiRecord[],
  storedIds: number[],
) {
  const named = inputs
    .map((i) => i.action_object_id)
    .filter((id): id is number => typeof id === "number" && Number.isInteger(id));
  // whether the writer may view each webhook, judged in the same read (0064, 0194)
  const view = await refViewWhere(ctx, ctx.auth, "extras", "webhook");
  const read = phase.add(
    ctx.services.db.orm
      .select({
        id: webhooks.id,
        name: webhooks.name,
        viewable: viewableColumn(view),
      })
      .from(webhooks)
      .where(
        or(
          inArray(webhooks.id, named),
          inArray(
            webhooks.id,
            ctx.services.db.orm
              .select({ id: eventRules.actionObjectId })
              .from(eventRules)
              .where(inArray(eventRules.id, storedIds)),
          ),
        ),
      ),
  );
  const webhookType = await ctx.services.objectTypes.ensure("extras", "webhook");
  const limit = ownedLimit(ctx, phase, ruleLimit(ctx.services));
  return (): StagedModelPart => {
    const byId = new Map(read().map((h) => [h.id, h]));
    const used = new Set<number>();
    const present = () =>
      ctx.services.db.orm
        .select({ n: count() })
        .from(webhooks)
        .where(inArray(webhooks.id, [...used]));
    return {
      async validate(values, existing, links, errors) {
        values.userId = ctx.auth.user?.id ?? null;
        const typeId = values.actionObjectTypeId ?? existing?.actionObjectTypeId;
        const objectId = (values.actionObjectId ?? existing?.actionObjectId) as number;
        if (typeId !== webhookType.id)
          return errors.add(
            "action_object_type",
            'The action object type of a "webhook" action must be extras.webhook.',
          );
        // a webhook the writer may not view is not found, unless the rule holds it already
        const hook = byId.get(objectId);
        if (!hook || (!Number(hook.viewable) && existing?.actionObjectId !== objectId))
          return errors.add("action_object_id", `No webhook with id ${objectId}.`);
        used.add(objectId);
        const types = links.get("object_types") ?? [];
        if (!types.length)
          throw new ValidationError({ object_types: ["Select at least one object type."] });
        await requireWatchableTypes(ctx, types);
        limit.admit(values, existing);
      },
      decorate: (rows, records) => decorateRules(ctx, rows, records, byId),
      write(batch) {
        if (used.size)
          batch.add(
            ctx.services.db.orm.run(
              sql`INSERT INTO write_guard (ok) SELECT (${present()}) = ${used.size}`,
            ),
          );
        limit.write(batch);
      },
      async explain() {
        const [now] = await present();
        if (used.size && now!.n < used.size)
          throw new ValidationError({
            action_object_id: ["The webhook was deleted while this request ran."],
          });
        return limit.explain();
      },
    };
  };
}

/**
 * Refuses a rule watching a type its owner (the writer) may not view, naming the first such
 * type: checked over every type of the rule, so a new owner must be able to view them all. A
 * hidden run-time type (a custom object type) answers as an unknown one: its existence is not told.
 */
async function requireWatchable(ctx: WriteContext, ruleId: number): Promise<void> {
  const links = await ctx.db
    .select({ id: eventRuleObjectTypes.objectTypeId })
    .from(eventRuleObjectTypes)
    .where(eq(eventRuleObjectTypes.eventRuleId, ruleId));
  await requireWatchableTypes(
    ctx,
    links.map((l) => l.id),
  );
}

/** `requireWatchable` over object type ids (the process's object types: no read warm). */
async function requireWatchableTypes(ctx: WriteContext, typeIds: number[]): Promise<void> {
  const user = ctx.auth.user;
  const types = await ctx.services.objectTypes.byIds(typeIds);
  const host = new Set(ctx.services.models.staticModels().map((m) => otLabel(m)));
  const sight = writerSight(ctx.services, ctx.auth);
  for (const ot of types.values()) {
    if (user && mayWatch(user, ot.appLabel, ot.model)) continue;
    // one the writer may not see, the rule held already (naming it is refused as unknown): it
    // stays, delivering nothing its owner may not view (decisions 0066, 0187)
    if (!sight.sees(ot)) continue;
    const label = otLabel(ot);
    throw new ValidationError({
      object_types: [
        host.has(label)
          ? `You may not watch objects of type ${label}: an event rule delivers only what its owner may view.`
          : `Unknown object type: ${JSON.stringify(label)}`,
      ],
    });
  }
}

/** The event rules calling webhook `id` (of object type `webhookType`). */
const callersQuery = (db: Executor, webhookType: number, id: number) =>
  db
    .select({ id: eventRules.id, name: eventRules.name })
    .from(eventRules)
    .where(and(eq(eventRules.actionObjectTypeId, webhookType), eq(eventRules.actionObjectId, id)));

function refuseCalled(
  ctx: WriteContext,
  target: { id: number },
  users: Array<{ id: number; name: string }>,
) {
  if (!users.length) return;
  // the rules are named only to a caller who may view every rule (judged on permissions, no
  // read, as 0181's counts): else the refusal stands naming none (decisions 0180, 0191)
  if (!seesEveryRule(ctx))
    throw ApiError.detail(
      409,
      `Cannot delete webhook ${target.id}: event rules you may not view call it.`,
      "protected",
      { protected_objects: [] },
    );
  throw ApiError.detail(
    409,
    `Cannot delete webhook ${target.id}: event rule "${users[0]!.name}" calls it. Delete or change the event rule first.`,
    "protected",
    {
      protected_objects: users.map((u) => ({ object_type: "extras.eventrule", id: u.id })),
    },
  );
}

/** Whether the writer may view every event rule (a write no user makes sees them all). */
const seesEveryRule = (ctx: WriteContext) =>
  !ctx.auth.user ||
  restrictionFor(ctx.auth, ctx.services.config.loginRequired, "view", "extras", "eventrule")
    .kind === "all";

const isWebhook = (target: { appLabel: string; model: string }) =>
  target.appLabel === "extras" && target.model === "webhook";

/** A webhook that event rules still call cannot be deleted (409), like NetBox's protected objects. */
export const protectRuleActions: DeleteHook = async (ctx, target) => {
  if (!isWebhook(target)) return;
  const webhookType = await ctx.services.objectTypes.ensure("extras", "webhook", ctx.db);
  refuseCalled(ctx, target, await callersQuery(ctx.db, webhookType.id, target.id));
};
// Staged (decisions 0071, 0084): the callers are read in the read phase (the webhook type is
// known to the process after its first use; else read on its own); other deletes add nothing.
protectRuleActions.stage = (ctx, phase, target) => {
  if (!isWebhook(target)) return async () => ({ write() {} });
  const known = ctx.services.objectTypes.cached("extras", "webhook");
  const read = known ? phase.add(callersQuery(ctx.services.db.orm, known.id, target.id)) : null;
  return async () => {
    const type = known ?? (await ctx.services.objectTypes.ensure("extras", "webhook"));
    const callers = () => callersQuery(ctx.services.db.orm, type.id, target.id);
    refuseCalled(ctx, target, read ? read() : await callers());
    return {
      // a rule made to call it since the read fails the batch, and is named as above (409)
      write(batch) {
        batch.add(
          ctx.services.db.orm.run(
            sql`INSERT INTO write_guard (ok) SELECT NOT EXISTS ${callers().limit(1)}`,
          ),
        );
      },
      async explain() {
        refuseCalled(ctx, target, await callers());
        return undefined;
      },
    };
  };
};
// Many webhooks at once (decision 0184): the callers of all of them in one read, one guard.
protectRuleActions.stageMany = (ctx, phase, targets) => {
  if (!isWebhook(targets))
    return {
      async admit() {},
      async part() {
        return { write() {} };
      },
    };
  const known = ctx.services.objectTypes.cached("extras", "webhook");
  if (!known) return null;
  const orm = ctx.services.db.orm;
  const callers = () =>
    orm
      .select({ id: eventRules.id, name: eventRules.name, of: eventRules.actionObjectId })
      .from(eventRules)
      .where(
        and(
          eq(eventRules.actionObjectTypeId, known.id),
          inIds(eventRules.actionObjectId, targets.ids),
        ),
      );
  const read = phase.add(callers());
  const refuse = (rows: Array<{ id: number; name: string; of: number | null }>, id: number) =>
    refuseCalled(
      ctx,
      { id },
      rows.filter((r) => r.of === id),
    );
  return {
    async admit(id) {
      refuse(read(), id);
    },
    async part() {
      return {
        write(batch) {
          batch.add(
            orm.run(sql`INSERT INTO write_guard (ok) SELECT NOT EXISTS ${callers().limit(1)}`),
          );
        },
        async explain() {
          const rows = await callers();
          for (const id of targets.ids) refuse(rows, id);
          return undefined;
        },
      };
    },
  };
};
// With no read (a create's revert, decision 0139): other deletes add nothing; a webhook's, where
// its type is known, a guard that no rule calls it (the ordinary delete names the rule).
protectRuleActions.stageAssumed = (ctx, target) => {
  if (!isWebhook(target)) return { write() {} };
  const known = ctx.services.objectTypes.cached("extras", "webhook");
  if (!known) return null;
  return {
    write(batch) {
      const callers = callersQuery(ctx.services.db.orm, known.id, target.id).limit(1);
      batch.add(
        ctx.services.db.orm.run(sql`INSERT INTO write_guard (ok) SELECT NOT EXISTS ${callers}`),
      );
    },
  };
};
