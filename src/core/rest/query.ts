/**
 * List query parameters of §4, turned into SQL once for every model: filters with NetBox
 * lookups, `q`, ordering, limit/offset and the brief/fields/omit projection.
 */
import { asc, desc, not, sql, type SQL, type SQLWrapper } from "drizzle-orm";
import { allOf, anyOf, inJsonList, jsonListRows } from "../../db/d1-limits";
import { ValidationError } from "../errors";
import {
  CONTROL_CHARACTER_MESSAGE,
  hasControlCharacter,
  MAX_FILTER_PARAMS,
  MAX_FILTER_TEXT_CHARS,
  MAX_FILTER_VALUES,
  MAX_NUMBER_LENGTH,
  MAX_ORDERING_TERMS,
  MAX_PROJECTION_NAMES,
  MAX_PAGING_VALUE,
} from "../limits";

export type FilterKind = "string" | "number" | "boolean" | "datetime" | "date";

export interface FilterSpec {
  kind: FilterKind;
  expr: SQLWrapper;
  /** The lookup a bare `name=value` means: `exact` (default) or, for loose text filters, `ic`. */
  bareLookup?: Lookup;
  /** Builds the condition for one lookup itself (link tables, tags, JSON lists). */
  build?: (lookup: Lookup, values: string[]) => SQL | undefined;
  /** Lookups allowed when `build` is given. */
  lookups?: readonly Lookup[];
  /** What the bare filter matches, for readers that describe it (OpenAPI), if not "equals". */
  description?: string;
  /**
   * Several values of the bare filter in a query string match rows holding all of them (NetBox's
   * `conjoined` filters: tags), not any; `build` keeps "any of" for a constraint's `in`.
   */
  conjoined?: (values: string[]) => SQL;
  /** Lookups that take one value (a second is a 400), as NetBox's single-value filters. */
  oneValue?: readonly Lookup[];
  /**
   * The object type this filter is about (a polymorphic field's per-type filter): readers that
   * describe filters (GraphQL, OpenAPI) name it only to callers who may view that type.
   */
  targetTypeId?: number;
  /**
   * That type's `app_label.model`: a caller who may not see it (decision 0187) is answered as if
   * the list had no such filter, as for a type that does not exist (0213).
   */
  targetLabel?: string;
  /**
   * Another name of a filter the list has under its own name (a custom object type's per-type
   * filter under upstream's app label): taken, but readers that describe filters skip it.
   */
  alias?: true;
  /**
   * A filter over other objects (an object's tags, its owner): `within` gives the same filter
   * held to those the caller may view of the models `labels` (their view conditions over those
   * tables, in order; undefined where nothing limits it), so it matches a hidden one as one that
   * does not exist (decision 0178; `filter-scope.ts`).
   */
  heldTo?: { labels: string[]; within: (views: Array<SQL | undefined>) => FilterSpec };
  /**
   * A filter whose values must name things the caller may view (NetBox's model choice filters:
   * tags): the check of a query string's values, judged in the list's own read.
   */
  known?: (param: string, values: string[]) => FilterCheck;
  /**
   * A filter naming object types: the same filter matching only the types the caller may see
   * (`seen`: their `object_types` rows as SQL over its two columns), so a hidden custom object
   * type filters as one that does not exist (decision 0187; `filter-scope.ts`).
   */
  seenTypes?: (seen: (appLabel: SQLWrapper, model: SQLWrapper) => SQL | undefined) => FilterSpec;
}

const STRING_LOOKUPS = [
  "exact",
  "n",
  "ic",
  "nic",
  "isw",
  "nisw",
  "iew",
  "niew",
  "ie",
  "nie",
  "empty",
] as const;
const NUMBER_LOOKUPS = ["exact", "n", "gt", "gte", "lt", "lte", "empty"] as const;
const BOOLEAN_LOOKUPS = ["exact", "n", "empty"] as const;
/** JSON values: a bare `name=` matches part of the JSON text (upstream's `icontains`). */
const JSON_LOOKUPS = ["ic", "nic", "empty"] as const;
export type Lookup = (typeof STRING_LOOKUPS)[number] | (typeof NUMBER_LOOKUPS)[number];
const ALL_LOOKUPS = new Set<string>([...STRING_LOOKUPS, ...NUMBER_LOOKUPS]);

