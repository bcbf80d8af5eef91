/**
 * A search or a text filter longer than SQLite takes as a LIKE pattern (50,000 bytes, after its
 * wildcards are escaped) answered 500 "LIKE or GLOB pattern too complex" on any table with rows.
 * An attacker with a read-only token sends such a `?q=`, `?name__ic=`, a run of `%`, or a GraphQL
 * `i_contains`: each answers a 400 naming the limit (decision 0179); a value at the limit is
 * still searched, and a permission constraint holding a longer one matches nothing, never a 500.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MAX_FILTER_TEXT_CHARS } from "../../src/core/limits";
import { userWith } from "../helpers/grants";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, create, namedCot } from "../custom-objects/fixtures";

let t: TestApp;
let reader = "";
const over = MAX_FILTER_TEXT_CHARS + 1;
beforeAll(async () => {
  t = await makeTestApp();
  await t.json("POST", "/api/dcim/sites/", { body: { name: "lp site", slug: "lp-site" } });
  await namedCot(t, "lpboxes");
  await create(t, "lpboxes", { name: "lp box" });
  reader = (
    await userWith(
      t,
      "long-pattern-reader",
      [
        [["view"], "dcim.site", null],
        [["view"], "custom_objects.lpboxes", null],
        [["view"], "core.objectchange", null],
      ],
      { writeEnabled: false },
    )
  ).token;
});
afterAll(() => t.close());

const lists = ["/api/dcim/sites/", `${CO}/lpboxes/`, "/api/core/object-changes/"];
/**
 * Values past the limit: one character past it, and what SQLite refused: 60,000 letters, 30,000
 * wildcards (escaped, they double), 13,000 four-byte characters.
 */
const longValues = () => [
  "a".repeat(over),
  "a".repeat(60_000),
  "%".repeat(30_000),
  "😀".repeat(13_000),
];

describe("REST", () => {
  test("a ?q= past the limit answers 400 {q}; at the limit it searches", async () => {
    for (const list of lists) {
      for (const value of longValues()) {
        const r = await t.json("GET", `${list}?q=${encodeURIComponent(value)}`, { token: reader });
        expect(r.status, `${list} ${value.slice(0, 2)}: ${JSON.stringify(r.body)}`).toBe(400);
        expect(r.body.q[0]).toContain(String(MAX_FILTER_TEXT_CHARS));
      }
      // the worst case that passes: every character escaped, or four bytes each
      for (const value of ["%".repeat(MAX_FILTER_TEXT_CHARS), "😀".repeat(MAX_FILTER_TEXT_CHARS)]) {
        const r = await t.json("GET", `${list}?q=${encodeURIComponent(value)}`, { token: reader });
        expect(r.status, list).toBe(200);
        expect(r.body.count).toBe(0);
      }
    }
  });

  test("a text filter value past the limit answers 400 keyed by its parameter", async () => {
    for (const list of lists.slice(0, 2)) {
      for (const param of ["name__ic", "name__isw", "name__niew", "name"]) {
        for (const value of longValues()) {
          const r = await t.json("GET", `${list}?${param}=${encodeURIComponent(value)}`, {
            token: reader,
          });
          expect(r.status, `${list} ${param}: ${JSON.stringify(r.body)}`).toBe(400);
          expect(r.body[param]?.[0], `${list} ${param} ${JSON.stringify(r.body)}`).toContain(
            String(MAX_FILTER_TEXT_CHARS),
          );
        }
      }
      const at = encodeURIComponent("%".repeat(MAX_FILTER_TEXT_CHARS));
      expect((await t.json("GET", `${list}?name__ic=${at}`, { token: reader })).status).toBe(200);
    }
  });
});

test("GraphQL: a lookup past the limit is a GraphQL error naming it, not a 500", async () => {
  for (const [list, value] of [
    ["site_list", "a".repeat(60_000)],
    ["custom_objects_lpboxes_list", "%".repeat(30_000)],
    ["site_list", "a".repeat(over)],
  ] as const) {
    const r = await t.json("POST", "/graphql/", {
      token: reader,
      body: { query: `{ ${list}(filters: {name: {i_contains: "${value}"}}) { id } }` },
    });
    expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(200);
    expect(r.body.data?.[list] ?? null).toBeNull();
    expect(r.body.errors[0].message).toContain(String(MAX_FILTER_TEXT_CHARS));
  }
});

test("a permission constraint holding a longer value matches nothing, never a 500", async () => {
  const { token } = await userWith(t, "long-constraint", [
    [["view"], "dcim.site", { name__icontains: "a".repeat(60_000) }],
  ]);
  const r = await t.json("GET", "/api/dcim/sites/", { token });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(r.body.count).toBe(0);
  expect((await t.json("GET", "/api/dcim/sites/1/", { token })).status).toBe(404);
});
