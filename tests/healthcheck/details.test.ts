/**
 * `details`: always (everyone sees every check), authenticated (anonymous callers get the overall
 * status and HTTP code only; a valid token sees the checks), never. No secret in any mode.
 */
import { describe, expect, test, afterEach } from "bun:test";
import type { TestApp } from "../helpers/app";
import { HEALTH } from "./helpers";
import { fixtureApp, startupError, resetFixtures } from "./fixtures";

afterEach(resetFixtures);

const CHECKS = ["health_check.Database", "fixtures.Healthy", "fixtures.Broken"];

/** Every representation as one caller sees it. */
async function views(t: TestApp, token: string | null) {
  const get = (accept: string) => t.req("GET", HEALTH, { token, headers: { accept } });
  const json = await get("application/json");
  const hj = await get("application/health+json");
  const html = await get("text/html");
  return {
    status: json.status,
    json: await json.json(),
    hj: { status: hj.status, body: await hj.json() },
    html: { status: html.status, text: await html.text() },
  };
}

const SECRETS = ["hunter2", "key=abc", "user:"];

describe("details", () => {
  test("always (the default): anonymous callers see every check and its message", async () => {
    const t = await fixtureApp({ checks: CHECKS });
    const v = await views(t, null);
    expect(v.status).toBe(500);
    expect(Object.keys(v.json.checks)).toEqual(["Database", "Healthy", "Broken"]);
    expect(v.json.checks.Broken).toStartWith(
      "unavailable: upstream answered 503 for https://api.example.test/v1",
    );
    expect(Object.keys(v.hj.body.checks)).toEqual(["Database", "Healthy", "Broken"]);
    const all = JSON.stringify(v) + (await (await t.req("GET", "/readyz", { token: null })).text());
    for (const secret of SECRETS) expect(all).not.toContain(secret);
    expect(await (await t.req("GET", "/readyz", { token: null })).json()).toEqual({
      status: "not ready",
      failing: ["Broken"],
    });
  });

  test("authenticated: anonymous → overall status and HTTP code only; a valid token sees every check", async () => {
    const t = await fixtureApp({ checks: CHECKS, details: "authenticated" });
    const anon = await views(t, null);
    expect(anon.status).toBe(500);
    expect(anon.json).toEqual({ status: "failing" });
    expect(anon.hj).toEqual({
      status: 500,
      body: { status: "fail", description: "host health checks" },
    });
    expect(anon.html.status).toBe(500);
    expect(anon.html.text).toContain("failing");
    for (const word of ["Broken", "Database", "upstream", "<table>"])
      expect(anon.html.text).not.toContain(word);
    expect(await (await t.req("GET", "/readyz", { token: null })).json()).toEqual({
      status: "not ready",
    });
    const unknown = await (
      await t.req("GET", `${HEALTH}?exclude=Nope`, {
        token: null,
        headers: { accept: "application/json" },
      })
    ).json();
    expect(JSON.stringify(unknown)).not.toContain("Broken");

    const monitor = await t.user("monitor");
    const authed = await views(t, monitor);
    expect(authed.status).toBe(500);
    expect(authed.json.checks.Broken).toStartWith("unavailable: upstream answered 503");
    expect(authed.hj.body.checks.Broken[0].output).toStartWith("unavailable: ");
    expect(authed.html.text).toContain("<td>Broken</td>");
    for (const secret of SECRETS) expect(JSON.stringify(authed)).not.toContain(secret);

    const bad = await t.req("GET", HEALTH, {
      token: "0".repeat(40),
      headers: { accept: "application/json" },
    });
    expect(bad.status).toBe(401);
    expect(bad.headers.get("www-authenticate")).toMatch(/^Token\b/);
  });

  test("a healthy app under authenticated: anonymous gets 200 {status: working}", async () => {
    const t = await fixtureApp({ checks: ["fixtures.Healthy"], details: "authenticated" });
    const r = await t.req("GET", HEALTH, { token: null, headers: { accept: "application/json" } });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ status: "working" });
  });

  test("never: nobody sees the checks, token or not", async () => {
    const t = await fixtureApp({ checks: CHECKS, details: "never" });
    for (const token of [null, t.admin]) {
      const v = await views(t, token);
      expect(v.status).toBe(500);
      expect(v.json).toEqual({ status: "failing" });
      expect(v.hj.body).toEqual({ status: "fail", description: "host health checks" });
      expect(v.html.text).not.toContain("Broken");
    }
  });

  test("login_required with details: authenticated shows the checks to every (authenticated) caller", async () => {
    const t = await fixtureApp({ checks: CHECKS, details: "authenticated", login_required: true });
    expect((await t.req("GET", HEALTH, { token: null })).status).toBe(401);
    const v = await views(t, t.admin);
    expect(Object.keys(v.json.checks)).toEqual(["Database", "Healthy", "Broken"]);
  });

  test("a bad details value stops start-up with one line", async () => {
    expect(await startupError({ details: "sometimes" })).toMatch(
      /^invalid setting PLUGINS_CONFIG: host_healthcheck_plugin\.details: must be one of always, authenticated, never$/,
    );
  });
});
