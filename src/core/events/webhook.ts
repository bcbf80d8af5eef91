/**
 * Webhook delivery (`webhook.deliver` jobs): the §7 event body built from the change record,
 * only when the rule's and the webhook's owners may view the object now (decision 0066),
 * `X-Hook-Signature` (hex HMAC-SHA512 of the exact body, WebCrypto, so Workers too), the
 * webhook's headers, `Idempotency-Key` (the same on every attempt and copy of a delivery); only
 * to allowed addresses, never following redirects (decision 0067). A non-2xx answer or a
 * network error throws one uniform message, and the queue retries.
 */
import { eq } from "drizzle-orm";
import { eventRules, objectChanges, webhooks } from "../../db/schema";
import type { JobHandler } from "../../services/tasks/queue";
import { DeferJob, PermanentJobError } from "../../services/tasks/queue";
import { admitted, restrictionFor, restrictWhere } from "../auth/restrict";
import type { ApiRecord, AuthState, ReadContext, Services } from "../context";
import type { WebhookTaskPayload } from "./dispatch";
import { headerTemplates, RenderTooLarge, renderBody, renderHeaderValue } from "./render";
import { evaluateCondition, type Condition } from "./conditions";
import { hideFromOwner, mayViewChanged, ownerAuth } from "./scope";
import { refusedAtDelivery } from "./targets";

/** Sent with every delivery; stable per delivery (its outbox row), whatever the attempt. */
const IDEMPOTENCY_HEADER = "Idempotency-Key";

const EVENT = { create: "created", update: "updated", delete: "deleted" } as Record<string, string>;
const enc = new TextEncoder();

