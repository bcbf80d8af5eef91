/**
 * The defences of token provisioning (docs/decisions/0010-login.md): an unknown username costs
 * the same password hash as a wrong password, and failed logins are limited per username and
 * per client address, counted on the app's cache so every process sharing it shares the limit.
 */
import type { Context } from "hono";
import type { Config } from "../../config";
import type { Services } from "../context";
import type { Cache } from "../../services/cache/types";
import { ApiError } from "../errors";
import { hashPassword, verifyPassword } from "./passwords";
import { slotKey } from "../slots";

/** A counter of failures in a fixed window that ends at `until` (epoch ms). */
interface Counter {
  n: number;
  until: number;
}

interface ThrottleState {
  /** A hash of the current cost for a password nobody knows. */
  dummy: Promise<string> | null;
  /** Per cache key, the tail of this process's read-modify-write chain. */
  locks: Map<string, Promise<unknown>>;
}

/** The app's throttle state, in `Services.state`. */
const THROTTLE_STATE = slotKey<ThrottleState>("auth.login-throttle");
const stateOf = (services: Services): ThrottleState =>
  services.state.ensure(THROTTLE_STATE, () => ({ dummy: null, locks: new Map() }));

/**
 * Verifies `password` against `storedHash`, or, when there is no user or no usable password,
 * against a dummy hash of the same cost, so both answers take the same time.
 */
export async function verifyLogin(
  services: Services,
  password: string,
  storedHash: string | null | undefined,
): Promise<boolean> {
  const state = stateOf(services);
  const dummy = await (state.dummy ??= hashPassword(crypto.randomUUID()));
  const ok = await verifyPassword(password, storedHash || dummy);
  return ok && !!storedHash;
}

/**
 * The client address the per-address limit counts: with `TRUSTED_PROXY_HOPS` = n, the address
 * the outermost trusted proxy saw (the n-th X-Forwarded-For entry from the right; entries further
 * left are whatever the client wrote). Otherwise the connection's address (Bun), Cloudflare's
 * `CF-Connecting-IP` (Workers), or "unknown" when neither exists (in-process requests).
 */
export function clientAddress(
  c: Context,
  config: Pick<Config, "trustedProxyHops" | "runtime">,
): string {
  if (config.trustedProxyHops > 0) {
    const hops = (c.req.header("x-forwarded-for") ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    const address = hops[hops.length - config.trustedProxyHops];
    if (address) return address.slice(0, 100);
  }
  if (config.runtime === "workerd") {
    const cf = c.req.header("cf-connecting-ip")?.trim();
    if (cf) return cf.slice(0, 100);
  }
  try {
    const server = c.env as
      | { requestIP?: (req: Request) => { address?: string } | null }
      | undefined;
    const address =
      typeof server?.requestIP === "function" ? server.requestIP(c.req.raw)?.address : undefined;
    if (address) return address;
  } catch {
    // not served by Bun.serve (app.request, tests): no connection to ask
  }
  return "unknown";
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * One login attempt's view of the failure counters. `begin` refuses with 429 when either limit is
 * reached, else counts the attempt as a failure in advance (so parallel guesses cannot all pass
 * the check); `succeeded` takes that back and clears the username's failures.
 */
export class LoginThrottle {
  private constructor(
    private readonly cache: Cache,
    private readonly state: ThrottleState,
    private readonly limits: Config["login"],
    private readonly userKey: string,
    private readonly addressKey: string,
    private readonly now: () => number,
  ) {}

  static async for(
    services: Services,
    username: string,
    address: string,
    now: () => number = Date.now,
  ): Promise<LoginThrottle> {
    // Hashed: usernames are bounded in length (and not spelled out) in cache keys.
    const userKey = `login-failures:user:${await sha256(username)}`;
    const addressKey = `login-failures:address:${await sha256(address)}`;
    return new LoginThrottle(
      services.cache,
      stateOf(services),
      services.config.login,
      userKey,
      addressKey,
      now,
    );
  }

  /** Runs `fn` after every earlier update of `key` in this process (the cache has no atomic increment). */
  private async serial<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.state.locks.get(key) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.state.locks.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.state.locks.get(key) === tail) this.state.locks.delete(key);
    }
  }

  private async read(key: string): Promise<Counter | null> {
    const c = await this.cache.get<Counter>(key);
    return c && typeof c.n === "number" && typeof c.until === "number" && c.until > this.now()
      ? c
      : null;
  }

  private async write(key: string, counter: Counter): Promise<void> {
    const ttl = Math.ceil((counter.until - this.now()) / 1000);
    if (counter.n <= 0 || ttl <= 0) await this.cache.delete(key);
    else await this.cache.set(key, counter, ttl);
  }

  async begin(): Promise<void> {
    const { failuresPerUsername, failuresPerAddress, windowSeconds } = this.limits;
    await this.serial(this.addressKey, () =>
      this.serial(this.userKey, async () => {
        const [user, address] = await Promise.all([
          this.read(this.userKey),
          this.read(this.addressKey),
        ]);
        const blocked = [
          user && user.n >= failuresPerUsername ? user : null,
          address && address.n >= failuresPerAddress ? address : null,
        ].filter((x): x is Counter => !!x);
        if (blocked.length) {
          const retryAfter = Math.max(
            1,
            Math.ceil((Math.max(...blocked.map((b) => b.until)) - this.now()) / 1000),
          );
          throw new ApiError(
            429,
            {
              detail: `Too many failed login attempts; try again in ${retryAfter} seconds.`,
              error: "rate_limited",
            },
            { "Retry-After": String(retryAfter) },
          );
        }
        const until = this.now() + windowSeconds * 1000;
        await Promise.all([
          this.write(this.userKey, { n: (user?.n ?? 0) + 1, until: user?.until ?? until }),
          this.write(this.addressKey, { n: (address?.n ?? 0) + 1, until: address?.until ?? until }),
        ]);
      }),
    );
  }

  async succeeded(): Promise<void> {
    await this.serial(this.addressKey, async () => {
      const address = await this.read(this.addressKey);
      if (address) await this.write(this.addressKey, { n: address.n - 1, until: address.until });
    });
    await this.serial(this.userKey, () => this.cache.delete(this.userKey));
  }
}
