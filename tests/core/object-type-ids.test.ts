/**
 * A restart registers the static object types it finds already there without consuming ids: an
 * `INSERT … ON CONFLICT DO NOTHING` into an AUTOINCREMENT table moved `sqlite_sequence` past every
 * row it skipped (about 20 ids per start before decision 0146).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { createApp } from "../../src/app";
import { openDatabase } from "../../src/db/local";
import { createCache } from "../../src/services/cache";
import { makeTestApp, type TestApp } from "../helpers/app";
import { makeCot } from "../custom-objects/fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(async () => {
  await t.close();
});

const nextId = async (db: { orm: any }) => {
  const [row] = (await db.orm.all(
    sql`SELECT seq FROM sqlite_sequence WHERE name = 'object_types'`,
  )) as Array<{ seq: number }>;
  return Number(row!.seq) + 1;
};

test("two more starts on one file leave the next object-type id where it was", async () => {
  const before = await nextId(t.deps.db);
  for (let start = 0; start < 2; start++) {
    const db = await openDatabase(t.dbUrl);
    try {
      await createApp({ config: t.deps.config, db, cache: createCache("memory", {}) });
      expect(await nextId(db)).toBe(before);
    } finally {
      await db.close();
    }
  }
  // and the next type made takes that very id
  const cot = await makeCot(t, "after_restarts");
  expect(cot.object_type.id).toBe(before);
});
