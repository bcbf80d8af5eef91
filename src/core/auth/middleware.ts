/**
 * Authenticates `/api/` requests from `Authorization: Token <v1 secret>` or `Bearer
 * nbt_<key>.<secret>` (either keyword with either version, as NetBox 4.7; decision 0076). A
 * token's row and its user's grants are one read, cached per app only while provably current
 * (decision 0085).
 */
import { errorBody } from "../../api-error";
import { eq, sql, type SQL } from "drizzle-orm";
import type { Context, MiddlewareHandler } from "hono";
import { authStamp, tokens, users } from "../../db/schema";
import type { AuthState, Ctx, Guard, HonoEnv } from "../context";
import { ApiError, notAuthenticated } from "../errors";
import { matchedRoutes } from "hono/route";
import { addGuard, foldsGuards, hasGuards, settleGuards } from "../fresh-read";
import type { Database, Executor, Orm } from "../../db/client";
import { oneRow, Prebuilt } from "../../db/driver-internals";
import { foldGrants, grantRowsQuery, type GrantRow, type Grants } from "./permissions";
import { credentialFromHeader, hashToken, knownTokenHash, type Credential } from "./tokens";
import { clientAddress } from "./login";
import { networkContains, parseAddress, parseNetwork } from "./networks";
import { JOB_CALLER } from "../rest/background";
import { jobCaller, jobCallerGone } from "./job-caller";
import { slotKey } from "../slots";
import { readsCostRoundTrip } from "../../db/policy";
import { Outage } from "../../services/outage";

/** A token's `last_used` is written at most this often per process (as NetBox: once a minute). */
const LAST_USED_EVERY_MS = 60_000;
/** When each token's `last_used` was last written, per app (in `Services.state`). */
const LAST_USED_WRITES = slotKey<Map<number, number>>("auth.last-used-writes");

/** Failed `last_used` writes, per app: one log line a minute however many tokens (decision 0204). */
const LAST_USED_OUTAGE = slotKey<Outage>("auth.last-used-outage");

/**
 * Records that a token was used, at most once a minute; never fails the request. Not awaited: a
 * write that waits for a long write's lock must not hold the request (and the other requests of
 * the minute make no promise at all).
 */
function touchToken(services: HonoEnv["Variables"]["services"], tokenId: number): void {
  const written = services.state.ensure(LAST_USED_WRITES, () => new Map());
  const now = Date.now();
  if (now - (written.get(tokenId) ?? 0) < LAST_USED_EVERY_MS) return;
  written.set(tokenId, now);
  if (written.size > 10_000)
    for (const [id, at] of written) if (now - at >= LAST_USED_EVERY_MS) written.delete(id);
  void writeLastUsed(services, tokenId, now);
}

async function writeLastUsed(
  services: HonoEnv["Variables"]["services"],
  tokenId: number,
  now: number,
) {
  // Plain SQL: the update builder would also move `last_updated`, which is about edits.
  await services.db.orm
    .run(
      sql`UPDATE ${tokens} SET ${sql.identifier("last_used")} = ${new Date(now).toISOString()} WHERE ${tokens.id} = ${tokenId}`,
    )
    .then(
      () => services.state.get(LAST_USED_OUTAGE)?.succeeded(),
      (e) => void lastUsedOutage(services).failed(e),
    );
}

function lastUsedOutage(services: HonoEnv["Variables"]["services"]): Outage {
  return services.state.ensure(
    LAST_USED_OUTAGE,
    () => new Outage({ name: "recording token use", logger: services.logger, baseMs: 0, maxMs: 0 }),
  );
}

interface TokenRow {
  tokenId: number;
  userId: number;
  username: string;
  isSuperuser: boolean;
  isActive: boolean;
  version: number;
  key: string | null;
  enabled: boolean;
  writeEnabled: boolean;
  allowedIps: string[] | null;
  expires: string | null;
  /** The token's print read with the row (`authPrint`); null on a local file. */
  print: string | null;
}

