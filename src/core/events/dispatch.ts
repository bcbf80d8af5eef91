/**
 * Every change meets the enabled event rules in its write's transaction: each matching rule's
 * webhook gets one delivery job per change (one per (change, webhook), however many rules
 * match), written to the transactional outbox beside the change record.
 */
import { eq, inArray, sql } from "drizzle-orm";
import type { Executor, Orm } from "../../db/client";
import { eventRuleObjectTypes, eventRules } from "../../db/schema";
import {
  lastOutboxId,
  recordOutboxSet,
  stageOutboxSet,
  type OutboxRange,
  type OutboxRow,
} from "../../services/tasks/outbox";
import { Prebuilt } from "../../db/driver-internals";
import type { Guard, Services } from "../context";
import type { ApiRecord, WriteContext } from "../rest/resource";
import { slotKey } from "../slots";
import type { ReadPhase, WriteBatch } from "../rest/write-batch";
import { yieldWhenDue } from "../../turns";
import { conditionReachesNested, evaluateCondition, type Condition } from "./conditions";

export type ChangeAction = "create" | "update" | "delete";

/**
 * A committed change, as event rules and webhooks see it (defined here, where it is consumed,
 * so the change log imports the dispatcher and not the other way round).
 */
export interface ChangeEvent {
  changeId: number;
  time: string;
  action: ChangeAction;
  objectTypeId: number;
  appLabel: string;
  model: string;
  objectId: number;
  prechange: ApiRecord | null;
  postchange: ApiRecord | null;
  userId: number | null;
  userName: string;
  requestId: string;
}

export const WEBHOOK_TASK = "webhook.deliver";

/** The payload of a `webhook.deliver` job: references, read again at delivery time. */
export interface WebhookTaskPayload {
  webhook: number;
  change: number;
  event_rule: number;
  /** The changed object's model name when the change happened (a COT may be renamed later). */
  model: string;
}

const EVENT_TYPE = {
  create: "object_created",
  update: "object_updated",
  delete: "object_deleted",
} as const;

interface ActiveRule {
  id: number;
  eventTypes: string[];
  conditions: unknown;
  actionType: string;
  actionObjectTypeId: number;
  actionObjectId: number;
  objectTypeIds: Set<number>;
}

/**
 * The app keeps one copy of the enabled rules with their print (`rulesPrintSql`) as read: they
 * are configuration, and reading them cost a statement on every write. The copy is never taken
 * on trust (decision 0110): a staged write's batch carries a guard that fails it unless the rules
 * still print as the copy did, and a transaction compares the print before it matches; a stale
 * copy is dropped and the write runs again on the rules read afresh. A write that changes a rule
 * or webhook reads them afresh itself and drops the copy once it commits. Only read rules are
 * shared, never a pending read (on Workers a promise must not cross requests).
 */
const RULE_CACHE = slotKey<{ print: string; rules: ActiveRule[] }>("events.rules");

/**
 * The rules' print: the stamp that every write to `event_rules` or `event_rule_object_types`
 * moves to a new random value in its own statement (triggers of migration 0015, cascades from a
 * deleted object type included), so equal prints, unchanged rules, as the rules' whole text
 * (up to ~3.3 MB, rebuilt and bound in every write's guard) proved before (decision 0197).
 * Random, not counted: a database restored or made again never shows the print of other rules.
 */
const rulesPrintSql = sql<string>`coalesce((SELECT "stamp" FROM "event_rules_stamp" WHERE "id" = 1), '')`;

/** The rules of a transaction's write: the copy when it prints as the rules do now, else read. */
async function cachedRules(services: Services, db: Executor): Promise<ActiveRule[]> {
  const [now] = await db.all<{ print: string }>(sql`SELECT ${rulesPrintSql} AS "print"`);
  const print = now?.print ?? "";
  const hit = services.state.get(RULE_CACHE);
  if (hit && hit.print === print) return hit.rules;
  const rules = await readRules(db);
  services.state.set(RULE_CACHE, { print, rules });
  return rules;
}

