/**
 * Wraps a remote cache (Redis) so its outages degrade to misses and no-ops instead of failing
 * requests: the cache is an optimisation, the database is the truth.
 */
import type { Logger } from "../logger";
import type { Redactor } from "../redact";
import type { Cache } from "./types";

/** Options of {@link createResilientCache}. */
export interface ResilientCacheOptions {
  logger: Logger;
  /** Applied to every error message before it is logged. */
  redact?: Redactor;
  /** After a failure, calls skip the backend for this long (no waiting on a dead server); default 5000 ms. */
  retryAfterMs?: number;
  /** Clock in epoch ms (tests may pass their own). */
  now?: () => number;
}

const DEFAULT_RETRY_AFTER_MS = 5_000;
/**
 * The property of a wrapping cache that holds what it wraps without the failure guard (see
 * {@link unwrapCache}); a wrapper that changes keys (`namespaced.ts`) gives its own unguarded form.
 */
export const INNER = Symbol("resilient-cache.inner");

/** A cache made by {@link createResilientCache}: it carries its backend. */
type ResilientCache = Cache & { readonly [INNER]: Cache };

/**
 * A cache that never throws: while the backend fails, `get` is a miss and `set`/`delete` do
 * nothing. The first failure of an outage logs one warning (redacted), recovery logs once more.
 * Entries written before an outage may outlive a `delete` missed during it, up to their TTL.
 * @example const cache = createResilientCache(createRedisCache(redis), { logger });
 */
export function createResilientCache(inner: Cache, options: ResilientCacheOptions): Cache {
  const { logger } = options;
  const redact = options.redact ?? ((s: string) => s);
  const retryAfterMs = options.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS;
  const now = options.now ?? Date.now;
  let downUntil = 0;
  let down = false;

  const guarded = async <T>(op: string, fallback: T, fn: () => Promise<T>): Promise<T> => {
    if (down && now() < downUntil) return fallback;
    try {
      const value = await fn();
      if (down) {
        down = false;
        logger.info("cache backend recovered", { backend: inner.backend });
      }
      return value;
    } catch (e) {
      if (e instanceof TypeError && /not JSON-serialisable/.test(e.message)) throw e; // a caller bug, not an outage
      downUntil = now() + retryAfterMs;
      if (!down) {
        down = true;
        logger.warn("cache backend failing; serving without cache", {
          backend: inner.backend,
          op,
          retryAfterMs,
          error: redact(e instanceof Error ? e.message : String(e)),
        });
      }
      return fallback;
    }
  };

  const cache: ResilientCache = {
    backend: inner.backend,
    get: <T>(key: string) => guarded<T | null>("get", null, () => inner.get<T>(key)),
    set: (key, value, ttlSeconds) =>
      guarded("set", undefined, () => inner.set(key, value, ttlSeconds)),
    delete: (key) => guarded("delete", undefined, () => inner.delete(key)),
    [INNER]: inner,
  };
  return cache;
}

/** The backend behind a resilient cache (so a health check sees real failures), else the cache itself. */
export function unwrapCache(cache: Cache): Cache {
  return (cache as Partial<ResilientCache>)[INNER] ?? cache;
}

/** True when `cache` degrades to misses on failure (requests then never depend on its backend). */
export function isResilient(cache: Cache): boolean {
  return unwrapCache(cache) !== cache;
}
