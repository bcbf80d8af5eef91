/**
 * Migrations 0017 and 0019 on a libSQL file, a remote database (the Hrana stand-in) and D1
 * (migrated by wrangler, as a deploy migrates it). 0017 turns a site's latitude and longitude text
 * into numbers (decision 0212) in SQL alone: each database is put back as 0016 left it (text
 * columns), sites are stored with the text earlier writes allowed, and the migration's statements
 * run on them. Numbers within range become numbers the API answers and filters; blank text null;
 * text that is no coordinate reads null and is kept. 0019 then moves the kept text out of the
 * undeclared columns of `sites` into `site_coordinate_text` (decision 0216): all of it kept,
 * nothing of it answered, gone with its site.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { MIGRATIONS_FOLDER } from "../../src/db/migrate";
import { makeTestApp } from "../helpers/app";
import { type D1App, startD1App } from "../helpers/d1-app";
import { startRemoteDb } from "../helpers/remote-db";

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

/** A migration's statements, as drizzle's migrator splits the file. */
function statements(file: string): string[] {
  return readFileSync(join(MIGRATIONS_FOLDER, file), "utf8")
    .split("--> statement-breakpoint")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Statements that put `sites` back as 0016 left it: text coordinates, none kept aside. */
const BEFORE_0017 = [
  "DROP TABLE `site_coordinate_text`",
  "ALTER TABLE `sites` DROP COLUMN `latitude`",
  "ALTER TABLE `sites` DROP COLUMN `longitude`",
  "ALTER TABLE `sites` ADD `latitude` text",
  "ALTER TABLE `sites` ADD `longitude` text",
];

/** Kept text no answer may carry (none of it is a piece of any other answer's text). */
const MARKERS = ["north", "W 75", "0x10", "1e5", "180.5"];

interface Backend {
  run(sql: string): Promise<void>;
  insertSite(name: string, latitude: string | null, longitude: string | null): Promise<void>;
  all(sql: string): Promise<Record<string, unknown>[]>;
  json(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

/** The app on a local file, or (`remote`) on a Hrana server of its own. */
async function libsqlBackend(remote: boolean): Promise<Backend> {
  const server = remote ? await startRemoteDb("site-coordinates") : null;
  const t = await makeTestApp(server ? { DATABASE_URL: server.url } : {});
  const orm = t.deps.db.orm;
  return {
    run: async (text) => void (await orm.run(sql.raw(text))),
    insertSite: async (name, latitude, longitude) =>
      void (await orm.run(
        sql`INSERT INTO sites (name, slug, latitude, longitude, created, last_updated) VALUES (${name}, ${name}, ${latitude}, ${longitude}, '', '')`,
      )),
    all: async (text) => (await orm.all(sql.raw(text))) as Record<string, unknown>[],
    json: (method, path, body) => t.json(method, path, { body }),
    close: async () => {
      await t.close();
      await server?.stop();
    },
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
    json: (method, path, body) => d1.json(method, path, body),
    close: () => d1.stop(),
  };
}

for (const [name, start] of [
  ["libSQL file", () => libsqlBackend(false)],
  ["remote libSQL", () => libsqlBackend(true)],
  ["D1", d1Backend],
] as const)
  describe(`migrations 0017 and 0019 on ${name}`, () => {
    let b: Backend;
    beforeAll(async () => {
      b = await start();
    });
    afterAll(() => b?.close());

    test("stored text becomes numbers the API answers and filters; other text is kept", async () => {
      for (const s of BEFORE_0017) await b.run(s);
      for (const [i, [[latitude], [longitude]]] of ROWS.entries())
        await b.insertSite(`m${i}`, latitude, longitude);
      const stmts = statements("0017_site_coordinates.sql");
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

    test("0019 moves the kept text into site_coordinate_text, all of it, and answers none of it", async () => {
      const stmts = statements("0019_site_coordinate_text.sql");
      expect(stmts.length).toBe(4);
      for (const s of stmts) await b.run(s);

      const columns = await b.all("SELECT name FROM pragma_table_info('sites')");
      expect(columns.map((c) => c.name)).not.toContain("_latitude_text");
      expect(columns.map((c) => c.name)).not.toContain("_longitude_text");
      const kept = await b.all(
        "SELECT s.name, k.field, k.text FROM site_coordinate_text k JOIN sites s ON s.id = k.site_id ORDER BY s.id, k.field",
      );
      const expected = ROWS.flatMap(([[, , latitude], [, , longitude]], i) => [
        ...(latitude === null ? [] : [{ name: `m${i}`, field: "latitude", text: latitude }]),
        ...(longitude === null ? [] : [{ name: `m${i}`, field: "longitude", text: longitude }]),
      ]);
      expect(expected.length).toBe(10);
      expect(kept).toEqual(expected);

      // answered nowhere: the site, the list, GraphQL, an edit's change record
      const [site] = (await b.json("GET", "/api/dcim/sites/?name=m9")).body.results;
      expect(site).toMatchObject({ name: "m9", latitude: null, longitude: null });
      const edited = await b.json("PATCH", `/api/dcim/sites/${site.id}/`, { description: "x" });
      expect(edited.status).toBe(200);
      const answers = [
        await b.json("GET", `/api/dcim/sites/${site.id}/`),
        await b.json("GET", "/api/dcim/sites/?limit=100"),
        await b.json("POST", "/graphql/", {
          query: "{ site_list { id name latitude longitude description } }",
        }),
        await b.json(
          "GET",
          `/api/core/object-changes/?changed_object_type=dcim.site&changed_object_id=${site.id}`,
        ),
      ];
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
      expect(answers[3]!.body.count).toBe(1);
      for (const a of answers) {
        const text = JSON.stringify(a.body);
        expect(MARKERS.filter((m) => text.includes(JSON.stringify(m).slice(1, -1)))).toEqual([]);
      }
      // the edit left it as it was; deleting the site takes it along
      expect(
        await b.all(`SELECT field, text FROM site_coordinate_text WHERE site_id = ${site.id}`),
      ).toEqual([
        { field: "latitude", text: "north" },
        { field: "longitude", text: "W 75" },
      ]);
      expect((await b.json("DELETE", `/api/dcim/sites/${site.id}/`)).status).toBe(204);
      expect(
        await b.all(`SELECT count(*) AS n FROM site_coordinate_text WHERE site_id = ${site.id}`),
      ).toEqual([{ n: 0 }]);
      expect(await b.all("SELECT count(*) AS n FROM site_coordinate_text")).toEqual([{ n: 8 }]);
    });
  });
