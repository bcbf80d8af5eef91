/** One interface for every cache backend (memory | database | redis | kv). Values are JSON. */
export interface Cache {
  readonly backend: "memory" | "database" | "redis" | "kv";
  get<T = unknown>(key: string): Promise<T | null>;
  /** `ttlSeconds` omitted = no expiry (backends may still evict). */
  set(key: string, value: unknown, ttlSeconds?: number): Promise<void>;
  delete(key: string): Promise<void>;
}
