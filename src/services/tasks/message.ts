/**
 * The Redis message of one job attempt, shared by the queue and the outbox relay.
 * `n` makes every pushed message a distinct string.
 */
export interface Message {
  id: number;
  name: string;
  attempt: number;
  max: number;
  payload: unknown;
  user: number | null;
  /** The outbox row's idempotency key (absent in messages queued before the outbox). */
  key?: string;
  n: string;
}

/** A message as pushed to Redis: `fields` plus a fresh nonce. */
export function messageText(fields: Omit<Message, "n">): string {
  return JSON.stringify({ ...fields, n: nonce() });
}

/** A fresh nonce: every pushed message is a distinct string. */
export const nonce = () => crypto.randomUUID().slice(0, 8);

export function parseMessage(raw: string): Message | null {
  try {
    const m = JSON.parse(raw) as Message;
    if (
      typeof m?.id === "number" &&
      typeof m.name === "string" &&
      typeof m.attempt === "number" &&
      typeof m.max === "number"
    )
      return m;
  } catch {
    // fall through
  }
  return null;
}
