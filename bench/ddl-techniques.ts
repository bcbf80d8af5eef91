/**
 * Issue 30 item 4, decision 0095: ways to add columns to tables, timed with no other types and
 * with `OTHERS` others, on plain libsql files shaped like COT tables (the table, its id and field
 * indexes, a link table, a full-text table, a pending table and two triggers). +`PER` columns on
 * each of 5 tables that hold rows and links, in one transaction:
 *   alter     one `ALTER TABLE ADD COLUMN` per column (SQLite re-parses its schema each time)
 *   edit      the CREATE TABLE text edited in `sqlite_schema`, the schema version bumped (ddl.ts)
 *   rebuild   SQLite's 12-step rebuild: new table, copy, drop, rename (foreign keys off first)
 *   npx bun bench/faults.ts ddl      (OTHERS=800 PER=100; `alter` with 800 others takes ~minutes)
 * Each reports its time, the columns SQLite then reads, and whether every link row survived.
 */
import Database from "libsql";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

type Db = InstanceType<typeof Database>;
const PER = Number(process.env.PER ?? 100);
const WIDE = 5;
const ROWS = 200;

function cotTable(db: Db, name: string) {
  db.exec(`CREATE TABLE "${name}" (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, last_updated TEXT NOT NULL, "name" TEXT, "field_1" INTEGER, "field_2" REAL);
    CREATE INDEX "${name}_id_idx" ON "${name}" (id);
    CREATE INDEX "${name}_f1_idx" ON "${name}" ("field_1");
    CREATE TABLE "${name}_links" (source_id INTEGER NOT NULL REFERENCES "${name}"(id) ON DELETE CASCADE, target_id INTEGER NOT NULL);
    CREATE VIRTUAL TABLE "${name}_fts" USING fts5("name", content='', contentless_delete=1, tokenize='trigram');
    CREATE TABLE "${name}_pending" (id INTEGER PRIMARY KEY);
    CREATE TRIGGER "${name}_ai" AFTER INSERT ON "${name}" BEGIN INSERT OR IGNORE INTO "${name}_pending" (id) VALUES (new.id); END;
    CREATE TRIGGER "${name}_ad" AFTER DELETE ON "${name}" BEGIN INSERT OR IGNORE INTO "${name}_pending" (id) VALUES (old.id); END;`);
}

function makeFile(others: number) {
  const dir = mkdtempSync(join(tmpdir(), "host-bench-ddl-"));
  const db = new Database(join(dir, "bench.db"));
  db.exec("PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; BEGIN");
  for (let i = 0; i < others; i++) cotTable(db, `other_${i}`);
  for (let t = 0; t < WIDE; t++) {
    cotTable(db, `wide_${t}`);
    for (let r = 1; r <= ROWS; r++) {
      db.prepare(`INSERT INTO "wide_${t}" (created, last_updated, name) VALUES ('', '', ?)`).run(
        `n${r}`,
      );
      db.prepare(`INSERT INTO "wide_${t}_links" (source_id, target_id) VALUES (?, 1)`).run(r);
    }
  }
  db.exec("COMMIT");
  return { db, close: () => (db.close(), rmSync(dir, { recursive: true, force: true })) };
}

const newColumns = (t: number) => Array.from({ length: PER }, (_, c) => `"c${t}_${c}" TEXT`);
const tableSql = (db: Db, name: string) =>
  (db.prepare("SELECT sql FROM sqlite_schema WHERE name = ?").get(name) as { sql: string }).sql;

const techniques: Record<string, (db: Db) => void> = {
  alter(db) {
    db.exec("BEGIN IMMEDIATE");
    for (let t = 0; t < WIDE; t++)
      for (const col of newColumns(t)) db.exec(`ALTER TABLE "wide_${t}" ADD COLUMN ${col}`);
    db.exec("COMMIT");
  },
  edit(db) {
    db.exec("BEGIN IMMEDIATE; PRAGMA writable_schema = ON");
    for (let t = 0; t < WIDE; t++) {
      const text = tableSql(db, `wide_${t}`);
      const edited = `${text.slice(0, -1)}, ${newColumns(t).join(", ")})`;
      db.prepare("UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = ?").run(
        edited,
        `wide_${t}`,
      );
    }
    const { schema_version } = db.prepare("PRAGMA schema_version").get() as {
      schema_version: number;
    };
    db.exec(`PRAGMA schema_version = ${schema_version + 1}; PRAGMA writable_schema = OFF; COMMIT`);
  },
  rebuild(db) {
    db.exec("PRAGMA foreign_keys = OFF; BEGIN IMMEDIATE");
    for (let t = 0; t < WIDE; t++) {
      const name = `wide_${t}`;
      const extras = db
        .prepare(
          "SELECT sql FROM sqlite_schema WHERE tbl_name = ? AND type IN ('index', 'trigger')",
        )
        .all(name) as Array<{ sql: string }>;
      const text = tableSql(db, name).replace(`"${name}"`, `"${name}_new"`);
      db.exec(`${text.slice(0, -1)}, ${newColumns(t).join(", ")})`);
      db.exec(`INSERT INTO "${name}_new" (id, created, last_updated, name, field_1, field_2)
        SELECT id, created, last_updated, name, field_1, field_2 FROM "${name}"`);
      db.exec(`DROP TABLE "${name}"; ALTER TABLE "${name}_new" RENAME TO "${name}"`);
      for (const e of extras) db.exec(e.sql);
    }
    db.exec("PRAGMA foreign_key_check; COMMIT; PRAGMA foreign_keys = ON");
  },
};

/** Each technique (or those in `only`) with no other types and with `others`. */
export function ddlTechniques(others: number, only?: string[]) {
  for (const name of only?.length ? only : Object.keys(techniques)) {
    const times: number[] = [];
    for (const count of [0, others]) {
      const { db, close } = makeFile(count);
      const t0 = performance.now();
      techniques[name]!(db);
      times.push(performance.now() - t0);
      const cols = db.prepare("SELECT count(*) AS n FROM pragma_table_info('wide_3')").get() as {
        n: number;
      };
      const links = db.prepare('SELECT count(*) AS n FROM "wide_3_links"').get() as { n: number };
      if (cols.n !== 6 + PER || links.n !== ROWS) throw new Error(`${name}: wrong result`);
      close();
    }
    console.log(
      `${name.padEnd(8)} +${WIDE * PER} columns: ${times[0]!.toFixed(0)} ms with no other types, ` +
        `${times[1]!.toFixed(0)} ms with ${others} (${(times[1]! / times[0]!).toFixed(1)}×); columns and links intact`,
    );
  }
}