export const DEFAULT_LOOKUPS: Record<FilterKind, readonly Lookup[]> = {
  string: STRING_LOOKUPS,
  number: NUMBER_LOOKUPS,
  boolean: BOOLEAN_LOOKUPS,
  datetime: NUMBER_LOOKUPS,
  date: NUMBER_LOOKUPS,
};

/** Parameters that are never filters. */
const RESERVED = new Set([
  "limit",
  "offset",
  "start",
  "background",
  "ordering",
  "q",
  "brief",
  "fields",
  "omit",
  "format",
  "exclude",
]);

const DEFAULT_LIMIT = 50;

const UNSUPPORTED_FILTER_MESSAGE =
  "Host does not support this filter: it is not applied, so the request is refused.";

/** A JSON field's filter: `name=` and `name__ic=` match part of its JSON text, `__nic`, `__empty`. */
export const jsonFilter = (expr: SQLWrapper): FilterSpec => ({
  kind: "string",
  expr,
  bareLookup: "ic",
  lookups: JSON_LOOKUPS,
});

const DATETIME_RE =
  /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/**
 * An ISO 8601 date/time as the instant it names, in the one form every stored datetime has
 * (`toISOString`: `YYYY-MM-DDTHH:MM:SS.sssZ`), or null. No offset means UTC (the server time
 * zone of NetBox's default settings), never the machine's local time; a date alone is midnight.
 */
export function toInstant(raw: string): string | null {
  const m = DATETIME_RE.exec(raw.trim());
  if (!m) return null;
  const [, day, time = "00:00", zone = "Z"] = m;
  const offset =
    zone.toUpperCase() === "Z"
      ? "Z"
      : zone.length === 3
        ? `${zone}:00`
        : `${zone.slice(0, 3)}:${zone.slice(-2)}`;
  // JavaScript parses at most milliseconds: drop further digits rather than refuse them.
  const t = Date.parse(`${day}T${time.replace(/(\.\d{3})\d+$/, "$1")}${offset}`);
  return Number.isNaN(t) ? null : new Date(t).toISOString();
}

/**
 * A stored datetime as an instant in the `toISOString` form, whatever offset or precision it
 * was stored with (writes normalise it; this covers values stored before they did).
 */
export const instantSql = (expr: SQLWrapper): SQL => sql`strftime('%Y-%m-%dT%H:%M:%fZ', ${expr})`;

/**
 * One term of `q`: a column searched with LIKE, or a condition of its own for values that are
 * not matched as text (an instant, a JSON list's items); `match` returns undefined to skip.
 */
export type SearchTerm = SQLWrapper | { match: (q: string) => SQL | undefined };
export const MAX_LIMIT = 1000;

/**
 * What a list's filter values must name, asked in the list's own read (no round trip of its own):
 * `statement` answers rows, `judge` throws the 400 when they show a value names nothing.
 */
export interface FilterCheck {
  statement: SQL;
  judge(rows: unknown): void;
}

export interface ListQuery {
  where: SQL | undefined;
  /** Checks of the filters' values (`FilterSpec.known`), to ride in the list's read. */
  checks?: FilterCheck[];
  orderBy: SQL[];
  /** Set when the list is ordered by its id alone (deep pages can then seek: `page-anchors.ts`). */
  idOrder?: "asc" | "desc";
  limit: number;
  offset: number;
  /** Cursor pagination (NetBox 4.6): the first id of the page; `offset` and `ordering` are refused with it. */
  start?: number;
  projection: Projection;
  /**
   * Set when a `q` alone, in id order, can be answered by a full-text index: its count and page
   * then come from the index, not from the rows it matches (decision 0081).
   */
  fromIndex?: IndexedSearch;
}

/** A `q` answered from an index: statements for its exact count and for one page of ids. */
export interface IndexedSearch {
  /**
   * What the search is, as text: the same key means the same statements under one schema, so
   * its count and pages can be kept under the change stamp without rendering them (decision 0112).
   */
  key: string;
  /** One row, one column `n`: how many rows match. */
  count: SQL;
  /** One column `id`: the ids of rows `offset`… in id order, at most `limit`. */
  pageIds(direction: "asc" | "desc", limit: number, offset: number): SQL;
}

export interface Projection {
  brief: boolean;
  fields: string[] | null;
  omit: string[];
}

const likeEscape = (s: string) => s.replace(/[\\%_]/g, (m) => `\\${m}`);

