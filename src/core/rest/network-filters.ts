/**
 * NetBox's network filters on prefixes (`prefix`, `within`, `within_include`, `contains`) and IP
 * addresses (`address`, `parent`), and `family` / `mask_length` on both: SQL over the numbers each
 * row stores beside its text (`_family`, `_mask`, `_first`/`_last` or `_host`, kept by every
 * write), so they page and count in the database on every backend.
 */
import { sql, type SQL, type SQLWrapper } from "drizzle-orm";
import { anyOf, inJsonList } from "../../db/d1-limits";
import { type Cidr, hexOf, parseCidr, rangeOf } from "../../networks";
import { ValidationError } from "../errors";
import { buildFilter, DEFAULT_LOOKUPS, type FilterSpec, oneValue } from "./query";

const PREFIX_MESSAGE = "Enter a valid IPv4 or IPv6 prefix (CIDR notation).";
const PREFIX_OR_ADDRESS_MESSAGE = "Enter a valid IPv4 or IPv6 prefix or address.";
const ADDRESS_MESSAGE = "Enter a valid IPv4 or IPv6 address, with or without a mask.";

function cidrOf(param: string, text: string, message: string): Cidr {
  const net = parseCidr(text);
  if (!net) throw new ValidationError({ [param]: [message] });
  return net;
}

interface PrefixColumns {
  family: SQLWrapper;
  mask: SQLWrapper;
  first: SQLWrapper;
  last: SQLWrapper;
}

interface AddressColumns {
  family: SQLWrapper;
  mask: SQLWrapper;
  host: SQLWrapper;
}

/** A filter that takes one lookup (its bare name) and builds its own condition. */
const exactOnly = (
  kind: FilterSpec["kind"],
  expr: SQLWrapper,
  description: string,
  build: FilterSpec["build"],
  oneValue = true,
): FilterSpec => ({
  kind,
  expr,
  lookups: ["exact"],
  build,
  description,
  ...(oneValue ? { oneValue: ["exact"] } : {}),
});

/** `family=4|6`: one value, as NetBox's NumberFilter; anything else is a 400. */
function familyFilter(family: SQLWrapper): FilterSpec {
  return exactOnly("number", family, "the address family, 4 or 6", (_lookup, values) => {
    const v = oneValue("family", values).trim();
    if (v !== "4" && v !== "6") throw new ValidationError({ family: ["Enter 4 or 6."] });
    return sql`${family} = ${Number(v)}`;
  });
}

/** `mask_length` (any of several), `mask_length__gte`, `mask_length__lte` (one value each). */
function maskLengthFilter(mask: SQLWrapper): FilterSpec {
  return {
    kind: "number",
    expr: mask,
    lookups: ["exact", "gte", "lte"],
    description: "the mask length (prefix length), 0 to 128",
    oneValue: ["gte", "lte"],
    build: (lookup, values) => {
      const param = lookup === "exact" ? "mask_length" : `mask_length__${lookup}`;
      if (lookup !== "exact") oneValue(param, values);
      const lengths = values.map((v) => {
        const s = v.trim();
        if (!/^\d{1,3}$/.test(s) || Number(s) > 128)
          throw new ValidationError({ [param]: ["Enter a mask length from 0 to 128."] });
        return Number(s);
      });
      if (lookup === "gte") return sql`${mask} >= ${lengths[0]}`;
      if (lookup === "lte") return sql`${mask} <= ${lengths[0]}`;
      // several ride as one JSON list (one bound value however many, decision 0188)
      return lengths.length === 1 ? sql`${mask} = ${lengths[0]}` : inJsonList(mask, lengths);
    },
  };
}

/** Prefixes inside `net` (`strict`: not `net` itself, as NetBox's `within`). */
function withinCondition(c: PrefixColumns, net: Cidr, strict: boolean): SQL {
  const { first, last } = rangeOf(net);
  const mask = strict ? sql`${c.mask} > ${net.mask}` : sql`${c.mask} >= ${net.mask}`;
  // an aligned block no wider than `net` whose first address is in `net` lies wholly inside it
  return sql`(${c.family} = ${net.family} AND ${mask} AND ${c.first} >= ${first} AND ${c.first} <= ${last})`;
}

/** Prefixes holding `text`: a prefix (itself included) or an address (a wider prefix only). */
function containsCondition(c: PrefixColumns, text: string): SQL {
  const net = cidrOf("contains", text, PREFIX_OR_ADDRESS_MESSAGE);
  const { first, last } = rangeOf(net);
  const mask = text.includes("/")
    ? sql`${c.mask} <= ${net.mask}`
    : sql`${c.mask} < ${net.bytes.length * 8}`;
  return sql`(${c.family} = ${net.family} AND ${mask} AND ${c.first} <= ${first} AND ${c.last} >= ${last})`;
}

/** A prefix list's network filters. */
export function prefixNetworkFilters(c: PrefixColumns): Record<string, FilterSpec> {
  const within = (name: string, strict: boolean, description: string) =>
    exactOnly("string", c.first, description, (_lookup, values) => {
      const net = cidrOf(name, oneValue(name, values), PREFIX_MESSAGE);
      return withinCondition(c, net, strict);
    });
  return {
    family: familyFilter(c.family),
    mask_length: maskLengthFilter(c.mask),
    within: within("within", true, "prefixes inside this prefix, not itself"),
    within_include: within("within_include", false, "prefixes inside this prefix or equal to it"),
    contains: exactOnly(
      "string",
      c.first,
      "prefixes that hold this prefix (itself included) or address",
      (_lookup, values) => containsCondition(c, oneValue("contains", values).trim()),
    ),
  };
}

