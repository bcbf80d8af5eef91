/**
 * The full-text index over a remote libSQL database (the Hrana server the Workers tests use, as
 * Turso would be reached): the index's form (contentless FTS5 with deletes, trigram) is created
 * there, `q` and the narrowed lookups answer exactly what a scan returns with rows pending and
 * after a flush (decisions 0050, 0056).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createClient, type Client } from "@libsql/client";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { addField, CO, create, makeCot } from "./fixtures";

let remote: RemoteDb;
let t: TestApp;
let direct: Client;
let cotId: number;

beforeAll(async () => {
  remote = await startRemoteDb("search-remote");
  t = await makeTestApp({ DATABASE_URL: remote.url });
  expect(t.deps.db.kind).toBe("remote");
  direct = createClient({ url: remote.url });
  const cot = await makeCot(t, "remote_search");
  cotId = cot.id;
  await addField(t, cot.id, { name: "title", type: "text", primary: true });
  await addField(t, cot.id, { name: "notes", type: "longtext" });
  for (const [title, notes] of [
    ["Alpha one", "the école"],
    ["alphabet", null],
    ["Zürich", "ALPHA-beta"],
    ["plain", "nothing here"],
    ["x_y", "100%_sure"],
  ]) {
    await create(t, "remote_search", { title, notes });
  }
});
afterAll(async () => {
  direct.close();
  await t.close();
  await remote.stop();
});

const ids = async (query: string) =>
  (
    (await t.json("GET", `${CO}/remote_search/?limit=100&${query}`)).body.results as Array<{
      id: number;
    }>
  )
    .map((r) => r.id)
    .sort((a, b) => a - b);
const scan = async (where: string, args: string[]) =>
  (
    await direct.execute({ sql: `SELECT id FROM co_${cotId} WHERE ${where} ORDER BY id`, args })
  ).rows.map((r) => Number(r.id));
const pending = async () =>
  Number(
    (await direct.execute(`SELECT count(*) AS n FROM co_search_pending WHERE type_id = ${cotId}`))
      .rows[0]!.n,
  );

const CASES: Array<[string, string, string[]]> = [
  ["q=alpha", "title LIKE ? OR notes LIKE ?", ["%alpha%", "%alpha%"]],
  ["q=%_s", "title LIKE ? ESCAPE '\\' OR notes LIKE ? ESCAPE '\\'", ["%\\%\\_s%", "%\\%\\_s%"]],
  ["title__ic=PHA", "title LIKE ?", ["%pha%"]],
  ["notes__isw=the", "notes LIKE ?", ["the%"]],
  ["title__iew=rich", "title LIKE ?", ["%rich"]],
];

test("the index exists on the remote database in its contentless, deletable form", async () => {
  const def = await direct.execute({
    sql: "SELECT sql FROM sqlite_master WHERE name = ?",
    args: ["co_search"],
  });
  expect(String(def.rows[0]!.sql)).toContain("contentless_delete=1");
  expect(String(def.rows[0]!.sql)).toContain("trigram");
});

test("answers are exactly a scan's, with rows pending and after the flush", async () => {
  // On a remote database nothing flushes by timer in the tests' time: the rows are pending.
  await direct.execute(
    `INSERT OR IGNORE INTO co_search_pending(type_id, id) SELECT ${cotId}, id FROM co_${cotId}`,
  );
  expect(await pending()).toBeGreaterThan(0);
  for (const [query, where, args] of CASES)
    expect(await ids(query)).toEqual(await scan(where, args));
  await flushSearchIndexesNow(servicesOf(t.app));
  expect(await pending()).toBe(0);
  expect(
    Number(
      (
        await direct.execute(
          `SELECT count(*) AS n FROM co_search_docsize WHERE id BETWEEN ${cotId} * 1099511627776 AND ${cotId} * 1099511627776 + 1099511627775`,
        )
      ).rows[0]!.n,
    ),
  ).toBe(5);
  for (const [query, where, args] of CASES)
    expect(await ids(query)).toEqual(await scan(where, args));
  // an update and a delete: pending again, then indexed; answers stay exact throughout
  const [first] = await scan("1", []);
  expect(
    (await t.json("PATCH", `${CO}/remote_search/${first}/`, { body: { title: "renamed" } })).status,
  ).toBe(200);
  expect(await ids("q=alpha")).toEqual(
    await scan("title LIKE ? OR notes LIKE ?", ["%alpha%", "%alpha%"]),
  );
  await flushSearchIndexesNow(servicesOf(t.app));
  expect(await ids("q=renam")).toEqual([first!]);
  expect(await ids("q=alpha")).toEqual(
    await scan("title LIKE ? OR notes LIKE ?", ["%alpha%", "%alpha%"]),
  );
});
