/**
 * The Database check names its driver (`file`, or `libsql` over HTTP) and the `SELECT 1`
 * latency as observed values (health+json, OpenMetrics); the plain JSON keeps its shape.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { startRemoteDb } from "../helpers/remote-db";
import { HEALTH, healthConfig, healthJson } from "./helpers";

const open: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const close of open.reverse()) await close();
});

async function databaseEntries(t: TestApp) {
  const hj = await (await t.req("GET", `${HEALTH}?format=health%2Bjson`, { token: null })).json();
  return hj.checks.Database as Array<Record<string, unknown>>;
}

const settings = healthConfig({ checks: ["health_check.Database"] });

describe("Database check", () => {
  test("a local file: driver file, latency in ms; plain JSON unchanged", async () => {
    const t = await makeTestApp({ PLUGINS_CONFIG: settings });
    open.push(() => t.close());
    expect((await healthJson(t)).body).toEqual({
      status: "working",
      checks: { Database: "working" },
    });
    const [timing, driver, latency] = await databaseEntries(t);
    expect(timing).toMatchObject({
      componentId: "health_check.Database",
      observedUnit: "ms",
      status: "pass",
    });
    expect(driver).toMatchObject({
      componentId: "health_check.Database",
      measurementName: "driver",
      observedValue: "file",
      status: "pass",
    });
    expect(latency).toMatchObject({
      measurementName: "latency",
      observedUnit: "ms",
      status: "pass",
    });
    // a figure is there; how quick the database is, is no test's business (bench/healthcheck.ts)
    expect(Number.isFinite(latency!.observedValue)).toBe(true);
    expect(latency!.observedValue as number).toBeGreaterThanOrEqual(0);
    const metrics = await (
      await t.req("GET", `${HEALTH}?format=openmetrics`, { token: null })
    ).text();
    expect(metrics).toContain('host_health_observed_info{check="Database",driver="file"} 1');
    expect(metrics).toMatch(/host_health_observed_latency_seconds\{check="Database"\} \d/);
  });

  test("a libSQL server over HTTP: driver libsql", async () => {
    const remote = await startRemoteDb("health-db");
    open.push(() => remote.stop());
    const t = await makeTestApp({ DATABASE_URL: remote.url, PLUGINS_CONFIG: settings });
    open.push(() => t.close());
    expect(t.deps.db.kind).toBe("remote");
    const entries = await databaseEntries(t);
    expect(entries.find((e) => e.measurementName === "driver")!.observedValue).toBe("libsql");
    expect(
      entries.find((e) => e.measurementName === "latency")!.observedValue as number,
    ).toBeGreaterThan(0);
    expect(
      await (await t.req("GET", `${HEALTH}?format=openmetrics`, { token: null })).text(),
    ).toContain('driver="libsql"');
  });

  test("a remote database: one round trip, one write and one read; the table is made once, by the migrations", async () => {
    const remote = await startRemoteDb("health-db");
    open.push(() => remote.stop());
    const { proxy } = remote;
    const t = await makeTestApp({ DATABASE_URL: remote.url, PLUGINS_CONFIG: settings });
    open.push(() => t.close());
    // the migrations made the table: no probe has run yet
    const made = await t.deps.db.client.execute(
      "SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'host_health'",
    );
    expect(Number(made.rows[0]!.n)).toBe(1);
    const probe = async () => {
      proxy.reset();
      expect((await healthJson(t)).body.checks).toEqual({ Database: "working" });
      return { trips: proxy.count, sql: proxy.log.flatMap((trip) => trip.sql) };
    };
    await probe(); // warm
    const { trips, sql } = await probe();
    expect(trips).toBe(1);
    // the batch's own BEGIN/COMMIT aside: the upsert of the one row, then the read
    const work = sql.filter((s) => !/^(BEGIN|COMMIT|ROLLBACK)\b/i.test(s.trim()));
    expect(work).toHaveLength(2);
    expect(work[0]).toMatch(/^INSERT INTO "host_health"/);
    expect(work[1]).toMatch(/^SELECT 1\b/);
  });
});
