/**
 * The caller of a replayed background bulk write (`core/rest/background.ts`): the user who queued
 * it, with their grants as of now. Cached per app and proven current by a guard that rides in the
 * write's one read (or its batch), as a token's is (decisions 0085, 0089, 0172).
 */
import { eq, sql, type SQL } from "drizzle-orm";
import type { Database, Orm } from "../../db/client";
import { users } from "../../db/schema";
import type { AuthState, Ctx, Guard } from "../context";
import { ApiError } from "../errors";
import { addGuard } from "../fresh-read";
import { slotKey } from "../slots";
import {
  foldGrants,
  grantRowsQuery,
  grantsPrintSql,
  type GrantRow,
  userRowQuery,
} from "./permissions";

interface UserRow {
  id: number;
  username: string;
  isSuperuser: boolean;
  isActive: boolean;
}

/** A job caller as last read: the caller (null: gone or inactive) and the print it was read with. */
interface CachedCaller {
  auth: AuthState | null;
  print: string;
}

/** Job callers kept per app, by user id (bounded: cleared when full). */
const CALLERS = slotKey<Map<number, CachedCaller>>("auth.job-callers");
const CALLERS_MAX = 1_000;

/** The user's row and grants as one text value computed by SQL (the guard compares it). */
function callerPrint(orm: Orm, userId: number): SQL<string> {
  const row = [users.id, users.username, users.isSuperuser, users.isActive].map(
    (column) => sql`quote(${column})`,
  );
  const user = orm
    .select({ p: sql<string>`${sql.join(row, sql` || ',' || `)}` })
    .from(users)
    .where(eq(users.id, userId));
  return sql<string>`coalesce((${user}), '') || '#' || ${grantsPrintSql(orm, sql`${userId}`)}`;
}

const printQuery = (orm: Orm, userId: number) =>
  orm.select({ print: callerPrint(orm, userId).as("print") }).from(sql`(SELECT 1)`);

/** The user, their grants and the print of both: one read. */
async function readCaller(db: Database, userId: number): Promise<CachedCaller> {
  const orm = db.orm;
  const [userRows, grantRows, printRows] = (await db.read([
    userRowQuery(orm, userId),
    grantRowsQuery(orm, userId),
    printQuery(orm, userId),
  ])) as unknown as [UserRow[], GrantRow[], Array<{ print: string }>];
  return { auth: authOf(userRows[0], grantRows), print: printRows[0]?.print ?? "" };
}

/**
 * The job's caller read now, uncached: user and grants in one read (a schema apply's job, whose
 * writes carry no guard to prove a cached copy). Null when the user is gone or inactive.
 */
export async function readJobCaller(db: Database, userId: number): Promise<AuthState | null> {
  return (await readCaller(db, userId)).auth;
}

/** The caller as the job acts (a user deactivated since is none: the job is refused). */
function authOf(user: UserRow | undefined, grantRows: GrantRow[]): AuthState | null {
  if (!user?.isActive) return null;
  const { permissions, constraints } = user.isSuperuser
    ? { permissions: new Set<string>(), constraints: new Map() }
    : foldGrants(grantRows);
  return {
    user: {
      id: user.id,
      username: user.username,
      isSuperuser: user.isSuperuser,
      permissions,
      constraints,
    },
    tokenId: null,
    writeEnabled: true,
  };
}

/**
 * The job's caller: from the cache where `folds` (the route's read phase or batch carries the
 * guard that proves it current), else read now. Null when the user is gone or inactive.
 */
export async function jobCaller(c: Ctx, userId: number, folds: boolean): Promise<AuthState | null> {
  const { db, state } = c.get("services");
  const callers = state.ensure(CALLERS, () => new Map());
  const cached = callers.get(userId);
  if (!cached || !folds) {
    const fresh = await readCaller(db, userId);
    if (callers.size >= CALLERS_MAX) callers.clear();
    callers.set(userId, fresh);
    return fresh.auth;
  }
  addGuard(c, callerGuard(c, userId, cached, callers));
  return cached.auth;
}

/** Proves `cached` current in the write's read (its print) or batch; refreshes it when not. */
function callerGuard(
  c: Ctx,
  userId: number,
  cached: CachedCaller,
  callers: Map<number, CachedCaller>,
): Guard {
  const { db } = c.get("services");
  return {
    name: "job caller",
    statements: [printQuery(db.orm, userId)],
    get batch() {
      return [
        db.orm.run(
          sql`INSERT INTO write_guard (ok) SELECT (${printQuery(db.orm, userId)}) = ${cached.print}`,
        ),
      ];
    },
    async settle(answers) {
      const [rows] = answers as [Array<{ print: string }>];
      if (rows[0]?.print === cached.print) return true;
      const fresh = await readCaller(db, userId);
      callers.set(userId, fresh);
      if (!fresh.auth) throw jobCallerGone();
      c.set("auth", fresh.auth);
      return false;
    },
  };
}

/** The job's user no longer exists or is inactive: refused as an unknown token is. */
export const jobCallerGone = () => ApiError.detail(403, "Invalid token", "invalid_token");
