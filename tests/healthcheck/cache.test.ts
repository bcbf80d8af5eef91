/**
 * `cache_seconds`: within the window every caller gets the last result, marked with its age, so
 * a storm of probes runs each check at most once per window.
 */
import { describe, expect, test } from "bun:test";
import { HEALTH, healthJson } from "./helpers";
import { fixtureApp, runs, slow, startupError } from "./fixtures";

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

    await Bun.sleep(1100);
    const later = await healthJson(t);
    expect(later.ms).toBeLessThan(80); // no 100 ms check ran
    expect(later.res.headers.get("age")).toBe("1");
    const grouped = await healthJson(t, { path: `${HEALTH}sleepy/` });
    expect(grouped.body.checks).toEqual({ Sleepy: "working" });
    const hj = await (await t.req("GET", `${HEALTH}?format=health%2Bjson`, { token: null })).json();
    expect(hj.ageSeconds).toBeGreaterThanOrEqual(1);
    expect(hj.ageSeconds).toBeLessThan(1.5);
    expect(runs.get("Sleepy")).toBe(1);

    await Bun.sleep(500);
    const fresh = await healthJson(t);
    expect(fresh.res.headers.get("age")).toBe("0");
    expect(runs.get("Sleepy")).toBe(2);
    expect(fresh.res.headers.get("cache-control")).toBe("no-store"); // the cache is ours, not the client's
  });

  test("default 0: no result is reused once its run finished, and no Age header", async () => {
    const t = await fixtureApp({ checks: CHECKS });
    runs.clear();
    slow.ms = 50;
    await Promise.all(Array.from({ length: 20 }, () => healthJson(t)));
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
