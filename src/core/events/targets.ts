/**
 * Where webhooks may deliver: never to loopback, link-local, private, unspecified or metadata
 * addresses unless `WEBHOOK_ALLOWED_NETWORKS` lets them through (decision 0067). Hosts are
 * normalised by the WHATWG URL parser first, so `0x7f000001`, `2130706433`, `127.1` and
 * `0177.0.0.1` all arrive here as `127.0.0.1`, and IPv6 in its one compressed form.
 */
import { contains, type Network, parseAddress, parseNetwork } from "../../networks";

export type { Network } from "../../networks";

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
