/**
 * Webhook delivery (`webhook.deliver` jobs): the §7 event body built from the change record,
 * `X-Hook-Signature` (hex HMAC-SHA512 of the exact body, WebCrypto, so Workers too), the
 * webhook's headers, `Idempotency-Key` (the same on every attempt and copy of a delivery); a
 * non-2xx answer or a network error throws, and the queue retries.
 */
import { eq } from "drizzle-orm";
import { objectChanges, webhooks } from "../../db/schema";
import type { JobHandler } from "../../services/tasks/queue";
import { PermanentJobError } from "../../services/tasks/queue";
import type { Services } from "../context";
import { resolvePath } from "./conditions";
import type { WebhookTaskPayload } from "./dispatch";
import { parseHeaderLines } from "./models";

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

/**
 * Renders `{{ dotted.path }}` placeholders against the event body: strings as they are,
 * anything else as JSON, missing values as empty. Deliberately tiny (no logic): see
 * docs/decisions/0019-tasks-webhook-delivery.md.
 */
function renderTemplate(template: string, context: Record<string, unknown>): string {
  return template.replace(/\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g, (_, path: string) => {
    const value = resolvePath(context, path);
    if (value === undefined || value === null) return "";
    return typeof value === "string" ? value : JSON.stringify(value);
  });
}

export interface WebhookOptions {
  /** Per-delivery deadline; default 10 s (keep it below the queue's visibility timeout). */
  timeoutMs?: number;
}

/** The `webhook.deliver` handler. Its `data` is `{status_code}` of the receiver's answer. */
export function webhookHandler(services: Services, options: WebhookOptions = {}): JobHandler {
  const timeoutMs = options.timeoutMs ?? 10_000;
  return async (payload: WebhookTaskPayload, job) => {
    const db = services.db.orm;
    const [hook] = await db.select().from(webhooks).where(eq(webhooks.id, payload.webhook));
    if (!hook) throw new PermanentJobError(`webhook ${payload.webhook} no longer exists`);
    const [change] = await db
      .select()
      .from(objectChanges)
      .where(eq(objectChanges.id, payload.change));
    if (!change) throw new PermanentJobError(`change record ${payload.change} no longer exists`);

    const prechange = change.prechangeData ?? null;
    const postchange = change.postchangeData ?? null;
    const event = {
      event: EVENT[change.action] ?? change.action,
      timestamp: change.time,
      model: payload.model,
      username: change.userName,
      request_id: change.requestId,
      data: postchange ?? prechange,
      snapshots: { prechange, postchange },
    };
    const body = hook.bodyTemplate
      ? renderTemplate(hook.bodyTemplate, event)
      : JSON.stringify(event);
    const headers = new Headers({ "Content-Type": hook.httpContentType || "application/json" });
    const extra = parseHeaderLines(renderTemplate(hook.additionalHeaders, event));
    if (!("error" in extra))
      for (const [name, value] of extra) headers.set(name, value.replace(/[\r\n]+/g, " "));
    if (hook.secret) headers.set("X-Hook-Signature", await signBody(hook.secret, body));
    // Delivery is at-least-once: receivers drop a repeat by this key (set last: not overridable).
    headers.set(IDEMPOTENCY_HEADER, job.idempotencyKey);

    const init: RequestInit & { tls?: { rejectUnauthorized: boolean } } = {
      method: hook.httpMethod,
      headers,
      body: hook.httpMethod === "GET" ? undefined : body,
      signal: AbortSignal.timeout(timeoutMs),
    };
    // Bun's fetch can skip certificate checks; Workers always verify.
    if (!hook.sslVerification && typeof Bun !== "undefined")
      init.tls = { rejectUnauthorized: false };
    let res: Response;
    try {
      res = await fetch(hook.payloadUrl, init);
    } catch (e) {
      const name = (e as Error)?.name;
      throw new Error(
        name === "TimeoutError" || name === "AbortError"
          ? `no answer within ${timeoutMs} ms`
          : `request failed: ${String((e as Error)?.message ?? e)}`,
      );
    }
    await res.body?.cancel().catch(() => undefined);
    if (res.status < 200 || res.status > 299)
      throw new Error(`the receiver answered HTTP ${res.status}`);
    return { status_code: res.status };
  };
}
