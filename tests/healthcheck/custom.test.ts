/**
 * Custom checks from a third-party plugin, check selection by `PLUGINS_CONFIG`, settings
 * validation at start-up, timeouts and concurrency. No Redis needed: these use custom checks.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { Hono } from "hono";
import type { HonoEnv } from "../../src/core/context";
import {
  BaseHealthCheckBackend,
  healthRunnerOf,
  ServiceReturnedUnexpectedResult,
  ServiceUnavailable,
  ServiceWarning,
} from "../../src/plugins/healthcheck";
import { BUILTIN_PLUGINS } from "../../src/plugins/registry";
import type { HostPlugin } from "../../src/plugins/types";
import { makeTestApp, type TestApp } from "../helpers/app";
import { waitFor } from "../helpers/wait";
import { HEALTH, healthConfig, healthJson } from "./helpers";

class QueueDepth extends BaseHealthCheckBackend {
  override criticalService = false;
  async checkStatus() {
    this.addError(
      new ServiceUnavailable("queue broker down"),
      new Error("ECONNREFUSED 127.0.0.1:5672"),
    );
  }
}

class Payments extends BaseHealthCheckBackend {
  async checkStatus() {
    this.addError(new ServiceUnavailable("payments API answered 503"));
  }
}

class Thrower extends BaseHealthCheckBackend {
  async checkStatus(): Promise<void> {
    throw new Error("boom");
  }
}

class ThrowsTyped extends BaseHealthCheckBackend {
  async checkStatus(): Promise<void> {
    throw new ServiceReturnedUnexpectedResult("disk reports 101% used");
  }
}

class Warner extends BaseHealthCheckBackend {
  async checkStatus() {
    this.addError(new ServiceWarning("certificate expires in 5 days"));
  }
}

class Named extends BaseHealthCheckBackend {
  override criticalService = false;
  override identifier() {
    return "Search index (replica 2)";
  }
  async checkStatus() {
    this.addError("index is stale");
  }
}

class Nasty extends BaseHealthCheckBackend {
  override criticalService = false;
  async checkStatus() {
    this.addError(new ServiceUnavailable(`<script>alert("x")</script> & friends`));
  }
}

class Healthy extends BaseHealthCheckBackend {
  async checkStatus() {}
}

/** What Slow (and Slow2) wait for before they finish; set by the tests below. */
let slowGate: () => Promise<void> = async () => {};
let slowRuns = 0;
class Slow extends BaseHealthCheckBackend {
  constructor(services: ConstructorParameters<typeof BaseHealthCheckBackend>[0]) {
    super(services);
    slowRuns++;
  }
  async checkStatus() {
    await slowGate();
  }
}

class Slow2 extends Slow {}

/** A gate that opens once `n` callers wait at it. */
function barrier(n: number): () => Promise<void> {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((done) => (open = done));
  return () => {
    if (++arrived === n) open();
    return opened;
  };
}

class Hung extends BaseHealthCheckBackend {
  async checkStatus() {
    await new Promise(() => {}); // never settles
  }
}

const acme: HostPlugin = {
  name: "acme",
  version: "1.0.0",
  setup: () => ({
    routes: new Hono<HonoEnv>(),
    healthChecks: {
      "acme.checks.QueueDepth": QueueDepth,
      "acme.checks.Payments": Payments,
      "acme.checks.Thrower": Thrower,
      "acme.checks.ThrowsTyped": ThrowsTyped,
      "acme.checks.Warner": Warner,
      "acme.checks.Named": Named,
      "acme.checks.Nasty": Nasty,
      "acme.checks.Healthy": Healthy,
      "acme.checks.Slow": Slow,
      "acme.checks.Slow2": Slow2,
      "acme.checks.Hung": Hung,
    },
  }),
};

const open: TestApp[] = [];
afterEach(async () => {
  slowGate = async () => {};
  await Promise.all(open.splice(0).map((t) => t.close()));
});

async function appWith(
  settings: Record<string, unknown> | null,
  plugins = "custom_objects,host_healthcheck_plugin,acme",
): Promise<TestApp> {
  const env: Record<string, string> = { PLUGINS: plugins };
  if (settings) env.PLUGINS_CONFIG = healthConfig(settings);
  const t = await makeTestApp(env, { availablePlugins: [...BUILTIN_PLUGINS, acme] });
  open.push(t);
  return t;
}

