/**
 * Decision 0130 (issue 30 item 4): one full-text index for every custom object type. A type's
 * schema is its table, its id index and three triggers — no FTS5 table, shadow tables or pending
 * table of its own, so the schema SQLite parses after each change does not grow by a virtual
 * table per type. The shared index keeps decision 0056's invariant across types: a removed
 * type's entries leave (and a new type that takes its id never sees them), and ids outside a
 * type's rowid range stay pending for good while searches stay exact.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { makeTestApp, type TestApp } from "../helpers/app";
import { doc, SCHEMA } from "../schema/helpers";
import { addField, CO, create, makeCot } from "./fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const SPAN = 1099511627776; // 2^40: the object ids of one type's rowid range
const n = async (sql: string, args: Array<string | number> = []) =>
  Number((await t.deps.db.client.execute({ sql, args })).rows[0]![0]);
const range = (cotId: number) => `BETWEEN ${cotId} * ${SPAN} AND ${cotId} * ${SPAN} + ${SPAN - 1}`;
const entries = (cotId: number) =>
  n(`SELECT count(*) FROM co_search_docsize WHERE id ${range(cotId)}`);
const pending = (cotId: number) =>
  n(`SELECT count(*) FROM co_search_pending WHERE type_id = ?`, [cotId]);
const flush = () => flushSearchIndexesNow(servicesOf(t.app));
/** The schema objects (tables, indexes, triggers) that belong to one type's table. */
const schemaRows = async (cotId: number) =>
  (
    await t.deps.db.client.execute({
      sql: "SELECT type, name FROM sqlite_master WHERE tbl_name = ? OR name = ? OR name GLOB ? ORDER BY name",
      args: [`co_${cotId}`, `co_${cotId}`, `co_${cotId}_[!0-9]*`],
    })
  ).rows.map((r) => `${r.type} ${r.name}`);
const found = async (slug: string, query: string) => {
  const r = await t.json("GET", `${CO}/${slug}/?limit=1000&${query}`);
  expect(r.status).toBe(200);
  return {
    count: r.body.count as number,
    ids: (r.body.results as Array<{ id: number }>).map((o) => o.id),
  };
};

async function textType(slug: string) {
  const cot = await makeCot(t, slug);
  await addField(t, cot.id, { name: "title", type: "text", primary: true });
  await addField(t, cot.id, { name: "notes", type: "longtext" });
  return cot;
}

test("a type adds five schema rows, and the schema holds one FTS5 table however many types there are", async () => {
  const virtualTables = () =>
    n("SELECT count(*) FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'");
  const before = await virtualTables();
  const made = [];
  for (let i = 0; i < 12; i++) made.push(await textType(`rows_${i}`));
  for (const cot of made) {
    const rows = await schemaRows(cot.id);
    // the table, its id index and the three triggers (11 with an index of its own)
    expect({ cot: cot.id, rows }).toEqual({
      cot: cot.id,
      rows: [
        `table co_${cot.id}`,
        `trigger co_${cot.id}_fts_ad`,
        `trigger co_${cot.id}_fts_ai`,
        `trigger co_${cot.id}_fts_au`,
        `index co_${cot.id}_id_idx`,
      ].sort((a, b) => a.split(" ")[1]!.localeCompare(b.split(" ")[1]!)),
    });
  }
  expect(before).toBe(1);
  expect(await virtualTables()).toBe(1);
  // a column apply beside them parses no virtual table of theirs: none exists
  const added = await addField(t, made[0]!.id, { name: "extra", type: "text" });
  expect(added.id).toBeGreaterThan(0);
  expect(await virtualTables()).toBe(1);
  expect((await schemaRows(made[0]!.id)).length).toBe(5);
});

test("a removed type's entries leave the shared index, and a new type taking its id never sees them", async () => {
  const a = await textType("reuse_a");
  for (const title of ["needle one", "needle two", "needle three"])
    await create(t, a.slug, { title, notes: "stale text" });
  await flush();
  expect(await entries(a.id)).toBe(3);
  expect((await found(a.slug, "q=needle")).count).toBe(3);

  // removed: in the same batch, every row is marked pending (its entry then leaves by the flusher)
  expect((await t.req("DELETE", `${CO}/custom-object-types/${a.id}/`)).status).toBe(204);
  expect(await pending(a.id)).toBe(3);
  expect(await entries(a.id)).toBe(3);

  // a new type takes the same id (its sequence moved back, as a restored backup could) before
  // any flush: its rows get the same object ids as the stale entries
  await t.deps.db.client.execute({
    sql: "UPDATE sqlite_sequence SET seq = ? WHERE name = 'custom_object_types'",
    args: [a.id - 1],
  });
  const b = await textType("reuse_b");
  expect(b.id).toBe(a.id);
  const made = [];
  for (const title of ["other one", "other two", "other three"])
    made.push((await create(t, b.slug, { title, notes: null })).id);
  for (const query of ["q=needle", "q=stale", "title__ic=needle", "notes__ic=stale"])
    expect({ query, ...(await found(b.slug, query)) }).toEqual({ query, count: 0, ids: [] });
  expect(await found(b.slug, "q=other")).toEqual({ count: 3, ids: made });
  await flush();
  expect({ pending: await pending(b.id), entries: await entries(b.id) }).toEqual({
    pending: 0,
    entries: 3,
  });
  for (const query of ["q=needle", "q=stale", "title__ic=needle", "notes__ic=stale"])
    expect({ query, ...(await found(b.slug, query)) }).toEqual({ query, count: 0, ids: [] });
  expect(await found(b.slug, "q=other")).toEqual({ count: 3, ids: made });

  // removed and flushed before anything takes the id: its entries and pending rows are gone
  expect((await t.req("DELETE", `${CO}/custom-object-types/${b.id}/`)).status).toBe(204);
  await flush();
  expect({ pending: await pending(b.id), entries: await entries(b.id) }).toEqual({
    pending: 0,
    entries: 0,
  });
});