async function readRules(db: Executor): Promise<ActiveRule[]> {
  const rules = await db.select().from(eventRules).where(eq(eventRules.enabled, true));
  if (!rules.length) return [];
  const links = await db
    .select()
    .from(eventRuleObjectTypes)
    .where(
      inArray(
        eventRuleObjectTypes.eventRuleId,
        rules.map((r) => r.id),
      ),
    );
  return rules.map((r) => ({
    ...r,
    objectTypeIds: new Set(links.filter((l) => l.eventRuleId === r.id).map((l) => l.objectTypeId)),
  }));
}

/**
 * True when `rule` may want this change: its object type, its event type, its conditions (those
 * reading related objects or tags are decided again at delivery).
 */
function ruleMatches(
  rule: Pick<ActiveRule, "eventTypes" | "conditions" | "objectTypeIds">,
  event: ChangeEvent,
  shaped: ReadonlySet<string>,
): boolean {
  if (!rule.objectTypeIds.has(event.objectTypeId)) return false;
  if (!rule.eventTypes.includes(EVENT_TYPE[event.action])) return false;
  const input = {
    data: event.postchange ?? event.prechange,
    prechange: event.prechange,
    postchange: event.postchange,
  };
  const condition = rule.conditions as Condition | null;
  // A condition reading related objects or tags is decided at delivery, on the record as the
  // rule's and webhook's owners may view it (decision 0191): here it only queues the delivery.
  return evaluateCondition(condition, input) || conditionReachesNested(condition, input, shaped);
}

/**
 * Keys a caller's view rewrites in place, without nesting a record: an owner group's
 * `member_count` (0191), a custom object's `_context` (0064), and every model's object type
 * fields (0187). A key of the same name on another model only queues a delivery more.
 */
const VIEW_DERIVED_KEYS = ["member_count", "_context"];
const shapedByRegistry = new WeakMap<object, ReadonlySet<string>>();

function viewShapedKeys(services: Services): ReadonlySet<string> {
  const models = services.models;
  let keys = shapedByRegistry.get(models);
  if (!keys) {
    const typeFields = models.staticModels().flatMap((m) => m.resource?.typeFields ?? []);
    keys = new Set([...VIEW_DERIVED_KEYS, ...typeFields]);
    shapedByRegistry.set(models, keys);
  }
  return keys;
}

/** What one write transaction has put in the outbox so far. */
interface TransactionEvents {
  rows: OutboxRow[];
  /** (change, webhook) pairs already queued: one delivery per pair, however many rules match. */
  queued: Set<string>;
  /** The transaction wrote a rule or webhook: it matches against what it sees itself. */
  rulesChanged: boolean;
  /** The rules proven current in this transaction (one print read per transaction). */
  rules?: ActiveRule[];
}
/** Kept in the write context's scratch for the rest of its transaction. */
const TRANSACTION_EVENTS = slotKey<TransactionEvents>("events.transaction");

/** Set once the "no queue" warning was logged: one line per process, not one per event. */
const NO_QUEUE_WARNED = slotKey<true>("events.no-queue-warned");

function warnNoQueue(services: Services) {
  if (services.state.get(NO_QUEUE_WARNED)) return;
  services.state.set(NO_QUEUE_WARNED, true);
  services.logger.warn(
    "event rules matched but there is no tasks Redis: the deliveries wait in the outbox and are sent once one is there",
    { cause: services.redisDown?.tasks ?? "REDIS_TASKS_URL is not set" },
  );
}

const changesRules = (event: ChangeEvent) =>
  event.appLabel === "extras" && (event.model === "eventrule" || event.model === "webhook");

/**
 * Matches changes (of one model) against the enabled event rules inside the write's transaction
 * and writes one `webhook.deliver` job per matching webhook to the outbox there, so the
 * deliveries commit (or roll back) with the changes: two set-based statements per document of
 * deliveries, as a staged write's (decisions 0197, 0201). After the commit the outbox relay hands
 * them to the tasks Redis; the request never waits for Redis (docs/decisions/0037-tasks-outbox.md).
 */
