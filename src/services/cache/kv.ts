/**
 * Cache backend over a Workers KV namespace. KV expires keys no sooner than 60 s, so each value
 * also carries its own expiry time and shorter TTLs are enforced on read.
 */
import type { Cache } from "./types";

/** The part of a Workers `KVNamespace` binding the cache uses. */
export interface KVNamespaceLike {
  get(key: string, type: "text"): Promise<string | null>;
  put(key: string, value: string, options?: { expirationTtl?: number }): Promise<void>;
  delete(key: string): Promise<void>;
}

/** KV refuses an `expirationTtl` below this many seconds. */
export const KV_MIN_TTL_SECONDS = 60;

interface Envelope {
  // The value.
  v: unknown;
  // Expiry in epoch ms, or null for none.
  e: number | null;
}

/**
 * A cache in Workers KV (eventually consistent across locations; fine for a cache).
 * @example const cache = createKvCache(env.CACHE); await cache.set("k", { a: 1 }, 10);
 */
export function createKvCache(
  kv: KVNamespaceLike,
  options: { prefix?: string; now?: () => number } = {},
): Cache {
  const prefix = options.prefix ?? "";
  const now = options.now ?? Date.now;
  return {
    backend: "kv",
    async get<T>(key: string): Promise<T | null> {
      const raw = await kv.get(prefix + key, "text");
      if (raw === null) return null;
      let envelope: Envelope;
      try {
        envelope = JSON.parse(raw) as Envelope;
      } catch {
        return null; // not written by this cache
      }
      if (!envelope || typeof envelope !== "object" || !("v" in envelope)) return null;
      if (typeof envelope.e === "number" && envelope.e <= now()) {
        await kv.delete(prefix + key);
        return null;
      }
      return envelope.v as T;
    },
    async set(key, value, ttlSeconds) {
      if (JSON.stringify(value) === undefined)
        throw new TypeError(`cache value for ${JSON.stringify(key)} is not JSON-serialisable`);
      if (ttlSeconds !== undefined && ttlSeconds <= 0) {
        await kv.delete(prefix + key);
        return;
      }
      const envelope: Envelope = {
        v: value,
        e: ttlSeconds === undefined ? null : Math.round(now() + ttlSeconds * 1000),
      };
      const json = JSON.stringify(envelope);
      if (ttlSeconds === undefined) await kv.put(prefix + key, json);
      else
        await kv.put(prefix + key, json, {
          expirationTtl: Math.max(KV_MIN_TTL_SECONDS, Math.ceil(ttlSeconds)),
        });
    },
    async delete(key) {
      await kv.delete(prefix + key);
    },
  };
}
