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
/** The same, PRAGMAs aside: they clear their own connection's cache only (they change no table). */
const SCHEMA_CHANGING_SHARED = /^\s*(create|alter|drop|vacuum|attach|detach|reindex|analyze)\b/i;

type Prepared = unknown;
type DatabaseProto = {
  prepare(sql: string): Prepared;
  exec(sql: string): unknown;
  [INSTALLED]?: boolean;
};

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
const TRANSACTION_CONTROL =
  /^\s*(begin|commit|end|rollback)(\s+(deferred|immediate|exclusive|transaction))*\s*;?\s*$/i;

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
      // A transaction that changed the schema has ended: other connections' caches go.
      if (schemaChanged.delete(db)) invalidateStatementCaches();
      return { changes: 0, lastInsertRowid: 0 };
    },
  };
  return stmt;
}

/**
 * The schema generation of this process, which the read pool's connections also follow
 * (`read-pool.ts`). Bumped when any connection of the
 * process changes the schema: when the statement is prepared, when it has run, and when its
 * transaction ends, so another thread cannot keep a column list memoised in between. Every
 * connection's cache is cleared before its next statement once the generation moved.
 */
let generation = 0;
export function invalidateStatementCaches(): void {
  generation++;
}

/** The generation, for the read pool's own statement caches. */
export function statementCacheGeneration(): number {
  return generation;
}

/** Connections that changed the schema inside a transaction not yet ended. */
const schemaChanged = new WeakSet<object>();

/** A schema-changing statement: bumps the generation before it runs and after. */
function bumpingAfter(db: object, stmt: Prepared): Prepared {
  invalidateStatementCaches();
  schemaChanged.add(db);
  const s = stmt as Record<string, unknown>;
  for (const method of ["run", "all", "get", "iterate"]) {
    const fn = s[method];
    if (typeof fn !== "function") continue;
    s[method] = function (this: unknown, ...args: unknown[]) {
      try {
        return (fn as (...a: unknown[]) => unknown).apply(this, args);
      } finally {
        invalidateStatementCaches();
      }
    };
  }
  return stmt;
}

/**
 * After another connection changed the schema, this one still holds the old schema until its
 * next statement meets the new schema cookie; a statement prepared before then describes the old
 * tables, and its memoised column list would outlive SQLite's own re-prepare. A statement that
 * reads the schema table makes SQLite reload it first.
 */
function reloadSchema(db: object, prepare: (this: object, sql: string) => Prepared): void {
  try {
    (prepare.call(db, "SELECT 1 FROM sqlite_schema LIMIT 1") as { get(): unknown }).get();
  } catch {
    // a closed or broken connection: its next statement reports that itself
  }
}

/** Installs the cache once per process (idempotent). */
export function installStatementCache(): void {
  const proto = (Database as unknown as { prototype: DatabaseProto }).prototype;
  if (proto[INSTALLED]) return;
  const prepare = proto.prepare;
  const exec = proto.exec;
  const caches = new WeakMap<object, Map<string, Prepared> & { generation?: number }>();
  proto.prepare = function (this: object, sql: string) {
    if (TRANSACTION_CONTROL.test(sql)) return viaExec(this, sql, exec);
    let cache = caches.get(this);
    if (!cache) caches.set(this, (cache = new Map()));
    const now = generation;
    if (cache.generation !== now) {
      if (cache.generation !== undefined) reloadSchema(this, prepare);
      cache.clear();
      cache.generation = now;
    }
    if (SCHEMA_CHANGING.test(sql)) {
      cache.clear();
      const stmt = prepare.call(this, sql);
      return SCHEMA_CHANGING_SHARED.test(sql) ? bumpingAfter(this, stmt) : stmt;
    }
    let stmt = cache.get(sql);
    if (stmt === undefined) {
      stmt = memoizeColumns(prepare.call(this, sql));
      if (cache.size >= MAX_STATEMENTS) cache.delete(cache.keys().next().value!);
      cache.set(sql, stmt);
    }
    return stmt;
  };
  proto.exec = function (this: object, sql: string) {
    caches.get(this)?.clear();
    invalidateStatementCaches();
    try {
      return exec.call(this, sql);
    } finally {
      invalidateStatementCaches();
    }
  };
  proto[INSTALLED] = true;
}
