/**
 * Schema apply benchmark (§5.1): a document of 100 types × 20 fields applied to an empty
 * database, and a rename-only apply on a type holding 100k rows. Baselines in the same run:
 * the same DDL as raw SQL in one transaction, and a raw `ALTER TABLE … RENAME COLUMN`.
 *   npx bun bench/schema.ts            (TYPES=100 FIELDS=20 ROWS=100000 by default)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createApp } from "../src/app";
import { loadConfig } from "../src/config";
import { openDatabase } from "../src/db/local";
import { runMigrations } from "../src/migrations";
import { createUser, issueToken } from "../src/core/auth/provisioning";
import { createCache } from "../src/services/cache";

const TYPES = Number(process.env.TYPES ?? 100);
const FIELDS = Number(process.env.FIELDS ?? 20);
const ROWS = Number(process.env.ROWS ?? 100_000);
const KINDS = [
  "text",
  "integer",
  "decimal",
  "boolean",
  "date",
  "datetime",
  "url",
  "json",
  "longtext",
  "text",
];

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), "host-bench-schema-"));
  const config = loadConfig({ DATABASE_URL: `file:${join(dir, "bench.db")}`, LOG_LEVEL: "silent" });
  const db = await openDatabase(config.database.url);
  await runMigrations(db);
  const app = await createApp({ config, db, cache: createCache("memory") });
  await createUser(db.orm, { username: "bench", isSuperuser: true });
  const { key } = await issueToken(db.orm, { username: "bench" });
  const apply = async (doc: unknown, allow = false) => {
    const res = await app.request("http://bench/api/plugins/custom-objects/schema/apply/", {
      method: "POST",
      headers: { authorization: `Token ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ schema: doc, allow_destructive: allow }),
    });
    if (res.status !== 200)
      throw new Error(`apply ${res.status}: ${(await res.text()).slice(0, 500)}`);
    return res.json();
  };
  return { dir, db, apply };
}

function bigDocument() {
  return {
    schema_version: "1",
    types: Array.from({ length: TYPES }, (_, t) => ({
      name: `type_${t}`,
      slug: `type_${t}`,
      fields: Array.from({ length: FIELDS }, (_, f) => ({
        id: f + 1,
        name: `field_${f}`,
        type: KINDS[f % KINDS.length]!,
        primary: f === 0,
      })),
    })),
  };
}

const ms = (t0: number) => performance.now() - t0;

// 1. 100 × 20 onto an empty database, against the same DDL as raw SQL.
{
  const { dir, db, apply } = await setup();
  const t0 = performance.now();
  const result = await apply(bigDocument());
  const applyMs = ms(t0);
  const t1 = performance.now();
  // Baseline: the same tables and indexes as hand-written DDL in one transaction.
  await db.orm.transaction(async (tx) => {
    for (let t = 0; t < TYPES; t++) {
      const cols = Array.from({ length: FIELDS }, (_, f) => `, "field_${f}" TEXT`).join("");
      await tx.run(
        `CREATE TABLE "raw_${t}" (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, last_updated TEXT NOT NULL${cols})` as any,
      );
      await tx.run(`CREATE INDEX "raw_${t}_id_idx" ON "raw_${t}" (id)` as any);
      for (let f = 0; f < FIELDS; f++) {
        if (["json", "longtext"].includes(KINDS[f % KINDS.length]!)) continue;
        await tx.run(`CREATE INDEX "raw_${t}_f${f}" ON "raw_${t}" ("field_${f}")` as any);
      }
    }
  });
  const rawMs = ms(t1);
  const t2 = performance.now();
  const again = await apply(bigDocument());
  const noopMs = ms(t2);
  const changed = (again as any).diffs.filter((d: any) => d.has_changes).length;
  console.log(
    `apply ${TYPES} types × ${FIELDS} fields to an empty database: ${applyMs.toFixed(0)} ms (raw DDL baseline ${rawMs.toFixed(0)} ms, ratio ${(applyMs / rawMs).toFixed(2)}×); ${(result as any).diffs.length} diffs`,
  );
  console.log(
    `re-apply of the same document (no changes: ${changed === 0}): ${noopMs.toFixed(0)} ms`,
  );
  await db.close();
  rmSync(dir, { recursive: true, force: true });
}

// 2. Rename-only apply on a type with ROWS rows.
{
  const { dir, db, apply } = await setup();
  const doc = (a: string, b: string) => ({
    schema_version: "1",
    types: [
      {
        name: "big",
        slug: "big",
        fields: [
          { id: 1, name: a, type: "text", primary: true },
          { id: 2, name: b, type: "integer" },
          { id: 3, name: "note", type: "text" },
        ],
      },
    ],
  });
  await apply(doc("label", "size"));
  const [cot] = (await db.client.execute("SELECT id FROM custom_object_types WHERE slug = 'big'"))
    .rows;
  const table = `co_${Number(cot!.id)}`;
  const t0 = performance.now();
  await db.orm.transaction(async (tx) => {
    const now = new Date().toISOString();
    for (let i = 0; i < ROWS; i += 1000) {
      const values = Array.from(
        { length: Math.min(1000, ROWS - i) },
        (_, k) => `('${now}','${now}','row ${i + k}',${i + k},'n')`,
      ).join(",");
      await tx.run(
        `INSERT INTO "${table}" (created, last_updated, label, size, note) VALUES ${values}` as any,
      );
    }
  });
  const loadMs = ms(t0);
  const t1 = performance.now();
  const renamed = await apply(doc("title", "size_mb"));
  const renameMs = ms(t1);
  // The raw baseline renames plain columns: the type's full-text index triggers (decision 0050)
  // go first, untimed (the app rebuilds them; raw SQLite cannot rename under them).
  for (const row of (
    await db.client.execute(
      `SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = '${table}'`,
    )
  ).rows) {
    await db.client.execute(`DROP TRIGGER "${String(row.name)}"`);
  }
  const t2 = performance.now();
  await db.orm.transaction(async (tx) => {
    await tx.run(`ALTER TABLE "${table}" RENAME COLUMN "title" TO "title2"` as any);
    await tx.run(`ALTER TABLE "${table}" RENAME COLUMN "size_mb" TO "size2"` as any);
  });
  const rawMs = ms(t2);
  const [check] = (
    await db.client.execute(`SELECT count(*) AS n, count(title2) AS t FROM "${table}"`)
  ).rows;
  console.log(`loaded ${ROWS} rows in ${loadMs.toFixed(0)} ms`);
  console.log(
    `rename-only apply (2 renames) on ${ROWS} rows: ${renameMs.toFixed(1)} ms (raw RENAME COLUMN baseline ${rawMs.toFixed(1)} ms); data kept: ${Number(check!.t) === ROWS}; changes: ${(renamed as any).diffs[0].field_changes.length}`,
  );
  await db.close();
  rmSync(dir, { recursive: true, force: true });
}