test("ids outside a type's rowid range stay pending for good; searches stay exact", async () => {
  const cot = await textType("far_ids");
  const inside = await create(t, cot.slug, { title: "faraway near", notes: null });
  const c = t.deps.db.client;
  // plain SQL can give ids the packing cannot hold: negative, and 2^40 and past
  for (const id of [-5, SPAN, SPAN + 7])
    await c.execute({
      sql: `INSERT INTO "co_${cot.id}" (id, created, last_updated, title) VALUES (?, '2024-01-01', '2024-01-01', ?)`,
      args: [id, `faraway ${id}`],
    });
  await flush();
  expect(await pending(cot.id)).toBe(3);
  expect(await entries(cot.id)).toBe(1);
  const expected = { count: 4, ids: [-5, inside.id, SPAN, SPAN + 7] };
  expect(await found(cot.slug, "q=faraway")).toEqual(expected);
  expect(await found(cot.slug, "title__ic=araway")).toEqual(expected);
  const desc = await t.json("GET", `${CO}/${cot.slug}/?q=faraway&ordering=-id&limit=2`);
  expect({
    count: desc.body.count,
    ids: desc.body.results.map((o: { id: number }) => o.id),
  }).toEqual({ count: 4, ids: [SPAN + 7, SPAN] });
  // a further flush finds nothing it can index and stops (they stay pending)
  await flush();
  expect(await pending(cot.id)).toBe(3);
  await c.execute(`DELETE FROM "co_${cot.id}" WHERE id <> ${inside.id}`);
  await flush();
  expect(await pending(cot.id)).toBe(0);
  expect(await found(cot.slug, "q=faraway")).toEqual({ count: 1, ids: [inside.id] });
});

test("a type trashed by an apply loses its entries; restored, it is searched exactly and indexed again", async () => {
  const apply = (body: Record<string, unknown>) =>
    t.json("POST", `${SCHEMA}/apply/`, { body: { allow_destructive: true, ...body } });
  const fields = [
    { id: 1, name: "title", type: "text", primary: true },
    { id: 2, name: "notes", type: "longtext" },
  ];
  const made = await apply({ schema: doc([{ name: "binned", slug: "binned", fields }]) });
  expect(made.status, JSON.stringify(made.body)).toBe(200);
  const ids = [];
  for (const title of ["binned kiwi", "binned lime", "plain"])
    ids.push((await create(t, "binned", { title, notes: null })).id);
  const cotId = (await t.json("GET", `${CO}/custom-object-types/?slug=binned`)).body.results[0].id;
  await flush();
  expect(await entries(cotId)).toBe(3);

  const removal = { schema_version: "1", types: [], removed_types: [{ slug: "binned" }] };
  const removed = await apply({ schema: removal });
  expect(removed.status, JSON.stringify(removed.body)).toBe(200);
  expect(await pending(cotId)).toBe(3);
  await flush();
  expect({ pending: await pending(cotId), entries: await entries(cotId) }).toEqual({
    pending: 0,
    entries: 0,
  });

  const restored = await t.json("POST", `${SCHEMA}/trash/${removed.body.trash[0]}/restore/`);
  expect(restored.status, JSON.stringify(restored.body)).toBe(200);
  expect(await pending(cotId)).toBe(3);
  expect(await found("binned", "q=binned")).toEqual({ count: 2, ids: ids.slice(0, 2) });
  await flush();
  expect({ pending: await pending(cotId), entries: await entries(cotId) }).toEqual({
    pending: 0,
    entries: 3,
  });
  expect(await found("binned", "q=binned")).toEqual({ count: 2, ids: ids.slice(0, 2) });
  expect(await found("binned", "title__ic=lime")).toEqual({ count: 1, ids: [ids[1]!] });
});