export async function recordEventDeliveries(
  ctx: WriteContext,
  events: readonly ChangeEvent[],
): Promise<void> {
  const services = ctx.services;
  let state = ctx.scratch.get(TRANSACTION_EVENTS);
  if (!state) {
    const fresh: TransactionEvents = { rows: [], queued: new Set(), rulesChanged: false };
    ctx.scratch.set(TRANSACTION_EVENTS, (state = fresh));
    ctx.onCommit?.(async () => {
      if (fresh.rulesChanged) services.state.delete(RULE_CACHE);
      if (services.tasks) services.tasks.outbox.afterCommit(ctx.requestId, fresh.rows);
      else if (fresh.rows.length) warnNoQueue(services);
    });
  }
  if (events.some(changesRules)) {
    state.rulesChanged = true;
    services.state.delete(RULE_CACHE);
  }
  const rules = state.rulesChanged
    ? await readRules(ctx.db)
    : (state.rules ??= await cachedRules(services, ctx.db));
  if (!rules.length || !events.length) return;
  const webhookType = await services.objectTypes.ensure("extras", "webhook", ctx.db);
  const items: string[] = [];
  for (const event of events)
    for (const [webhook, rule] of await matchInTransaction(
      services,
      state,
      rules,
      event,
      webhookType.id,
    ))
      items.push(`[${event.changeId},${webhook},${rule}]`);
  // Written whether or not a queue exists now: the relay hands them over once one is there.
  const job = {
    name: WEBHOOK_TASK,
    maxAttempts: services.tasks?.maxAttempts ?? services.config.tasks.maxAttempts,
    // nobody's job but a superuser's: the writer may not see another's rule match (0191)
    userId: null,
    objectTypeId: webhookType.id,
  };
  const at = (k: number) => sql.raw(`json_extract(d.value, '$[${k}]')`);
  // the payload's keys in the order `WebhookTaskPayload` gives them
  const payload = sql`json_object('webhook', ${at(1)}, 'change', ${at(0)}, 'event_rule', ${at(2)}, 'model', ${events[0]!.model})`;
  for (const document of deliveryDocuments(items)) {
    const set = { document: document.text, count: document.count, objectId: at(1), payload };
    state.rows.push(...(await recordOutboxSet(ctx.db, job, set)));
  }
}

/**
 * The webhooks `event` is delivered to in this transaction, each with the first rule that matched
 * it, in rule order, as `[webhook, rule]`: one delivery per (change, webhook), however many rules
 * match.
 */
async function matchInTransaction(
  services: Services,
  state: TransactionEvents,
  rules: ActiveRule[],
  event: ChangeEvent,
  webhookTypeId: number,
): Promise<Array<[webhook: number, rule: number]>> {
  const out: Array<[number, number]> = [];
  for (const rule of rules) {
    await yieldWhenDue(); // many rules, each matched in turn (decision 0196)
    if (
      rule.actionType !== "webhook" ||
      rule.actionObjectTypeId !== webhookTypeId ||
      !ruleMatches(rule, event, viewShapedKeys(services))
    )
      continue;
    const pair = `${event.changeId}:${rule.actionObjectId}`;
    if (state.queued.has(pair)) continue;
    state.queued.add(pair);
    out.push([rule.actionObjectId, rule.id]);
  }
  return out;
}

/** The enabled rules a staged write matches its changes against, and the outbox rows it wrote. */
export interface StagedRules {
  rules: ActiveRule[];
  webhookTypeId: number | null;
  /** Outbox rows the batch returned, and the id ranges of those it did not (many at once). */
  rows: OutboxRow[];
  ranges: OutboxRange[];
}

/** The enabled rules with their object types (a read phase). */
function rulesQuery(db: Executor) {
  return db
    .select({
      rule: eventRules,
      objectTypes: sql<string>`(SELECT json_group_array("object_type_id") FROM "event_rule_object_types" WHERE "event_rule_id" = "event_rules"."id")`,
    })
    .from(eventRules)
    .where(eq(eventRules.enabled, true));
}