/** `X-Hook-Signature`: hex HMAC-SHA512 of `body` keyed with `secret`. */
async function signBody(secret: string, body: string): Promise<string> {
  const key = await crypto.subtle.importKey(
    "raw",
    enc.encode(secret),
    { name: "HMAC", hash: "SHA-512" },
    false,
    ["sign"],
  );
  const mac = await crypto.subtle.sign("HMAC", key, enc.encode(body));
  return [...new Uint8Array(mac)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

export interface WebhookOptions {
  /** Per-delivery deadline; default 10 s (keep it below the queue's visibility timeout). */
  timeoutMs?: number;
  /**
   * Deliveries one process runs at once to one receiver (its origin); one more waits up to a
   * second for a turn, then goes back to the queue (no attempt used), so a slow receiver
   * cannot take every worker slot. Default 3 (the worker's 4 default slots, less one).
   */
  perTarget?: number;
}

/** How long a delivery waits for its receiver's turn before it is deferred. */
const TURN_WAIT_MS = 1_000;
/** How long a deferred delivery stays back (plus up to 50 % jitter). */
const DEFER_MS = 500;

/** What a delivery the owners may not see records instead of sending (no data of the object). */
const SKIPPED = { skipped: "the event rule's or webhook's owner may not view this object" };
/** What a delivery records whose rule's conditions do not hold on what its owners may view. */
const UNMATCHED = {
  skipped: "the event rule's conditions do not hold on what its owners may view",
};
/** The one error of a delivery that got no answer: it must not tell a port scanner anything. */
const CONNECTION_FAILED = "delivery failed: connection error";

/**
 * The snapshots as the rule's and the webhook's owners may see them now, and the writer's name
 * as they may see it, or null when either may not view the object (decision 0066).
 */
async function visibleSnapshots(
  services: Services,
  ruleOwner: number | null,
  hookOwner: number | null,
  change: typeof objectChanges.$inferSelect,
): Promise<{ snapshots: Array<ApiRecord | null>; username: string } | null> {
  const db = services.db.orm;
  const ctx = { db, services, baseUrl: "" };
  const [type] = (await services.objectTypes.byIds([change.changedObjectTypeId], db)).values();
  const resource = type && (await services.models.get(type.appLabel, type.model, ctx))?.resource;
  if (!resource) return null;
  let snapshots: Array<ApiRecord | null> = [
    (change.prechangeData as ApiRecord | null) ?? null,
    (change.postchangeData as ApiRecord | null) ?? null,
  ];
  const deleted = change.action === "delete";
  let username = change.userName;
  for (const userId of new Set([ruleOwner, hookOwner])) {
    const auth = await ownerAuth(db, userId);
    if (!auth || !(await mayViewChanged(ctx, auth, resource, change.changedObjectId, deleted)))
      return null;
    snapshots = await hideFromOwner(ctx, auth, resource, snapshots);
    if (username && !(await mayViewWriter(ctx, auth, change.userId))) username = "";
  }
  return { snapshots, username };
}

/**
 * Whether `auth` may view the user who made the change, as the change log shows its `user_name`
 * (decision 0191): a live user under their view constraints; a deleted one only to an
 * unconstrained view of users.
 */
async function mayViewWriter(
  ctx: ReadContext,
  auth: AuthState,
  userId: number | null,
): Promise<boolean> {
  if (auth.user?.isSuperuser) return true;
  if (userId === null) {
    const { loginRequired } = ctx.services.config;
    return restrictionFor(auth, loginRequired, "view", "users", "user").kind === "all";
  }
  const users = (await ctx.services.models.get("users", "user", ctx))?.resource;
  if (!users) return false;
  const where = await restrictWhere(ctx, auth, "view", users);
  return !where || (await admitted(ctx, users, [userId], where)).has(userId);
}

/** The `webhook.deliver` handler. Its `data` is `{status_code}` of the receiver's answer. */
export function webhookHandler(services: Services, options: WebhookOptions = {}): JobHandler {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const turns = new TargetTurns(Math.max(1, options.perTarget ?? 3));
  return async (payload: WebhookTaskPayload, job) => {
    const db = services.db.orm;
    const [hook] = await db.select().from(webhooks).where(eq(webhooks.id, payload.webhook));
    if (!hook) throw new PermanentJobError(`webhook ${payload.webhook} no longer exists`);
    const target = targetOf(hook.payloadUrl);
    if (!(await turns.take(target, TURN_WAIT_MS)))
      throw new DeferJob(Math.round(DEFER_MS * (1 + Math.random() / 2)));
    try {
      // The webhook's own `timeout` (seconds, NetBox 4.7), else the queue's default.
      const bound = hook.timeout ? hook.timeout * 1000 : timeoutMs;
      return await deliver(services, hook, payload, job.idempotencyKey, bound);
    } finally {
      turns.give(target);
    }
  };
}

/** The delivery of one job once its receiver's turn has come. */
async function deliver(
  services: Services,
  hook: typeof webhooks.$inferSelect,
  payload: WebhookTaskPayload,
  idempotencyKey: string,
  timeoutMs: number,
): Promise<unknown> {
  const db = services.db.orm;
  const [change] = await db
    .select()
    .from(objectChanges)
    .where(eq(objectChanges.id, payload.change));
  if (!change) throw new PermanentJobError(`change record ${payload.change} no longer exists`);
  const [rule] = await db
    .select({ userId: eventRules.userId, conditions: eventRules.conditions })
    .from(eventRules)
    .where(eq(eventRules.id, payload.event_rule));
  const visible = rule && (await visibleSnapshots(services, rule.userId, hook.userId, change));
  if (!visible) return SKIPPED;
  const [prechange, postchange] = visible.snapshots;
  // the rule's conditions judged on what its owners may view, never on what they may not (0191)
  const input = { data: postchange ?? prechange, prechange, postchange };
  if (!evaluateCondition(rule.conditions as Condition | null, input)) return UNMATCHED;
  const event = {
    event: EVENT[change.action] ?? change.action,
    timestamp: change.time,
    model: payload.model,
    // the writer's name only where both owners may view that user (decision 0191)
    username: visible.username,
    request_id: change.requestId,
    data: postchange ?? prechange,
    snapshots: { prechange, postchange },
  };
  return send(services, hook, event, idempotencyKey, timeoutMs);
}

/** At most `limit` deliveries per receiver at once in this process; others wait their turn. */
class TargetTurns {
  readonly #running = new Map<string, number>();
  readonly #waiting = new Map<string, Array<() => void>>();
  constructor(readonly limit: number) {}

  /** True once the receiver has a free turn (taken); false after `waitMs` without one. */
  async take(target: string, waitMs: number): Promise<boolean> {
    if ((this.#running.get(target) ?? 0) < this.limit) {
      this.#running.set(target, (this.#running.get(target) ?? 0) + 1);
      return true;
    }
    return new Promise<boolean>((resolve) => {
      const queue = this.#waiting.get(target) ?? [];
      this.#waiting.set(target, queue);
      // `give` hands its turn straight to a waiter, so the count stays as it is.
      const wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        queue.splice(queue.indexOf(wake), 1);
        if (!queue.length) this.#waiting.delete(target);
        resolve(false);
      }, waitMs);
      queue.push(wake);
    });
  }

  give(target: string): void {
    const queue = this.#waiting.get(target);
    const next = queue?.shift();
    if (queue && !queue.length) this.#waiting.delete(target);
    if (next) {
      next();
      return;
    }
    const left = (this.#running.get(target) ?? 1) - 1;
    if (left > 0) this.#running.set(target, left);
    else this.#running.delete(target);
  }
}

/** A receiver's identity for the per-target limit: its origin (the URL itself if unparseable). */
function targetOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}

/** A rendering, or the delivery refused (no retry: the same data renders the same) past its limit. */
function refusedPast(what: string, render: () => string): string {
  try {
    return render();
  } catch (e) {
    if (e instanceof RenderTooLarge)
      throw new PermanentJobError(`delivery refused: ${what} ${e.message}`);
    throw e;
  }
}

/** Renders, signs and sends one delivery; throws (to retry) unless the receiver answers 2xx. */
async function send(
  services: Services,
  hook: typeof webhooks.$inferSelect,
  event: Record<string, unknown>,
  idempotencyKey: string,
  timeoutMs: number,
): Promise<{ status_code: number }> {
  const contentType = hook.httpContentType || "application/json";
  const body = hook.bodyTemplate
    ? refusedPast("the body template", () => renderBody(hook.bodyTemplate, contentType, event))
    : JSON.stringify(event);
  const headers = new Headers({ "Content-Type": contentType });
  const lines = headerTemplates(hook.additionalHeaders);
  if (!("error" in lines))
    for (const [name, value] of lines)
      headers.set(
        name,
        refusedPast(`the header ${name}`, () => renderHeaderValue(value, event)),
      );
  if (hook.secret) headers.set("X-Hook-Signature", await signBody(hook.secret, body));
  // Delivery is at-least-once: receivers drop a repeat by this key (set last: not overridable).
  headers.set(IDEMPOTENCY_HEADER, idempotencyKey);

  const refused = await refusedAtDelivery(
    hook.payloadUrl,
    services.config.webhookAllowedNetworks,
  ).catch(() => CONNECTION_FAILED); // a name that does not resolve: retried like a refused connection
  if (refused === CONNECTION_FAILED) throw new Error(CONNECTION_FAILED);
  if (refused) throw new PermanentJobError("delivery refused: the target address is not allowed");

  const init: RequestInit & { tls?: { rejectUnauthorized: boolean } } = {
    method: hook.httpMethod,
    headers,
    body: hook.httpMethod === "GET" ? undefined : body,
    signal: AbortSignal.timeout(timeoutMs),
    // A redirect could lead anywhere (another host, a private address): never followed.
    redirect: "manual",
  };
  // Bun's fetch can skip certificate checks; Workers always verify.
  if (!hook.sslVerification && typeof Bun !== "undefined") init.tls = { rejectUnauthorized: false };
  let res: Response;
  try {
    res = await fetch(hook.payloadUrl, init);
  } catch (e) {
    // A timeout names the bound that applied (the webhook's `timeout` or the default).
    const name = (e as Error)?.name;
    if (name === "TimeoutError" || name === "AbortError")
      throw new Error(`delivery failed: no answer within ${timeoutMs} ms`);
    throw new Error(CONNECTION_FAILED);
  }
  await res.body?.cancel().catch(() => undefined);
  if (res.status < 200 || res.status > 299) throw new Error(`delivery failed: HTTP ${res.status}`);
  return { status_code: res.status };
}
