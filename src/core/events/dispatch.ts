/**
 * After a write commits, its changes meet the enabled event rules: every matching rule's
 * webhook gets one delivery job per change (one per (change, webhook), however many rules match).
 */
import { eq, inArray } from "drizzle-orm";
import { eventRuleObjectTypes, eventRules } from "../../db/schema";
import type { ChangeEvent } from "../changes/record";
import type { Services } from "../context";
import { evaluateCondition, type Condition } from "./conditions";

export const WEBHOOK_TASK = "webhook.deliver";

/** The payload of a `webhook.deliver` job: references, read again at delivery time. */
export interface WebhookTaskPayload {
  webhook: number;
  change: number;
  event_rule: number;
  /** The changed object's model name when the change happened (a COT may be renamed later). */
  model: string;
}

const EVENT_TYPE = { create: "object_created", update: "object_updated", delete: "object_deleted" } as const;

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
 * Enabled rules are read at most every RULES_TTL_MS per process: they are configuration, and
 * reading them cost a statement on every write. A change to a rule or webhook committed in this
 * process drops the copy at once (`dispatchEvents` sees every committed change); other processes
 * and isolates pick it up within the TTL.
 */
export const RULES_TTL_MS = 2000;
const ruleCache = new WeakMap<Services, { at: number; rules: Promise<ActiveRule[]> }>();

function cachedRules(services: Services): Promise<ActiveRule[]> {
  const hit = ruleCache.get(services);
  if (hit && Date.now() - hit.at < RULES_TTL_MS) return hit.rules;
  const rules = readRules(services);
  ruleCache.set(services, { at: Date.now(), rules });
  rules.catch(() => ruleCache.delete(services));
  return rules;
}

async function readRules(services: Services): Promise<ActiveRule[]> {
  const rules = await services.db.orm.select().from(eventRules).where(eq(eventRules.enabled, true));
  if (!rules.length) return [];
  const links = await services.db.orm
    .select()
    .from(eventRuleObjectTypes)
    .where(inArray(eventRuleObjectTypes.eventRuleId, rules.map((r) => r.id)));
  return rules.map((r) => ({ ...r, objectTypeIds: new Set(links.filter((l) => l.eventRuleId === r.id).map((l) => l.objectTypeId)) }));
}

/** True when `rule` wants this change: its object type, its event type, its conditions. */
export function ruleMatches(rule: Pick<ActiveRule, "eventTypes" | "conditions" | "objectTypeIds">, event: ChangeEvent): boolean {
  if (!rule.objectTypeIds.has(event.objectTypeId)) return false;
  if (!rule.eventTypes.includes(EVENT_TYPE[event.action])) return false;
  const data = event.postchange ?? event.prechange;
  return evaluateCondition(rule.conditions as Condition | null, { data, prechange: event.prechange, postchange: event.postchange });
}

/** Enqueues the deliveries of committed changes. Failures are logged: the change stands. */
export async function dispatchEvents(services: Services, events: ChangeEvent[]): Promise<void> {
  if (!events.length) return;
  if (events.some((e) => e.appLabel === "extras" && (e.model === "eventrule" || e.model === "webhook"))) ruleCache.delete(services);
  const rules = await cachedRules(services);
  if (!rules.length) return;
  const webhookType = await services.objectTypes.ensure("extras", "webhook");
  const queued = new Set<string>();
  for (const event of events) {
    for (const rule of rules) {
      if (rule.actionType !== "webhook" || rule.actionObjectTypeId !== webhookType.id || !ruleMatches(rule, event)) continue;
      const key = `${event.changeId}:${rule.actionObjectId}`;
      if (queued.has(key)) continue;
      queued.add(key);
      if (!services.tasks) {
        services.logger.warn("an event rule matched but no tasks Redis is configured (REDIS_TASKS_URL); nothing is delivered", { eventRule: rule.id, requestId: event.requestId });
        return;
      }
      const payload: WebhookTaskPayload = { webhook: rule.actionObjectId, change: event.changeId, event_rule: rule.id, model: event.model };
      try {
        await services.tasks.enqueue(WEBHOOK_TASK, payload, { objectTypeId: webhookType.id, objectId: rule.actionObjectId, userId: event.userId });
      } catch (e) {
        services.logger.error("could not queue a webhook delivery", { eventRule: rule.id, change: event.changeId, error: String((e as Error)?.message ?? e) });
      }
    }
  }
}
