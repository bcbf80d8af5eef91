/**
 * A type's `display_expression` (upstream renders it as a sandboxed Jinja2 template): we render
 * the subset display names need — `{{ field }}` and `{% if field %}…{% else %}…{% endif %}` —
 * with each field's display value, an unknown or empty field being "". Anything else is kept
 * as written. An expression that renders to nothing falls back to the primary field or name.
 */
import { MAX_DISPLAY_CHARS } from "../../../core/limits";

const TOKEN_RE =
  /\{\{\s*([a-z0-9_]+)\s*\}\}|\{%-?\s*(if\s+(not\s+)?([a-z0-9_]+)|else|endif)\s*-?%\}/g;

/** Field names an expression reads (their columns must be in every query `display` runs on). */
export function expressionNames(expression: string): string[] {
  const out = new Set<string>();
  for (const m of expression.matchAll(TOKEN_RE)) {
    const name = m[1] ?? m[4];
    if (name) out.add(name);
  }
  return [...out];
}

/**
 * Renders an expression; `displayOf` gives a field's display value ("" when it has none). Stops
 * once the text passes `limit` characters (the caller cuts it there): an expression may name a
 * long field many times.
 */
export function renderExpression(
  expression: string,
  displayOf: (name: string) => string,
  limit = Number.POSITIVE_INFINITY,
): string {
  let out = "";
  let last = 0;
  // Each open `if`: whether its current branch shows.
  const stack: { shown: boolean }[] = [];
  const showing = () => stack.every((s) => s.shown);
  for (const m of expression.matchAll(TOKEN_RE)) {
    if (out.length > limit) return out.trim();
    if (showing()) out += expression.slice(last, m.index);
    last = m.index! + m[0].length;
    if (m[1]) {
      if (showing()) out += displayOf(m[1]);
    } else if (m[4]) {
      const truthy = displayOf(m[4]) !== "";
      stack.push({ shown: m[3] ? !truthy : truthy });
    } else if (m[2] === "else") {
      const top = stack.at(-1);
      if (top) top.shown = !top.shown;
    } else if (m[2] === "endif") stack.pop();
  }
  if (showing()) out += expression.slice(last);
  return out.trim();
}

/** A decoded value as display text: lists joined, coordinates as "lat, lon". */
export function displayText(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (Array.isArray(value)) return value.map(displayText).filter(Boolean).join(", ");
  if (typeof value === "object") {
    const o = value as Record<string, unknown>;
    if ("latitude" in o && "longitude" in o) return `${String(o.latitude)}, ${String(o.longitude)}`;
    if (typeof o.display === "string") return o.display;
    return JSON.stringify(value);
  }
  return String(value);
}

/** `text` within `MAX_DISPLAY_CHARS`, cut with "…" (decision 0196). */
export function boundedDisplay(text: string): string {
  return text.length > MAX_DISPLAY_CHARS ? `${text.slice(0, MAX_DISPLAY_CHARS - 1)}…` : text;
}
