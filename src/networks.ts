/**
 * IP addresses and CIDR ranges in every spelling the WHATWG URL parser accepts: the one parser
 * behind `WEBHOOK_ALLOWED_NETWORKS` (read by `config.ts`) and the webhook target rules
 * (`core/events/targets.ts`). A leaf module: it imports nothing of the app.
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
