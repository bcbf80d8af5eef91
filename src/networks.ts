/**
 * IP addresses and CIDR ranges in every spelling the WHATWG URL parser accepts: the one parser
 * behind `WEBHOOK_ALLOWED_NETWORKS` (read by `config.ts`) and the webhook target rules
 * (`core/events/targets.ts`); and NetBox's strict forms with the numbers prefixes and IP
 * addresses store for the network filters (`core/rest/network-filters.ts`). A leaf module: it
 * imports nothing of the app.
 */

/** An address (4 or 16 bytes) with a prefix length: one CIDR range. */
export interface Network {
  bytes: Uint8Array;
  prefix: number;
}

const IPV4_RE = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function parseIpv4(text: string): Uint8Array | null {
  const m = IPV4_RE.exec(text);
  if (!m) return null;
  const parts = m.slice(1).map(Number);
  return parts.every((p) => p <= 255) ? Uint8Array.from(parts) : null;
}

/** Expanded IPv6 (as the URL parser serialises it: hex groups, at most one `::`). */
function parseIpv6(text: string): Uint8Array | null {
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const groups = (s: string) => (s ? s.split(":") : []);
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
  const all = [...head, ...Array<string>(missing).fill("0"), ...tail];
  const out = new Uint8Array(16);
  for (const [i, g] of all.entries()) {
    if (!/^[0-9a-f]{1,4}$/i.test(g)) return null;
    const v = Number.parseInt(g, 16);
    out[i * 2] = v >> 8;
    out[i * 2 + 1] = v & 0xff;
  }
  return out;
}

/**
 * The bytes of an IP address in any spelling the URL parser accepts (decimal, hex, octal,
 * short IPv4; IPv6 with or without brackets); null for a name.
 */
export function parseAddress(text: string): Uint8Array | null {
  const bare = text.replace(/^\[(.*)\]$/, "$1");
  let host: string;
  try {
    host = new URL(bare.includes(":") ? `http://[${bare}]/` : `http://${bare}/`).hostname;
  } catch {
    return null;
  }
  return host.startsWith("[") ? parseIpv6(host.slice(1, -1)) : parseIpv4(host);
}

/** `addr` or `addr/prefix`; throws with a message naming the entry. */
export function parseNetwork(entry: string): Network {
  const [addr, prefixText, extra] = entry.trim().split("/");
  const bytes = parseAddress(addr ?? "");
  const max = bytes ? bytes.length * 8 : 0;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (!bytes || extra !== undefined || !/^\d{1,3}$/.test(prefixText ?? "0") || prefix > max)
    throw new Error(`"${entry.trim()}" is not an IP address or CIDR range`);
  return { bytes, prefix };
}

/** `WEBHOOK_ALLOWED_NETWORKS`: comma-separated addresses or CIDR ranges. */
export function parseNetworks(raw: string): Network[] {
  return raw
    .split(",")
    .filter((s) => s.trim())
    .map(parseNetwork);
}

export function contains(net: Network, bytes: Uint8Array): boolean {
  if (net.bytes.length !== bytes.length) return false;
  let bits = net.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((net.bytes[i]! & mask) !== (bytes[i]! & mask)) return false;
  }
  return true;
}

/**
 * An address or CIDR range as NetBox's inet fields take it (netaddr's strict forms): dotted-quad
 * IPv4, or IPv6 in hex groups with at most one `::` and an optional dotted-quad tail; no other
 * spellings. Without `/len` the mask is the full width. Null when it is not one.
 */
export interface Cidr {
  family: 4 | 6;
  bytes: Uint8Array;
  mask: number;
}

const STRICT_IPV4_RE = /^\d{1,3}(\.\d{1,3}){3}$/;
const MAX_CIDR_TEXT = 64;

function strictIpv4(text: string): Uint8Array | null {
  if (!STRICT_IPV4_RE.test(text)) return null;
  const parts = text.split(".").map(Number);
  return parts.every((p) => p <= 255) ? Uint8Array.from(parts) : null;
}

function strictIpv6(text: string): Uint8Array | null {
  if (!/^[0-9a-fA-F:.]+$/.test(text) || !text.includes(":")) return null;
  const tail = /(?:^|:)(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text);
  let head = text;
  if (tail) {
    const v4 = strictIpv4(tail[1]!);
    if (!v4) return null;
    const hi = ((v4[0]! << 8) | v4[1]!).toString(16);
    const lo = ((v4[2]! << 8) | v4[3]!).toString(16);
    head = `${text.slice(0, text.length - tail[1]!.length)}${hi}:${lo}`;
  }
  return parseIpv6(head);
}