/**
 * Prefixes `parent` takes at once (any of them): each binds three values, and a D1 statement
 * takes 100 in all (NetBox sets no bound).
 */
const MAX_PARENT_PREFIXES = 16;

/** An IP address list's network filters: `parent` takes several prefixes (any of them). */
export function addressNetworkFilters(c: AddressColumns): Record<string, FilterSpec> {
  return {
    family: familyFilter(c.family),
    mask_length: maskLengthFilter(c.mask),
    parent: exactOnly(
      "string",
      c.host,
      `addresses inside any of these prefixes (at most ${MAX_PARENT_PREFIXES})`,
      (_lookup, values) => {
        if (values.length > MAX_PARENT_PREFIXES)
          throw new ValidationError({ parent: [`Give at most ${MAX_PARENT_PREFIXES} prefixes.`] });
        return anyOf(
          values.map((text) => {
            const net = cidrOf("parent", text, PREFIX_MESSAGE);
            const { first, last } = rangeOf(net);
            return sql`(${c.family} = ${net.family} AND ${c.host} >= ${first} AND ${c.host} <= ${last})`;
          }),
        );
      },
      false,
    ),
  };
}

/** A network as `prefix=` / `address=` compare it: its address as hex, and its mask if it counts. */
interface NetworkKey {
  family: 4 | 6;
  hex: string;
  mask?: number;
}

const oneOf = (expr: SQLWrapper, values: readonly (string | number)[]): SQL =>
  values.length === 1 ? sql`${expr} = ${values[0]}` : inJsonList(expr, values);

/**
 * Rows whose network is one of `keys`: per family, the address among a list (the `(_family, hex)`
 * index), and where masks count, the mask or the `hex/mask` pair among another list. A few bound
 * values however many keys (D1 takes 100 a statement; decision 0188).
 */
function amongNetworks(
  c: { family: SQLWrapper; mask: SQLWrapper; hex: SQLWrapper },
  keys: NetworkKey[],
) {
  const unique = <T>(xs: T[]) => [...new Set(xs)];
  const terms: SQL[] = [];
  for (const family of [4, 6] as const) {
    const of = keys.filter((k) => k.family === family);
    const bare = unique(of.filter((k) => k.mask === undefined).map((k) => k.hex));
    if (bare.length) terms.push(sql`(${c.family} = ${family} AND ${oneOf(c.hex, bare)})`);
    const masked = of.filter((k) => k.mask !== undefined);
    if (!masked.length) continue;
    const pairs = unique(masked.map((k) => `${k.hex}/${k.mask}`));
    const masks =
      pairs.length === 1
        ? sql`${c.mask} = ${masked[0]!.mask}`
        : inJsonList(sql`(${c.hex} || '/' || ${c.mask})`, pairs);
    const hexes = unique(masked.map((k) => k.hex));
    terms.push(sql`(${c.family} = ${family} AND ${oneOf(c.hex, hexes)} AND ${masks})`);
  }
  return anyOf(terms);
}

/**
 * The text field's filter `name` with its bare form (and `__n`) comparing networks: `among` turns
 * the values into the condition (a bad one a 400); the other lookups still compare the text.
 */
function networkExact(
  name: string,
  text: FilterSpec,
  description: string,
  among: (param: string, values: string[]) => SQL,
): FilterSpec {
  return {
    ...text,
    lookups: text.lookups ?? DEFAULT_LOOKUPS[text.kind],
    description,
    build: (lookup, values) => {
      if (lookup === "exact") return among(name, values);
      // a row whose numbers are unknown (no network) is not equal, so it stays
      if (lookup === "n") return sql`NOT COALESCE(${among(`${name}__n`, values)}, 0)`;
      return buildFilter(name, text, lookup, values);
    },
  };
}

/**
 * `prefix=`: prefixes that are any of these networks, however written (NetBox compares its cidr
 * column). A value with host bits set is a 400: no stored prefix has them (NetBox clears them on
 * save, and its cidr column refuses such a value, a 500 there).
 */
export function prefixExactFilter(text: FilterSpec, c: PrefixColumns): FilterSpec {
  return networkExact(
    "prefix",
    text,
    "prefixes that are any of these networks, however written (host bits clear)",
    (param, values) => {
      const keys = values.map((v): NetworkKey => {
        const net = cidrOf(param, v, PREFIX_MESSAGE);
        const { first } = rangeOf(net);
        if (first !== hexOf(net.bytes))
          throw new ValidationError({
            [param]: [`${v.trim()} has host bits set: give the network it lies in.`],
          });
        return { family: net.family, hex: first, mask: net.mask };
      });
      return amongNetworks({ family: c.family, mask: c.mask, hex: c.first }, keys);
    },
  );
}

/**
 * `address=`: addresses whose host is any of these; one given with a mask matches that host with
 * that mask only (NetBox's `net_in`: `HOST(address)` without a mask, the inet with one).
 */
export function addressExactFilter(text: FilterSpec, c: AddressColumns): FilterSpec {
  return networkExact(
    "address",
    text,
    "addresses with any of these hosts (whatever their mask), or host and mask when given one",
    (param, values) => {
      const keys = values.map((v): NetworkKey => {
        const net = cidrOf(param, v, ADDRESS_MESSAGE);
        const hex = hexOf(net.bytes);
        return v.includes("/")
          ? { family: net.family, hex, mask: net.mask }
          : { family: net.family, hex };
      });
      return amongNetworks({ family: c.family, mask: c.mask, hex: c.host }, keys);
    },
  );
}
