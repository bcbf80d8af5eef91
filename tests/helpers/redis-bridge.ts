/** Starts a redis-server plus the Upstash-compatible REST bridge in front of it, for tests. */
import { startRedisBridge, type RedisBridge } from "../../tools/redis-bridge";
import { startRedisServer, type RedisServerHandle } from "./redis-server";

/** A redis-server and a bridge speaking the Upstash REST protocol to it. */
export interface RedisStack {
  redis: RedisServerHandle;
  bridge: { url: string; token: string; port: number };
  /** Stops the bridge, then the server. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Starts both halves with a random token; cleans up the server when the bridge fails to start.
 * @example const stack = await startRedisStack(); new Redis({ url: stack.bridge.url, token: stack.bridge.token });
 */
export async function startRedisStack(): Promise<RedisStack> {
  const redis = await startRedisServer();
  const token = `test-${crypto.randomUUID()}`;
  let bridge: RedisBridge;
  try {
    bridge = await startRedisBridge({ redisUrl: redis.url, token });
  } catch (e) {
    await redis.stop();
    throw e;
  }
  let stopped: Promise<void> | null = null;
  return {
    redis,
    bridge: { url: bridge.url, token, port: bridge.port },
    stop() {
      stopped ??= (async () => {
        try {
          await bridge.stop();
        } finally {
          await redis.stop();
        }
      })();
      return stopped;
    },
  };
}
