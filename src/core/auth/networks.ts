/**
 * IPv4/IPv6 networks in CIDR notation, for a token's `allowed_ips`: parse a network, tell whether
 * a client address lies inside it. No dependency; addresses become byte arrays.
 */

/** A parsed network: its address bytes (4 or 16) and prefix length. */
interface Network {
  bytes: Uint8Array;
  prefix: number;
}

function parseV4(text: string): Uint8Array | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  const bytes = parts.map((p) => (/^\d{1,3}$/.test(p) ? Number(p) : 256));
  return bytes.every((b) => b <= 255) ? Uint8Array.from(bytes) : null;
}

function parseV6(text: string): Uint8Array | null {
  if (text.length > 45 || (text.match(/::/g) ?? []).length > 1) return null;
  let tail: number[] = [];
  let body = text;
  // an IPv4 tail (::ffff:192.0.2.1) counts as two groups
  const v4 = /(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text);
  if (v4) {
    const b = parseV4(v4[1]!);
    if (!b) return null;
    tail = [(b[0]! << 8) | b[1]!, (b[2]! << 8) | b[3]!];
    body = text.slice(0, -v4[1]!.length);
    if (body.endsWith(":") && !body.endsWith("::")) body = body.slice(0, -1);
  }
  const group = (g: string) => (/^[0-9a-fA-F]{1,4}$/.test(g) ? Number.parseInt(g, 16) : -1);
  const [head, rest] = body.includes("::") ? body.split("::") : [body, null];
  const left = head ? head.split(":").map(group) : [];
  const right = rest ? rest.split(":").map(group) : [];
  const missing = 8 - left.length - right.length - tail.length;
  if (rest === null ? missing !== 0 : missing < 1) return null;
  const groups = [...left, ...Array(rest === null ? 0 : missing).fill(0), ...right, ...tail];
  if (groups.some((g) => g < 0)) return null;
  return Uint8Array.from(groups.flatMap((g) => [g >> 8, g & 0xff]));
}

/** An address's bytes; an IPv4-mapped IPv6 address reads as its IPv4 address. */
export function parseAddress(text: string): Uint8Array | null {
  const plain = text.trim().replace(/^\[|\]$/g, "");
  const bytes = plain.includes(":") ? parseV6(plain) : parseV4(plain);
  if (bytes?.length === 16 && bytes.slice(0, 10).every((b) => b === 0))
    if (bytes[10] === 0xff && bytes[11] === 0xff) return bytes.slice(12);
  return bytes;
}

/** `10.0.0.0/8`, `2001:db8::/32` or a bare address (a host network); null when malformed. */
export function parseNetwork(text: string): Network | null {
  if (typeof text !== "string" || text.length > 50) return null;
  const [addr, len, extra] = text.trim().split("/");
  if (extra !== undefined || !addr) return null;
  const bytes = parseAddress(addr);
  if (!bytes) return null;
  const max = bytes.length * 8;
  if (len !== undefined && !/^\d{1,3}$/.test(len)) return null;
  const prefix = len === undefined ? max : Number(len);
  return prefix <= max ? { bytes, prefix } : null;
}

/** True when `address` lies in `network` (same family, first `prefix` bits equal). */
export function networkContains(network: Network, address: Uint8Array): boolean {
  if (network.bytes.length !== address.length) return false;
  for (let bit = 0; bit < network.prefix; bit += 8) {
    const take = Math.min(8, network.prefix - bit);
    const mask = (0xff << (8 - take)) & 0xff;
    if ((network.bytes[bit / 8]! & mask) !== (address[bit / 8]! & mask)) return false;
  }
  return true;
}
