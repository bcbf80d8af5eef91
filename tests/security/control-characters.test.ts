/**
 * Row 13 of issue 27: `?q=ab%00cd` (and `name=`, `__ic`, `__isw`, `__iew`) answered 500
 * "unterminated string" from the full-text index. NUL and every other control character in a
 * search or filter answers 400 in the §4 shape, on host models and custom objects, REST and
 * GraphQL (decision 0068).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;

beforeAll(async () => {
  t = await makeTestApp();
  await t.json("POST", "/api/dcim/sites/", { body: { name: "abcd", slug: "abcd" } });
  const cot = await makeCot(t, "circuit");
  await addField(t, cot.id, { name: "cid", type: "text", primary: true });
  await addField(t, cot.id, { name: "notes", type: "longtext" });
  for (let i = 0; i < 5; i++) await create(t, "circuit", { cid: `abcd-${i}`, notes: "abcdef" });
});
afterAll(() => t.close());

const CONTROLS = ["\u0000", "\u0001", "\n", "\t", "\u001b", "\u007f"];
const PARAMS = {
  "/api/dcim/sites/": ["q", "name", "name__ic", "name__isw", "name__iew", "slug__n"],
  [`${CO}/circuit/`]: ["q", "cid", "cid__ic", "cid__isw", "cid__iew", "notes__ic"],
};

describe("REST searches and filters", () => {
  for (const [path, params] of Object.entries(PARAMS)) {
    test(`${path}: every control character in every search and filter answers 400`, async () => {
      for (const param of params) {
        for (const ch of CONTROLS) {
          const value = encodeURIComponent(`ab${ch}cd`);
          const r = await t.json("GET", `${path}?${param}=${value}`);
          expect({ param, ch, status: r.status }).toEqual({ param, ch, status: 400 });
          expect(r.body[param][0]).toContain("Control characters");
        }
      }
    });
  }

  test("the plain value still searches", async () => {
    const r = await t.json("GET", `${CO}/circuit/?q=abcd`);
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(5);
  });
});

describe("GraphQL filters", () => {
  test("a NUL in a string lookup is a GraphQL error, not a 500", async () => {
    for (const [field, filter] of [
      ["site_list", "name: {i_contains: $v}"],
      ["custom_objects_circuit_list", "cid: {i_starts_with: $v}"],
    ]) {
      const r = await t.json("POST", "/graphql/", {
        body: {
          query: `query($v: String!) { ${field}(filters: {${filter}}) { id } }`,
          variables: { v: "ab\u0000cd" },
        },
      });
      expect(r.status).toBeLessThan(500);
      expect(r.body.errors[0].message).toContain("Control characters");
    }
  });
});
