/**
 * Decision 0056: a database whose full-text indexes have the older external-content form (kept
 * by triggers, decision 0050) is not searched through them by the new code (the stored
 * definition differs, so the list scans), and the migrations replace them with the deferred form,
 * filled at once: afterwards searches go through the index and answer what a scan does.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { runMigrations } from "../../src/migrations";
import {
  indexMatches,
  indexStatements,
  readIndexSchema,
} from "../../src/plugins/custom-objects/search/search-index";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, create, makeCot } from "./fixtures";

let t: TestApp;
let cot: { id: number; slug: string };

/** The index as decision 0050 made it (verbatim), filled from the rows. */
function oldForm(id: number): string[] {
  const t = `"co_${id}"`;
  const f = `"co_${id}_fts"`;
  const list = `"title", "notes"`;
  return [
    `CREATE VIRTUAL TABLE ${f} USING fts5(${list}, content=${t}, content_rowid='id', tokenize='trigram')`,
    `CREATE TRIGGER "co_${id}_fts_ai" AFTER INSERT ON ${t} BEGIN INSERT INTO ${f}(rowid, ${list}) VALUES (new.id, new."title", new."notes"); END`,
    `CREATE TRIGGER "co_${id}_fts_ad" AFTER DELETE ON ${t} BEGIN INSERT INTO ${f}(${f}, rowid, ${list}) VALUES ('delete', old.id, old."title", old."notes"); END`,
    `CREATE TRIGGER "co_${id}_fts_au" AFTER UPDATE OF ${list} ON ${t} BEGIN INSERT INTO ${f}(${f}, rowid, ${list}) VALUES ('delete', old.id, old."title", old."notes"); INSERT INTO ${f}(rowid, ${list}) VALUES (new.id, new."title", new."notes"); END`,
    `INSERT INTO ${f}(${f}) VALUES ('rebuild')`,
  ];
}

const ids = async (query: string) =>
  (
    (await t.json("GET", `${CO}/${cot.slug}/?limit=1000&${query}`)).body.results as Array<{
      id: number;
    }>
  )
    .map((x) => x.id)
    .sort((a, b) => a - b);
const scan = async (needle: string) =>
  (
    await t.deps.db.client.execute({
      sql: `SELECT id FROM co_${cot.id} WHERE title LIKE ? OR notes LIKE ? ORDER BY id`,
      args: [`%${needle}%`, `%${needle}%`],
    })
  ).rows.map((r) => Number(r.id));
/** Makes the registry rebuild the type's model (and look at the stored index again). */
const bumpShape = () =>
  t.deps.db.client.execute({
    sql: "UPDATE custom_object_types SET shape_version = shape_version + 1 WHERE id = ?",
    args: [cot.id],
  });

beforeAll(async () => {
  t = await makeTestApp();
  cot = await makeCot(t, "upgraded", "upgraded");
  await addField(t, cot.id, { name: "title", type: "text" });
  await addField(t, cot.id, { name: "notes", type: "longtext" });
  for (let i = 0; i < 40; i++)
    await create(t, cot.slug, { title: `Upgrade item ${i}`, notes: i % 3 ? `alpha ${i}` : null });
});
afterAll(() => t.close());

test("the stored definition must be the current one, every trigger included", async () => {
  const current = await readIndexSchema(t.deps.db.orm, cot.id);
  expect(indexMatches(current, cot.id, ["title", "notes"])).toBe(true);
  expect(current.size).toBe(indexStatements(cot.id, ["title", "notes"]).length);
  for (const name of [...current.keys()]) {
    const partial = new Map(current);
    partial.delete(name);
    expect({ name, matches: indexMatches(partial, cot.id, ["title", "notes"]) }).toEqual({
      name,
      matches: false,
    });
  }
});

/** The type's own index parts and the shared index's entries and pending rows for it. */
async function state() {
  const c = t.deps.db.client;
  const n = async (q: string) => Number((await c.execute(q)).rows[0]!.n);
  const own = await c.execute({
    sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB ? ORDER BY name",
    args: [`co_${cot.id}_fts*`],
  });
  return {
    ownTables: own.rows.map((r) => String(r.name)),
    entries: await n(`SELECT count(*) AS n FROM co_search_docsize WHERE id ${range()}`),
    pending: await n(`SELECT count(*) AS n FROM co_search_pending WHERE type_id = ${cot.id}`),
    triggers: [...(await readIndexSchema(t.deps.db.orm, cot.id)).values()],
  };
}
const range = () =>
  `BETWEEN ${cot.id} * 1099511627776 AND ${cot.id} * 1099511627776 + 1099511627775`;
