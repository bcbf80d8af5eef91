/**
 * The small Redis surface the host uses, met by `@upstash/redis` (http/https URLs, Bun and
 * Workers) and by Bun's built-in client (redis:// on Bun). Strings in, strings out.
 */
export interface RedisClient {
  /** Where it points, with credentials removed: safe for logs and health output. */
  readonly describe: string;
  ping(): Promise<string>;
  get(key: string): Promise<string | null>;
  set(
    key: string,
    value: string,
    options?: { ex?: number; px?: number; nx?: boolean },
  ): Promise<string | null>;
  del(...keys: string[]): Promise<number>;
  incr(key: string): Promise<number>;
  expire(key: string, seconds: number): Promise<number>;
  lpush(key: string, ...values: string[]): Promise<number>;
  rpush(key: string, ...values: string[]): Promise<number>;
  lrange(key: string, start: number, stop: number): Promise<string[]>;
  lrem(key: string, count: number, value: string): Promise<number>;
  llen(key: string): Promise<number>;
  /** Keeps only the elements from `start` to `stop` (inclusive; negative counts from the end). */
  ltrim(key: string, start: number, stop: number): Promise<string>;
  /** Atomically pops the tail of `source` and pushes it on the head of `destination`. */
  lmove(
    source: string,
    destination: string,
    from: "left" | "right",
    to: "left" | "right",
  ): Promise<string | null>;
  zadd(key: string, score: number, member: string): Promise<number>;
  zrangebyscore(
    key: string,
    min: number | string,
    max: number | string,
    limit?: { offset: number; count: number },
  ): Promise<string[]>;
  zrem(key: string, ...members: string[]): Promise<number>;
  hset(key: string, fields: Record<string, string>): Promise<number>;
  hgetall(key: string): Promise<Record<string, string> | null>;
  close(): Promise<void>;
}
