/**
 * Removes secrets from text before it reaches a log line, an error body or the health page:
 * URLs lose their userinfo, query and fragment, and every configured token or password is masked.
 */
import type { Config } from "../config";

/** Turns a message into one safe to show anyone. */
export type Redactor = (text: string) => string;

const URL_PATTERN = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]+/gi;
/** Shorter values would mask ordinary words; real tokens and passwords are longer. */
const MIN_SECRET_LENGTH = 4;

function stripUrl(raw: string): string {
  // Keep trailing punctuation of the sentence out of the URL.
  const trail = /[).,;:!?\]]+$/.exec(raw)?.[0] ?? "";
  const body = trail ? raw.slice(0, -trail.length) : raw;
  try {
    const u = new URL(body);
    if (!u.host) return `${u.protocol}//${trail}`;
    return `${u.protocol}//${u.host}${u.pathname === "/" ? "/" : u.pathname}${trail}`;
  } catch {
    // Not parseable: drop everything that could be credentials or parameters.
    const scheme = body.slice(0, body.indexOf("://") + 3);
    const rest = body
      .slice(scheme.length)
      .replace(/^[^/@]*@/, "")
      .replace(/[?#].*$/, "");
    return scheme + rest + trail;
  }
}

function passwordOf(url: string | undefined): string[] {
  if (!url) return [];
  try {
    const u = new URL(url);
    return [u.password, u.username && u.password ? `${u.username}:${u.password}` : ""].flatMap(
      (s) => (s ? [s, decodeURIComponent(s)] : []),
    );
  } catch {
    return [];
  }
}

/**
 * Every secret value the settings hold: tokens, passwords inside URLs, and plugin settings
 * whose name says they are secret (`token`, `password`, `secret`, `key`).
 */
export function secretsOf(config: Config): string[] {
  const out: Array<string | undefined> = [
    config.database.authToken,
    ...passwordOf(config.database.url),
    config.redis.caching?.token,
    ...passwordOf(config.redis.caching?.url),
    config.redis.tasks?.token,
    ...passwordOf(config.redis.tasks?.url),
  ];
  for (const section of Object.values(config.pluginsConfig)) {
    for (const [name, value] of Object.entries(section ?? {})) {
      if (typeof value === "string" && /token|password|secret|key/i.test(name)) out.push(value);
    }
  }
  return out.filter((s): s is string => typeof s === "string");
}

/**
 * Builds the redactor for a set of secret values (see {@link secretsOf}).
 * @example createRedactor(["s3cret"])("login to redis://u:s3cret@h/?t=1 failed") === "login to redis://h/ failed"
 */
export function createRedactor(secrets: Iterable<string>): Redactor {
  const masked = new Set<string>();
  for (const s of secrets) {
    if (s.length < MIN_SECRET_LENGTH) continue;
    masked.add(s);
    masked.add(encodeURIComponent(s));
  }
  const ordered = [...masked].sort((a, b) => b.length - a.length);
  return (text) => {
    let out = String(text);
    // Secrets first: a token may be part of a URL that would otherwise be cut differently.
    for (const secret of ordered) out = out.split(secret).join("***");
    return out.replace(URL_PATTERN, stripUrl);
  };
}