/**
 * The rules' print, once: beside each rule row it was printed once per rule, all of them each
 * time (2,000 rules: 8 GB and 21 s of held loop on a file; decision 0196).
 */
const printQuery = (db: Executor) => db.select({ print: rulesPrintSql }).from(sql`(SELECT 1)`);

/**
 * The rules for a staged write (decision 0071): the app's copy, else read in the write's read
 * phase (`phase`; no read inside the write). Either way the write's batch proves them current
 * (`rulesGuard`). Call the answer after the phase ran; once the write commits, its outbox rows are
 * handed on (`ctx.onCommit`).
 */
export function stageRules(
  ctx: WriteContext,
  phase: ReadPhase,
  writes: { appLabel: string; model: string },
): () => Promise<StagedRules> {
  const services = ctx.services;
  // a write of a rule or webhook reads them afresh and drops the copy once it commits
  const own = changesRules(writes as ChangeEvent);
  if (own) ctx.onCommit?.(async () => services.state.delete(RULE_CACHE));
  const hit = own ? undefined : services.state.get(RULE_CACHE);
  const read = hit ? null : phase.add(rulesQuery(services.db.orm));
  const printed = hit ? null : phase.add(printQuery(services.db.orm));
  return async () => {
    let copy = hit;
    if (read && printed) {
      const rows = read();
      copy = {
        print: printed()[0]?.print ?? "",
        rules: rows.map(({ rule, objectTypes }) => ({
          ...rule,
          objectTypeIds: new Set(JSON.parse(objectTypes ?? "[]") as number[]),
        })),
      };
      if (!own) services.state.set(RULE_CACHE, copy);
    }
    const { rules, print } = copy!;
    // the batch changes rules itself when `own`: it matches what its read phase saw, as before
    if (!own) ctx.guard?.(rulesGuard(services, print));
    const staged: StagedRules = { rules, webhookTypeId: null, rows: [], ranges: [] };
    if (rules.some((r) => r.actionType === "webhook"))
      staged.webhookTypeId = (await services.objectTypes.ensure("extras", "webhook")).id;
    ctx.onCommit?.(async () => {
      if (services.tasks)
        services.tasks.outbox.afterCommit(ctx.requestId, staged.rows, staged.ranges);
      else if (staged.rows.length || staged.ranges.length) warnNoQueue(services);
    });
    return staged;
  };
}

/**
 * The proof a staged write's batch carries that the rules it matched against are the committed
 * ones (decision 0110): the batch fails (`write_guard`, all rolled back) unless the enabled rules
 * print as `print`. Settled after such a failure, a changed print drops the app's copy, and the
 * write runs again on the rules read afresh (`writeFolded`).
 */
function rulesGuard(services: Services, print: string): Guard {
  const orm = services.db.orm;
  return {
    name: RULES_GUARD,
    batchOnly: true,
    statements: [orm.select({ print: rulesPrintSql }).from(sql`(SELECT 1)`)],
    batch: [rulesGuardSql(orm, print)],
    async settle([rows]) {
      if ((rows as Array<{ print: string }>)[0]?.print === print) return true;
      if (services.state.get(RULE_CACHE)?.print === print) services.state.delete(RULE_CACHE);
      return false;
    },
  };
}

const RULES_GUARD = "events.rules";

/** The guard statement, its text rendered once per ORM (decision 0107): only `print` changes. */
const rulesGuardStatement = new Prebuilt<unknown>((orm) =>
  orm.run(sql`INSERT INTO write_guard (ok) SELECT ${rulesPrintSql} = ${sql.placeholder("print")}`),
);
const rulesGuardSql = (orm: Orm, print: string) => rulesGuardStatement.with(orm, { print });

/** A change of a staged write as the rules see it (its change record's id is the batch's). */
export type StagedEvent = Omit<ChangeEvent, "changeId" | "time" | "objectId" | "userName">;

