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

test("the stored definition must be the current one, pending table and triggers included", async () => {
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

test("an index of the older form is not trusted, and the migrations upgrade it", async () => {
  const c = t.deps.db.client;
  for (const name of ["co_%_fts_ai", "co_%_fts_ad", "co_%_fts_au"])
    await c.execute(`DROP TRIGGER IF EXISTS "${name.replace("%", String(cot.id))}"`);
  await c.execute(`DROP TABLE "co_${cot.id}_fts"`);
  await c.execute(`DROP TABLE "co_${cot.id}_fts_pending"`);
  for (const s of oldForm(cot.id)) await c.execute(s);
  await bumpShape();
  const expected = await scan("alpha");
  expect(expected.length).toBeGreaterThan(10);
  // emptied, the old index would find nothing: the list does not use it
  await c.execute(`INSERT INTO "co_${cot.id}_fts"("co_${cot.id}_fts") VALUES ('delete-all')`);
  expect(await ids("q=alpha")).toEqual(expected);

  await runMigrations(t.deps.db);
  await bumpShape();
  const def = await c.execute({
    sql: "SELECT sql FROM sqlite_master WHERE name = ?",
    args: [`co_${cot.id}_fts`],
  });
  expect(String(def.rows[0]!.sql)).toContain("contentless_delete=1");
  expect(
    Number((await c.execute(`SELECT count(*) AS n FROM "co_${cot.id}_fts_pending"`)).rows[0]!.n),
  ).toBe(0);
  expect(
    Number((await c.execute(`SELECT count(*) AS n FROM "co_${cot.id}_fts_docsize"`)).rows[0]!.n),
  ).toBe(40);
  expect(await ids("q=alpha")).toEqual(expected);
  expect(await ids("notes__ic=lpha 1")).toEqual(
    (await scan("lpha 1")).filter((id) => expected.includes(id)),
  );
  // now through the index: emptied, it finds nothing
  await c.execute(`INSERT INTO "co_${cot.id}_fts"("co_${cot.id}_fts") VALUES ('delete-all')`);
  expect(await ids("q=alpha")).toEqual([]);
  // a second run finds nothing to upgrade and leaves the index alone
  await runMigrations(t.deps.db);
  expect(await ids("q=alpha")).toEqual([]);
});

test("an index of decision 0056's form (case-folding trigrams over the raw text) is rebuilt with LIKE's folding (0081)", async () => {
  const c = t.deps.db.client;
  const current = indexStatements(cot.id, ["title", "notes"]);
  const f = `"co_${cot.id}_fts"`;
  await c.execute(`DROP TABLE ${f}`);
  // 0056's definition: the same but for the tokenizer, filled with the text as it is
  await c.execute(
    current[0]!.sql.replace("tokenize='trigram case_sensitive 1'", "tokenize='trigram'"),
  );
  await c.execute(
    `INSERT INTO ${f}(rowid, "title", "notes") SELECT id, "title", "notes" FROM "co_${cot.id}"`,
  );
  await bumpShape();
  const expected = await scan("ALPHA");
  expect(expected.length).toBeGreaterThan(10);
  // not trusted: an emptied old index changes nothing (the list scans)
  await c.execute(`INSERT INTO ${f}(${f}) VALUES ('delete-all')`);
  const r = await t.json("GET", `${CO}/${cot.slug}/?q=ALPHA&limit=5`);
  expect({ count: r.body.count, first: r.body.results[0].id }).toEqual({
    count: expected.length,
    first: expected[0],
  });

  await runMigrations(t.deps.db);
  await bumpShape();
  const def = await c.execute({
    sql: "SELECT sql FROM sqlite_master WHERE name = ?",
    args: [`co_${cot.id}_fts`],
  });
  expect(String(def.rows[0]!.sql)).toBe(current[0]!.sql);
  const after = await t.json("GET", `${CO}/${cot.slug}/?q=ALPHA&limit=5`);
  expect({ count: after.body.count, first: after.body.results[0].id }).toEqual({
    count: expected.length,
    first: expected[0],
  });
  // through the rebuilt index: emptied, it finds nothing
  await c.execute(`INSERT INTO ${f}(${f}) VALUES ('delete-all')`);
  expect((await t.json("GET", `${CO}/${cot.slug}/?q=ALPHA`)).body.count).toBe(0);
});
