/** Moved to src/services/redis-bridge.ts (the local Redis of npm start uses it; src never imports tools/). */
export * from "../src/services/redis-bridge";
