/**
 * The search-index flush is one read, then one atomic write batch (decision 0105): no lock is held
 * between them, so other writers — a request, plain SQL, another process's flush — may change
 * the rows in between. Whatever they do, every row ends pending or indexed with its current text
 * (the index's invariant, decision 0056), and searches answer exactly what a scan returns. Each
 * test runs its interloper between the flush's read and its write, through the real database.
 */
import { afterAll, beforeAll, beforeEach, expect, test } from "bun:test";
import type { Database } from "../../src/db/client";
import { flushSearchIndex } from "../../src/plugins/custom-objects/search/search-index";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, create, makeCot } from "./fixtures";

let t: TestApp;
let cotId: number;

beforeAll(async () => {
  t = await makeTestApp();
  cotId = (await makeCot(t, "raced")).id;
  await addField(t, cotId, { name: "title", type: "text", primary: true });
  await addField(t, cotId, { name: "notes", type: "longtext" });
});
afterAll(() => t.close());

const exec = (sql: string, args: Array<string | number> = []) =>
  t.deps.db.client.execute({ sql, args });
const pendingIds = async () =>
  (await exec(`SELECT id FROM co_search_pending WHERE type_id = ${cotId} ORDER BY id`)).rows.map(
    (r) => Number(r.id),
  );
/** Ids whose index entry matches `needle` (lower case, as the index holds text), pending or not. */
const indexHas = async (needle: string) =>
  (
    await exec(
      `SELECT rowid - ${cotId} * 1099511627776 AS id FROM co_search WHERE co_search MATCH ? AND rowid BETWEEN ${cotId} * 1099511627776 AND ${cotId} * 1099511627776 + 1099511627775 ORDER BY rowid`,
      [`"${needle}"`],
    )
  ).rows.map((r) => Number(r.id));
const searched = async (needle: string) =>
  (
    (await t.json("GET", `${CO}/raced/?limit=1000&q=${encodeURIComponent(needle)}`)).body
      .results as Array<{ id: number }>
  ).map((r) => r.id);
const scanned = async (needle: string) =>
  (
    await exec(`SELECT id FROM "co_${cotId}" WHERE title LIKE ? OR notes LIKE ? ORDER BY id`, [
      `%${needle}%`,
      `%${needle}%`,
    ])
  ).rows.map((r) => Number(r.id));

/** The app's database, with `interloper` run (committed) after the flush's read, before its write. */
function racedBy(interloper: () => Promise<unknown>): Database {
  const db = t.deps.db;
  let ran = false;
  return {
    ...db,
    write: async (queries) => {
      if (!ran) {
        ran = true;
        await interloper();
      }
      return db.write(queries);
    },
  };
}

/** Flushes the type until nothing is left to take (on the app's own database). */
async function drain() {
  while ((await flushSearchIndex(t.deps.db, cotId)) > 0);
}

beforeEach(async () => {
  await drain();
  expect(await pendingIds()).toEqual([]);
});

test("a new row updated between the read and the write is indexed with its new text", async () => {
  const id = (await create(t, "raced", { title: "kestrel-old" })).id;
  const raced = racedBy(() =>
    exec(`UPDATE "co_${cotId}" SET title = ? WHERE id = ?`, ["osprey-new", id]),
  );
  expect(await flushSearchIndex(raced, cotId)).toBeGreaterThan(0);
  // not stale: the entry is the text the row has now, and the row is no longer pending
  expect(await indexHas("kestrel-old")).toEqual([]);
  expect(await indexHas("osprey-new")).toEqual([id]);
  expect(await pendingIds()).toEqual([]);
  expect(await searched("kestrel")).toEqual(await scanned("kestrel"));
  expect(await searched("osprey")).toEqual([id]);
});

