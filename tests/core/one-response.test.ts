/**
 * An answer is one Response (decision 0132). The headers every answer carries (X-Request-Id,
 * API-Version) are set before the handler answers: set after it, Hono makes the Response again
 * around the first one's body, once per header, and the body becomes a stream the server then
 * reads back. Counted here by the Responses made while a request is answered, over the app.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Hono } from "hono";
import { servicesOf } from "../../src/app";
import type { HonoEnv } from "../../src/core/context";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { BUILTIN_PLUGINS } from "../../src/plugins/registry";
import type { HostPlugin } from "../../src/plugins/types";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, siteLinkedCot } from "../custom-objects/fixtures";

let t: TestApp;
const slug = "oneres";

/** A plugin whose route answers with a Response of its own, made without Hono's context. */
const rawAnswer: HostPlugin = {
  name: "raw_answer",
  version: "1.0.0",
  apiBase: "raw-answer",
  setup: () => ({
    apiRoutes: new Hono<HonoEnv>().get("/", () => new Response("plain", { status: 203 })),
  }),
};

beforeAll(async () => {
  t = await makeTestApp(
    { PLUGINS: "custom_objects,host_healthcheck_plugin,raw_answer" },
    { availablePlugins: [...BUILTIN_PLUGINS, rawAnswer] },
  );
  await siteLinkedCot(t, slug);
  for (let i = 0; i < 3; i++)
    expect((await t.json("POST", `${CO}/${slug}/`, { body: { name: `box-${i}` } })).status).toBe(
      201,
    );
  await flushSearchIndexesNow(servicesOf(t.app));
});
afterAll(() => t.close());

/** The answer to one request, and how many Responses were made while it was answered. */
async function counted(method: string, path: string, body?: unknown) {
  const Real = globalThis.Response;
  let made = 0;
  class Counting extends Real {
    constructor(...args: ConstructorParameters<typeof Real>) {
      super(...args);
      made++;
    }
  }
  globalThis.Response = Counting as typeof Response;
  try {
    const res = await t.req(method, path, body === undefined ? {} : { body });
    return { res, made, text: await res.text() };
  } finally {
    globalThis.Response = Real;
  }
}

test.each([
  ["a GET by id", "GET", () => `${CO}/${slug}/1/`],
  ["a list", "GET", () => `${CO}/${slug}/?limit=2`],
  ["a search, twice (the second from the kept page)", "GET", () => `${CO}/${slug}/?q=box`],
  ["a search again", "GET", () => `${CO}/${slug}/?q=box`],
  ["a 404", "GET", () => `${CO}/${slug}/999999/`],
  ["a 400", "GET", () => `${CO}/${slug}/?ordering=nope`],
  ["a create", "POST", () => `${CO}/${slug}/`],
])("%s is one Response, with both headers", async (_what, method, path) => {
  const { res, made, text } = await counted(
    method,
    path(),
    method === "POST" ? { name: "box-new" } : undefined,
  );
  expect(text.length).toBeGreaterThan(0);
  expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  expect(res.headers.get("api-version")).toBeTruthy();
  expect(res.headers.get("content-type")).toStartWith("application/json");
  expect(made).toBe(1);
});

test("an answer made without the context still gets both headers", async () => {
  const res = await t.req("GET", "/api/plugins/raw-answer/");
  expect(res.status).toBe(203);
  expect(await res.text()).toBe("plain");
  expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  expect(res.headers.get("api-version")).toBeTruthy();
});
