/**
 * What serialising a list page allocates (issue 28 item 5, decision 0149): the engine keeps a
 * scope object per loop pass when a closure in the loop captures the pass's variable, so a closure
 * in the per-row field loop cost a scope per field per row (25 per row on a 20-field type). Counted
 * by JavaScriptCore's live objects by type across one page request: no collection runs in it when
 * the counts only grow, so the largest of a few tries is the page's own allocation.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { heapStats } from "bun:jsc";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, makeCot } from "./fixtures";

let t: TestApp;
const slug = "alloc_item";
const FIELD_COUNT = 20;
const ROWS = 50;

beforeAll(async () => {
  t = await makeTestApp();
  const cot = await makeCot(t, slug, slug);
  for (let i = 0; i < FIELD_COUNT; i++)
    await addField(t, cot.id, { name: `f${i}`, type: i % 2 ? "integer" : "text" });
  const body = Array.from({ length: ROWS }, (_, r) =>
    Object.fromEntries(
      Array.from({ length: FIELD_COUNT }, (_, i) => [`f${i}`, i % 2 ? r * i : `v${r}-${i}`]),
    ),
  );
  expect((await t.json("POST", `${CO}/${slug}/`, { body })).status).toBe(201);
});
afterAll(() => t.close());

const page = `${CO}/${slug}/?limit=${ROWS}`;

/** Scope objects made while one page is answered, or null when a collection ran meanwhile. */
async function scopesOfOnePage(): Promise<number | null> {
  Bun.gc(true);
  const before = heapStats();
  const res = await t.req("GET", page);
  const body = (await res.json()) as { results: unknown[] };
  const after = heapStats();
  expect(body.results.length).toBe(ROWS);
  if (after.objectCount < before.objectCount) return null;
  return (
    (after.objectTypeCounts.JSLexicalEnvironment ?? 0) -
    (before.objectTypeCounts.JSLexicalEnvironment ?? 0)
  );
}

test("a list page's records make no scope per field per row", async () => {
  for (let i = 0; i < 20; i++) await (await t.req("GET", page)).arrayBuffer(); // warm
  const counts: number[] = [];
  for (let i = 0; i < 5; i++) {
    const n = await scopesOfOnePage();
    if (n !== null) counts.push(n);
  }
  expect(counts.length).toBeGreaterThan(0);
  // before: 1,611 (one per field per row and more); now ~460, most of them the request's own
  expect(Math.max(...counts)).toBeLessThan(ROWS * FIELD_COUNT);
});