test("an indexed row changed between the read and the write loses its old entry", async () => {
  const id = (await create(t, "raced", { title: "heron-one" })).id;
  await drain();
  await exec(`UPDATE "co_${cotId}" SET title = ? WHERE id = ?`, ["heron-two", id]);
  const raced = racedBy(() =>
    exec(`UPDATE "co_${cotId}" SET title = ? WHERE id = ?`, ["heron-three", id]),
  );
  await flushSearchIndex(raced, cotId);
  expect(await indexHas("heron-one")).toEqual([]);
  expect(await indexHas("heron-two")).toEqual([]);
  expect(await indexHas("heron-three")).toEqual([id]);
  expect(await searched("heron-t")).toEqual([id]);
  expect(await searched("heron-one")).toEqual([]);
});

test("a row that grew past the size limit between the read and the write stays pending, and is found", async () => {
  const id = (await create(t, "raced", { title: "small-finch" })).id;
  const big = `${"w".repeat(70 * 1024)} buried-wren`;
  const raced = racedBy(() => exec(`UPDATE "co_${cotId}" SET notes = ? WHERE id = ?`, [big, id]));
  await flushSearchIndex(raced, cotId);
  expect(await pendingIds()).toEqual([id]);
  expect(await indexHas("small-finch")).toEqual([]);
  expect(await searched("buried-wren")).toEqual([id]);
  expect(await searched("small-finch")).toEqual([id]);
  // it stays out of the index for good (decision 0056); the next test starts from a clean slate
  await exec(`UPDATE "co_${cotId}" SET notes = NULL WHERE id = ?`, [id]);
});

test("a row deleted between the read and the write leaves the index and pending", async () => {
  const id = (await create(t, "raced", { title: "plover-gone" })).id;
  await drain();
  await exec(`UPDATE "co_${cotId}" SET notes = 'touched' WHERE id = ?`, [id]);
  const raced = racedBy(() => exec(`DELETE FROM "co_${cotId}" WHERE id = ?`, [id]));
  await flushSearchIndex(raced, cotId);
  expect(await indexHas("plover-gone")).toEqual([]);
  expect(await pendingIds()).toEqual([]);
  expect(await searched("plover")).toEqual([]);
});

test("another flush between the read and the write, then a change: the row stays pending, the next flush indexes it", async () => {
  const id = (await create(t, "raced", { title: "gannet-first" })).id;
  // another process's flush indexes the row after this one read it; then a write changes it
  const raced = racedBy(async () => {
    await drain();
    await exec(`UPDATE "co_${cotId}" SET title = ? WHERE id = ?`, ["gannet-second", id]);
  });
  await flushSearchIndex(raced, cotId);
  // this flush read the row without an entry: it must not add a second one, nor drop it from
  // pending while the entry it has is the old text
  expect(await pendingIds()).toEqual([id]);
  expect(await searched("gannet-second")).toEqual([id]);
  expect(await searched("gannet-first")).toEqual([]);
  await drain();
  expect(await pendingIds()).toEqual([]);
  expect(await indexHas("gannet-first")).toEqual([]);
  expect(await indexHas("gannet-second")).toEqual([id]);
  expect(await searched("gannet")).toEqual([id]);
});

test("the index rebuilt between the read and the write (a field added): the write rolls back, the flush reads again", async () => {
  const id = (await create(t, "raced", { title: "tern-title" })).id;
  const raced = racedBy(async () => {
    expect((await addField(t, cotId, { name: "remark", type: "text" })).id).toBeGreaterThan(0);
    await exec(`UPDATE "co_${cotId}" SET remark = 'tern-remark' WHERE id = ?`, [id]);
  });
  expect(await flushSearchIndex(raced, cotId)).toBeGreaterThan(0);
  // written with the new index's columns (the old ones' write would leave `remark` out)
  expect(await pendingIds()).toEqual([]);
  expect(await indexHas("tern-remark")).toEqual([id]);
  expect(await searched("tern-remark")).toEqual([id]);
  expect(await searched("tern-title")).toEqual([id]);
});
