/**
 * A `q`'s conditions are built once per list spec and needle and shared by the requests that ask
 * it again (decision 0132), within a bound of needles per spec; a list with other filters still
 * gets its own WHERE around them, and another spec (a changed schema) builds its own.
 */
import { expect, test } from "bun:test";
import { sql, type SQL } from "drizzle-orm";
import { sqliteTable, integer, text } from "drizzle-orm/sqlite-core";
import { MAX_KEPT_NEEDLES, parseListQuery, type ListSpec } from "../../src/core/rest/query";

const items = sqliteTable("items", { id: integer("id").primaryKey(), name: text("name") });

/** A spec whose search term, index narrowing and first pages count how often they are built. */
function countingSpec() {
  const built = { term: 0, narrowed: 0, firstPage: 0 };
  const spec: ListSpec = {
    filters: { name: { kind: "string", expr: items.name } },
    orderings: { id: items.id },
    defaultOrdering: ["id"],
    idExpr: items.id,
    search: [
      {
        match: (q: string) => {
          built.term++;
          return sql`${items.name} = ${q}`;
        },
      },
    ],
    searchIndex: () => {
      built.narrowed++;
      return sql`1`;
    },
    searchFirstPage: (q: string, term: SQL) => {
      built.firstPage++;
      return { key: `k-${q}`, count: sql`SELECT 1 AS n`, pageIds: () => term };
    },
  };
  return { spec, built };
}

const url = (query: string) => new URL(`http://h/api/items/?${query}`);

test("the same needle again builds nothing: the same conditions and index search", () => {
  const { spec, built } = countingSpec();
  const first = parseListQuery(url("q=abc"), spec);
  const again = parseListQuery(url("q=abc&limit=10"), spec);
  expect(built).toEqual({ term: 1, narrowed: 1, firstPage: 1 });
  expect(again.fromIndex).toBe(first.fromIndex!);
  expect(again.limit).toBe(10);
  // another needle is its own
  parseListQuery(url("q=abd"), spec);
  expect(built).toEqual({ term: 2, narrowed: 2, firstPage: 2 });
  // with a filter beside it: the same term, no index pages, the filter in the WHERE
  const filtered = parseListQuery(url("q=abc&name=x"), spec);
  expect(built).toEqual({ term: 2, narrowed: 2, firstPage: 2 });
  expect(filtered.fromIndex).toBeUndefined();
  expect(filtered.where).not.toBe(first.where);
  // another spec (what a schema change gives) builds its own
  const other = countingSpec();
  parseListQuery(url("q=abc"), other.spec);
  expect(other.built).toEqual({ term: 1, narrowed: 1, firstPage: 1 });
});

test("needles kept per spec are bounded, the least recently used dropped first", () => {
  const { spec, built } = countingSpec();
  for (let i = 0; i < MAX_KEPT_NEEDLES; i++) parseListQuery(url(`q=needle-${i}`), spec);
  parseListQuery(url("q=needle-0"), spec); // used again: now the most recent
  expect(built.term).toBe(MAX_KEPT_NEEDLES);
  parseListQuery(url("q=one-more"), spec); // drops needle-1
  parseListQuery(url("q=needle-0"), spec);
  expect(built.term).toBe(MAX_KEPT_NEEDLES + 1);
  parseListQuery(url("q=needle-1"), spec);
  expect(built.term).toBe(MAX_KEPT_NEEDLES + 2);
});