/** A token's row and its user's grants as read, with the proof (their answers as text). */
interface CachedAuth {
  token: TokenRow | null;
  grants: Grants;
  proof: string;
  /** The change stamp it was read under (a local file), or null. */
  stamp: string | null;
}

/** Token look-ups kept per app, by key hash (bounded: cleared when full). */
const AUTH_CACHE = slotKey<Map<string, CachedAuth>>("auth.cache");
const AUTH_CACHE_MAX = 10_000;
/** Requests answered again after a stale cached token was found too late to fold (at most once). */
const answeredAgain = new WeakSet<Request>();

const invalidToken = () => ApiError.detail(403, "Invalid token", "invalid_token");
const ANONYMOUS: AuthState = { user: null, tokenId: null, writeEnabled: false };

/**
 * What proves a cached token and its grants current where reads cost a round trip (decision
 * 0209): the token's own columns as SQL quotes them and its user's auth stamp, which triggers move
 * on every write that can change the user or the user's grants, by any process (migration 0018;
 * '' where the user has none yet: the first such write gives one). A token look-up reads it with
 * the token, a remote read compares it, and a write batch that took the token from the cache
 * checks it (decision 0107). Replaces 0122's print, whose grants SQL computed on every read.
 */
function authPrint(): SQL<string> {
  const columns = [
    tokens.id,
    tokens.userId,
    tokens.version,
    tokens.key,
    tokens.enabled,
    tokens.writeEnabled,
    tokens.allowedIps,
    tokens.expires,
  ].map((column) => sql`quote(${column})`);
  const stamp = sql`(SELECT ${authStamp.stamp} FROM ${authStamp} WHERE ${authStamp.userId} = ${tokens.userId})`;
  return sql<string>`${sql.join(columns, sql` || ',' || `)} || '#' || coalesce(${stamp}, '')`;
}

/** The print of the token whose key hash is the placeholder `keyHash`, as a one-row select. */
const printOf = (orm: Executor) =>
  orm
    .select({ print: authPrint().as("print") })
    .from(tokens)
    .where(eq(tokens.keyHash, sql.placeholder("keyHash")))
    .limit(1);

/**
 * A statement for a write batch that fails it (`write_guard`) unless the token and its user's
 * auth stamp are still as `print` was read: the batch itself proves the cache current.
 */
function printGuard(orm: Orm, keyHash: string, print: string) {
  return printGuardStatement.with(orm, { keyHash, print });
}

/** Its text rendered once per ORM (decision 0107): only the hash and the print change. */
const printGuardStatement = new Prebuilt<unknown>((orm) =>
  orm.run(
    sql`INSERT INTO write_guard (ok) SELECT coalesce((${printOf(orm)}), '') = ${sql.placeholder("print")}`,
  ),
);

/**
 * A token with its user, by the key's hash (a placeholder): prepared once per ORM. With its print
 * where a write batch may compare it (not on a local file, whose reads cost no round trip).
 */
const tokenQuery = (orm: Executor, printed: boolean) =>
  orm
    // every column named once: D1's batch answers rows as objects keyed by column name
    .select({
      tokenId: tokens.id,
      userId: tokens.userId,
      username: users.username,
      isSuperuser: users.isSuperuser,
      isActive: users.isActive,
      version: tokens.version,
      key: tokens.key,
      enabled: tokens.enabled,
      writeEnabled: tokens.writeEnabled,
      allowedIps: tokens.allowedIps,
      expires: tokens.expires,
      print: (printed ? authPrint() : sql<string | null>`NULL`).as("print"),
    })
    .from(tokens)
    .innerJoin(users, eq(users.id, tokens.userId))
    .where(eq(tokens.keyHash, sql.placeholder("keyHash")))
    .limit(1);
const tokenByHash = new Prebuilt<TokenRow[]>((orm) => tokenQuery(orm, false));
const tokenByHashPrinted = new Prebuilt<TokenRow[]>((orm) => tokenQuery(orm, true));

