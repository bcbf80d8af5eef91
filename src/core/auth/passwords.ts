/** Password hashing with PBKDF2-SHA256 from WebCrypto, so it works on Bun and Workers alike. */
const ITERATIONS = 100_000;
const enc = new TextEncoder();
const hex = (b: ArrayBuffer | Uint8Array) =>
  [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");

async function derive(
  password: string,
  salt: Uint8Array<ArrayBuffer>,
  iterations: number,
): Promise<string> {
  const key = await crypto.subtle.importKey("raw", enc.encode(password), "PBKDF2", false, [
    "deriveBits",
  ]);
  return hex(
    await crypto.subtle.deriveBits({ name: "PBKDF2", hash: "SHA-256", salt, iterations }, key, 256),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.getRandomValues(new Uint8Array(16));
  return `pbkdf2_sha256$${ITERATIONS}$${hex(salt)}$${await derive(password, salt, ITERATIONS)}`;
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  if (!stored) return false;
  const [algo, iter, saltHex, hash] = stored.split("$");
  if (algo !== "pbkdf2_sha256" || !iter || !saltHex || !hash) return false;
  const salt = Uint8Array.from(
    saltHex.match(/../g)!.map((h) => parseInt(h, 16)),
  ) as Uint8Array<ArrayBuffer>;
  const candidate = await derive(password, salt, Number(iter));
  let diff = candidate.length ^ hash.length;
  for (let i = 0; i < Math.min(candidate.length, hash.length); i++)
    diff |= candidate.charCodeAt(i) ^ hash.charCodeAt(i);
  return diff === 0;
}
