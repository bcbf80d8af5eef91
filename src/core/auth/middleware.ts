/**
 * Authenticates `/api/` requests from `Authorization: Token|Bearer <key>`. Token lookups are
 * cached (short TTL, invalidated on token and user changes); permissions load per request.
 */
import { eq, sql } from "drizzle-orm";
import type { MiddlewareHandler } from "hono";
import { tokens, users } from "../../db/schema";
import type { AuthState, HonoEnv } from "../context";
import { ApiError, notAuthenticated } from "../errors";
import { tokenCacheKey } from "./models";
import { loadGrants } from "./permissions";
import { hashToken, tokenFromHeader } from "./tokens";
import { slotKey } from "../slots";

const TOKEN_CACHE_TTL_SECONDS = 30;
/** A token's `last_used` is written at most this often per process (as NetBox: once a minute). */
const LAST_USED_EVERY_MS = 60_000;
/** When each token's `last_used` was last written, per app (in `Services.state`). */
const LAST_USED_WRITES = slotKey<Map<number, number>>("auth.last-used-writes");

/** Records that a token was used, at most once a minute; never fails the request. */
async function touchToken(services: HonoEnv["Variables"]["services"], tokenId: number) {
  const written = services.state.ensure(LAST_USED_WRITES, () => new Map());
  const now = Date.now();
  if (now - (written.get(tokenId) ?? 0) < LAST_USED_EVERY_MS) return;
  written.set(tokenId, now);
  if (written.size > 10_000)
    for (const [id, at] of written) if (now - at >= LAST_USED_EVERY_MS) written.delete(id);
  // Plain SQL: the update builder would also move `last_updated`, which is about edits.
  await services.db.orm
    .run(
      sql`UPDATE ${tokens} SET ${sql.identifier("last_used")} = ${new Date(now).toISOString()} WHERE ${tokens.id} = ${tokenId}`,
    )
    .catch((e) =>
      services.logger.warn("could not record token use", {
        error: String((e as Error)?.message ?? e),
      }),
    );
}

interface CachedToken {
  tokenId: number;
  userId: number;
  username: string;
  isSuperuser: boolean;
  isActive: boolean;
  writeEnabled: boolean;
  expires: string | null;
}

const invalidToken = () => ApiError.detail(403, "Invalid token", "invalid_token");
const ANONYMOUS: AuthState = { user: null, tokenId: null, writeEnabled: false };

export function authenticate(
  options: { exempt?: (path: string, method: string) => boolean } = {},
): MiddlewareHandler<HonoEnv> {
  return async (c, next) => {
    const { config, db, cache } = c.var.services;
    const key = tokenFromHeader(c.req.header("authorization"));
    if (key === null) {
      c.set("auth", ANONYMOUS);
      const exempt = options.exempt?.(c.req.path, c.req.method) ?? false;
      const readOnly =
        c.req.method === "GET" || c.req.method === "HEAD" || c.req.method === "OPTIONS";
      if (!exempt && (config.loginRequired || !readOnly)) throw notAuthenticated();
      return next();
    }
    if (!key || key.length > 256) throw invalidToken();
    const keyHash = await hashToken(key);
    let found = await cache.get<CachedToken>(tokenCacheKey(keyHash)).catch(() => null);
    if (!found) {
      const [row] = await db.orm
        .select({
          tokenId: tokens.id,
          userId: users.id,
          username: users.username,
          isSuperuser: users.isSuperuser,
          isActive: users.isActive,
          writeEnabled: tokens.writeEnabled,
          expires: tokens.expires,
        })
        .from(tokens)
        .innerJoin(users, eq(users.id, tokens.userId))
        .where(eq(tokens.keyHash, keyHash))
        .limit(1);
      if (!row) throw invalidToken();
      found = row;
      await cache.set(tokenCacheKey(keyHash), row, TOKEN_CACHE_TTL_SECONDS).catch(() => undefined);
    }
    if (!found.isActive || (found.expires && Date.parse(found.expires) <= Date.now()))
      throw invalidToken();
    // Not awaited: a write that waits for a long write's lock must not hold the request.
    void touchToken(c.var.services, found.tokenId);
    const { permissions, constraints } = found.isSuperuser
      ? { permissions: new Set<string>(), constraints: new Map() }
      : await loadGrants(db.orm, found.userId);
    c.set("auth", {
      user: {
        id: found.userId,
        username: found.username,
        isSuperuser: found.isSuperuser,
        permissions,
        constraints,
      },
      tokenId: found.tokenId,
      writeEnabled: found.writeEnabled,
    });
    return next();
  };
}
