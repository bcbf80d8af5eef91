/** §4: a wrong method on an existing route is 405 with `Allow`; unknown paths and ids stay 404. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

describe("405 Method Not Allowed", () => {
  const cases: Array<[string, string, string]> = [
    ["POST", "/api/status/", "GET, HEAD"],
    ["DELETE", "/api/", "GET, HEAD"],
    ["PUT", "/api/plugins/custom-objects/", "GET, HEAD"],
    ["PATCH", "/api/plugins/", "GET, HEAD"],
    ["POST", "/api/schema/", "GET, HEAD"],
    ["DELETE", "/livez", "GET, HEAD"],
    ["POST", "/api/status", "GET, HEAD"], // without the trailing slash too
  ];
  for (const [method, path, allow] of cases) {
    test(`${method} ${path} → 405, Allow: ${allow}`, async () => {
      const r = await t.json(method, path);
      expect(r.status).toBe(405);
      expect(r.res.headers.get("allow")).toBe(allow);
      expect(r.body).toEqual({
        detail: `Method "${method}" not allowed.`,
        error: "method_not_allowed",
      });
    });
  }

  test("unknown paths, unknown ids and unknown custom object types stay 404", async () => {
    for (const [method, path] of [
      ["POST", "/api/nothing/"],
      ["GET", "/api/dcim/sites/999/"],
      ["PUT", "/api/plugins/custom-objects/nope/"],
      ["GET", "/nowhere"],
    ]) {
      expect((await t.req(method!, path!)).status).toBe(404);
    }
  });

  test("without a token the answer is still the authentication error (methods are not revealed)", async () => {
    const r = await t.req("POST", "/api/status/", { token: null });
    expect(r.status).toBe(403);
    expect(r.headers.get("allow")).toBeNull();
  });
});
