/**
 * Where webhooks may deliver: never to loopback, link-local, private, unspecified or metadata
 * addresses unless `WEBHOOK_ALLOWED_NETWORKS` lets them through (decision 0067). Hosts are
 * normalised by the WHATWG URL parser first, so `0x7f000001`, `2130706433`, `127.1` and
 * `0177.0.0.1` all arrive here as `127.0.0.1`, and IPv6 in its one compressed form.
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
function parseAddress(text: string): Uint8Array | null {
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
function parseNetwork(entry: string): Network {
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

function contains(net: Network, bytes: Uint8Array): boolean {
  if (net.bytes.length !== bytes.length) return false;
  let bits = net.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((net.bytes[i]! & mask) !== (bytes[i]! & mask)) return false;
  }
  return true;
}

/** Not public: loopback, private, link-local (metadata), CGNAT, reserved, multicast. */
const BLOCKED = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.88.99.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "224.0.0.0/4",
  "240.0.0.0/4",
  "::/96", // unspecified, loopback and the deprecated IPv4-compatible form
  "100::/64",
  "2001:db8::/32",
  "64:ff9b:1::/48",
  "fc00::/7",
  "fe80::/10",
  "fec0::/10",
  "ff00::/8",
].map(parseNetwork);

/** IPv6 ranges that carry an IPv4 address: checked as that IPv4 address. */
const EMBEDDED_V4: Array<[Network, number]> = [
  [parseNetwork("::ffff:0:0/96"), 12],
  [parseNetwork("64:ff9b::/96"), 12],
  [parseNetwork("2002::/16"), 2],
];

/** The address as checked: IPv4 inside IPv6 (mapped, NAT64, 6to4) is checked as IPv4. */
function unwrap(bytes: Uint8Array): Uint8Array {
  for (const [net, at] of EMBEDDED_V4) if (contains(net, bytes)) return bytes.slice(at, at + 4);
  return bytes;
}

/** True when the address may be delivered to. */
function addressAllowed(bytes: Uint8Array, allowed: readonly Network[]): boolean {
  const plain = unwrap(bytes);
  if (allowed.some((n) => contains(n, plain) || contains(n, bytes))) return true;
  return !BLOCKED.some((n) => contains(n, plain));
}

const REFUSED =
  "This address is not allowed: webhooks may not reach loopback, private, link-local or metadata addresses (see WEBHOOK_ALLOWED_NETWORKS).";

/** A name that is loopback by definition (RFC 6761). */
const isLocalName = (host: string) => host === "localhost" || host.endsWith(".localhost");

/**
 * Why a payload URL is refused as written (scheme, or a literal or local host outside the
 * allowed networks), or null. Names are resolved and checked again at delivery.
 */
export function refusedTarget(url: string, allowed: readonly Network[]): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return "Enter a valid URL.";
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return "Enter an http:// or https:// URL.";
  const host = u.hostname.replace(/\.+$/, "");
  const literal = parseAddress(host);
  if (literal) return addressAllowed(literal, allowed) ? null : REFUSED;
  if (isLocalName(host)) {
    const loopback = [parseAddress("127.0.0.1")!, parseAddress("::1")!];
    return loopback.some((a) => addressAllowed(a, allowed)) ? null : REFUSED;
  }
  return null;
}

/**
 * Resolves a payload URL's host where the runtime can (Bun) and checks every address; null
 * when delivery may go ahead. On Workers names cannot be resolved: the literal check stands.
 */
export async function refusedAtDelivery(
  url: string,
  allowed: readonly Network[],
): Promise<string | null> {
  const refused = refusedTarget(url, allowed);
  if (refused) return refused;
  const host = new URL(url).hostname.replace(/\.+$/, "");
  if (parseAddress(host) || typeof Bun === "undefined") return null;
  const found = await Bun.dns.lookup(host, {});
  const addresses = found.map((a) => parseAddress(a.address));
  if (!addresses.length || addresses.some((a) => !a || !addressAllowed(a, allowed))) return REFUSED;
  return null;
}