describe("custom checks", () => {
  test("failing and non-critical: 200, its error shown", async () => {
    const t = await appWith({ checks: ["health_check.Database", "acme.checks.QueueDepth"] });
    const r = await healthJson(t);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      status: "degraded",
      checks: { Database: "working", QueueDepth: "unavailable: queue broker down" },
    });
    const html = await (await t.req("GET", HEALTH, { token: null })).text();
    expect(html).toContain("unavailable: queue broker down");
    const hj = await (
      await t.req("GET", HEALTH, { token: null, headers: { accept: "application/health+json" } })
    ).json();
    expect(hj.status).toBe("warn");
    expect(hj.checks.QueueDepth[0]).toMatchObject({
      status: "warn",
      output: "unavailable: queue broker down",
      componentId: "acme.checks.QueueDepth",
    });
    expect((await t.req("GET", "/readyz", { token: null })).status).toBe(200);
  });

  test("failing and critical: 500", async () => {
    const t = await appWith({
      checks: ["health_check.Database", "acme.checks.QueueDepth", "acme.checks.Payments"],
    });
    const r = await healthJson(t);
    expect(r.status).toBe(500);
    expect(r.body.status).toBe("failing");
    expect(r.body.checks.Payments).toBe("unavailable: payments API answered 503");
    expect((await t.req("HEAD", HEALTH, { token: null })).status).toBe(500);
    const hj = await (
      await t.req("GET", HEALTH, { token: null, headers: { accept: "application/health+json" } })
    ).json();
    expect(hj.status).toBe("fail");
    expect(hj.checks.Payments[0].status).toBe("fail");
    const ready = await t.req("GET", "/readyz", { token: null });
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({ status: "not ready", failing: ["Payments"] });
  });

  test("error kinds: thrown plain errors are unknown errors, typed ones keep their kind", async () => {
    const t = await appWith({
      checks: [
        "acme.checks.Thrower",
        "acme.checks.ThrowsTyped",
        "acme.checks.Named",
        "acme.checks.Warner",
      ],
    });
    const r = await healthJson(t);
    expect(r.body.checks).toEqual({
      Thrower: "unknown error: boom",
      ThrowsTyped: "unexpected result: disk reports 101% used",
      "Search index (replica 2)": "unknown error: index is stale",
      Warner: "warning: certificate expires in 5 days",
    });
    expect(r.status).toBe(500);
  });

  test("warnings_as_errors: false lets a critical check's warning pass (still shown)", async () => {
    const t = await appWith({
      checks: ["acme.checks.Warner", "acme.checks.Healthy"],
      warnings_as_errors: false,
    });
    const r = await healthJson(t);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      status: "degraded",
      checks: { Warner: "warning: certificate expires in 5 days", Healthy: "working" },
    });
  });

  test("the HTML page escapes everything a check reports", async () => {
    const t = await appWith({ checks: ["acme.checks.Nasty"] });
    const html = await (
      await t.req("GET", HEALTH, { token: null, headers: { accept: "text/html" } })
    ).text();
    expect(html).not.toContain("<script>");
    expect(html).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; friends");
  });

  test("a cause passed to addError is logged (warn) but never shown", async () => {
    const lines: string[] = [];
    const { createLogger } = await import("../../src/services/logger");
    const t = await makeTestApp(
      {
        PLUGINS: "host_healthcheck_plugin,acme",
        PLUGINS_CONFIG: healthConfig({ checks: ["acme.checks.QueueDepth"] }),
      },
      {
        availablePlugins: [...BUILTIN_PLUGINS, acme],
        logger: createLogger("debug", (l) => lines.push(l)),
      },
    );
    open.push(t);
    const r = await healthJson(t);
    expect(r.text).not.toContain("ECONNREFUSED");
    const logged = lines.map((l) => JSON.parse(l)).find((l) => l.msg === "health check failed");
    expect(logged).toMatchObject({
      level: "warn",
      check: "QueueDepth",
      critical: false,
      status: "unavailable: queue broker down",
    });
    expect(logged.cause).toContain("ECONNREFUSED");
  });
});

