/**
 * Migration 0017 turns a site's latitude and longitude text into numbers (decision 0212) in SQL
 * alone, on a libSQL file and on D1 (migrated by wrangler, as a deploy migrates it): each database
 * is put back as 0016 left it (text columns), sites are stored with the text earlier writes
 * allowed, and the migration's statements run on them. Numbers within range become numbers the
 * API answers and filters; blank text null; text that is no coordinate reads null and is kept.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { MIGRATIONS_FOLDER } from "../../src/db/migrate";
import { makeTestApp } from "../helpers/app";
import { type D1App, startD1App } from "../helpers/d1-app";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(90_000);

/**
 * Stored latitude text → what the site answers after the migration and the text kept aside; the
 * longitude beside it, the same.
 */
type Case = [string | null, number | null, string | null];
const ROWS: Array<[Case, Case]> = [
  [
    ["41.500000", 41.5, null],
    ["141.5", 141.5, null],
  ],
  [
    [" -33.8688 ", -33.8688, null],
    ["151.2093 ", 151.2093, null],
  ],
  [
    ["+7", 7, null],
    ["-7", -7, null],
  ],
  [
    ["-.5", -0.5, null],
    ["180", 180, null],
  ],
  [
    ["12.12345678", 12.123457, null],
    ["-179.9999999", -180, null],
  ],
  [
    ["90", 90, null],
    ["-180.0", -180, null],
  ],
  [
    ["", null, null],
    ["  ", null, null],
  ],
  [
    [null, null, null],
    [null, null, null],
  ],
  [
    ["91", null, "91"],
    ["180.5", null, "180.5"],
  ],
  [
    ["north", null, "north"],
    ["W 75", null, "W 75"],
  ],
  [
    ["1.2.3", null, "1.2.3"],
    ["0x10", null, "0x10"],
  ],
  [
    ["--5", null, "--5"],
    ["5-", null, "5-"],
  ],
  [
    ["1e5", null, "1e5"],
    ["-", null, "-"],
  ],
];

/** The migration's statements, as drizzle's migrator splits the file. */
function statements(): string[] {
  const file = readFileSync(join(MIGRATIONS_FOLDER, "0017_site_coordinates.sql"), "utf8");
  return file
    .split("--> statement-breakpoint")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Statements that put `sites` back as 0016 left it: text coordinates, none kept aside. */
const BEFORE_0017 = [
  "ALTER TABLE `sites` DROP COLUMN `latitude`",
  "ALTER TABLE `sites` DROP COLUMN `longitude`",
  "ALTER TABLE `sites` RENAME COLUMN `_latitude_text` TO `latitude`",
  "ALTER TABLE `sites` RENAME COLUMN `_longitude_text` TO `longitude`",
];

interface Backend {
  run(sql: string): Promise<void>;
  insertSite(name: string, latitude: string | null, longitude: string | null): Promise<void>;
  all(sql: string): Promise<Record<string, unknown>[]>;
  json(method: string, path: string): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

async function localBackend(): Promise<Backend> {
  const t = await makeTestApp();
  const orm = t.deps.db.orm;
  return {
    run: async (text) => void (await orm.run(sql.raw(text))),
    insertSite: async (name, latitude, longitude) =>
      void (await orm.run(
        sql`INSERT INTO sites (name, slug, latitude, longitude, created, last_updated) VALUES (${name}, ${name}, ${latitude}, ${longitude}, '', '')`,
      )),
    all: async (text) => (await orm.all(sql.raw(text))) as Record<string, unknown>[],
    json: (method, path) => t.json(method, path),
    close: async () => t.close(),
  };
}

async function d1Backend(): Promise<Backend> {
  const d1: D1App = await startD1App("site-coordinates");
  const run = async (text: string, args: unknown[] = []) =>
    (
      await d1.binding
        .prepare(text)
        .bind(...args)
        .all<Record<string, unknown>>()
    ).results;
  return {
    run: async (text) => void (await run(text)),
    insertSite: async (name, latitude, longitude) =>
      void (await run(
        "INSERT INTO sites (name, slug, latitude, longitude, created, last_updated) VALUES (?, ?, ?, ?, '', '')",
        [name, name, latitude, longitude],
      )),
    all: (text) => run(text),
    json: (method, path) => d1.json(method, path),
    close: () => d1.stop(),
  };
}

for (const [name, start] of [
  ["libSQL file", localBackend],
  ["D1", d1Backend],
] as const)
  describe(`migration 0017 on ${name}`, () => {
    let b: Backend;
    beforeAll(async () => {
      b = await start();
    });
    afterAll(() => b?.close());

    test("stored text becomes numbers the API answers and filters; other text is kept", async () => {
      for (const s of BEFORE_0017) await b.run(s);
      for (const [i, [[latitude], [longitude]]] of ROWS.entries())
        await b.insertSite(`m${i}`, latitude, longitude);
      const stmts = statements();
      expect(stmts.length).toBe(6);
      for (const s of stmts) await b.run(s);

      const rows = await b.all(
        "SELECT name, latitude, _latitude_text AS kept, typeof(latitude) AS kind FROM sites ORDER BY id",
      );
      expect(rows.map((r) => [r.latitude, r.kept])).toEqual(ROWS.map(([[, n, kept]]) => [n, kept]));
      expect(rows.filter((r) => r.latitude !== null).every((r) => r.kind === "real")).toBe(true);

      const list = await b.json("GET", "/api/dcim/sites/?latitude__gte=7&ordering=latitude");
      expect(list.status).toBe(200);
      expect(list.body.results.map((s: { latitude: number }) => s.latitude)).toEqual([
        7, 12.123457, 41.5, 90,
      ]);
      const kept = await b.json("GET", "/api/dcim/sites/?name=m9");
      expect(kept.body.results[0]).toMatchObject({ latitude: null, longitude: null });
      const first = await b.json("GET", "/api/dcim/sites/?name=m0");
      expect(first.body.results[0]).toMatchObject({ latitude: 41.5, longitude: 141.5 });
      const longitudes = await b.all(
        "SELECT longitude, _longitude_text AS kept FROM sites ORDER BY id",
      );
      expect(longitudes.map((r) => [r.longitude, r.kept])).toEqual(
        ROWS.map(([, [, n, kept]]) => [n, kept]),
      );
    });
  });