/**
 * The webhooks a staged change is delivered to, each with the first rule that matched it (one
 * delivery per webhook, however many rules match), in rule order, as `[webhook, rule]`. Steps,
 * one per rule, between which the caller may give the event loop turns.
 */
export function* matchDeliveries(
  ctx: WriteContext,
  staged: StagedRules,
  event: StagedEvent,
): Generator<void, Array<[webhook: number, rule: number]>> {
  const shaped = viewShapedKeys(ctx.services);
  const queued = new Map<number, number>();
  for (const rule of staged.rules) {
    // a step per rule: the caller gives the loop turns between them (decision 0196)
    yield;
    if (
      rule.actionType !== "webhook" ||
      rule.actionObjectTypeId !== staged.webhookTypeId ||
      queued.has(rule.actionObjectId) ||
      !ruleMatches(rule, event as ChangeEvent, shaped)
    )
      continue;
    queued.set(rule.actionObjectId, rule.id);
  }
  return [...queued];
}

/**
 * Deliveries per JSON document (one `[change, webhook, rule]` item each, `change` the change's
 * index among the write's change records): a document's two statements write this many rows,
 * a few milliseconds' work (a local file runs a statement without giving the loop turns), in
 * ~20 KB of bound text (D1 binds a value of at most 2 MB).
 */
const DOCUMENT_DELIVERIES = 1_000;

/** Deliveries whose outbox rows the batch returns; past it, the relay reads them by id range. */
const RETURNED_DELIVERIES = 100;

/**
 * The deliveries `items` (`[change, webhook, rule]` JSON texts) of a staged write's `changes`
 * change records of `model`, which the same batch wrote last in `object_changes`, as two
 * statements per document of `batch` (decision 0197): the same jobs and outbox rows, in the
 * same order, as a statement pair each would write. Staged whether or not a queue exists now:
 * the relay hands them over once one is there.
 */
export function stageDeliveries(
  ctx: WriteContext,
  batch: WriteBatch,
  staged: StagedRules,
  writes: { model: string; changes: number },
  items: string[],
): void {
  if (!items.length || staged.webhookTypeId === null) return;
  const services = ctx.services;
  const orm = services.db.orm;
  const at = (k: number) => sql.raw(`json_extract(d.value, '$[${k}]')`);
  // the k-th of the write's n change records is the table's (n - 1 - k)-th from last
  const back = sql.raw(String(writes.changes - 1));
  const changeId = sql`(SELECT max("id") FROM "object_changes") - (${back} - ${at(0)})`;
  // the payload's keys in the order `WebhookTaskPayload` gives them
  const payload = sql`json_object('webhook', ${at(1)}, 'change', ${changeId}, 'event_rule', ${at(2)}, 'model', ${writes.model})`;
  const job = {
    name: WEBHOOK_TASK,
    maxAttempts: services.tasks?.maxAttempts ?? services.config.tasks.maxAttempts,
    userId: null, // as in `recordEventDeliveries` (decision 0191)
    objectTypeId: staged.webhookTypeId,
  };
  const returned = items.length <= RETURNED_DELIVERIES;
  for (const document of deliveryDocuments(items)) {
    stageOutboxSet(
      batch,
      orm,
      job,
      { document: document.text, count: document.count, objectId: at(1), payload },
      returned ? (rows) => staged.rows.push(...rows) : undefined,
    );
  }
  if (returned) return;
  batch.add(lastOutboxId(orm), (rows) => {
    const last = Number((rows as Array<{ last: number | null }>)[0]?.last);
    if (Number.isSafeInteger(last)) staged.ranges.push({ first: last - items.length + 1, last });
  });
}

/** `items` joined into JSON arrays of at most `DOCUMENT_DELIVERIES` each. */
function deliveryDocuments(items: string[]): Array<{ text: string; count: number }> {
  const out: Array<{ text: string; count: number }> = [];
  for (let k = 0; k < items.length; k += DOCUMENT_DELIVERIES) {
    const part = items.slice(k, k + DOCUMENT_DELIVERIES);
    out.push({ text: `[${part.join(",")}]`, count: part.length });
  }
  return out;
}
