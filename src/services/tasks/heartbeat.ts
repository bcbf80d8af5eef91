/**
 * Task worker heartbeats on the tasks Redis, read by the health check's queue figures: each Bun
 * worker loop and each Workers cron run records "a worker of this runtime was alive at T".
 * One key per queue (the newest beat wins): the check asks "did any worker beat lately?".
 */
import type { TaskQueue } from "./queue";

/** The last beat: when (epoch ms) and from which runtime. */
export interface Heartbeat {
  at: number;
  runtime: string;
}

/** A loop beats at most this often (one SET per queue and process). */
const HEARTBEAT_EVERY_MS = 5_000;
/** A beat outlives any sensible staleness threshold, then goes (no worker for a week reads "never"). */
const HEARTBEAT_TTL_SECONDS = 7 * 24 * 3600;

/** `<prefix>:heartbeat`, next to the queue's other keys. */
export function heartbeatKey(queue: TaskQueue): string {
  return `${queue.keys.ready.replace(/:ready$/, "")}:heartbeat`;
}

/**
 * Records that a worker of `runtime` is alive (throttled to one write per
 * {@link HEARTBEAT_EVERY_MS}). Never throws: a beat Redis did not take is simply missing, which
 * is what the check should see.
 * @example void beat(queue, "bun");
 */
export async function beat(
  queue: TaskQueue,
  runtime: "bun" | "workerd",
  now = Date.now(),
): Promise<void> {
  const previous = queue.lastBeatAt;
  if (previous !== undefined && now - previous < HEARTBEAT_EVERY_MS) return;
  queue.lastBeatAt = now;
  try {
    await queue.redis.set(
      heartbeatKey(queue),
      JSON.stringify({ at: now, runtime } satisfies Heartbeat),
      { ex: HEARTBEAT_TTL_SECONDS },
    );
  } catch (e) {
    queue.lastBeatAt = undefined;
    queue.logger.debug("task worker: heartbeat not recorded", {
      error: String((e as Error)?.message ?? e),
    });
  }
}

/** The newest beat of any worker, or null when none was recorded (or it expired). */
export async function lastHeartbeat(queue: TaskQueue): Promise<Heartbeat | null> {
  const raw = await queue.redis.get(heartbeatKey(queue));
  if (raw === null) return null;
  try {
    const parsed = JSON.parse(raw) as Heartbeat;
    if (typeof parsed?.at === "number" && typeof parsed.runtime === "string") return parsed;
  } catch {
    // fall through: an unreadable beat counts as none
  }
  return null;
}
