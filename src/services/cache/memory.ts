/** In-process cache backend: a Map with per-entry TTL and least-recently-used eviction. */
import type { Cache } from "./types";

/** Options of {@link createMemoryCache}. */
export interface MemoryCacheOptions {
  /** Entries kept before the least recently used is evicted; default 10 000. */
  maxEntries?: number;
  /** Clock in epoch ms (tests may pass their own). */
  now?: () => number;
}

interface Entry {
  json: string;
  expiresAt: number | null;
}

/**
 * A cache living in this process (per isolate on Workers). Values are stored as JSON, so callers
 * get a fresh copy on every read, exactly like the other backends.
 * @example const cache = createMemoryCache({ maxEntries: 100 }); await cache.set("k", { a: 1 }, 60);
 */
export function createMemoryCache(options: MemoryCacheOptions = {}): Cache {
  const maxEntries = Math.max(1, options.maxEntries ?? 10_000);
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry>();

  return {
    backend: "memory",
    async get<T>(key: string): Promise<T | null> {
      const entry = entries.get(key);
      if (!entry) return null;
      entries.delete(key);
      if (entry.expiresAt !== null && entry.expiresAt <= now()) return null;
      entries.set(key, entry); // most recently used goes to the end
      return JSON.parse(entry.json) as T;
    },
    async set(key, value, ttlSeconds) {
      const json = JSON.stringify(value);
      if (json === undefined)
        throw new TypeError(`cache value for ${JSON.stringify(key)} is not JSON-serialisable`);
      entries.delete(key);
      if (ttlSeconds !== undefined && ttlSeconds <= 0) return;
      entries.set(key, {
        json,
        expiresAt: ttlSeconds === undefined ? null : now() + ttlSeconds * 1000,
      });
      if (entries.size > maxEntries) {
        const t = now();
        for (const [k, e] of entries)
          if (e.expiresAt !== null && e.expiresAt <= t) entries.delete(k);
        for (const k of entries.keys()) {
          if (entries.size <= maxEntries) break;
          entries.delete(k);
        }
      }
    },
    async delete(key) {
      entries.delete(key);
    },
  };
}
