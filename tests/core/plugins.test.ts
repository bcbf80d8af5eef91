import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Hono } from "hono";
import { makeTestApp, type TestApp } from "../helpers/app";
import { BUILTIN_PLUGINS } from "../../src/plugins/registry";
import type { HonoEnv } from "../../src/core/context";

describe("plugin registry", () => {
  let without: TestApp;
  let withAll: TestApp;
  beforeAll(async () => {
    without = await makeTestApp({ PLUGINS: "host_healthcheck_plugin" });
    withAll = await makeTestApp();
  });
  afterAll(async () => {
    await without.close();
    await withAll.close();
  });

  test("with custom_objects left out, its paths answer 404 exactly like unknown paths", async () => {
    const unknown = await without.req("GET", "/api/plugins/not-a-plugin/");
    for (const path of [
      "/api/plugins/custom-objects/",
      "/api/plugins/custom-objects/custom-object-types/",
      "/api/plugins/custom-objects/anything/1/",
    ]) {
      for (const method of ["GET", "POST", "DELETE"]) {
        const r = await without.req(method, path, method === "GET" ? {} : { body: {} });
        expect(r.status).toBe(404);
        expect(await r.text()).toBe(
          await (await without.req("GET", "/api/plugins/not-a-plugin/")).text(),
        );
      }
    }
    expect(unknown.status).toBe(404);
    expect((await without.json("GET", "/api/status/")).body.plugins).toEqual({
      host_healthcheck_plugin: "0.1.0",
    });
    // NetBox's root always names installed-plugins/ (decision 0200); no plugin API is listed
    expect(Object.keys((await without.json("GET", "/api/plugins/")).body)).toEqual([
      "installed-plugins",
    ]);
  });

  test("enabled, the plugin is mounted and listed", async () => {
    expect((await withAll.req("GET", "/api/plugins/custom-objects/")).status).toBe(200);
    expect(Object.keys((await withAll.json("GET", "/api/plugins/")).body)).toContain(
      "custom-objects",
    );
  });

  test("an unknown plugin name stops start-up with a line naming PLUGINS", async () => {
    await expect(makeTestApp({ PLUGINS: "custom_objects,nope" })).rejects.toThrow(
      /invalid setting PLUGINS: unknown plugin "nope"/,
    );
  });

  test("a third-party plugin mounts API and page routes", async () => {
    const extra = {
      name: "hello",
      version: "9.9.9",
      apiBase: "hello",
      setup: () => ({
        apiRoutes: new Hono<HonoEnv>().get("/", (c) => c.json({ user: c.var.auth.user?.username })),
        routes: new Hono<HonoEnv>().get("/page", (c) => c.text("hi")),
      }),
    };
    const t = await makeTestApp(
      { PLUGINS: "hello" },
      { availablePlugins: [...BUILTIN_PLUGINS, extra] },
    );
    try {
      expect((await t.json("GET", "/api/plugins/hello/")).body).toEqual({ user: "admin" });
      expect((await t.req("GET", "/api/plugins/hello/", { token: null })).status).toBe(403);
      expect(await (await t.req("GET", "/plugins/hello/page/", { token: null })).text()).toBe("hi");
    } finally {
      await t.close();
    }
  });
});
