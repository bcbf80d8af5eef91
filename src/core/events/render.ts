/**
 * Webhook templates: `{{ dotted.path }}` placeholders filled from the event body, each value
 * escaped for its place, so data cannot add JSON keys or header lines (decision 0066).
 */
import { resolvePath } from "./conditions";

/**
 * Characters a rendered body may hold (decision 0190): a template of 65,536 characters repeating
 * a value of 1 MiB would otherwise build gigabytes. Far above any receiver's useful payload.
 */
export const MAX_RENDERED_BODY_CHARS = 4_194_304;

/** Characters one rendered header value may hold (receivers refuse headers of 8–16 KiB). */
export const MAX_RENDERED_HEADER_CHARS = 8_192;

/** A rendering that would pass its limit: the delivery is refused, nothing is sent. */
export class RenderTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`renders more than ${limit} characters`);
    this.name = "RenderTooLarge";
  }
}

/**
 * Passes values through while the text they fill stays within `limit` characters (the
 * template's own text counted in `start`, a placeholder's text counted with it); throws
 * `RenderTooLarge` before a value would take it past, so no oversized string is ever built.
 */
function bounded(limit: number, start = 0): (value: string) => string {
  let total = start;
  return (value) => {
    total += value.length;
    if (total > limit) throw new RenderTooLarge(limit);
    return value;
  };
}

const PLACEHOLDER_RE = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;
const HEADER_NAME_RE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Set by the transport or by us: a template may not set them. */
const RESERVED_HEADERS = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "idempotency-key",
  "x-hook-signature",
]);
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
const CONTROL_RE = /[\u0000-\u001f\u007f]+/g;

/** A value as text: strings as they are, anything else as JSON, missing as empty. */
function plain(value: unknown): string {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** `Name: value` lines (NetBox's format; blank lines ignored), split before anything is rendered. */
export function headerTemplates(text: string): Array<[string, string]> | { error: string } {
  const out: Array<[string, string]> = [];
  for (const [i, line] of text.split(/\r?\n/).entries()) {
    if (!line.trim()) continue;
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon).trim() : "";
    if (!name || !HEADER_NAME_RE.test(name))
      return { error: `Line ${i + 1}: expected "Name: value".` };
    if (RESERVED_HEADERS.has(name.toLowerCase()))
      return { error: `Line ${i + 1}: the header ${name} cannot be set here.` };
    out.push([name, line.slice(colon + 1).trim()]);
  }
  return out;
}

/** A character a header value cannot carry, as UTF-8 percent escapes (`?` for a lone surrogate). */
function percentEncoded(ch: string): string {
  try {
    return encodeURIComponent(ch);
  } catch {
    return "?";
  }
}

/**
 * One header value: control characters (CR, LF, NUL, …) of a value become a space, and
 * characters beyond ASCII are percent-encoded (a header carries bytes, not text).
 */
export function renderHeaderValue(template: string, context: Record<string, unknown>): string {
  const within = bounded(MAX_RENDERED_HEADER_CHARS);
  return template
    .replace(PLACEHOLDER_RE, (_, path: string) => within(plain(resolvePath(context, path))))
    .replace(CONTROL_RE, " ")
    .replace(/[^\x20-\x7e]/gu, percentEncoded)
    .trim();
}

const XML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/**
 * The body: in a JSON body (`…json` content type) a value inside a string literal is
 * JSON-escaped and one outside is written as a JSON value (missing: null); form bodies are
 * percent-encoded, XML and HTML bodies entity-escaped, other bodies get the plain text.
 */
export function renderBody(
  template: string,
  contentType: string,
  context: Record<string, unknown>,
): string {
  const type = contentType.toLowerCase();
  if (/json/.test(type)) return renderJson(template, context);
  const escapeValue = type.includes("x-www-form-urlencoded")
    ? encodeURIComponent
    : /xml|html/.test(type)
      ? (s: string) => s.replace(/[&<>"']/g, (c) => XML_ESCAPES[c]!)
      : (s: string) => s;
  const within = bounded(MAX_RENDERED_BODY_CHARS, template.length);
  return template.replace(PLACEHOLDER_RE, (_, path: string) =>
    within(escapeValue(plain(resolvePath(context, path)))),
  );
}

/** Follows the template's own JSON string literals to know where each placeholder stands. */
function renderJson(template: string, context: Record<string, unknown>): string {
  const within = bounded(MAX_RENDERED_BODY_CHARS, template.length);
  let out = "";
  let inString = false;
  let escaped = false;
  let at = 0;
  const scan = (text: string) => {
    for (const ch of text) {
      if (escaped) escaped = false;
      else if (inString && ch === "\\") escaped = true;
      else if (ch === '"') inString = !inString;
    }
  };
  for (const m of template.matchAll(PLACEHOLDER_RE)) {
    const before = template.slice(at, m.index);
    scan(before);
    const value = resolvePath(context, m[1]!);
    // A template backslash right before the placeholder would escape the value's first
    // character: double it so it stands for itself.
    const lone = escaped ? "\\" : "";
    escaped = false;
    out +=
      before +
      lone +
      within(inString ? JSON.stringify(plain(value)).slice(1, -1) : JSON.stringify(value ?? null));
    at = m.index + m[0].length;
  }
  return out + template.slice(at);
}
