/**
 * Row 17 of issue 27 (and issue 31's X-Forwarded-Host): with `TRUSTED_PROXY_HOPS=0` any client
 * switched the generated URLs to https. Proxy headers are believed only when proxies are
 * configured, and then only the entry the outermost trusted proxy wrote (decision 0069).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";

let direct: TestApp;
let proxied: TestApp;

beforeAll(async () => {
  direct = await makeTestApp();
  proxied = await makeTestApp({ TRUSTED_PROXY_HOPS: "1" });
  for (const t of [direct, proxied])
    for (const n of [1, 2])
      await t.json("POST", "/api/dcim/sites/", { body: { name: `s${n}`, slug: `s${n}` } });
});
afterAll(async () => {
  await direct.close();
  await proxied.close();
});

const FORGED = { "x-forwarded-proto": "https", "x-forwarded-host": "evil.example" };

/** Every absolute URL the answers below carry. */
async function urls(t: TestApp, headers: Record<string, string>): Promise<string[]> {
  const list = await t.json("GET", "/api/dcim/sites/?limit=1", { headers });
  const root = await t.json("GET", "/api/", { headers });
  const plugins = await t.json("GET", "/api/plugins/", { headers });
  const gql = await t.json("POST", "/graphql/", {
    headers,
    body: { query: "{ site_list { url } }" },
  });
  return [
    list.body.results[0].url,
    list.body.next,
    ...Object.values(root.body as Record<string, string>),
    ...Object.values(plugins.body as Record<string, string>),
    ...gql.body.data.site_list.map((s: { url: string }) => s.url),
  ];
}

describe("TRUSTED_PROXY_HOPS=0 (the default)", () => {
  test("a client's X-Forwarded-Proto and X-Forwarded-Host change no URL", async () => {
    const all = await urls(direct, FORGED);
    expect(all.length).toBeGreaterThan(4);
    for (const u of all) expect(u.startsWith("http://host.test/")).toBe(true);
  });
});

describe("TRUSTED_PROXY_HOPS=1", () => {
  test("the proxy's scheme and host make the URLs", async () => {
    const all = await urls(proxied, {
      "x-forwarded-proto": "https",
      "x-forwarded-host": "inv.example:8443",
    });
    for (const u of all) expect(u.startsWith("https://inv.example:8443/")).toBe(true);
  });

  test("only the entry the trusted proxy wrote counts; a malformed host is ignored", async () => {
    const all = await urls(proxied, {
      "x-forwarded-proto": "https, http",
      "x-forwarded-host": "evil.example, inv.example",
    });
    for (const u of all) expect(u.startsWith("http://inv.example/")).toBe(true);
    const bad = await urls(proxied, { "x-forwarded-host": "inv.example/evil?x=" });
    for (const u of bad) expect(u.startsWith("http://host.test/")).toBe(true);
  });
});
