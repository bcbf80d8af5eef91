/**
 * The page cache budget of a local database file (decision 0117): SQLite's page caches of all
 * the file's connections together, shared out as a `PRAGMA cache_size` per connection.
 */

/** `DATABASE_CACHE_MB` when unset. */
export const DEFAULT_CACHE_MB = 4;

/**
 * Each service connection's cache (maintenance, checkpointer, integrity check), counted in the
 * budget: they touch a few pages per statement or scan once, where a cache saves next to nothing.
 */
export const SERVICE_CACHE_KIB = 256;
const SERVICE_CONNECTIONS = 3;

/** The least a serving connection keeps (16 pages of 4 KiB), however small the share. */
const MIN_CACHE_KIB = 64;

/**
 * The cache of each serving connection, in KiB: the main connection, the background connection
 * and every read-pool connection get equal shares of what the service connections leave.
 */
export function servingCacheKib(budgetMb: number, readPool: number): number {
  const serving = 2 + readPool;
  const left = budgetMb * 1024 - SERVICE_CONNECTIONS * SERVICE_CACHE_KIB;
  return Math.max(MIN_CACHE_KIB, Math.floor(left / serving));
}

/** The statement that sets a connection's page cache to `kib` (a negative size is in KiB). */
export const cacheSizePragma = (kib: number) => `PRAGMA cache_size=-${kib}`;
