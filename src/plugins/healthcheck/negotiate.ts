/** Picks the representation of the health endpoint from `?format=` and the `Accept` header. */

/** The representations the endpoint offers. */
export type HealthFormat = "html" | "json" | "health+json" | "openmetrics";

const MEDIA: Record<HealthFormat, string> = {
  html: "text/html",
  json: "application/json",
  "health+json": "application/health+json",
  openmetrics: "application/openmetrics-text",
};

/** What the 406 answer lists. */
export const SUPPORTED_MEDIA_TYPES = Object.values(MEDIA);

interface MediaRange {
  type: string;
  subtype: string;
  q: number;
  order: number;
}

function parseAccept(header: string): MediaRange[] {
  const ranges: MediaRange[] = [];
  header.split(",").forEach((part, order) => {
    const [mediaRaw, ...params] = part.split(";");
    const media = mediaRaw?.trim().toLowerCase() ?? "";
    const slash = media.indexOf("/");
    if (slash <= 0 || slash === media.length - 1) return;
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p);
      if (m) q = Math.min(1, Math.max(0, Number(m[1]) || 0));
    }
    ranges.push({ type: media.slice(0, slash), subtype: media.slice(slash + 1), q, order });
  });
  return ranges;
}

/** Which of our formats a range names; wildcards pick HTML (`*\/*`, `text/*`) or JSON (`application/*`). */
function formatFor(range: MediaRange): HealthFormat | null {
  const { type, subtype } = range;
  if (type === "*" && subtype === "*") return "html";
  if (type === "text" && (subtype === "html" || subtype === "*")) return "html";
  if (type === "application") {
    if (subtype === "json" || subtype === "*") return "json";
    if (subtype === "health+json") return "health+json";
    if (subtype === "openmetrics-text") return "openmetrics";
  }
  return null;
}

/**
 * The format to answer with, or null for 406. `?format=json|html|health+json|openmetrics` wins; no Accept
 * header means a browser-ish client (HTML). Otherwise the acceptable range with the highest `q`
 * wins, ties going to the one listed first.
 * @example negotiateFormat("application/json, text/html;q=0.9", undefined) === "json"
 */
export function negotiateFormat(
  accept: string | undefined,
  format: string | undefined,
): HealthFormat | null {
  if (format !== undefined) {
    const f = format.trim().toLowerCase();
    if (f === "json" || f === "html" || f === "health+json" || f === "openmetrics") return f;
    return null;
  }
  if (accept === undefined || accept.trim() === "") return "html";
  const ranges = parseAccept(accept)
    .filter((r) => r.q > 0)
    .sort((a, b) => b.q - a.q || a.order - b.order);
  for (const range of ranges) {
    const f = formatFor(range);
    if (f) return f;
  }
  return null;
}
