/**
 * API token formats. v1 (NetBox ≤ 4.4): 40 hex characters, sent as `Token <secret>`. v2 (NetBox
 * 4.5+, the default): a public 12-character key and a 40-character secret, sent as
 * `Bearer nbt_<key>.<secret>`. Either keyword is accepted with either version (NetBox infers the
 * version from the `nbt_` prefix). Only a SHA-256 of the secret is stored.
 */

const TOKEN_PREFIX = "nbt_";
const KEY_LENGTH = 12;
const SECRET_LENGTH = 40;
const CHARSET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** A v1 token: 40 random hex characters. */
export function generateToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(20));
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** `length` random letters and digits (rejection sampling keeps them uniform). */
function randomAlphanumeric(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const b of crypto.getRandomValues(new Uint8Array(length * 2))) {
      if (b < 248 && out.length < length) out += CHARSET[b % CHARSET.length];
    }
  }
  return out;
}

/** A new v2 token: its public key, its secret and what a client sends after `Bearer `. */
export function generateV2Token(): { key: string; secret: string; credential: string } {
  const key = randomAlphanumeric(KEY_LENGTH);
  const secret = randomAlphanumeric(SECRET_LENGTH);
  return { key, secret, credential: `${TOKEN_PREFIX}${key}.${secret}` };
}

// Module-level on purpose: a bounded pure memo (token → its SHA-256), no app state (docs/architecture.md).
const recentHashes = new Map<string, string>();
const RECENT_MAX = 1000;

/** `hashToken`'s answer when it is remembered, without waiting a turn for it; else undefined. */
export const knownTokenHash = (token: string): string | undefined => recentHashes.get(token);

/** SHA-256 hex of a token's secret; recent results are remembered (hashing ran on every request). */
export async function hashToken(token: string): Promise<string> {
  const known = recentHashes.get(token);
  if (known) return known;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token));
  const hex = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
  if (recentHashes.size >= RECENT_MAX) recentHashes.delete(recentHashes.keys().next().value!);
  recentHashes.set(token, hex);
  return hex;
}

/** What an `Authorization` header presents: a v1 secret, or a v2 key and secret. */
export type Credential =
  | { version: 1; secret: string }
  | { version: 2; key: string; secret: string };

/**
 * Parses `Authorization: Token|Bearer <value>`: null when absent, "malformed" when it cannot be
 * a token (wrong shape, a v2 value without its `.`, an overlong value).
 */
export function credentialFromHeader(header: string | undefined): Credential | null | "malformed" {
  if (!header) return null;
  // a client sends the same header with every request: parsed once (bounded, as `recentHashes`)
  const known = recentCredentials.get(header);
  if (known) return known;
  const parsed = parseCredential(header);
  if (parsed === null || header.length > MEMO_HEADER_MAX) return parsed;
  if (recentCredentials.size >= RECENT_MAX)
    recentCredentials.delete(recentCredentials.keys().next().value!);
  recentCredentials.set(header, parsed);
  return parsed;
}

/**
 * `Authorization` values parsed lately, each to a frozen credential (or "malformed"): a bounded
 * pure memo, module-level as `recentHashes`. Only values a token fits in are kept.
 */
const MEMO_HEADER_MAX = 300;
const recentCredentials = new Map<string, Readonly<Credential> | "malformed">();

function parseCredential(header: string): Readonly<Credential> | null | "malformed" {
  if (!header.trim()) return null;
  const m = /^\s*(Token|Bearer)\s+(\S+)\s*$/i.exec(header);
  const value = m?.[2];
  if (!value || value.length > 256) return "malformed";
  if (!value.startsWith(TOKEN_PREFIX)) return Object.freeze({ version: 1, secret: value });
  const body = value.slice(TOKEN_PREFIX.length);
  const dot = body.indexOf(".");
  if (dot < 1 || dot === body.length - 1) return "malformed";
  return Object.freeze({ version: 2, key: body.slice(0, dot), secret: body.slice(dot + 1) });
}
