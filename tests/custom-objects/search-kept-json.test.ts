/**
 * A kept `?q=` page answered again (decision 0116) reuses its records' JSON text, made once, when
 * nothing is hidden and nothing projected: the body is the bytes `c.json` gives, and a caller with
 * references hidden gets its own answer, never the kept text. The answer is kept as the bytes it
 * sent, made once per head (decision 0132). Over HTTP, in the app.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createClient } from "@libsql/client";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { CO, siteLinkedCot } from "./fixtures";

let t: TestApp;
const sites: number[] = [];

beforeAll(async () => {
  t = await makeTestApp();
  const made = await siteLinkedCot(t, "kjson");
  sites.push(...made.sites);
  const cot = { id: made.cotId };
  const db = createClient({ url: t.dbUrl });
  await db.execute(
    `INSERT INTO co_${cot.id} (created, last_updated, name, site_id)
     WITH RECURSIVE x(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM x WHERE i < 60)
     SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'box-' || i, ${sites[0]} + i % 2 FROM x`,
  );
  db.close();
  await flushSearchIndexesNow(servicesOf(t.app));
});
afterAll(() => t.close());

const PATH = `${CO}/kjson/?q=box&limit=10&offset=10`;

/**
 * The body's bytes, the lists of records JSON.stringify was given while answering, and the
 * lengths of the texts TextEncoder encoded meanwhile.
 */
async function searchText(token?: string, path = PATH) {
  const real = JSON.stringify;
  const lists: unknown[] = [];
  const encode = TextEncoder.prototype.encode;
  const encoded: number[] = [];
  TextEncoder.prototype.encode = function (this: TextEncoder, input?: string) {
    encoded.push(input?.length ?? 0);
    return encode.call(this, input);
  };
  const spy = (value: unknown, ...rest: unknown[]) => {
    const results = (value as { results?: unknown } | null)?.results;
    if (Array.isArray(results) && results.length) lists.push(results);
    if (Array.isArray(value) && value.length && (value[0] as { site?: unknown })?.site)
      lists.push(value);
    return (real as (...a: unknown[]) => string)(value, ...rest);
  };
  JSON.stringify = spy as typeof JSON.stringify;
  try {
    const r = await t.req("GET", path, token ? { token } : {});
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("application/json");
    return { text: await r.text(), lists, encoded };
  } finally {
    JSON.stringify = real;
    TextEncoder.prototype.encode = encode;
  }
}

/** What `c.json` gives for the answer the text holds. */
const asCJson = (text: string) => {
  const { count, next, previous, results } = JSON.parse(text);
  return JSON.stringify({ count, next, previous, results });
};

test("the same search again encodes no record: the kept text, byte for byte what c.json gives", async () => {
  const first = await searchText();
  expect(first.lists.length).toBe(1); // made once, here
  const again = await searchText();
  expect(again.lists).toEqual([]);
  expect(again.text).toBe(first.text);
  expect(again.text).toBe(asCJson(again.text));
  const page = JSON.parse(again.text);
  expect(page.count).toBe(60);
  expect(page.results).toHaveLength(10);
  expect(page.next).toContain("offset=20");
  expect(page.results[0].site).toMatchObject({
    name: expect.any(String),
    slug: expect.any(String),
  });
});

test("a caller with references hidden gets its own answer, not the kept text", async () => {
  const viewer = (await userWith(t, "kjson-only", [[["view"], "custom_objects.kjson", null]]))
    .token;
  const full = await searchText(); // kept, with its text, by the superuser's request
  for (let round = 0; round < 2; round++) {
    const hidden = await searchText(viewer);
    expect(hidden.lists.length).toBe(1); // its own results, encoded for it
    expect(hidden.text).not.toBe(full.text);
    expect(hidden.text).toBe(asCJson(hidden.text));
    const page = JSON.parse(hidden.text);
    for (const r of page.results) expect(r.site).toEqual({ id: r.site.id });
  }
  // and a projection is its own answer too
  const brief = await t.json("GET", `${PATH}&brief=1`);
  expect(Object.keys(brief.body.results[0]).sort()).toEqual(["display", "id", "url"]);
  expect((await searchText()).text).toBe(full.text);
});

test("the kept answer is the bytes it sent, made once per head and sent again as they are", async () => {
  const path = `${CO}/kjson/?q=box&limit=7&offset=3`;
  const first = await searchText(undefined, path);
  expect(first.lists.length).toBe(1);
  // encoded once, here: the whole answer (no text of it is built per request any more)
  expect(first.encoded.filter((n) => n > 200)).toHaveLength(1);
  const again = await searchText(undefined, path);
  expect(again.text).toBe(first.text);
  expect(again.lists).toEqual([]);
  expect(again.encoded).toEqual([]);
  // the same page asked by another URL (its links differ): the records' bytes are reused, only
  // the new head is encoded
  const reordered = await searchText(undefined, `${CO}/kjson/?offset=3&q=box&limit=7`);
  expect(reordered.lists).toEqual([]);
  expect(reordered.encoded).toHaveLength(1);
  expect(reordered.encoded[0]!).toBeLessThan(300);
  expect(reordered.text).toBe(asCJson(reordered.text));
  expect(reordered.text).not.toBe(first.text);
  expect(JSON.parse(reordered.text).results).toEqual(JSON.parse(first.text).results);
  expect(JSON.parse(reordered.text).next).toStartWith("http://");
});