/** The grants of a token's user, by the key's hash (a placeholder): prepared once per ORM. */
const grantsByHash = new Prebuilt<GrantRow[]>((orm) =>
  grantRowsQuery(
    orm,
    sql`(SELECT ${tokens.userId} FROM ${tokens} WHERE ${tokens.keyHash} = ${sql.placeholder("keyHash")})`,
  ),
);

/**
 * The print alone (`authPrint`) by the key's hash: what a remote read's token guard sends
 * (decisions 0122, 0209). One short value answered by one row whatever the grants: a read may
 * carry it as columns of its own statement (`oneRow`).
 */
const printByHash = new Prebuilt<{ print: string | null }[]>(printOf);

/**
 * The statements that read a token and its user's grants, by the key's hash: one read. Sent with
 * every request (the guard of 0085), so their SQL text is rendered once, not per request (0098).
 */
function authStatements(db: Database, orm: Orm, keyHash: string) {
  const token = readsCostRoundTrip(db) ? tokenByHashPrinted : tokenByHash;
  return [token.with(orm, { keyHash }), grantsByHash.with(orm, { keyHash })] as const;
}

function cachedFrom(answers: unknown[], stamp: string | null): CachedAuth {
  const [tokenRows, grantRows] = answers as [TokenRow[], GrantRow[]];
  return {
    token: tokenRows[0] ?? null,
    grants: foldGrants(grantRows),
    proof: JSON.stringify(answers),
    stamp,
  };
}

function remember(entries: Map<string, CachedAuth>, keyHash: string, entry: CachedAuth) {
  if (entries.size >= AUTH_CACHE_MAX) entries.clear();
  entries.set(keyHash, entry);
}

/** NetBox 4.7's checks of a found token: its source address and `enabled`. */
function refuseUnusable(c: Context<HonoEnv>, found: TokenRow): void {
  if (found.allowedIps?.length) {
    const client = clientAddress(c, c.get("services").config);
    const address = parseAddress(client);
    if (!address)
      throw ApiError.detail(
        403,
        "Client IP address could not be determined for validation.",
        "invalid_token",
      );
    const networks = found.allowedIps.map(parseNetwork);
    if (!networks.some((n) => n && networkContains(n, address)))
      throw ApiError.detail(
        403,
        `Source IP ${client} is not permitted to authenticate using this token.`,
        "invalid_token",
      );
  }
  if (!found.enabled) throw ApiError.detail(403, "Token disabled", "invalid_token");
}

/**
 * The request's caller from a cached or fresh look-up; an unknown, inactive or expired token is a
 * 403, as is a secret presented under another version or (v2) another token's key.
 */
function authStateOf(c: Context<HonoEnv>, entry: CachedAuth, credential: Credential): AuthState {
  const found = entry.token;
  if (!found || found.version !== credential.version) throw invalidToken();
  if (credential.version === 2 && found.key !== credential.key) throw invalidToken();
  refuseUnusable(c, found);
  if (!found.isActive || (found.expires && Date.parse(found.expires) <= Date.now()))
    throw invalidToken();
  const { permissions, constraints } = found.isSuperuser
    ? { permissions: new Set<string>(), constraints: new Map() }
    : entry.grants;
  return {
    user: {
      id: found.userId,
      username: found.username,
      isSuperuser: found.isSuperuser,
      permissions,
      constraints,
    },
    tokenId: found.tokenId,
    writeEnabled: found.writeEnabled,
  };
}

/** Look-ups under way, by key hash: concurrent requests with one token share one read. */
const IN_FLIGHT = slotKey<Map<string, Promise<CachedAuth>>>("auth.in-flight");

/** The token and its grants read now (one read), shared with requests asking the same meanwhile. */
function lookUp(c: Ctx, keyHash: string, stamp: string | null): Promise<CachedAuth> {
  const { db, state } = c.get("services");
  const read = () =>
    db
      .read([...authStatements(db, db.reader, keyHash)])
      .then((answers) => cachedFrom(answers as unknown[], stamp));
  // only under one change stamp: nothing committed between the shared read and this request
  if (stamp === null) return read();
  const flying = state.ensure(IN_FLIGHT, () => new Map());
  const key = `${stamp}\u0000${keyHash}`;
  const shared = flying.get(key);
  if (shared) return shared;
  const reading = read().finally(() => flying.delete(key));
  flying.set(key, reading);
  return reading;
}

