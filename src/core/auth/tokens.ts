/** API token format: 40 random hex characters (NetBox v1 style), stored as a SHA-256 hash. */
export function generateToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(20));
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

// Module-level on purpose: a bounded pure memo (token → its SHA-256), no app state (docs/architecture.md).
const recentHashes = new Map<string, string>();
const RECENT_MAX = 1000;

/** SHA-256 hex of a token; recent results are remembered (hashing ran on every request). */
export async function hashToken(token: string): Promise<string> {
  const known = recentHashes.get(token);
  if (known) return known;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token));
  const hex = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
  if (recentHashes.size >= RECENT_MAX) recentHashes.delete(recentHashes.keys().next().value!);
  recentHashes.set(token, hex);
  return hex;
}

/** Parses `Authorization: Token <key>` or `Bearer <key>`; null when absent, "" when malformed. */
export function tokenFromHeader(header: string | undefined): string | null {
  if (!header?.trim()) return null;
  const m = /^\s*(Token|Bearer)\s+(\S+)\s*$/i.exec(header);
  return m ? m[2]! : "";
}
