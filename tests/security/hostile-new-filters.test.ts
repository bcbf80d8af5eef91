/**
 * Hostile input on the filters and fields of decisions 0203, 0211 and 0212 (probe of 0213): site
 * coordinates, network filters and tag filters answer each odd or huge value with a 400 keyed by
 * the parameter (DESIGN.md §4), never a 500 or every row; lists of values are bounded before
 * anything is read.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { MAX_FILTER_VALUES } from "../../src/core/limits";

let t: TestApp;
let caller = "";
let site = 0;
beforeAll(async () => {
  t = await makeTestApp();
  site = (await t.json("POST", "/api/dcim/sites/", { body: { name: "hq", slug: "hq" } })).body.id;
  caller = (
    await userWith(t, "hostile-filters", [
      [["view", "change"], "dcim.site", null],
      [["view"], "ipam.prefix", null],
      [["view"], "ipam.ipaddress", null],
      [["view"], "extras.tag", null],
    ])
  ).token;
});
afterAll(() => t.close());

/** The request answers 400 with a message under `key` (a DRF field map). */
async function refusedUnder(method: string, path: string, key: string, body?: unknown) {
  const r = await t.json(method, path, { token: caller, body });
  expect(r.status, `${method} ${path.slice(0, 120)}`).toBe(400);
  const messages = (r.body as Record<string, unknown>)[key];
  expect(Array.isArray(messages), JSON.stringify(r.body).slice(0, 200)).toBe(true);
  expect(typeof (messages as unknown[])[0]).toBe("string");
}

describe("site coordinates (0212)", () => {
  const values = [
    "1e308",
    "NaN",
    "Infinity",
    "-Infinity",
    "9".repeat(10_000),
    "0x10",
    "1_0",
    "1e-400",
  ];
  test("filters refuse values that are no bounded decimal", async () => {
    for (const value of values)
      for (const key of ["latitude", "longitude__gte", "latitude__lt"])
        await refusedUnder("GET", `/api/dcim/sites/?${key}=${encodeURIComponent(value)}`, key);
  });
  test("writes refuse them, and values past the digits, places or range", async () => {
    // `Decimal("1_0")` is 10: DRF takes it on a write (0215)
    const bad = [1e308, ...values.filter((v) => v !== "1_0"), "91", "1.1234567", true, [], {}];
    for (const latitude of bad)
      await refusedUnder("PATCH", `/api/dcim/sites/${site}/`, "latitude", { latitude });
  });
});

describe("network filters (0203, 0211)", () => {
  test("a value that is no network, or past the width, is refused", async () => {
    const cases: Array<[string, string]> = [
      ["prefix", "::ffff:1.2.3.4/200"],
      ["prefix", "1".repeat(10_000)],
      ["prefix", "10.0.0.1/8"],
      ["within", "10.0.0.0/33"],
      ["mask_length", "99999999999999999999"],
      ["mask_length__gte", "1e308"],
    ];
    for (const [key, value] of cases)
      await refusedUnder("GET", `/api/ipam/prefixes/?${key}=${encodeURIComponent(value)}`, key);
    await refusedUnder("GET", `/api/ipam/ip-addresses/?address=${"9".repeat(5_000)}`, "address");
  });
  test("5,000 prefix= values are refused by count", async () => {
    const many = Array.from({ length: 5_000 }, (_, i) => `prefix=10.${i % 256}.${i >> 8}.0/24`);
    await refusedUnder("GET", `/api/ipam/prefixes/?${many.join("&")}`, "prefix");
    const parents = Array.from({ length: 17 }, (_, i) => `parent=10.${i}.0.0/16`);
    await refusedUnder("GET", `/api/ipam/ip-addresses/?${parents.join("&")}`, "parent");
  });
});

describe("tag filters (0211, 0212)", () => {
  test("100,000 tag values, as parameters or in one, are refused before any is read", async () => {
    const names = Array.from({ length: 100_000 }, (_, i) => `t${i}`);
    await refusedUnder("GET", `/api/dcim/sites/?${names.map((n) => `tag=${n}`).join("&")}`, "tag");
    await refusedUnder("GET", `/api/dcim/sites/?tag=${names.join(",")}`, "tag");
    const ids = Array.from({ length: MAX_FILTER_VALUES + 1 }, (_, i) => `tag_id=${i + 1}`);
    await refusedUnder("GET", `/api/dcim/sites/?${ids.join("&")}`, "tag_id");
  });
  test("a tag id that is no whole number is refused", async () => {
    for (const value of ["abc", "1e3", "-1", "99999999999999999999", "1.0"])
      await refusedUnder("GET", `/api/dcim/sites/?tag_id=${value}`, "tag_id");
  });
});
