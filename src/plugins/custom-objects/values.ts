/**
 * Instance values per field type: checking what a client writes (§5 rule 6), encoding it for
 * the column, decoding it for the record, and converting stored values on a type change.
 */
import type { customObjectTypeFields } from "../../db/schema";

export type FieldRow = typeof customObjectTypeFields.$inferSelect;
export type Checked = { value: unknown } | { error: string };

const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
const DATETIME_RE = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?$/i;
const INT_RE = /^-?\d+$/;
const DECIMAL_RE = /^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/;
const URL_SCHEMES = new Set(["http:", "https:", "ftp:", "ftps:"]);

export function isValidDate(s: string): boolean {
  if (!DATE_RE.test(s)) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s;
}

function normalizeDatetime(s: string): string | null {
  if (!DATETIME_RE.test(s.trim())) return null;
  const t = Date.parse(s.trim().replace(" ", "T"));
  return Number.isNaN(t) ? null : new Date(t).toISOString();
}

/** Regexes come from users: compile once per pattern and keep them. */
const regexCache = new Map<string, RegExp | null>();
export function compileRegex(pattern: string): RegExp | null {
  if (!regexCache.has(pattern)) {
    try {
      regexCache.set(pattern, new RegExp(pattern));
    } catch {
      regexCache.set(pattern, null);
    }
  }
  return regexCache.get(pattern)!;
}

function checkRange(f: FieldRow, n: number): string | null {
  if (f.validationMinimum != null && n < f.validationMinimum) return `Ensure this value is greater than or equal to ${f.validationMinimum}.`;
  if (f.validationMaximum != null && n > f.validationMaximum) return `Ensure this value is less than or equal to ${f.validationMaximum}.`;
  return null;
}

/**
 * Checks and encodes a scalar value (not object/multiobject) for its column.
 * `choices` are the allowed values of the field's choice set.
 */
export function encodeScalar(f: FieldRow, raw: unknown, choices: Set<string> | null): Checked {
  if (raw === null || raw === undefined) return { value: null };
  switch (f.type) {
    case "text":
    case "longtext":
    case "url": {
      if (typeof raw !== "string") return { error: "Not a valid string." };
      if (raw === "") return { value: null };
      if (f.type === "url") {
        let ok = false;
        try {
          const u = new URL(raw);
          ok = URL_SCHEMES.has(u.protocol) && !!u.host;
        } catch {}
        if (!ok) return { error: "Enter a valid URL." };
        if (raw.length > 2000) return { error: "Ensure this field has no more than 2000 characters." };
      }
      if (f.validationRegex) {
        const re = compileRegex(f.validationRegex);
        if (re && !re.test(raw)) return { error: `Values must match this regex: ${f.validationRegex}` };
      }
      return { value: raw };
    }
    case "integer": {
      const n = typeof raw === "number" ? raw : typeof raw === "string" && INT_RE.test(raw.trim()) ? Number(raw.trim()) : NaN;
      if (!Number.isSafeInteger(n)) return { error: "A valid integer is required." };
      const range = checkRange(f, n);
      return range ? { error: range } : { value: n };
    }
    case "decimal": {
      const n = typeof raw === "number" ? raw : typeof raw === "string" && DECIMAL_RE.test(raw.trim()) ? Number(raw.trim()) : NaN;
      if (!Number.isFinite(n)) return { error: "A valid number is required." };
      const range = checkRange(f, n);
      return range ? { error: range } : { value: n };
    }
    case "boolean":
      if (typeof raw === "boolean") return { value: raw ? 1 : 0 };
      if (raw === "true" || raw === "false") return { value: raw === "true" ? 1 : 0 };
      return { error: "Must be a valid boolean." };
    case "date":
      if (typeof raw !== "string" || !isValidDate(raw)) return { error: "Date has wrong format. Use one of these formats instead: YYYY-MM-DD." };
      return { value: raw };
    case "datetime": {
      const iso = typeof raw === "string" ? normalizeDatetime(raw) : null;
      return iso ? { value: iso } : { error: "Datetime has wrong format. Use ISO 8601 (YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z])." };
    }
    case "json":
      return { value: JSON.stringify(raw) };
    case "select":
      if (typeof raw !== "string" || !choices?.has(raw)) return { error: `"${typeof raw === "string" ? raw : JSON.stringify(raw)}" is not a valid choice.` };
      return { value: raw };
    case "multiselect": {
      if (!Array.isArray(raw)) return { error: 'Expected a list of items but got type "' + typeof raw + '".' };
      for (const v of raw) if (typeof v !== "string" || !choices?.has(v)) return { error: `"${typeof v === "string" ? v : JSON.stringify(v)}" is not a valid choice.` };
      return { value: raw.length ? JSON.stringify([...new Set(raw)]) : null };
    }
    default:
      return { error: `Unsupported field type ${f.type}.` };
  }
}

/** Turns a stored scalar back into its API value. */
export function decodeScalar(type: string, value: unknown): unknown {
  if (value === null || value === undefined) return type === "multiselect" ? [] : null;
  switch (type) {
    case "boolean":
      return value === 1 || value === 1n || value === true;
    case "integer":
      return typeof value === "bigint" ? Number(value) : value;
    case "decimal":
      return typeof value === "string" ? Number(value) : value;
    case "json":
    case "multiselect":
      try {
        return JSON.parse(String(value));
      } catch {
        return type === "multiselect" ? [] : null;
      }
    default:
      return value;
  }
}

/**
 * How a stored value of type `from` becomes one of type `to` (already encoded for the new
 * column), or `undefined` when it cannot: e.g. text "42" → integer 42, text "x" → lost.
 */
export function retypeConverter(from: string, to: string): (v: unknown) => unknown {
  const asText = (v: unknown): string | undefined => {
    const api = decodeScalar(from, v);
    if (api === null || api === undefined) return undefined;
    if (typeof api === "string") return api;
    if (Array.isArray(api)) return api.join(",");
    return typeof api === "object" ? JSON.stringify(api) : String(api);
  };
  const fake = (type: string) => ({ type, validationRegex: "", validationMinimum: null, validationMaximum: null }) as unknown as FieldRow;
  return (v) => {
    const text = asText(v);
    if (text === undefined) return undefined;
    switch (to) {
      case "text":
      case "longtext":
        return text;
      case "json":
        return JSON.stringify(decodeScalar(from, v));
      case "multiselect":
        return JSON.stringify(from === "select" ? [text] : text.split(",").map((s) => s.trim()).filter(Boolean));
      case "select":
        return from === "multiselect" ? ((decodeScalar(from, v) as string[])[0] ?? undefined) : text;
      case "boolean": {
        const t = text.trim().toLowerCase();
        if (["true", "1", "yes"].includes(t)) return 1;
        if (["false", "0", "no"].includes(t)) return 0;
        return undefined;
      }
      default: {
        const r = encodeScalar(fake(to), to === "integer" || to === "decimal" ? text.trim() : text, null);
        return "error" in r ? undefined : r.value;
      }
    }
  };
}
