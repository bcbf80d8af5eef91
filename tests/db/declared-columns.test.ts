/**
 * The Drizzle schema (`src/db/schema/`) declares every column a migrated database has (decision
 * 0216). A rebuild of a table generated from it (drizzle-kit's SQLite rebuild: a new table,
 * `INSERT … SELECT` of the columns it knows, drop, rename) copies only what it declares, so a
 * column a migration added beside it — 0017's `_latitude_text` / `_longitude_text` — would be
 * dropped with its values. Checked on a libSQL file migrated by the app and on D1 migrated by
 * wrangler, as a deploy migrates each; and the last migration snapshot, which drizzle-kit diffs
 * the schema against, names the same columns. Tables it does not declare at all are listed here
 * with why: drizzle-kit never rebuilds a table it does not know.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { is } from "drizzle-orm";
import { getTableConfig, SQLiteTable } from "drizzle-orm/sqlite-core";
import * as schema from "../../src/db/schema";
import { openDatabase } from "../../src/db/local";
import { MIGRATIONS_FOLDER } from "../../src/db/migrate";
import { runMigrations } from "../../src/migrations";
import { type D1App, startD1App } from "../helpers/d1-app";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(90_000);

/** Tables and views the schema does not declare, and why each may be so. */
const UNDECLARED: Record<string, string> = {
  __drizzle_migrations: "drizzle's migrator's own record of applied migrations",
  d1_migrations: "wrangler's own record of applied migrations (D1)",
  _cf_METADATA: "D1's own table",
  co_search: "an FTS5 virtual table (0012), which Drizzle cannot declare",
  co_search_config: "FTS5's shadow table of co_search",
  co_search_data: "FTS5's shadow table of co_search",
  co_search_docsize: "FTS5's shadow table of co_search",
  co_search_idx: "FTS5's shadow table of co_search",
  co_search_pending: "the search index's queue, read and written in SQL of its own (0012)",
  host_health: "the health check's write probe, SQL of its own (0011)",
  host_database_identity: "made at start-up by src/db/identity.ts, SQL of its own",
  write_guard: "a view whose trigger refuses a write (0007)",
};

/** Each table the schema declares, with its column names. */
function declared(): Map<string, string[]> {
  const tables = new Map<string, string[]>();
  for (const value of Object.values(schema))
    if (is(value, SQLiteTable)) {
      const config = getTableConfig(value);
      tables.set(
        config.name,
        config.columns.map((c) => c.name),
      );
    }
  return tables;
}

type All = (sql: string) => Promise<Record<string, unknown>[]>;

/**
 * Every column of a declared table that the schema does not declare (or declares and the
 * database lacks), as `table.column`; and every other table or view not listed above.
 */
async function mismatches(all: All): Promise<{ columns: string[]; tables: string[] }> {
  const tables = declared();
  const found = await all(
    "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
  );
  const columns: string[] = [];
  const others: string[] = [];
  for (const { name } of found as { name: string }[]) {
    const own = tables.get(name);
    if (!own) {
      if (!(name in UNDECLARED)) others.push(name);
      continue;
    }
    // table_xinfo: hidden and generated columns too
    const have = (await all(`SELECT name FROM pragma_table_xinfo('${name}')`)).map(
      (r) => r.name as string,
    );
    for (const c of have) if (!own.includes(c)) columns.push(`${name}.${c} (not declared)`);
    for (const c of own) if (!have.includes(c)) columns.push(`${name}.${c} (not in the database)`);
  }
  const names = new Set(found.map((r) => r.name));
  for (const name of tables.keys())
    if (!names.has(name)) others.push(`${name} (not in the database)`);
  return { columns, tables: others };
}

describe("every column of a migrated database is declared in the Drizzle schema", () => {
  let dir: string;
  let d1: D1App;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "host-declared-"));
  });
  afterAll(async () => {
    await d1?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a libSQL file migrated by the app", async () => {
    const db = await openDatabase(`file:${join(dir, "host.db")}`);
    try {
      await runMigrations(db);
      const all: All = async (sql) => (await db.client.execute(sql)).rows as never;
      expect(await mismatches(all)).toEqual({ columns: [], tables: [] });
    } finally {
      await db.close();
    }
  });

  test("D1 migrated by wrangler", async () => {
    d1 = await startD1App("declared-columns");
    const all: All = async (sql) => (await d1.binding.prepare(sql).bind().all()).results as never;
    expect(await mismatches(all)).toEqual({ columns: [], tables: [] });
  });

  test("the check names a column a migration added beside the schema, and a table", async () => {
    const db = await openDatabase(`file:${join(dir, "added.db")}`);
    try {
      await runMigrations(db);
      await db.client.execute("ALTER TABLE sites ADD `_kept` text");
      await db.client.execute("CREATE TABLE kept_aside (id integer)");
      const all: All = async (sql) => (await db.client.execute(sql)).rows as never;
      expect(await mismatches(all)).toEqual({
        columns: ["sites._kept (not declared)"],
        tables: ["kept_aside"],
      });
    } finally {
      await db.close();
    }
  });

  test("the last migration snapshot names the schema's tables and columns", () => {
    const journal = JSON.parse(
      readFileSync(join(MIGRATIONS_FOLDER, "meta", "_journal.json"), "utf8"),
    ) as { entries: Array<{ idx: number; tag: string }> };
    const last = journal.entries.at(-1)!;
    const snapshot = JSON.parse(
      readFileSync(
        join(MIGRATIONS_FOLDER, "meta", `${last.tag.slice(0, 4)}_snapshot.json`),
        "utf8",
      ),
    ) as { tables: Record<string, { columns: Record<string, unknown> }> };
    const inSnapshot = Object.fromEntries(
      Object.entries(snapshot.tables).map(([name, t]) => [name, Object.keys(t.columns).sort()]),
    );
    const inSchema = Object.fromEntries(
      [...declared()].map(([name, columns]) => [name, [...columns].sort()]),
    );
    expect(inSnapshot).toEqual(inSchema);
  });
});
