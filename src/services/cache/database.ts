/** Cache backend in the `cache_entries` table (libSQL via Drizzle); expired rows are removed lazily. */
import { and, eq, lte } from "drizzle-orm";
import type { Database } from "../../db/client";
import { cacheEntries } from "../../db/schema/core";
import type { Cache } from "./types";

/**
 * A cache stored in the database, shared by every process using it. An expired row reads as a
 * miss and is deleted on that read; `set` upserts.
 * @example const cache = createDatabaseCache(db); await cache.set("k", [1, 2], 30);
 */
export function createDatabaseCache(db: Database, options: { now?: () => number } = {}): Cache {
  const now = options.now ?? Date.now;
  return {
    backend: "database",
    async get<T>(key: string): Promise<T | null> {
      const [row] = await db.orm
        .select()
        .from(cacheEntries)
        .where(eq(cacheEntries.key, key))
        .limit(1);
      if (!row) return null;
      const t = now();
      if (row.expiresAt !== null && row.expiresAt <= t) {
        // Only if still expired: a concurrent set may have just refreshed the row.
        await db.orm
          .delete(cacheEntries)
          .where(and(eq(cacheEntries.key, key), lte(cacheEntries.expiresAt, t)));
        return null;
      }
      return JSON.parse(row.value) as T;
    },
    async set(key, value, ttlSeconds) {
      const json = JSON.stringify(value);
      if (json === undefined)
        throw new TypeError(`cache value for ${JSON.stringify(key)} is not JSON-serialisable`);
      if (ttlSeconds !== undefined && ttlSeconds <= 0) {
        await db.orm.delete(cacheEntries).where(eq(cacheEntries.key, key));
        return;
      }
      const expiresAt = ttlSeconds === undefined ? null : Math.round(now() + ttlSeconds * 1000);
      await db.orm
        .insert(cacheEntries)
        .values({ key, value: json, expiresAt })
        .onConflictDoUpdate({ target: cacheEntries.key, set: { value: json, expiresAt } });
    },
    async delete(key) {
      await db.orm.delete(cacheEntries).where(eq(cacheEntries.key, key));
    },
  };
}
