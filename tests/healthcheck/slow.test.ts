/**
 * `warn_ms`: a check slower than it answers `warning` (HTTP 200) before it would time out. The
 * slow check takes its time on the fixture apps' clock; a hung one meets the real timeout.
 */
import { describe, expect, test, afterEach } from "bun:test";
import { HEALTH, healthJson } from "./helpers";
import { fixtureApp, slow, startupError, resetFixtures } from "./fixtures";

afterEach(resetFixtures);

describe("warn_ms", () => {
  test("slower than warn_ms: warning, HTTP 200, degraded; still a timeout past timeout_ms", async () => {
    const t = await fixtureApp({
      checks: ["fixtures.Sleepy", "fixtures.Healthy"],
      warn_ms: { Sleepy: 50 },
      timeout_ms: 400,
    });
    slow.ms = 120;
    const r = await healthJson(t);
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("degraded");
    expect(r.body.checks.Healthy).toBe("working");
    expect(r.body.checks.Sleepy).toBe("warning: took 120 ms (warn_ms 50)");
    const hj = await (await t.req("GET", `${HEALTH}?format=health%2Bjson`, { token: null })).json();
    expect(hj.status).toBe("warn");
    expect(hj.checks.Sleepy[0]).toMatchObject({
      status: "warn",
      output: expect.stringMatching(/^warning: took /),
    });
    expect((await t.req("GET", "/readyz", { token: null })).status).toBe(200);

    slow.ms = 50; // not slower than warn_ms
    expect((await healthJson(t)).body).toEqual({
      status: "working",
      checks: { Sleepy: "working", Healthy: "working" },
    });

    slow.hang = true;
    const timedOut = await healthJson(t);
    expect(timedOut.status).toBe(500);
    expect(timedOut.body.checks.Sleepy).toBe("unavailable: timeout after 400 ms");
  });

  test("one number applies to every check; warnings_as_errors does not turn a slow check into a failure", async () => {
    const t = await fixtureApp({
      checks: ["fixtures.Sleepy", "health_check.Database"],
      warn_ms: 40,
      warnings_as_errors: true,
    });
    slow.ms = 80;
    const r = await healthJson(t);
    expect(r.status).toBe(200);
    expect(r.body.checks.Sleepy).toBe("warning: took 80 ms (warn_ms 40)");
    expect(r.body.checks.Database).toBe("working");
  });

  test("bad values stop start-up with one line", async () => {
    const cases: Array<[unknown, RegExp]> = [
      [0, /host_healthcheck_plugin\.warn_ms: must be at least 1$/],
      ["fast", /host_healthcheck_plugin\.warn_ms: must be a number of milliseconds, or an object/],
      [{ Nope: 10 }, /host_healthcheck_plugin\.warn_ms: unknown check identifier "Nope"/],
      [
        { Sleepy: 3000 },
        /host_healthcheck_plugin\.warn_ms: 3000 for "Sleepy" must be below timeout_ms \(3000\)/,
      ],
      [
        { Sleepy: "10" },
        /host_healthcheck_plugin\.warn_ms: must be a number of milliseconds, or an object/,
      ],
    ];
    for (const [warn_ms, pattern] of cases) {
      const message = await startupError({ checks: ["fixtures.Sleepy"], warn_ms });
      expect(message).toMatch(/^invalid setting PLUGINS_CONFIG: /);
      expect(message).toMatch(pattern);
    }
  });
});