describe("timeouts and concurrency", () => {
  test("a hung check reports unavailable: timeout after N ms; the endpoint answers in bounded time", async () => {
    const t = await appWith({
      checks: ["acme.checks.Hung", "acme.checks.Healthy"],
      timeout_ms: 200,
    });
    const r = await healthJson(t);
    expect(r.status).toBe(500);
    expect(r.body.checks).toEqual({
      Hung: "unavailable: timeout after 200 ms",
      Healthy: "working",
    });
  });

  test("checks run concurrently", async () => {
    // Each check finishes only once both have started: in sequence, the first would time out.
    const t = await appWith({
      checks: ["acme.checks.Slow", "acme.checks.Slow2"],
      timeout_ms: 5_000,
    });
    slowGate = barrier(2);
    const r = await healthJson(t);
    expect(r.body.checks).toEqual({ Slow: "working", Slow2: "working" });
  });

  test("concurrent requests share the run in flight", async () => {
    const t = await appWith({ checks: ["acme.checks.Slow"] });
    slowRuns = 0;
    // Slow's run stays open until all eight requests have asked for its result.
    let release!: () => void;
    const held = new Promise<void>((done) => (release = done));
    slowGate = () => held;
    const asked = healthRunnerOf(t.app).asked;
    const pending = Promise.all(Array.from({ length: 8 }, () => healthJson(t)));
    await waitFor(() => asked.get("acme.checks.Slow") === 8, { message: "eight requests asked" });
    release();
    const answers = await pending;
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(slowRuns).toBe(1);
    await healthJson(t);
    expect(slowRuns).toBe(2); // not cached: the next request runs again
  });
});

describe("selection by PLUGINS_CONFIG", () => {
  test("no settings, {} or settings without checks: the four built-ins, in order", async () => {
    for (const settings of [null, {}, { timeout_ms: 1000 }]) {
      const t = await appWith(settings);
      const r = await healthJson(t);
      expect(Object.keys(r.body.checks)).toEqual([
        "Database",
        "CacheBackend",
        "HostRedisCacheHealthCheck",
        "HostRedisTasksHealthCheck",
      ]);
    }
  });

  test("only the listed checks run, in the listed order (duplicates once)", async () => {
    const t = await appWith({
      checks: [
        "acme.checks.Healthy",
        "health_check.cache.backends.CacheBackend",
        "health_check.Database",
        "acme.checks.Healthy",
      ],
    });
    const r = await healthJson(t);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      status: "working",
      checks: { Healthy: "working", CacheBackend: "working", Database: "working" },
    });
  });

  test("an unknown dotted path stops start-up with one line naming PLUGINS_CONFIG", async () => {
    const err = await appWith({ checks: ["health_check.Database", "health_check.Nope"] }).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.name).toBe("ConfigError");
    expect(err?.message).toMatch(
      /^invalid setting PLUGINS_CONFIG: host_healthcheck_plugin\.checks: unknown health check "health_check\.Nope" \(available: /,
    );
    expect(err?.message).not.toContain("\n");
  });

  test("a check of a plugin that is not enabled is unknown", async () => {
    await expect(
      appWith({ checks: ["acme.checks.Healthy"] }, "host_healthcheck_plugin"),
    ).rejects.toThrow(/unknown health check "acme\.checks\.Healthy"/);
  });

  test("bad settings stop start-up with one clear line", async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ timeout_ms: 0 }, /host_healthcheck_plugin\.timeout_ms: must be at least 1/],
      [
        { timeout_ms: "3000" },
        /host_healthcheck_plugin\.timeout_ms: must be a number of milliseconds/,
      ],
      [{ timeout_ms: 1.5 }, /host_healthcheck_plugin\.timeout_ms: must be a whole number/],
      [{ timeout_ms: 600_000 }, /host_healthcheck_plugin\.timeout_ms: must be at most 60000/],
      [
        { checks: "health_check.Database" },
        /host_healthcheck_plugin\.checks: must be a list of dotted paths/,
      ],
      [{ checks: [] }, /host_healthcheck_plugin\.checks: must list at least one check/],
      [{ checks: [""] }, /host_healthcheck_plugin\.checks\.0: must not contain empty paths/],
      [{ login_required: "yes" }, /host_healthcheck_plugin\.login_required: must be true or false/],
      [{ check: ["health_check.Database"] }, /host_healthcheck_plugin: unknown key "check"/],
    ];
    for (const [settings, pattern] of cases) {
      const err = await appWith(settings).then(
        () => null,
        (e: Error) => e,
      );
      expect(err?.message).toMatch(/^invalid setting PLUGINS_CONFIG: /);
      expect(err?.message).toMatch(pattern);
    }
  });
});

describe("negotiation with a failing app", () => {
  test("406 still wins over running the checks", async () => {
    const t = await appWith({ checks: ["acme.checks.Payments"] });
    expect(
      (await t.req("GET", HEALTH, { token: null, headers: { accept: "text/csv" } })).status,
    ).toBe(406);
  });
});
