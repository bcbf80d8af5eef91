/**
 * Groups (`/healthcheck/<group>/`) and `?exclude=<identifier>` on every health path; the seed
 * path keeps its shape.
 */
import { describe, expect, test, afterEach } from "bun:test";
import { HEALTH, healthJson } from "./helpers";
import { fixtureApp, runs, startupError, resetFixtures } from "./fixtures";

afterEach(resetFixtures);

const CHECKS = ["health_check.Database", "fixtures.Healthy", "fixtures.Broken", "fixtures.Soft"];
const GROUPS = {
  core: ["Database", "Healthy"],
  soft: ["Soft"],
  "with-broken": ["Broken", "Database"],
};

describe("groups", () => {
  test("a group runs only its checks (in the configured order), in every format", async () => {
    const t = await fixtureApp({ checks: CHECKS, groups: GROUPS });
    runs.clear();
    for (const path of [`${HEALTH}core/`, `${HEALTH}core`]) {
      const r = await healthJson(t, { path });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({
        status: "working",
        checks: { Database: "working", Healthy: "working" },
      });
    }
    expect(runs.get("Broken")).toBeUndefined();
    const broken = await healthJson(t, { path: `${HEALTH}with-broken/` });
    expect(broken.status).toBe(500);
    expect(Object.keys(broken.body.checks)).toEqual(["Database", "Broken"]);
    const soft = await healthJson(t, { path: `${HEALTH}soft/` });
    expect(soft.status).toBe(200);
    expect(soft.body.status).toBe("degraded");

    const hj = await (
      await t.req("GET", `${HEALTH}core/?format=health%2Bjson`, { token: null })
    ).json();
    expect(Object.keys(hj.checks)).toEqual(["Database", "Healthy"]);
    const html = await (
      await t.req("GET", `${HEALTH}core/`, { token: null, headers: { accept: "text/html" } })
    ).text();
    expect(html).toContain("<td>Healthy</td>");
    expect(html).not.toContain("Broken");
    expect((await t.req("HEAD", `${HEALTH}with-broken/`, { token: null })).status).toBe(500);
  });

  test("the seed path still runs every check with the same JSON shape", async () => {
    const t = await fixtureApp({ checks: CHECKS, groups: GROUPS });
    const r = await healthJson(t);
    expect(r.status).toBe(500);
    expect(Object.keys(r.body)).toEqual(["status", "checks"]);
    expect(Object.keys(r.body.checks)).toEqual(["Database", "Healthy", "Broken", "Soft"]);
  });

  test("an unknown group answers 404 like any unknown path", async () => {
    const t = await fixtureApp({ checks: CHECKS, groups: GROUPS });
    const r = await t.req("GET", `${HEALTH}nope/`, {
      token: null,
      headers: { accept: "application/json" },
    });
    expect(r.status).toBe(404);
    expect(await r.json()).toEqual({ detail: "Not found.", error: "not_found" });
    expect((await t.req("GET", `${HEALTH}core/extra/`, { token: null })).status).toBe(404);
  });

  test("bad groups stop start-up with one clear line", async () => {
    const cases: Array<[unknown, RegExp]> = [
      [
        { core: ["Nope"] },
        /host_healthcheck_plugin\.groups\.core: unknown check identifier "Nope" \(checks: Database, Healthy, Broken, Soft\)/,
      ],
      [
        { core: [] },
        /host_healthcheck_plugin\.groups\.core: must list at least one check identifier/,
      ],
      [{ "Bad Name": ["Database"] }, /group names must be lowercase letters/],
      [["Database"], /host_healthcheck_plugin\.groups: must be an object mapping a group name/],
    ];
    for (const [groups, pattern] of cases) {
      const message = await startupError({ checks: CHECKS, groups });
      expect(message).toMatch(/^invalid setting PLUGINS_CONFIG: /);
      expect(message).toMatch(pattern);
      expect(message).not.toContain("\n");
    }
  });
});

describe("?exclude=", () => {
  test("skips checks on the seed path, on a group and on /readyz; repeatable", async () => {
    const t = await fixtureApp({ checks: CHECKS, groups: GROUPS });
    const r = await healthJson(t, { path: `${HEALTH}?exclude=Broken` });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      status: "degraded",
      checks: { Database: "working", Healthy: "working", Soft: "unavailable: replica lagging" },
    });
    const two = await healthJson(t, { path: `${HEALTH}?exclude=Broken&exclude=Soft` });
    expect(two.body).toEqual({
      status: "working",
      checks: { Database: "working", Healthy: "working" },
    });
    const group = await healthJson(t, { path: `${HEALTH}with-broken/?exclude=Broken` });
    expect(group.status).toBe(200);
    expect(group.body.checks).toEqual({ Database: "working" });

    const notReady = await t.req("GET", "/readyz", { token: null });
    expect(notReady.status).toBe(503);
    const ready = await t.req("GET", "/readyz?exclude=Broken", { token: null });
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: "ready" });
  });

  test("an unknown identifier is a 400 naming it, never a 500", async () => {
    const t = await fixtureApp({ checks: CHECKS });
    for (const path of [`${HEALTH}?exclude=Nope`, "/readyz?exclude=Nope"]) {
      const r = await t.req("GET", path, { token: null, headers: { accept: "application/json" } });
      expect(r.status).toBe(400);
      const body = await r.json();
      expect(body.exclude[0]).toStartWith('Unknown check "Nope"');
    }
  });
});

describe("OpenAPI", () => {
  test("the document describes the group path, the formats and exclude", async () => {
    const t = await fixtureApp({ checks: CHECKS, groups: GROUPS, details: "authenticated" });
    const doc = (await t.json("GET", "/api/schema/")).body;
    const page = doc.paths["/plugins/host_healthcheck_plugin/healthcheck/"].get;
    const group = doc.paths["/plugins/host_healthcheck_plugin/healthcheck/{group}/"].get;
    expect(group.parameters.map((p: { name: string }) => p.name)).toEqual([
      "group",
      "format",
      "exclude",
    ]);
    expect(page.parameters.find((p: { name: string }) => p.name === "format").schema.enum).toEqual([
      "json",
      "html",
      "health+json",
      "openmetrics",
    ]);
    expect(Object.keys(page.responses["200"].content)).toContain("application/openmetrics-text");
    expect(page.description).toContain("API token only");
    expect(group.responses["404"]).toBeDefined();
  });
});
