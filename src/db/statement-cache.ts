/**
 * A prepared-statement cache for the local libSQL driver. `@libsql/client` prepares every
 * statement from scratch (about 45 % of CPU on a get-by-id); the driver sets each statement's
 * modes on every call, so a prepared statement can be reused safely. The cache is per
 * connection, bounded, and cleared by any statement that can change the schema. Why a patch and
 * what it buys, measured: docs/decisions/0041-statement-cache-patch.md.
 */
import Database from "libsql";

const INSTALLED = Symbol.for("host.statementCache");
const MAX_STATEMENTS = 1000;
/** Statements after which cached statements may describe a schema that no longer exists. */
const SCHEMA_CHANGING = /^\s*(create|alter|drop|vacuum|attach|detach|reindex|pragma|analyze)\b/i;

type Prepared = unknown;
type DatabaseProto = { prepare(sql: string): Prepared; exec(sql: string): unknown; [INSTALLED]?: boolean };

/**
 * The driver asks a statement for its columns twice per call, and the native binding builds
 * them afresh each time (17 % of CPU on a get-by-id). A cached statement's columns cannot
 * change until the cache is cleared by the next schema change, so they are read once.
 */
function memoizeColumns(stmt: Prepared): Prepared {
  const s = stmt as { columns?: () => unknown };
  if (typeof s.columns !== "function") return stmt;
  const read = s.columns.bind(stmt);
  let columns: unknown;
  s.columns = () => (columns ??= read());
  return stmt;
}

/** The statements `@libsql/client` opens and ends transactions with. */
const TRANSACTION_CONTROL = /^\s*(begin|commit|end|rollback)(\s+(deferred|immediate|exclusive|transaction))*\s*;?\s*$/i;

/**
 * A statement that SQLite refuses with SQLITE_BUSY (another connection holds the write lock)
 * stays "in progress" until it is reset or finalized, and this driver does neither: the
 * connection's next COMMIT then fails ("SQL statements in progress"). Transaction control is
 * therefore run through `exec`, which finalizes its statement whatever happens; a connection
 * that meets SQLITE_BUSY meets it at BEGIN IMMEDIATE (see `serializeClient`).
 */
function viaExec(db: object, sql: string, exec: (this: object, sql: string) => unknown): Prepared {
  const stmt = {
    safeIntegers: () => stmt,
    raw: () => {
      throw new TypeError("The statement does not return data");
    },
    columns: () => [],
    run: () => {
      exec.call(db, sql);
      return { changes: 0, lastInsertRowid: 0 };
    },
  };
  return stmt;
}

/**
 * Bumped when another connection of this process commits a schema change (the background
 * connection, background.ts): every cache is cleared before its next statement.
 */
let generation = 0;
export function invalidateStatementCaches(): void {
  generation++;
}

export interface StatementCacheOptions {
  /**
   * Read each cached statement's column list once (default). The read pool's worker threads
   * turn this off: their cache is never told of another connection's schema change, and SQLite
   * re-prepares a statement by itself, so only a memoised column list could go stale there.
   */
  memoizeColumns?: boolean;
}

/** Installs the cache once per process, or per worker thread (idempotent). */
export function installStatementCache(options: StatementCacheOptions = {}): void {
  const memoize = options.memoizeColumns ?? true;
  const proto = (Database as unknown as { prototype: DatabaseProto }).prototype;
  if (proto[INSTALLED]) return;
  const prepare = proto.prepare;
  const exec = proto.exec;
  const caches = new WeakMap<object, Map<string, Prepared> & { generation?: number }>();
  proto.prepare = function (this: object, sql: string) {
    if (TRANSACTION_CONTROL.test(sql)) return viaExec(this, sql, exec);
    let cache = caches.get(this);
    if (!cache) caches.set(this, (cache = new Map()));
    if (cache.generation !== generation) {
      cache.clear();
      cache.generation = generation;
    }
    if (SCHEMA_CHANGING.test(sql)) {
      cache.clear();
      return prepare.call(this, sql);
    }
    let stmt = cache.get(sql);
    if (stmt === undefined) {
      stmt = prepare.call(this, sql);
      if (memoize) stmt = memoizeColumns(stmt);
      if (cache.size >= MAX_STATEMENTS) cache.delete(cache.keys().next().value!);
      cache.set(sql, stmt);
    }
    return stmt;
  };
  proto.exec = function (this: object, sql: string) {
    caches.get(this)?.clear();
    return exec.call(this, sql);
  };
  proto[INSTALLED] = true;
}
