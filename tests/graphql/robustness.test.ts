/**
 * GraphQL robustness: hostile documents get a clear GraphQL error (HTTP 4xx or 200 with
 * `errors`), never a 5xx, a stack trace or a hang — depth, cost, aliases, token count, deep
 * filter nesting, huge filters, bad pagination and oversized bodies.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, create, makeCot } from "../custom-objects/fixtures";
import { GRAPHQL_LIMITS } from "../../src/graphql/routes";
import { MAX_FILTER_NESTING } from "../../src/graphql/resolve";

let t: TestApp;

beforeAll(async () => {
  t = await makeTestApp();
  const node = await makeCot(t, "node");
  await addField(t, node.id, { name: "label", type: "text", primary: true });
  await addField(t, node.id, {
    name: "parent",
    type: "object",
    related_object_type: "custom_objects.node",
  });
  const root = await create(t, "node", { label: "root" });
  await create(t, "node", { label: "child", parent: root.id });
});
afterAll(() => t.close());

async function post(query: string, variables?: unknown) {
  const res = await t.req("POST", "/graphql/", {
    body: { query, variables },
    headers: { accept: "application/json" },
  });
  const text = await res.text();
  return {
    status: res.status,
    body: text ? JSON.parse(text) : null,
    text,
  };
}

/** A refused document: a 4xx or a 200 with errors, the message naming the problem, no data leak. */
function refused(r: Awaited<ReturnType<typeof post>>, pattern: RegExp) {
  expect(r.status).toBeLessThan(500);
  expect(r.body.errors?.length).toBeGreaterThan(0);
  expect(r.body.errors.map((e: any) => e.message).join(" ")).toMatch(pattern);
  expect(r.text).not.toMatch(/at \w+ \(|node_modules|\.ts:\d+/); // no stack trace
}

describe("document limits", () => {
  test("a query deeper than the limit is refused", async () => {
    const deep = (n: number) =>
      `{ custom_objects_node_list { ${"parent { ".repeat(n)}label${" }".repeat(n)} } }`;
    const ok = await post(deep(3));
    expect(ok.status).toBe(200);
    expect(ok.body.errors).toBeUndefined();
    refused(await post(deep(GRAPHQL_LIMITS.maxDepth + 5)), /depth/i);
  });

  test("too many aliases are refused", async () => {
    const q = `{ ${Array.from({ length: GRAPHQL_LIMITS.maxAliases + 10 }, (_, i) => `a${i}: site_list { id }`).join(" ")} }`;
    refused(await post(q), /alias/i);
  });

  test("a document over the cost limit is refused", async () => {
    const chain = (d: number) => `label ${"parent { label ".repeat(d)}${"}".repeat(d)}`;
    const ok = await post(`{ a: custom_objects_node_list { ${chain(7)} } }`);
    expect(ok.body.errors).toBeUndefined();
    const wide = Array.from(
      { length: 28 },
      (_, i) => `a${i}: custom_objects_node_list { ${chain(7)} }`,
    ).join(" ");
    refused(await post(`{ ${wide} }`), /cost|complexity/i);
  });

  // Quickly, by construction: the parser gives up at the token limit or at the first bad token,
  // long before the end of either document (how long a refusal takes is bench/graphql.ts's job).
  test("a huge document is refused at the token limit, 40,000 nested braces at the second", async () => {
    const many = `{ ${Array.from({ length: 20_000 }, () => "site_list { id }").join(" ")} }`;
    const r1 = await post(many);
    refused(r1, /token/i);
    expect(r1.text).toContain(String(GRAPHQL_LIMITS.maxTokens));
    const nested = await post("{".repeat(40_000) + "}".repeat(40_000));
    refused(nested, /Syntax Error/);
    expect(nested.body.errors[0].locations).toEqual([{ line: 1, column: 2 }]);
  });

  test("syntax errors, unknown fields and prototype names are GraphQL errors", async () => {
    refused(await post("{ site_list { id "), /Syntax Error/);
    refused(await post("{ constructor }"), /Cannot query field/);
    refused(
      await post("{ site_list(filters: {__proto__: {exact: 1}}) { id } }"),
      /not defined|Syntax Error|Name "__proto__"/,
    );
    refused(
      await post('{ site_list(filters: {constructor: {exact: "1"}}) { id } }'),
      /not defined/,
    );
  });
});

describe("argument limits", () => {
  test("pagination outside its bounds is a clear error", async () => {
    refused(
      await post("{ site_list(pagination: {limit: 5000}) { id } }"),
      /limit must be between 1 and 1000/,
    );
    refused(
      await post("{ site_list(pagination: {offset: -1}) { id } }"),
      /offset must be a non-negative integer/,
    );
    refused(
      await post("{ site_list(pagination: {offset: 1e300}) { id } }"),
      /Int cannot represent|offset/,
    );
  });

  test("filters nested past the limit or with too many values are clear errors", async () => {
    const nest = (n: number) => `${"{NOT: ".repeat(n)}{label: {exact: "x"}}${"}".repeat(n)}`;
    const ok = await post(`{ custom_objects_node_list(filters: ${nest(2)}) { label } }`);
    expect(ok.body.errors).toBeUndefined();
    refused(
      await post(
        `{ custom_objects_node_list(filters: ${nest(MAX_FILTER_NESTING + 2)}) { label } }`,
      ),
      /nest at most/,
    );
    const values = Array.from({ length: 999 }, (_, i) => `"v${i}"`).join(", ");
    refused(
      await post(
        `{ custom_objects_node_list(filters: {label: {in_list: [${values}]}}) { label } }`,
      ),
      /at most 100/,
    );
    const ors = Array.from({ length: 150 }, (_, i) => `{label: {exact: "v${i}"}}`).join(", ");
    refused(
      await post(`{ custom_objects_node_list(filters: {OR: [${ors}]}) { label } }`),
      /at most 100/,
    );
  });

  test("an id that is not a number finds nothing; a 400-digit number is refused or finds nothing", async () => {
    const r = await post(
      `{ custom_objects_node(id: "abc") { label } big: custom_objects_node(id: "${"9".repeat(400)}") { label } }`,
    );
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual({ custom_objects_node: null, big: null });
    const f = await post(
      `{ custom_objects_node_list(filters: {id: {exact: "${"9".repeat(400)}"}}) { label } }`,
    );
    expect(f.status).toBeLessThan(500);
    expect(f.body.data?.custom_objects_node_list ?? []).toEqual([]);
  });
});

describe("transport", () => {
  test("an oversized body is 413, malformed JSON and a wrong method are 4xx", async () => {
    const big = await t.req("POST", "/graphql/", {
      raw: JSON.stringify({ query: `{ site_list { id } }`, pad: "x".repeat(1_100_000) }),
    });
    expect(big.status).toBe(413);
    const bad = await t.req("POST", "/graphql/", { raw: "{not json" });
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(bad.status).toBeLessThan(500);
    const del = await t.req("DELETE", "/graphql/");
    expect(del.status).toBe(405);
    const noQuery = await t.req("POST", "/graphql/", { body: {} });
    expect(noQuery.status).toBeLessThan(500);
    expect(((await noQuery.json()) as any).errors.length).toBeGreaterThan(0);
  });

  test("a browser gets the offline query page; it loads nothing from elsewhere", async () => {
    const res = await t.req("GET", "/graphql/", { token: null, headers: { accept: "text/html" } });
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain("Host GraphQL");
    expect(html).not.toMatch(/https?:\/\//);
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
  });
});
