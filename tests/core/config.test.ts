import { describe, expect, test } from "bun:test";
import { loadConfig, redactUrl } from "../../src/config";

describe("configuration", () => {
  test("defaults make a working local setup", () => {
    const c = loadConfig({}, "bun");
    expect(c.database.url).toBe("file:data/host.db");
    expect(c.host).toBe("127.0.0.1");
    expect(c.port).toBe(8000);
    expect(c.plugins).toEqual(["custom_objects", "host_healthcheck_plugin"]);
    expect(c.cacheBackend).toBe("memory");
    expect(c.loginRequired).toBe(true);
    expect(c.maxBodyBytes).toBe(1048576);
  });
  test("cache backend follows Redis and runtime", () => {
    expect(loadConfig({ REDIS_CACHING_URL: "http://127.0.0.1:1" }).cacheBackend).toBe("redis");
    expect(loadConfig({}, "workerd").cacheBackend).toBe("kv");
    expect(loadConfig({ CACHE_BACKEND: "database" }).cacheBackend).toBe("database");
  });
  test.each([
    [{ PORT: "eighty" }, /^invalid setting PORT: /],
    [{ PORT: "70000" }, /^invalid setting PORT: must be at most 65535$/],
    [{ LOGIN_REQUIRED: "sometimes" }, /^invalid setting LOGIN_REQUIRED: /],
    [{ PLUGINS_CONFIG: "{oops" }, /^invalid setting PLUGINS_CONFIG: must be valid JSON/],
    [
      { PLUGINS_CONFIG: '{"custom_objects": 3}' },
      /^invalid setting PLUGINS_CONFIG: the entry for "custom_objects"/,
    ],
    [{ DATABASE_URL: "mysql://x" }, /^invalid setting DATABASE_URL: /],
    [{ CACHE_BACKEND: "disk" }, /^invalid setting CACHE_BACKEND: /],
    [
      { CACHE_BACKEND: "redis" },
      /^invalid setting CACHE_BACKEND: is redis but REDIS_CACHING_URL is not set$/,
    ],
    [{ MAX_BODY_BYTES: "0" }, /^invalid setting MAX_BODY_BYTES: /],
    [{ REDIS_TASKS_URL: "ftp://x" }, /^invalid setting REDIS_TASKS_URL: /],
  ])("bad value %j stops with one line naming the setting", (env, pattern) => {
    expect(() => loadConfig(env as Record<string, string>)).toThrow(pattern);
  });
  test("redactUrl leaves local file paths as written", () => {
    expect(redactUrl("file:data/host.db")).toBe("file:data/host.db");
  });
  test("redactUrl hides credentials", () => {
    expect(redactUrl("https://user:secretpw@example.test/x?token=abc")).not.toContain("secretpw");
    expect(redactUrl("https://user:secretpw@example.test/x?token=abc")).not.toContain("abc");
  });
});