/** Drops the type's current triggers and its shared entries (a database before decision 0130). */
async function dropCurrent() {
  const c = t.deps.db.client;
  for (const name of indexStatements(cot.id, ["title", "notes"]).map((s) => s.name))
    await c.execute(`DROP TRIGGER IF EXISTS "${name}"`);
  await c.execute(`DELETE FROM co_search WHERE rowid ${range()}`);
  await c.execute(`DELETE FROM co_search_pending WHERE type_id = ${cot.id}`);
}
/** After the migrations: the shared index only, every row in it, answers as a scan's. */
async function expectUpgraded(needle: string, expected: number[]) {
  await bumpShape();
  expect(await state()).toEqual({
    ownTables: [],
    entries: 40,
    pending: 0,
    triggers: indexStatements(cot.id, ["title", "notes"]).map((s) => s.sql),
  });
  expect(await ids(`q=${needle}`)).toEqual(expected);
  // now through the shared index: its entries for the type removed, it finds nothing
  await t.deps.db.client.execute(`DELETE FROM co_search WHERE rowid ${range()}`);
  expect(await ids(`q=${needle}`)).toEqual([]);
  // a second run finds nothing to upgrade and leaves the index alone
  await runMigrations(t.deps.db);
  expect(await ids(`q=${needle}`)).toEqual([]);
  // put back for the next test
  await t.deps.db.client.execute(
    `INSERT OR IGNORE INTO co_search_pending(type_id, id) SELECT ${cot.id}, id FROM co_${cot.id}`,
  );
  await runMigrations(t.deps.db);
  await flushSearchIndexesNow(servicesOf(t.app));
}

test("an index of the older form is not trusted, and the migrations upgrade it", async () => {
  const c = t.deps.db.client;
  await dropCurrent();
  for (const s of oldForm(cot.id)) await c.execute(s);
  await bumpShape();
  const expected = await scan("alpha");
  expect(expected.length).toBeGreaterThan(10);
  // emptied, the old index would find nothing: the list does not use it
  await c.execute(`INSERT INTO "co_${cot.id}_fts"("co_${cot.id}_fts") VALUES ('delete-all')`);
  expect(await ids("q=alpha")).toEqual(expected);

  await runMigrations(t.deps.db);
  await bumpShape();
  expect(await ids("notes__ic=lpha 1")).toEqual(
    (await scan("lpha 1")).filter((id) => expected.includes(id)),
  );
  await expectUpgraded("alpha", expected);
});

/**
 * The per-type index of decisions 0056/0081 (verbatim): a contentless FTS5 table over the
 * lowered columns, a pending table of ids and three triggers adding to it.
 */
function perTypeForm(id: number): string[] {
  const t = `"co_${id}"`;
  const f = `"co_${id}_fts"`;
  const p = `"co_${id}_fts_pending"`;
  const list = `"title", "notes"`;
  const mark = (row: string) => `INSERT OR IGNORE INTO ${p}(id) VALUES (${row}.id);`;
  return [
    `CREATE VIRTUAL TABLE ${f} USING fts5(${list}, content='', contentless_delete=1, tokenize='trigram case_sensitive 1')`,
    `CREATE TABLE ${p} (id INTEGER PRIMARY KEY)`,
    `CREATE TRIGGER "co_${id}_fts_ai" AFTER INSERT ON ${t} BEGIN ${mark("new")} END`,
    `CREATE TRIGGER "co_${id}_fts_ad" AFTER DELETE ON ${t} BEGIN ${mark("old")} END`,
    `CREATE TRIGGER "co_${id}_fts_au" AFTER UPDATE OF "id", ${list} ON ${t} BEGIN ${mark("old")} ${mark("new")} END`,
    // most rows indexed, the last ten still pending, as a running server leaves them
    `INSERT INTO ${f}(rowid, "title", "notes") SELECT id, lower("title"), lower("notes") FROM ${t} WHERE id <= (SELECT max(id) - 10 FROM ${t})`,
    `INSERT INTO ${p}(id) SELECT id FROM ${t} WHERE id > (SELECT max(id) - 10 FROM ${t})`,
  ];
}

test("a database with an index per type (decisions 0056/0081) is moved to the shared index at start-up", async () => {
  const c = t.deps.db.client;
  await dropCurrent();
  for (const s of perTypeForm(cot.id)) await c.execute(s);
  await bumpShape();
  const expected = await scan("ALPHA");
  expect(expected.length).toBeGreaterThan(10);
  // not trusted: its triggers are not the current ones (the list scans)
  await c.execute(`INSERT INTO "co_${cot.id}_fts"("co_${cot.id}_fts") VALUES ('delete-all')`);
  const r = await t.json("GET", `${CO}/${cot.slug}/?q=ALPHA&limit=5`);
  expect({ count: r.body.count, first: r.body.results[0].id }).toEqual({
    count: expected.length,
    first: expected[0],
  });

  await runMigrations(t.deps.db);
  await bumpShape();
  const after = await t.json("GET", `${CO}/${cot.slug}/?q=ALPHA&limit=5`);
  expect({ count: after.body.count, first: after.body.results[0].id }).toEqual({
    count: expected.length,
    first: expected[0],
  });
  await expectUpgraded("ALPHA", expected);
});
