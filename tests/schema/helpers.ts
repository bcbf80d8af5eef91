/** Shared pieces for schema document tests: the example document, choice sets and a full dump. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import type { TestApp } from "../helpers/app";

export const SCHEMA = "/api/plugins/custom-objects/schema";
export const exampleDoc = () =>
  JSON.parse(readFileSync(join(import.meta.dir, "../../examples/inventory-schema.json"), "utf8"));

export async function exampleChoiceSets(t: TestApp) {
  for (const [name, choices] of [
    [
      "support-hours",
      [
        ["24x7", "24x7"],
        ["business", "Business hours"],
      ],
    ],
    [
      "circuit-labels",
      [
        ["primary", "Primary"],
        ["backup", "Backup"],
        ["lab", "Lab"],
      ],
    ],
  ] as const) {
    const r = await t.json("POST", "/api/extras/custom-field-choice-sets/", {
      body: { name, extra_choices: choices },
    });
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
}

/** Every table's schema and rows: equal dumps mean the database is exactly as it was. */
/**
 * The shared full-text index's shadow tables (decision 0130) hold integers past 2^53 (FTS5's
 * tombstone page ids), which a client reading numbers refuses: those come quoted, as SQL text.
 */
async function dumpColumns(t: TestApp, table: string): Promise<string> {
  if (!table.startsWith("co_search_")) return "*";
  const cols = await t.deps.db.client.execute(`SELECT name FROM pragma_table_info('${table}')`);
  return cols.rows.map((c) => `quote("${String(c.name)}")`).join(", ");
}

export async function dump(t: TestApp): Promise<string> {
  // Rows pending in a full-text index are indexed in the background (decision 0056): settle them
  // first, so two dumps differ only by what the requests between them did.
  await flushSearchIndexesNow(servicesOf(t.app));
  const client = t.deps.db.client;
  const master = await client.execute(
    "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
  );
  const parts: unknown[] = [master.rows.map((r) => [r.type, r.name, r.sql])];
  for (const r of master.rows) {
    if (r.type !== "table" || r.name === "cache_entries") continue;
    // WITHOUT ROWID tables (a full-text index's shadow tables) come in primary-key order.
    const order = /WITHOUT ROWID/i.test(String(r.sql)) ? "" : " ORDER BY rowid";
    const rows = await client.execute(
      `SELECT ${await dumpColumns(t, String(r.name))} FROM "${String(r.name)}"${order}`,
    );
    parts.push([r.name, rows.rows.map((row) => Object.values(row))]);
  }
  return JSON.stringify(parts);
}

export function doc(types: unknown[]) {
  return { schema_version: "1", types };
}
