/**
 * `RenderedOnce` (decision 0107): a statement bound from text rendered once is the statement
 * Drizzle renders for the same values, and one it cannot take apart is built as it is.
 */
import { expect, test } from "bun:test";
import { createClient } from "@libsql/client";
import { and, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/libsql";
import * as schema from "../../src/db/schema";
import { renderSql } from "../../src/db/driver-internals";
import { RenderedOnce } from "../../src/db/rendered-once";

const orm = drizzle(createClient({ url: ":memory:" }), { schema });

test("bound values land where the build put them, fixed parameters stay", () => {
  const build = (o: typeof orm, [hash, print]: readonly [string, string]) =>
    sql`INSERT INTO write_guard (ok) SELECT coalesce((${o
      .select({ id: schema.tokens.id })
      .from(schema.tokens)
      .where(
        and(eq(schema.tokens.writeEnabled, true), eq(schema.tokens.keyHash, hash)),
      )}), '') = ${print}`;
  const once = new RenderedOnce<[string, string]>((o, v) => build(o as typeof orm, v));
  for (const values of [
    ["a", "p?1"],
    ["b'; --", "p2"],
  ] as const) {
    const mine = renderSql(orm, once.on(orm, [...values] as [string, string]))!;
    expect(mine).toEqual(renderSql(orm, build(orm, values))!);
  }
});

test("a value the build does not bind (inlined) falls back to building each time", () => {
  const once = new RenderedOnce<[string]>((_o, [v]) => sql`SELECT ${sql.raw(`'${v.length}'`)}`);
  expect(renderSql(orm, once.on(orm, ["abc"]))!.sql).toBe("SELECT '3'");
  expect(renderSql(orm, once.on(orm, ["abcd"]))!.sql).toBe("SELECT '4'");
});