/** `expr` contains `text` (LIKE: case-insensitive for ASCII, wildcards escaped). */
export const likeContains = (expr: SQLWrapper, text: string): SQL =>
  sql`${expr} LIKE ${`%${likeEscape(text)}%`} ESCAPE '\\'`;

export function parseBool(raw: string): boolean | null {
  const s = raw.trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(s)) return true;
  if (["false", "0", "no", "off"].includes(s)) return false;
  return null;
}

/**
 * `obj[key]` only when `key` is the object's own property: query keys such as `constructor`
 * or `__proto__` must never reach `Object.prototype`.
 */
function own<T>(obj: Record<string, T>, key: string): T | undefined {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

/** A numeral as Django's `DecimalField` reads one: a sign, `.5`, `5.`, an exponent (`1e2`). */
const NUMERAL = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/**
 * A numeric filter value: digits with an optional sign and fraction, at most
 * `MAX_NUMBER_LENGTH` characters and within ±(2^53 − 1), or null.
 */
export function parseFilterNumber(raw: string): number | null {
  const s = raw.trim();
  if (s.length > MAX_NUMBER_LENGTH || !NUMERAL.test(s)) return null;
  const n = Number(s);
  // an exponent that underflows to 0 is no value this filter can compare (`1e-400`)
  if (n === 0 && /[1-9]/.test(s.split(/[eE]/)[0]!)) return null;
  return Number.isFinite(n) && Math.abs(n) <= Number.MAX_SAFE_INTEGER ? n : null;
}

function convert(kind: FilterKind, raw: string): string | number | null {
  switch (kind) {
    case "number":
      return parseFilterNumber(raw);
    case "boolean": {
      const b = parseBool(raw);
      return b === null ? null : b ? 1 : 0;
    }
    case "date":
      return /^\d{4}-\d{2}-\d{2}$/.test(raw.trim()) ? raw.trim() : null;
    case "datetime":
      return toInstant(raw);
    default:
      return raw;
  }
}

const CONVERT_MESSAGE: Record<FilterKind, string> = {
  number: "Enter a number.",
  boolean: "Enter true or false.",
  date: "Enter a date as YYYY-MM-DD.",
  datetime: "Enter an ISO 8601 date/time.",
  string: "Enter a value.",
};

/**
 * Why `raw` is no value of `kind`: Django's "Enter a number." for what is no numeral; a numeral
 * past what a filter compares exactly says its bounds.
 */
function convertMessage(kind: FilterKind, raw: string): string {
  if (kind === "number" && NUMERAL.test(raw.trim()))
    return `Ensure this number has at most ${MAX_NUMBER_LENGTH} characters and is within ±9007199254740991.`;
  return CONVERT_MESSAGE[kind];
}

function condition(spec: FilterSpec, lookup: Lookup, value: string | number): SQL {
  const e = spec.expr;
  const text = String(value);
  switch (lookup) {
    case "exact":
      return sql`${e} = ${value}`;
    case "gt":
      return sql`${e} > ${value}`;
    case "gte":
      return sql`${e} >= ${value}`;
    case "lt":
      return sql`${e} < ${value}`;
    case "lte":
      return sql`${e} <= ${value}`;
    case "ic":
    case "isw":
    case "iew":
      return sql`${e} LIKE ${likePattern(lookup, text)} ESCAPE '\\'`;
    case "ie":
      return sql`lower(${e}) = lower(${text})`;
    default:
      throw new Error(`lookup ${lookup} has no positive form`);
  }
}

/** Lookups that match text against a pattern or a case-folded value. */
const PATTERN_LOOKUPS = new Set<Lookup>(["ic", "isw", "iew", "ie"]);

/** The LIKE pattern of a pattern lookup, its wildcards escaped (`ESCAPE '\\'`). */
function likePattern(lookup: Lookup, text: string): string {
  const escaped = likeEscape(text);
  return lookup === "isw" ? `${escaped}%` : lookup === "iew" ? `%${escaped}` : `%${escaped}%`;
}

/**
 * Whether `expr` matches any of `texts` under a pattern lookup, the texts bound as ONE JSON list
 * (decision 0188): one statement text and one bound value for any number of them.
 */
function matchesAny(expr: SQLWrapper, lookup: Lookup, texts: string[]): SQL {
  if (lookup === "ie")
    return sql`lower(${expr}) IN (SELECT lower(value) FROM (${jsonListRows(texts)}))`;
  const patterns = jsonListRows(texts.map((t) => likePattern(lookup, t)));
  return sql`EXISTS (SELECT 1 FROM (${patterns}) WHERE ${expr} LIKE value ESCAPE '\\')`;
}

const NEGATED: Partial<Record<Lookup, Lookup>> = {
  n: "exact",
  nic: "ic",
  nisw: "isw",
  niew: "iew",
  nie: "ie",
};

/** A `__empty` filter's value, or 400 keyed by the parameter. */
export function parseEmpty(param: string, raw: string | undefined): boolean {
  const b = parseBool(raw ?? "");
  if (b === null) throw new ValidationError({ [param]: ["Enter true or false."] });
  return b;
}

/** Whether `text` has more characters (code points) than a filter value or `q` may (0179). */
export function pastTextLimit(text: string): boolean {
  if (text.length <= MAX_FILTER_TEXT_CHARS) return false;
  // a run of 4-byte characters is two UTF-16 units each: count them only where that decides
  if (text.length > 2 * MAX_FILTER_TEXT_CHARS) return true;
  let chars = 0;
  for (const _ of text) if (++chars > MAX_FILTER_TEXT_CHARS) return true;
  return false;
}

export const TEXT_LIMIT_MESSAGE = `Ensure this value has at most ${MAX_FILTER_TEXT_CHARS} characters.`;

/** The one value a single-value filter takes (NetBox reads one; several are refused, not ORed). */
export function oneValue(param: string, values: string[]): string {
  if (values.length > 1) throw new ValidationError({ [param]: ["This filter takes one value."] });
  return values[0]!;
}

/** How a filter is written: for DDL (a partial index's WHERE takes no subquery), values in line. */
export interface FilterForm {
  inDdl?: boolean;
}

export function buildFilter(
  name: string,
  spec: FilterSpec,
  lookup: Lookup,
  rawValues: string[],
  form: FilterForm = {},
): SQL | undefined {
  const param = lookup === "exact" ? name : `${name}__${lookup}`;
  // past it a LIKE pattern is more than SQLite takes (a 500): refused for every kind and lookup
  if (rawValues.some(pastTextLimit)) throw new ValidationError({ [param]: [TEXT_LIMIT_MESSAGE] });
  if (spec.build) return spec.build(lookup, rawValues);
  if (lookup === "empty") {
    const b = parseBool(rawValues[0] ?? "");
    if (b === null) throw new ValidationError({ [param]: ["Enter true or false."] });
    const isEmpty =
      spec.kind === "string"
        ? sql`(${spec.expr} IS NULL OR ${spec.expr} = '')`
        : sql`${spec.expr} IS NULL`;
    return b ? isEmpty : not(isEmpty);
  }
  // Datetimes compare as instants: both sides in one form (see toInstant, instantSql).
  if (spec.kind === "datetime") spec = { ...spec, expr: instantSql(spec.expr) };
  const values = rawValues.map((raw) => {
    const v = convert(spec.kind, raw);
    if (v === null) throw new ValidationError({ [param]: [convertMessage(spec.kind, raw)] });
    return v;
  });
  // several values to equal are one JSON list: one bound value and one statement text however
  // many (D1 takes 100 bound values a statement; decision 0188); one value stays `= ?`
  if (values.length > 1 && (lookup === "exact" || lookup === "n") && !form.inDdl) {
    const among = inJsonList(spec.expr, values);
    // `x__n=a&x__n=b` excludes both; NULLs are never equal to a value, so they stay.
    return lookup === "exact" ? among : sql`(${spec.expr} IS NULL OR NOT (${among}))`;
  }
  const positive = NEGATED[lookup] ?? lookup;
  if (values.length > 1 && PATTERN_LOOKUPS.has(positive) && !form.inDdl) {
    // several patterns are one JSON list too (as `__n` above): the same text for 2 values and 200
    const among = matchesAny(spec.expr, positive, values.map(String));
    return positive === lookup ? among : sql`(${spec.expr} IS NULL OR NOT (${among}))`;
  }
  if (positive !== lookup) {
    // `x__nic=a&x__nic=b` excludes both; NULLs stay, as they do for `__n`.
    return allOf(
      values.map((v) => sql`(${spec.expr} IS NULL OR NOT (${condition(spec, positive, v)}))`),
    );
  }
  // balanced: 100 values chained would be deeper than D1 parses (decision 0125)
  return anyOf(values.map((v) => condition(spec, lookup, v)));
}

function splitList(values: string[]): string[] {
  return values
    .flatMap((v) => v.split(","))
    .map((s) => s.trim())
    .filter(Boolean);
}

export interface ListSpec {
  filters: Record<string, FilterSpec>;
  orderings: Record<string, SQLWrapper>;
  defaultOrdering: string[];
  search: SearchTerm[];
  idExpr: SQLWrapper;
  /**
   * Optional: for a `q`, a condition that narrows the rows first (an index's candidate ids), or
   * undefined. ANDed with the search terms, so it must hold for every row they match.
   */
  searchIndex?: (q: string) => SQL | undefined;
  /**
   * Optional: for a `q` that is the list's only condition, its count and pages from an index
   * (`term` is the `q` condition, for rows the index does not hold yet), or undefined.
   */
  searchFirstPage?: (q: string, term: SQL) => IndexedSearch | undefined;
  /**
   * Optional: a list whose own columns copy other objects' values (the change log's `user_name`),
   * its filters, orderings and search on them held to the caller's view of those objects (0191).
   */
  heldTo?: {
    labels: string[];
    within: (list: ListSpec, views: Array<SQL | undefined>) => ListSpec;
  };
  /**
   * Optional: whether a parameter that names none of `filters` is still a filter's, one NetBox
   * filters this list by that Host does not model: answered 400, since ignoring it, as
   * django-filter does, answers every row (decision 0203; `models/netbox-filters.ts`). A string
   * is the refusal's own message (custom object lists, decision 0206).
   */
  refuses?: (param: string) => boolean | string;
}

/**
 * A `q`'s conditions for one list spec: the search terms ORed (`sql\`0\`` when none can match),
 * the index's narrowing, and its first pages when `q` is the only condition (made on first use).
 */
interface SearchConditions {
  needle: string;
  term: SQL;
  matches: boolean;
  narrowed: SQL | undefined;
  firstPage?: IndexedSearch | null;
}

/**
 * Built once per spec and needle and shared (decision 0132): they depend on nothing else (a
 * changed schema is another spec), and SQL is not changed by rendering it. A search asked again
 * skips ~20 SQL objects and the index's match expression per request.
 */
const searches = new WeakMap<ListSpec, Map<string, SearchConditions>>();
/** Needles kept per spec, least recently used dropped first. */
export const MAX_KEPT_NEEDLES = 64;

function searchConditions(spec: ListSpec, q: string): SearchConditions {
  let byNeedle = searches.get(spec);
  if (!byNeedle) searches.set(spec, (byNeedle = new Map()));
  const kept = byNeedle.get(q);
  if (kept) {
    byNeedle.delete(q); // re-inserted as the most recently used
    byNeedle.set(q, kept);
    return kept;
  }
  const pattern = `%${likeEscape(q)}%`;
  const terms = spec.search
    .map((e) => ("match" in e ? e.match(q) : sql`${e} LIKE ${pattern} ESCAPE '\\'`))
    .filter((c): c is SQL => !!c);
  const made: SearchConditions = {
    needle: q,
    term: terms.length ? anyOf(terms) : sql`0`,
    matches: terms.length > 0,
    narrowed: spec.searchIndex?.(q),
  };
  byNeedle.set(q, made);
  if (byNeedle.size > MAX_KEPT_NEEDLES) byNeedle.delete(byNeedle.keys().next().value!);
  return made;
}

function firstPageOf(spec: ListSpec, search: SearchConditions): IndexedSearch | undefined {
  if (search.firstPage === undefined)
    search.firstPage = spec.searchFirstPage?.(search.needle, search.term) ?? null;
  return search.firstPage ?? undefined;
}

/** Parses a list request's query string; invalid values answer 400 keyed by parameter. */
export function parseListQuery(url: URL, spec: ListSpec): ListQuery {
  const params = url.searchParams;
  refuseControlCharacters(params);
  const conditions: SQL[] = [];
  const checks: FilterCheck[] = [];
  const seen = new Set<string>();
  let filterParams = 0;
  for (const key of params.keys()) {
    if (seen.has(key) || RESERVED.has(key)) continue;
    seen.add(key);
    let name = key;
    let lookup: Lookup = "exact";
    const sep = key.lastIndexOf("__");
    if (sep > 0 && ALL_LOOKUPS.has(key.slice(sep + 2))) {
      name = key.slice(0, sep);
      lookup = key.slice(sep + 2) as Lookup;
    }
    const filter = own(spec.filters, name);
    if (!filter) {
      const refusal = spec.refuses?.(key);
      if (refusal)
        throw new ValidationError({
          [key]: [typeof refusal === "string" ? refusal : UNSUPPORTED_FILTER_MESSAGE],
        });
      continue; // other unknown parameters are ignored, as django-filter does
    }
    if (++filterParams > MAX_FILTER_PARAMS) {
      throw new ValidationError({
        non_field_errors: [`A list request takes at most ${MAX_FILTER_PARAMS} filter parameters.`],
      });
    }
    const allowed = filter.lookups ?? DEFAULT_LOOKUPS[filter.kind];
    if (lookup === "exact" && filter.bareLookup && sep < 0) lookup = filter.bareLookup;
    if (!allowed.includes(lookup))
      throw new ValidationError({ [key]: [`Lookup "${lookup}" is not supported for ${name}.`] });
    const values = params.getAll(key).filter((v) => v !== "");
    if (!values.length) continue;
    if (values.length > MAX_FILTER_VALUES) {
      throw new ValidationError({
        [key]: [`A filter takes at most ${MAX_FILTER_VALUES} values (got ${values.length}).`],
      });
    }
    if (values.some(pastTextLimit)) throw new ValidationError({ [key]: [TEXT_LIMIT_MESSAGE] });
    const cond =
      filter.conjoined && lookup === "exact" && values.length > 1
        ? filter.conjoined(values)
        : buildFilter(name, filter, lookup, values);
    if (cond) conditions.push(cond);
    if (filter.known) checks.push(filter.known(key, values));
  }
  const q = params.get("q")?.trim();
  if (q && pastTextLimit(q)) throw new ValidationError({ q: [TEXT_LIMIT_MESSAGE] });
  const search = q ? searchConditions(spec, q) : undefined;
  // `q` is the list's only condition: its first pages may come from an index
  const qAlone = !!search?.matches && !conditions.length;
  if (search) conditions.push(search.term);
  if (search?.narrowed) conditions.push(search.narrowed);

  const ordering = params.has("ordering")
    ? splitList(params.getAll("ordering"))
    : spec.defaultOrdering;
  if (ordering.length > MAX_ORDERING_TERMS)
    throw new ValidationError({ ordering: [`Order by at most ${MAX_ORDERING_TERMS} fields.`] });
  const orderBy: SQL[] = [];
  let hasId = false;
  for (const term of ordering) {
    const field = term.replace(/^-/, "");
    const expr = own(spec.orderings, field);
    if (!expr) throw new ValidationError({ ordering: [`Cannot order by "${field}".`] });
    if (field === "id") hasId = true;
    orderBy.push(term.startsWith("-") ? desc(expr as any) : asc(expr as any));
  }
  if (!hasId) orderBy.push(asc(spec.idExpr as any)); // stable pages
  const only =
    ordering.length === 1 && own(spec.orderings, ordering[0]!.replace(/^-/, "")) === spec.idExpr
      ? ordering[0]!
      : null;
  const idOrder =
    only === null ? undefined : only.startsWith("-") ? ("desc" as const) : ("asc" as const);

  const fromIndex = search && qAlone && idOrder ? firstPageOf(spec, search) : undefined;
  return {
    where: conditions.length ? allOf(conditions) : undefined,
    ...(checks.length ? { checks } : {}),
    orderBy,
    idOrder,
    ...(fromIndex ? { fromIndex } : {}),
    ...parsePaging(params),
    ...parseStart(params),
    projection: parseProjection(params),
  };
}

/** 400 when any query parameter (name or value) holds a control character (decision 0068). */
function refuseControlCharacters(params: URLSearchParams): void {
  for (const [key, value] of params) {
    if (hasControlCharacter(value))
      throw new ValidationError({
        [hasControlCharacter(key) ? "non_field_errors" : key]: [CONTROL_CHARACTER_MESSAGE],
      });
    if (hasControlCharacter(key))
      throw new ValidationError({ non_field_errors: [CONTROL_CHARACTER_MESSAGE] });
  }
}

/** `?start=<id>`: cursor pagination, exclusive with `offset` and `ordering` (as NetBox 4.6). */
function parseStart(params: URLSearchParams): { start?: number } {
  const raw = params.get("start");
  if (raw === null) return {};
  if (!/^\d{1,15}$/.test(raw.trim()))
    throw new ValidationError({
      start: ["Invalid 'start' parameter: must be a non-negative integer."],
    });
  if (params.has("offset"))
    throw new ValidationError({ start: ["'start' and 'offset' are mutually exclusive."] });
  if (params.has("ordering"))
    throw new ValidationError({
      ordering: ["Ordering cannot be specified in conjunction with cursor-based pagination."],
    });
  return { start: Number(raw.trim()) };
}

export function parsePaging(params: URLSearchParams): { limit: number; offset: number } {
  const intParam = (name: string, fallback: number) => {
    const raw = params.get(name);
    if (raw === null || raw.trim() === "") return fallback;
    const s = raw.trim();
    if (!/^\d+$/.test(s))
      throw new ValidationError({ [name]: ["A valid non-negative integer is required."] });
    // Checked on the digits: a number this long would already have lost precision.
    const value = s.replace(/^0+(?=\d)/, "");
    if (value.length > String(MAX_PAGING_VALUE).length || Number(value) > MAX_PAGING_VALUE) {
      throw new ValidationError({
        [name]: [`Ensure this value is less than or equal to ${MAX_PAGING_VALUE}.`],
      });
    }
    return Number(value);
  };
  let limit = intParam("limit", DEFAULT_LIMIT);
  if (limit === 0 || limit > MAX_LIMIT) limit = MAX_LIMIT;
  return { limit, offset: intParam("offset", 0) };
}

/** No projection: what `parseProjection` makes of no parameters. */
const NO_PROJECTION: Projection = Object.freeze({ brief: false, fields: null, omit: [] });

/** The projection a request's URL asks for; without a query string, none (no URL parsed). */
export function projectionOfUrl(url: string): Projection {
  return url.includes("?") ? parseProjection(new URL(url).searchParams) : NO_PROJECTION;
}

function parseProjection(params: URLSearchParams): Projection {
  const brief = params.has("brief") && parseBool(params.get("brief") || "true") !== false;
  const fields = params.has("fields") ? projectionNames(params, "fields") : null;
  return {
    brief,
    fields: fields?.length ? fields : null,
    omit: projectionNames(params, "omit"),
  };
}

/** The names of `?fields=` or `?omit=`, at most `MAX_PROJECTION_NAMES` of them (decision 0190). */
function projectionNames(params: URLSearchParams, name: "fields" | "omit"): string[] {
  const names = splitList(params.getAll(name));
  if (names.length > MAX_PROJECTION_NAMES)
    throw new ValidationError({ [name]: [`Name at most ${MAX_PROJECTION_NAMES} fields.`] });
  return names;
}

/** Applies `brief`, `fields` and `omit` to serialised records. */
export function project(
  records: Record<string, unknown>[],
  projection: Projection,
  briefFields: string[],
): Record<string, unknown>[] {
  const keys: string[] | null = projection.fields ?? (projection.brief ? briefFields : null);
  if (!keys && !projection.omit.length) return records;
  // each name looked up once per row, a repeated one once
  const omit = new Set(projection.omit);
  const asked = keys && [...new Set(keys)].filter((k) => !omit.has(k));
  return records.map((r) => {
    const out: Record<string, unknown> = {};
    if (asked) {
      for (const k of asked) if (Object.hasOwn(r, k)) out[k] = r[k];
    } else for (const k of Object.keys(r)) if (!omit.has(k)) out[k] = r[k];
    return out;
  });
}

/** The absolute next/previous page URLs, keeping every other parameter. */
export function pageLinks(
  url: URL,
  count: number,
  limit: number,
  offset: number,
): { next: string | null; previous: string | null } {
  const at = (o: number) => {
    const u = new URL(url);
    u.searchParams.set("limit", String(limit));
    if (o <= 0) u.searchParams.delete("offset");
    else u.searchParams.set("offset", String(o));
    return u.toString();
  };
  return {
    next: offset + limit < count ? at(offset + limit) : null,
    previous: offset > 0 ? at(Math.max(0, offset - limit)) : null,
  };
}
