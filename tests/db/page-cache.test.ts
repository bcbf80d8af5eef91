/**
 * The page cache budget of a local file (decision 0117): `DATABASE_CACHE_MB` is shared out as
 * each connection's `PRAGMA cache_size`, so SQLite's caches together stay within it however many
 * read-pool connections there are (SQLite's default is 2 MB per connection).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfig } from "../../src/config";
import { openDatabase } from "../../src/db/local";
import { SERVICE_CACHE_KIB, servingCacheKib } from "../../src/db/page-cache";

const dir = mkdtempSync(join(tmpdir(), "host-page-cache-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `PRAGMA cache_size` as a connection answers it (negative: KiB). */
const sizeOf = (rows: ArrayLike<ArrayLike<unknown>>) => Number(rows[0]![0]);

describe("the page cache budget", () => {
  test("the serving connections share the budget; the service connections keep their small share", () => {
    // 4 MB, two pool connections: (4096 - 3 × 256) / 4 KiB each for main, background and pool
    expect(servingCacheKib(4, 2)).toBe(832);
    expect(servingCacheKib(16, 0)).toBe((16 * 1024 - 3 * SERVICE_CACHE_KIB) / 2);
    // the shares never add up past the budget
    for (const [mb, pool] of [
      [2, 0],
      [4, 2],
      [8, 16],
      [2, 16],
      [64, 3],
    ] as const)
      expect(servingCacheKib(mb, pool) * (2 + pool) + 3 * SERVICE_CACHE_KIB).toBeLessThanOrEqual(
        mb * 1024,
      );
  });

  test("every connection of a local file runs with its share as cache_size", async () => {
    const db = await openDatabase(`file:${join(dir, "a.db")}`, undefined, {
      readPool: 2,
      cacheMb: 4,
    });
    try {
      const share = -servingCacheKib(4, 2);
      // the main connection
      expect(sizeOf(await db.orm.values(sql`PRAGMA cache_size`))).toBe(share);
      // both read-pool connections: two reads at once go to two connections
      const pooled = await Promise.all([
        db.readRows("PRAGMA cache_size", []),
        db.readRows("PRAGMA cache_size", []),
      ]);
      for (const r of pooled) expect(sizeOf(r.rows)).toBe(share);
      // the background connection, which long writes' transactions run on
      const background = await db.longWrite(() =>
        db.transaction((tx) => tx.values(sql`PRAGMA cache_size`)),
      );
      expect(sizeOf(background)).toBe(share);
    } finally {
      await db.close();
    }
  });

  test("a larger budget, no read pool: two serving connections share it", async () => {
    const db = await openDatabase(`file:${join(dir, "b.db")}`, undefined, {
      readPool: 0,
      cacheMb: 16,
    });
    try {
      expect(sizeOf(await db.orm.values(sql`PRAGMA cache_size`))).toBe(-servingCacheKib(16, 0));
    } finally {
      await db.close();
    }
  });

  test("DATABASE_CACHE_MB: 4 by default, a whole number of MB from 2, else a config error", () => {
    expect(loadConfig({}, "bun").database.cacheMb).toBe(4);
    expect(loadConfig({ DATABASE_CACHE_MB: "32" }, "bun").database.cacheMb).toBe(32);
    for (const bad of ["0", "1", "-1", "1.5", "lots"])
      expect(() => loadConfig({ DATABASE_CACHE_MB: bad }, "bun")).toThrow(ConfigError);
  });
});