export function parseCidr(text: string): Cidr | null {
  const s = text.trim();
  if (!s || s.length > MAX_CIDR_TEXT) return null;
  const [addr = "", maskText, extra] = s.split("/");
  if (extra !== undefined) return null;
  const bytes = strictIpv4(addr) ?? strictIpv6(addr);
  if (!bytes) return null;
  const width = bytes.length * 8;
  if (maskText !== undefined && !/^\d{1,3}$/.test(maskText)) return null;
  const mask = maskText === undefined ? width : Number(maskText);
  if (mask > width) return null;
  return { family: bytes.length === 4 ? 4 : 6, bytes, mask };
}

/** Lower-case hex of `bytes`: 8 digits for IPv4, 32 for IPv6, so text order is numeric order. */
export const hexOf = (bytes: Uint8Array): string =>
  Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

/** The first and last address of a CIDR range (host bits cleared, then set), in `hexOf` form. */
export function rangeOf(net: Cidr): { first: string; last: string } {
  const first = new Uint8Array(net.bytes.length);
  const last = new Uint8Array(net.bytes.length);
  for (let i = 0; i < net.bytes.length; i++) {
    const bits = Math.max(0, Math.min(8, net.mask - i * 8));
    const keep = bits === 0 ? 0 : (0xff << (8 - bits)) & 0xff;
    first[i] = net.bytes[i]! & keep;
    last[i] = first[i]! | (~keep & 0xff);
  }
  return { first: hexOf(first), last: hexOf(last) };
}

/** An address as text in the form PostgreSQL's inet types answer (and NetBox with them). */
function addressText(bytes: Uint8Array): string {
  if (bytes.length === 4) return bytes.join(".");
  const groups = Array.from({ length: 8 }, (_, i) => (bytes[2 * i]! << 8) | bytes[2 * i + 1]!);
  // an IPv4-mapped address keeps its dotted tail (RFC 5952 section 5), and so does an
  // IPv4-compatible one past ::ffff (six zero groups first), as PostgreSQL and netaddr write it
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff)
    return `::ffff:${bytes.slice(12).join(".")}`;
  if (groups.slice(0, 6).every((g) => g === 0) && groups[6] !== 0)
    return `::${bytes.slice(12).join(".")}`;
  // the longest run of two or more zero groups (the first of equals) becomes '::' (RFC 5952)
  let [best, bestLength] = [-1, 1];
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) [best, bestLength] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = (gs: number[]) => gs.map((g) => g.toString(16)).join(":");
  if (best < 0) return hex(groups);
  return `${hex(groups.slice(0, best))}::${hex(groups.slice(best + bestLength))}`;
}

/**
 * A prefix's text as NetBox stores it: its network (`prefix.cidr`, host bits cleared, as
 * `Prefix.save()` does), spelled as PostgreSQL answers a cidr. Text that is no prefix as given.
 */
export function networkText(text: unknown): unknown {
  const net = typeof text === "string" && text.includes("/") ? parseCidr(text) : null;
  if (!net) return text;
  const first = new Uint8Array(net.bytes.length);
  for (let i = 0; i < first.length; i++) {
    const bits = Math.max(0, Math.min(8, net.mask - i * 8));
    first[i] = net.bytes[i]! & (bits === 0 ? 0 : (0xff << (8 - bits)) & 0xff);
  }
  return `${addressText(first)}/${net.mask}`;
}

/**
 * An IP address's text as NetBox stores it: its host and mask as given, spelled as PostgreSQL
 * answers an inet (IPv6 in lower case, zero runs as `::`). Text that is no address as given.
 */
export function inetText(text: unknown): unknown {
  const net = typeof text === "string" && text.includes("/") ? parseCidr(text) : null;
  return net ? `${addressText(net.bytes)}/${net.mask}` : text;
}

/**
 * The numbers a prefix row stores beside its text (keys of the `prefixes` table): family 4 or 6,
 * mask length, first and last address; family 0 and nulls when the text is no prefix.
 */
export function prefixNumbers(text: unknown): Record<string, unknown> {
  const net = typeof text === "string" && text.includes("/") ? parseCidr(text) : null;
  if (!net) return { netFamily: 0, netMask: null, netFirst: null, netLast: null };
  const { first, last } = rangeOf(net);
  return { netFamily: net.family, netMask: net.mask, netFirst: first, netLast: last };
}

/** The numbers an IP address row stores: family, mask length and the host address as hex. */
export function addressNumbers(text: unknown): Record<string, unknown> {
  const net = typeof text === "string" && text.includes("/") ? parseCidr(text) : null;
  if (!net) return { netFamily: 0, netMask: null, netHost: null };
  return { netFamily: net.family, netMask: net.mask, netHost: hexOf(net.bytes) };
}