/** Whether the route that answers `c` folds the token guard into its write (`foldsCredentials`). */
function foldingRoute(c: Ctx): boolean {
  // a documented route (`describeRoute`) matches its doc middleware first, then its handler
  return matchedRoutes(c).some((route) => {
    if (route.method !== c.req.method) return false;
    const handler = route.handler as { __COMPOSED_HANDLER?: unknown };
    return foldsGuards(handler) || foldsGuards(handler.__COMPOSED_HANDLER);
  });
}

/**
 * The guard proving a cached token and its grants current (decision 0085): their two statements,
 * compared as answered. A stale copy is replaced and the request's caller set from the fresh one.
 */
function tokenGuard(
  c: Ctx,
  at: { keyHash: string; cached: CachedAuth; stamp: string | null; folded: boolean },
  credential: Credential,
): Guard {
  const { db, state } = c.get("services");
  const { keyHash, cached, stamp } = at;
  const entries = state.ensure(AUTH_CACHE, () => new Map());
  // remote and D1: the print proves the copy current; read in full only when it does not
  const print = cached.token?.print ?? null;
  let statements: Guard["statements"] | undefined;
  let alone: Guard["alone"];
  return {
    name: "token",
    // A write's guard reads where its read phase reads (a local file's main connection, whose
    // reads answer in turn: the writes they lead meet in one batch); a read's on the readers.
    // Built when a read takes them along: a write in a transaction settles alone instead.
    get statements() {
      const orm = at.folded ? db.orm : db.reader;
      statements ??=
        print === null
          ? [...authStatements(db, orm, keyHash)]
          : [oneRow(printByHash.with(orm, { keyHash }))];
      return statements;
    },
    // Settled alone (before a transaction, or after the answer) on a file: the look-up that
    // concurrent requests share while the change stamp holds (one read per commit, not one per
    // request); elsewhere a read of its own on the readers, built only for such a read (a GET's
    // one read takes `statements` along instead).
    settleAlone:
      stamp === null
        ? undefined
        : async () => {
            const fresh = await lookUp(c, keyHash, db.changeStamp());
            remember(entries, keyHash, fresh);
            if (fresh.proof === cached.proof) return true;
            c.set("auth", authStateOf(c, fresh, credential));
            return false;
          },
    get alone() {
      if (stamp !== null) return undefined;
      alone ??= [...authStatements(db, db.reader, keyHash)];
      return alone;
    },
    // the batch of a write with nothing else to read proves the cache there (decision 0107)
    get batch() {
      const print = cached.token?.print;
      return print == null ? [] : [printGuard(db.orm, keyHash, print)];
    },
    async settle(answers) {
      if (answers.length === 1) {
        // the print alone (`statements` on a remote database): unchanged, or read in full now
        const [rows] = answers as [{ print: string | null }[]];
        if (rows[0]?.print === print) return true;
        const fresh = await lookUp(c, keyHash, stamp);
        remember(entries, keyHash, fresh);
        c.set("auth", authStateOf(c, fresh, credential));
        return false;
      }
      // read after `stamp` was taken: the answers are current for it (or newer)
      if (JSON.stringify(answers) === cached.proof) {
        if (stamp !== null) remember(entries, keyHash, { ...cached, stamp });
        return true;
      }
      const fresh = cachedFrom(answers, stamp);
      remember(entries, keyHash, fresh);
      c.set("auth", authStateOf(c, fresh, credential));
      return false;
    },
  };
}

/**
 * Authenticates from the app's token cache where it is provably current: on a local file when
 * the change stamp is the one it was read under; remotely, for reads, by a guard whose statements
 * ride in the request's one read (`core/fresh-read.ts`). Otherwise the token and its grants are
 * one read now.
 */
