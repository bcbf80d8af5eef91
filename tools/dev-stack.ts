/** Moved to src/services/local-redis.ts (src/server.ts uses it; src never imports tools/). */
export * from "../src/services/local-redis";
