/**
 * Row 4 of issue 27: rows of 1 MB text, then one GraphQL query with aliases of a 1,000-row list
 * (an 894 MB answer) or concurrent REST pages of 1,000. Text and JSON values have documented
 * maximum sizes, GraphQL weighs every list by its page size, and REST and GraphQL answers have a
 * byte budget: a request whose answer would pass it is a 400 telling the client to page, before
 * any row is read (decision 0068).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, makeCot } from "../custom-objects/fixtures";
import { MAX_JSON_CHARS, MAX_LONGTEXT_CHARS, MAX_TEXT_CHARS } from "../../src/core/limits";
import { GRAPHQL_LIMITS } from "../../src/graphql/routes";

const BUDGET = 1_048_576;
let t: TestApp;

beforeAll(async () => {
  // Bodies up to 4 MiB, so the value caps (not the body limit) answer; a 1 MiB answer budget.
  t = await makeTestApp({
    MAX_BODY_BYTES: String(4 * 1_048_576),
    MAX_RESPONSE_BYTES: String(BUDGET),
  });
  const cot = await makeCot(t, "blob");
  await addField(t, cot.id, { name: "title", type: "text", primary: true });
  await addField(t, cot.id, { name: "body", type: "longtext" });
  await addField(t, cot.id, { name: "data", type: "json" });
  // Six rows of 300 KB each: any page of four or more passes the 1 MiB budget.
  for (let i = 0; i < 6; i++) {
    const r = await t.json("POST", `${CO}/blob/`, {
      body: { title: `b${i}`, body: "x".repeat(300_000) },
    });
    expect(r.status).toBe(201);
    const s = await t.json("POST", "/api/dcim/sites/", {
      body: { name: `s${i}`, slug: `s${i}`, comments: "y".repeat(300_000) },
    });
    expect(s.status).toBe(201);
  }
});
afterAll(() => t.close());

describe("values have maximum sizes", () => {
  test("text, longtext, JSON and host comments past their caps answer 400 naming the cap", async () => {
    const cases: Array<[string, Record<string, unknown>, string, number]> = [
      [`${CO}/blob/`, { title: "a".repeat(MAX_TEXT_CHARS + 1) }, "title", MAX_TEXT_CHARS],
      [
        `${CO}/blob/`,
        { title: "t", body: "b".repeat(MAX_LONGTEXT_CHARS + 1) },
        "body",
        MAX_LONGTEXT_CHARS,
      ],
      [`${CO}/blob/`, { title: "t", data: ["d".repeat(MAX_JSON_CHARS)] }, "data", MAX_JSON_CHARS],
      [
        "/api/dcim/sites/",
        { name: "big", slug: "big", comments: "c".repeat(MAX_LONGTEXT_CHARS + 1) },
        "comments",
        MAX_LONGTEXT_CHARS,
      ],
    ];
    for (const [path, body, field, cap] of cases) {
      const r = await t.json("POST", path, { body });
      expect({ field, status: r.status }).toEqual({ field, status: 400 });
      expect(r.body[field][0]).toContain(`no more than ${cap} characters`);
    }
  });

  test("values at the cap are accepted", async () => {
    const r = await t.json("POST", `${CO}/blob/`, { body: { title: "a".repeat(MAX_TEXT_CHARS) } });
    expect(r.status).toBe(201);
    await t.json("DELETE", `${CO}/blob/${r.body.id}/`);
  });
});

describe("REST answers have a byte budget", () => {
  test("a page past the budget answers 400 response_too_large; smaller pages work", async () => {
    for (const path of [`${CO}/blob/`, "/api/dcim/sites/"]) {
      const big = await t.json("GET", `${path}?limit=1000`);
      expect({ path, status: big.status }).toEqual({ path, status: 400 });
      expect(big.body).toMatchObject({ error: "response_too_large", limit: BUDGET });
      expect(big.body.detail).toContain("smaller page");
      const small = await t.json("GET", `${path}?limit=2`);
      expect(small.status).toBe(200);
      expect(small.body.results).toHaveLength(2);
      expect(small.body.next).toContain("offset=2");
    }
  });
});

describe("every way a list picks its page is weighed", () => {
  // The page's ids come with what their rows take (one statement): a deep page found from an
  // anchor and a `?q=` page from the search index are charged like a shallow one.
  beforeAll(async () => {
    const cot = await makeCot(t, "deep");
    await addField(t, cot.id, { name: "title", type: "text", primary: true });
    await addField(t, cot.id, { name: "body", type: "longtext" });
    const small = Array.from({ length: 1024 }, (_, i) => ({ title: `small ${i}` }));
    expect((await t.json("POST", `${CO}/deep/`, { body: small })).status).toBe(201);
    for (let i = 0; i < 4; i++) {
      const r = await t.json("POST", `${CO}/deep/`, {
        body: { title: `heavy ${i}`, body: "z".repeat(300_000) },
      });
      expect(r.status).toBe(201);
    }
  });

  test("a deep page (offset past the first anchor) of heavy rows answers 400", async () => {
    const big = await t.json("GET", `${CO}/deep/?limit=4&offset=1024`);
    expect(big.status).toBe(400);
    expect(big.body).toMatchObject({ error: "response_too_large", limit: BUDGET });
    const small = await t.json("GET", `${CO}/deep/?limit=2&offset=1024`);
    expect(small.status).toBe(200);
    expect(small.body.results.map((r: { title: string }) => r.title)).toEqual([
      "heavy 0",
      "heavy 1",
    ]);
  });

  test("a ?q= page of heavy rows answers 400", async () => {
    const big = await t.json("GET", `${CO}/deep/?q=heavy&limit=4`);
    expect(big.status).toBe(400);
    expect(big.body).toMatchObject({ error: "response_too_large", limit: BUDGET });
    const small = await t.json("GET", `${CO}/deep/?q=heavy&limit=2`);
    expect(small.status).toBe(200);
    expect(small.body.count).toBe(4);
    expect(small.body.results).toHaveLength(2);
  });
});

describe("GraphQL", () => {
  test("aliases of full pages are weighed by page size and refused before running", async () => {
    const aliases = Array.from({ length: 30 }, (_, i) => `a${i}: site_list { id }`).join(" ");
    const r = await t.json("POST", "/graphql/", { body: { query: `{ ${aliases} }` } });
    expect(r.body.data ?? null).toBeNull();
    expect(r.body.errors[0].message).toContain(`limit of ${GRAPHQL_LIMITS.maxRows}`);
    // The same aliases on small pages pass: the cost is the rows, not the aliases.
    for (const n of [1, 2])
      await t.json("POST", "/api/tenancy/tenants/", { body: { name: `t${n}`, slug: `t${n}` } });
    const small = Array.from(
      { length: 30 },
      (_, i) => `a${i}: tenant_list(pagination: {limit: 2}) { id }`,
    ).join(" ");
    const ok = await t.json("POST", "/graphql/", { body: { query: `{ ${small} }` } });
    expect(ok.status).toBe(200);
    expect(ok.body.data.a29).toHaveLength(2);
  });

  test("a page size in a variable counts too", async () => {
    const query = `query($p: OffsetPaginationInput) { ${Array.from({ length: 6 }, (_, i) => `a${i}: site_list(pagination: $p) { id }`).join(" ")} }`;
    const r = await t.json("POST", "/graphql/", {
      body: { query, variables: { p: { limit: 1000 } } },
    });
    expect(r.body.errors[0].message).toContain(`limit of ${GRAPHQL_LIMITS.maxRows}`);
  });

  test("aliases whose rows pass the byte budget answer 400 response_too_large, no partial data", async () => {
    const aliases = Array.from(
      { length: 4 },
      (_, i) => `a${i}: custom_objects_blob_list(pagination: {limit: 3}) { id body }`,
    ).join(" ");
    const r = await t.json("POST", "/graphql/", { body: { query: `{ ${aliases} }` } });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: "response_too_large", limit: BUDGET });
    expect(r.body.errors[0].extensions.code).toBe("RESPONSE_TOO_LARGE");
    expect(r.body.data).toBeUndefined();
  });
});