export function authenticate(
  options: {
    exempt?: (path: string, method: string) => boolean;
    /** Answers a request again (the app's `fetch`), for a stale cache found after the answer was built. */
    again?: (c: Ctx) => Promise<Response>;
    /**
     * Every request is a read whatever its method, and its route settles the guards itself,
     * answering again if one was stale (GraphQL).
     */
    readsSettled?: boolean;
  } = {},
): MiddlewareHandler<HonoEnv> {
  return async (c, next) => {
    const { config, db } = c.get("services");
    // A bulk write replayed by its background job acts as the user who queued it.
    const jobCallerId = (c.env as Record<PropertyKey, unknown> | undefined)?.[JOB_CALLER];
    if (typeof jobCallerId === "number") {
      const folds = c.req.method !== "GET" && foldingRoute(c);
      const auth = await jobCaller(c, jobCallerId, folds);
      if (!auth) throw jobCallerGone();
      c.set("auth", auth);
      await next();
      return settleLeftGuards(c, options, false);
    }
    const credential = credentialFromHeader(c.req.header("authorization"));
    if (credential === null) {
      c.set("auth", ANONYMOUS);
      const exempt = options.exempt?.(c.req.path, c.req.method) ?? false;
      const readOnly =
        c.req.method === "GET" || c.req.method === "HEAD" || c.req.method === "OPTIONS";
      if (!exempt && (config.loginRequired || !readOnly)) throw notAuthenticated();
      return next();
    }
    if (credential === "malformed") throw invalidToken();
    const keyHash = knownTokenHash(credential.secret) ?? (await hashToken(credential.secret));
    const entries = c.get("services").state.ensure(AUTH_CACHE, () => new Map());
    const stamp = db.changeStamp();
    let entry = entries.get(keyHash);
    const read = c.req.method === "GET" || c.req.method === "HEAD";
    const proven = !!entry && stamp !== null && entry.stamp === stamp;
    // a write route that folds the guard into its read phase (decision 0089), on any database
    const folded = !read && foldingRoute(c);
    let deferred =
      !!entry &&
      !proven &&
      !answeredAgain.has(c.req.raw) &&
      (folded || (stamp === null && ((read && !!options.again) || !!options.readsSettled)));
    if (!entry || (!proven && !deferred)) {
      entry = await lookUp(c, keyHash, stamp);
      remember(entries, keyHash, entry);
    }
    let auth: AuthState;
    try {
      auth = authStateOf(c, entry, credential);
    } catch (refused) {
      // A refusal from a copy nothing proved (a remote database: the guard would prove it only
      // after the refusal) is asked of the database again: a token re-enabled, extended, its
      // user reactivated or its row written since by another instance is not refused for good.
      if (!deferred) throw refused;
      entry = await lookUp(c, keyHash, stamp);
      remember(entries, keyHash, entry);
      deferred = false;
      auth = authStateOf(c, entry, credential);
    }
    c.set("auth", auth);
    touchToken(c.get("services"), entry.token!.tokenId);
    if (!deferred) return next();
    addGuard(c, tokenGuard(c, { keyHash, cached: entry, stamp, folded }, credential));
    await next();
    await settleLeftGuards(c, options, read);
  };
}

/**
 * After the handler: a guard no read of the handler took along is settled before the answer
 * leaves, and the request answered again (once) if what the handler saw was stale.
 */
async function settleLeftGuards(
  c: Ctx,
  options: { again?: (c: Ctx) => Promise<Response> },
  read: boolean,
): Promise<void> {
  if (!hasGuards(c)) return;
  let current: boolean;
  try {
    current = await settleGuards(c);
  } catch (e) {
    if (e instanceof ApiError) {
      c.res = undefined;
      c.res = c.json(e.body as object, e.statusCode);
      return;
    }
    throw e;
  }
  if (current) return;
  c.res = undefined;
  if (!options.again || !read) {
    // a route that settles its own guards failed before it could: ask for the request again
    c.res = c.json(
      errorBody("retry", "Credentials changed while this request ran; retry it."),
      503,
      { "Retry-After": "0" },
    );
    return;
  }
  answeredAgain.add(c.req.raw);
  c.res = await options.again(c);
}
