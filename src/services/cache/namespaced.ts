/**
 * A cache whose keys carry a namespace: the app puts its database's identity there (decision
 * 0069), so two databases sharing one Redis or KV never read each other's entries (a token
 * cached for one database is unknown to the other).
 */
import { INNER, unwrapCache } from "./resilient";
import type { Cache } from "./types";

export function namespacedCache(cache: Cache, namespace: string): Cache {
  const namespaced = {
    backend: cache.backend,
    get: <T = unknown>(key: string) => cache.get<T>(namespace + key),
    set: (key: string, value: unknown, ttlSeconds?: number) =>
      cache.set(namespace + key, value, ttlSeconds),
    delete: (key: string) => cache.delete(namespace + key),
  };
  // Over a resilient cache, the health check's unguarded view keeps the namespace.
  const inner = unwrapCache(cache);
  if (inner === cache) return namespaced;
  return Object.assign(namespaced, { [INNER]: namespacedCache(inner, namespace) });
}
