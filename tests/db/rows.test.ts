/**
 * `rowMaker` builds rows that read like the ones `@libsql/client` returns for the same query:
 * compared here with the client's own rows, by every access Drizzle and our code use.
 */
import { createClient, type Row } from "@libsql/client";
import { afterAll, expect, test } from "bun:test";
import { rowMaker } from "../../src/db/rows";

const client = createClient({ url: ":memory:" });
afterAll(() => client.close());

/** Every way a row is read: by index, by name, by enumerable keys, as JSON, spread, sliced. */
const views = (row: Row) => ({
  length: row.length,
  byIndex: Array.from({ length: row.length }, (_, i) => row[i]),
  sliced: Array.prototype.slice.call(row),
  keys: Object.keys(row),
  enumerable: Object.keys(row).filter((k) => Object.prototype.propertyIsEnumerable.call(row, k)),
  named: Object.fromEntries(Object.keys(row).map((k) => [k, (row as any)[k]])),
  json: JSON.stringify(row),
  spread: { ...row },
});

test.each([
  ["plain columns", "SELECT 1 AS id, 'x' AS name, NULL AS gone, 2.5 AS weight, x'00ff' AS blob"],
  [
    "repeated names (the first wins by name, each keeps its index)",
    "SELECT 1 AS id, 2 AS id, 'a' AS name",
  ],
  ["index-like names", 'SELECT 7 AS "0", 8 AS "1", 9 AS other'],
  ["a column named length or __proto__", 'SELECT 3 AS length, 4 AS "__proto__", 5 AS ok'],
])("%s read the same as the client's rows", async (_label, query) => {
  const rs = await client.execute(query);
  const make = rowMaker(rs.columns);
  for (const row of rs.rows) {
    const values = Array.prototype.slice.call(row);
    expect(views(make(values))).toEqual(views(row));
  }
});

test("rows of one column list share a maker; a different list gets its own", () => {
  expect(rowMaker(["a", "b"])).toBe(rowMaker(["a", "b"]));
  expect(rowMaker(["a", "b"])).not.toBe(rowMaker(["b", "a"]));
  const r = rowMaker(["b", "a"])([1, 2]);
  expect([r[0], r[1], (r as any).a, (r as any).b]).toEqual([1, 2, 2, 1]);
});
