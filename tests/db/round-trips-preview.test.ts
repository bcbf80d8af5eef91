/**
 * A schema preview counting the values retypes lose, on a remote database through the counting
 * proxy (decision 0207): a change SQLite counts takes one statement however large the table (it
 * read the column a page of 2,000 values at a time, a round trip each), and the answers are the
 * converter's, value for value, as before. The changes only the converter counts read bounded
 * pages: a megabyte JSON value does not bring the rest of the column with it.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { tableName } from "../../src/plugins/custom-objects/constants";
import { retypeConverter } from "../../src/plugins/custom-objects/objects/values";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { settleBeforeCounting } from "../helpers/settle";
import { addField, CO, makeCot } from "../custom-objects/fixtures";

/** Objects of the type: the values of a column fill pages of 2,000 (three of them, before). */
const ROWS = 5_000;

let remote: RemoteDb;
let t: TestApp;
let table: string;

/** Each retyped field: its type now, the type the document asks, its values by row `i` in SQL. */
const FIELDS: Record<string, { from: string; to: string; values: string }> = {
  n: {
    from: "text",
    to: "integer",
    values: `CASE i % 5 WHEN 0 THEN 'x' WHEN 1 THEN ' ' || i || ' ' WHEN 2 THEN '1.5' WHEN 3 THEN NULL ELSE CAST(i AS TEXT) END`,
  },
  day: {
    from: "text",
    to: "date",
    values: `CASE i % 4 WHEN 0 THEN '2024-02-29' WHEN 1 THEN '2023-02-29' WHEN 2 THEN 'soon' ELSE '2026-01-3' || (i % 2) END`,
  },
  on: {
    from: "text",
    to: "boolean",
    values: `CASE i % 3 WHEN 0 THEN ' Yes' WHEN 1 THEN 'nope' ELSE '0' END`,
  },
  amount: {
    from: "decimal",
    to: "integer",
    values: `CASE i % 4 WHEN 0 THEN i + 0.5 WHEN 1 THEN i * 1.0 WHEN 2 THEN 1e21 ELSE NULL END`,
  },
  price: {
    from: "text",
    to: "decimal",
    values: `CASE i % 3 WHEN 0 THEN '1e3' WHEN 1 THEN 'x' ELSE ' -.5 ' END`,
  },
};

beforeAll(async () => {
  remote = await startRemoteDb("round-trips-preview");
  t = await makeTestApp({ DATABASE_URL: remote.url });
  const cot = await makeCot(t, "gauge");
  await addField(t, cot.id, { name: "name", type: "text", primary: true });
  for (const [name, f] of Object.entries(FIELDS)) await addField(t, cot.id, { name, type: f.from });
  table = tableName(cot.id);
  // made in the database at once: the preview reads the values, not how they came
  const names = Object.keys(FIELDS);
  await servicesOf(t.app).db.orm.run(
    sql.raw(
      `INSERT INTO "${table}" (created, last_updated, name, ${names.map((n) => `"${n}"`).join(", ")}) WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${ROWS}) SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'g' || i, ${names.map((n) => FIELDS[n]!.values).join(", ")} FROM s`,
    ),
  );
});
afterAll(async () => {
  await t?.close();
  await remote?.stop();
});

/** The document of the type with `changed` fields retyped as `FIELDS` says. */
async function retyped(changed: string[]) {
  const exported = await t.json("GET", `${CO}/schema/export?slug=gauge`);
  expect(exported.status).toBe(200);
  const doc = exported.body;
  for (const f of doc.types[0].fields as Array<{ name: string; type: string }>)
    if (changed.includes(f.name)) f.type = FIELDS[f.name]!.to;
  return { schema: doc };
}

/** One warm preview's answer and its round trips. */
async function preview(body: unknown) {
  const warm = await t.json("POST", `${CO}/schema/preview/`, { body });
  expect(warm.status, JSON.stringify(warm.body)).toBe(200);
  await settleBeforeCounting(t.app, () => t.json("GET", "/api/status/"), "admin");
  remote.proxy.reset();
  const r = await t.json("POST", `${CO}/schema/preview/`, { body });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const trips = remote.proxy.count;
  expect(r.body).toEqual(warm.body);
  if (process.env.ROUND_TRIPS_LOG) console.log(trips, JSON.stringify(remote.proxy.log, null, 1));
  return { trips, body: r.body, log: [...remote.proxy.log] };
}

/** What the converter loses of each field's values, read here (the preview's answer before 0207). */
async function convertersCount(name: string): Promise<number> {
  const f = FIELDS[name]!;
  const rows = await servicesOf(t.app).db.orm.all<{ v: unknown }>(
    sql.raw(`SELECT "${name}" AS v FROM "${table}" WHERE "${name}" IS NOT NULL`),
  );
  const convert = retypeConverter(f.from, f.to);
  return rows.filter((r) => {
    const v = convert(r.v);
    return v === undefined || v === null;
  }).length;
}

const lossOf = (name: string, rows: number) => ({
  slug: "gauge",
  field: name,
  reason: "lossy_type_change",
  rows,
  detail: `changing "${name}" from ${FIELDS[name]!.from} to ${FIELDS[name]!.to} loses ${rows} value(s) that cannot be converted; they become null`,
});

test("a preview counts a retype SQLite counts in one statement, whatever the table's size; its answers are the converter's", async () => {
  const unchanged = await preview(await retyped([]));
  expect(unchanged.body.destructive_changes).toEqual([]);
  const inSql = ["n", "day", "on", "amount"];
  const lossy = await preview(await retyped(inSql));
  const want = [];
  for (const name of inSql) want.push(lossOf(name, await convertersCount(name)));
  // every field loses some, and keeps some
  for (const w of want) expect(w.rows).toBeGreaterThan(0);
  expect(lossy.body.destructive_changes).toEqual(want);
  expect(lossy.body.diffs[0].warnings).toEqual(want.map((w) => w.detail));
  // one statement a change (before: a round trip a page of 2,000 values and a last empty one:
  // 11 more, measured)
  expect(lossy.trips - unchanged.trips).toBe(inSql.length);
});

test("a change only the converter counts: its pages, the same answer", async () => {
  const priced = await preview(await retyped(["price"]));
  expect(priced.body.destructive_changes).toEqual([
    lossOf("price", await convertersCount("price")),
  ]);
  expect(priced.body.destructive_changes[0].rows).toBe(Math.round(ROWS / 3));
});

test("the converter's count holds a bounded page: megabyte JSON values come a few at a time", async () => {
  const cot = (await t.json("GET", `${CO}/custom-object-types/?slug=gauge`)).body.results[0];
  await addField(t, cot.id, { name: "doc", type: "json" });
  const big = `'"' || replace(hex(zeroblob(450000)), '0', 'a') || '"'`;
  await servicesOf(t.app).db.orm.run(
    sql.raw(
      `UPDATE "${table}" SET doc = CASE WHEN id <= 12 THEN ${big} WHEN id <= 20 THEN '"2024-02-29"' WHEN id <= 25 THEN '[1,2]' END WHERE id <= 25`,
    ),
  );
  FIELDS.doc = { from: "json", to: "date", values: "NULL" };
  const docs = await preview(await retyped(["doc"]));
  expect(docs.body.destructive_changes).toEqual([lossOf("doc", await convertersCount("doc"))]);
  expect(docs.body.destructive_changes[0].rows).toBe(17);
  // 10.8 MB of values: pages of at most 4 MB and one value (before: all 25 values in one page)
  const pages = docs.log.filter((trip) => trip.sql.some((q) => q.includes('"doc"')));
  expect(pages.length).toBe(3);
});
