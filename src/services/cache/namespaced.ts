/**
 * A cache whose keys carry a namespace: the app puts its database's identity there (decision
 * 0069), so two databases sharing one Redis or KV never read each other's entries (a token
 * cached for one database is unknown to the other).
 */
import type { Cache } from "./types";

export function namespacedCache(cache: Cache, namespace: string): Cache {
  return {
    backend: cache.backend,
    get: <T = unknown>(key: string) => cache.get<T>(namespace + key),
    set: (key, value, ttlSeconds) => cache.set(namespace + key, value, ttlSeconds),
    delete: (key) => cache.delete(namespace + key),
  };
}
