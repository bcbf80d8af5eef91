/**
 * `cache_seconds`: within the window every caller gets the last result, marked with its age, so
 * a storm of probes runs each check at most once per window. The window passes on the fixture
 * apps' clock.
 */
import { describe, expect, test, afterEach } from "bun:test";
import { healthRunnerOf } from "../../src/plugins/healthcheck";
import { waitFor } from "../helpers/wait";
import { HEALTH, healthJson } from "./helpers";
import { clock, fixtureApp, runs, slow, startupError, resetFixtures } from "./fixtures";

afterEach(resetFixtures);

const CHECKS = ["fixtures.Healthy", "fixtures.Sleepy"];

describe("cache_seconds", () => {
  test("a burst of 200 concurrent probes, then more within the window: each check ran once", async () => {
    const t = await fixtureApp({
      checks: CHECKS,
      cache_seconds: 1.5,
      groups: { sleepy: ["Sleepy"] },
    });
    runs.clear();
    slow.ms = 100;
    const burst = await Promise.all(Array.from({ length: 200 }, () => healthJson(t)));
    expect(burst.every((r) => r.status === 200 && r.body.status === "working")).toBe(true);
    expect(runs.get("Sleepy")).toBe(1);
    expect(runs.get("Healthy")).toBe(1);

    clock.advance(1000); // the results finished 1,000 ms ago
    const later = await healthJson(t);
    expect(later.res.headers.get("age")).toBe("1");
    const grouped = await healthJson(t, { path: `${HEALTH}sleepy/` });
    expect(grouped.body.checks).toEqual({ Sleepy: "working" });
    const hj = await (await t.req("GET", `${HEALTH}?format=health%2Bjson`, { token: null })).json();
    expect(hj.ageSeconds).toBe(1);
    expect(runs.get("Sleepy")).toBe(1);
    expect(runs.get("Healthy")).toBe(1);

    clock.advance(499);
    expect((await healthJson(t)).res.headers.get("age")).toBe("1"); // 1,499 ms: still cached
    expect(runs.get("Sleepy")).toBe(1);
    clock.advance(1);
    const fresh = await healthJson(t);
    expect(fresh.res.headers.get("age")).toBe("0");
    expect(runs.get("Sleepy")).toBe(2);
    expect(fresh.res.headers.get("cache-control")).toBe("no-store"); // the cache is ours, not the client's
  });

  test("default 0: no result is reused once its run finished, and no Age header", async () => {
    const t = await fixtureApp({ checks: CHECKS });
    runs.clear();
    // Sleepy holds its run open until all 20 probes have asked for its result.
    let release!: () => void;
    slow.until = new Promise<void>((done) => (release = done));
    const asked = healthRunnerOf(t.app).asked;
    asked.clear();
    const probes = Promise.all(Array.from({ length: 20 }, () => healthJson(t)));
    await waitFor(() => asked.get("fixtures.Sleepy") === 20, { message: "20 probes asked" });
    release();
    await probes;
    slow.until = null;
    expect(runs.get("Sleepy")).toBe(1); // the run in flight is still shared
    const r = await healthJson(t);
    expect(runs.get("Sleepy")).toBe(2);
    expect(r.res.headers.get("age")).toBeNull();
    const hj = await (await t.req("GET", `${HEALTH}?format=health%2Bjson`, { token: null })).json();
    expect(hj.ageSeconds).toBeUndefined();
  });

  test("bad values stop start-up with one line", async () => {
    expect(await startupError({ cache_seconds: -1 })).toMatch(
      /host_healthcheck_plugin\.cache_seconds: must be at least 0$/,
    );
    expect(await startupError({ cache_seconds: "10" })).toMatch(
      /host_healthcheck_plugin\.cache_seconds: must be a number of seconds$/,
    );
    expect(await startupError({ cache_seconds: 86_400 })).toMatch(
      /host_healthcheck_plugin\.cache_seconds: must be at most 3600$/,
    );
  });
});
