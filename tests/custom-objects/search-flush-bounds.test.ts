/**
 * The full-text flush tokenises a bounded amount of text per transaction (it runs on the event
 * loop), rows with very large text stay pending for good, and searches stay exact either way.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import {
  FLUSH_BYTES,
  flushSearchIndex,
  INDEXED_ROW_MAX_BYTES,
} from "../../src/plugins/custom-objects/search/search-index";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { makeTestApp, type TestApp } from "../helpers/app";

const CO = "/api/plugins/custom-objects";
let t: TestApp;
let cotId: number;

const pendingCount = async () =>
  Number(
    (
      (await t.deps.db.orm.all(
        sql.raw(`SELECT count(*) AS n FROM co_search_pending WHERE type_id = ${cotId}`),
      )) as Array<{ n: number }>
    )[0]!.n,
  );

beforeAll(async () => {
  t = await makeTestApp();
  const cot = await t.json("POST", `${CO}/custom-object-types/`, {
    body: { name: "note", slug: "note" },
  });
  cotId = cot.body.id;
  for (const [name, type] of [
    ["title", "text"],
    ["body", "longtext"],
  ] as const) {
    const f = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: cotId, name, type, primary: name === "title" },
    });
    expect(f.status).toBe(201);
  }
  // Whatever the app's own flusher did meanwhile, start from an empty pending table.
  await flushSearchIndexesNow(t.app.services);
});
afterAll(() => t.close());

describe("bounded flushes", () => {
  test("one flush transaction takes about FLUSH_BYTES of text, however many rows wait", async () => {
    const size = 40 * 1024;
    for (let i = 0; i < 10; i++) {
      const r = await t.req("POST", `${CO}/note/`, {
        body: { title: `mid-${i}`, body: `${"m".repeat(size)} mid-${i}` },
      });
      expect(r.status).toBe(201);
    }
    // Rows of 40 KiB: the first flush stops at the byte budget, far below its row limit.
    const first = await flushSearchIndex(t.deps.db, cotId);
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(Math.ceil(FLUSH_BYTES / size));
    let total = first;
    for (let n = first; n > 0; total += n) n = await flushSearchIndex(t.deps.db, cotId);
    expect(total).toBe(10);
    expect(await pendingCount()).toBe(0);
  });

  test("a row over INDEXED_ROW_MAX_BYTES stays pending, and ?q= still finds text deep inside it", async () => {
    const filler = "z".repeat(INDEXED_ROW_MAX_BYTES + 1024);
    const r = await t.json("POST", `${CO}/note/`, {
      body: { title: "huge", body: `${filler} deep-needle-42` },
    });
    expect(r.status).toBe(201);
    await flushSearchIndexesNow(t.app.services);
    expect(await flushSearchIndex(t.deps.db, cotId)).toBe(0);
    expect(await pendingCount()).toBe(1);
    const found = await t.json("GET", `${CO}/note/?q=deep-needle-42`);
    expect(found.status).toBe(200);
    expect(found.body.results.map((o: { id: number }) => o.id)).toEqual([r.body.id]);
    // An indexed row is found through the index too.
    const mid = await t.json("GET", `${CO}/note/?q=mid-3`);
    expect(mid.body.count).toBe(1);
  });

  test("a deleted row leaves the index even when the flush budget is spent on others", async () => {
    const list = await t.json("GET", `${CO}/note/?q=mid-5`);
    const id = list.body.results[0].id;
    expect((await t.req("DELETE", `${CO}/note/${id}/`)).status).toBe(204);
    await flushSearchIndexesNow(t.app.services);
    const rows = (await t.deps.db.orm.all(
      sql.raw(
        `SELECT count(*) AS n FROM co_search_docsize WHERE id = ${cotId} * 1099511627776 + ${Number(id)}`,
      ),
    )) as Array<{ n: number }>;
    expect(Number(rows[0]!.n)).toBe(0);
    expect((await t.json("GET", `${CO}/note/?q=mid-5`)).body.count).toBe(0);
  });
});
