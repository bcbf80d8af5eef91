/** Creating users and tokens outside HTTP: the `manage` CLI and test fixtures use these. */
import { eq } from "drizzle-orm";
import type { Executor } from "../../db/client";
import { tokens, users } from "../../db/schema";
import { hashPassword } from "./passwords";
import { generateToken, generateV2Token, hashToken } from "./tokens";

export async function createUser(
  db: Executor,
  opts: { username: string; password?: string; isSuperuser?: boolean; email?: string },
): Promise<{ id: number; username: string }> {
  if (!/^[\w.@+-]{1,150}$/.test(opts.username))
    throw new Error(`invalid username "${opts.username}"`);
  const [existing] = await db
    .select({ id: users.id })
    .from(users)
    .where(eq(users.username, opts.username));
  if (existing) throw new Error(`user "${opts.username}" already exists`);
  const [row] = await db
    .insert(users)
    .values({
      username: opts.username,
      passwordHash: opts.password ? await hashPassword(opts.password) : null,
      isSuperuser: opts.isSuperuser ?? false,
      email: opts.email ?? "",
    })
    .returning({ id: users.id, username: users.username });
  return row!;
}

/**
 * Issues a token (v2 unless `version: 1`); only its secret's hash is stored. `key` is what a
 * client sends after `Bearer ` (or `Token `): `nbt_<key>.<secret>` for v2, the secret for v1.
 */
export async function issueToken(
  db: Executor,
  opts: {
    username: string;
    writeEnabled?: boolean;
    expires?: string | null;
    description?: string;
    version?: 1 | 2;
  },
): Promise<{ id: number; key: string }> {
  const [user] = await db
    .select({ id: users.id })
    .from(users)
    .where(eq(users.username, opts.username));
  if (!user) throw new Error(`no user "${opts.username}"`);
  const v2 = opts.version !== 1 ? generateV2Token() : null;
  const secret = v2 ? v2.secret : generateToken();
  const [row] = await db
    .insert(tokens)
    .values({
      userId: user.id,
      version: v2 ? 2 : 1,
      key: v2?.key ?? null,
      keyHash: await hashToken(secret),
      keyHint: secret.slice(-4),
      writeEnabled: opts.writeEnabled ?? true,
      expires: opts.expires ?? null,
      description: opts.description ?? "",
    })
    .returning({ id: tokens.id });
  return { id: row!.id, key: v2 ? v2.credential : secret };
}
