/**
 * Issue 30 item 4: a schema apply that adds many columns to a type edits the schema once per
 * table, not once per column (each `ALTER TABLE ADD COLUMN` made SQLite parse the whole schema
 * again, so an apply's cost grew with the number of other types). Counted by SQLite's own schema
 * version, which every schema change bumps; the columns work and the file stays sound.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { doc, SCHEMA } from "../schema/helpers";

// Types whose fields get no index, so only column additions change the schema.
const KINDS = ["longtext", "json", "boolean", "integer", "decimal", "date", "datetime"];
const TYPES = 3;
const FIELDS = 61;

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const schemaDoc = (fields: number) =>
  doc(
    Array.from({ length: TYPES }, (_, i) => ({
      name: `wide_${i}`,
      slug: `wide_${i}`,
      fields: Array.from({ length: fields }, (_, f) => ({
        id: f + 1,
        name: f === 0 ? "name" : `field_${f}`,
        type: f === 0 ? "text" : KINDS[f % KINDS.length]!,
        primary: f === 0,
      })),
    })),
  );
const schemaVersion = async () =>
  Number((await t.deps.db.client.execute("PRAGMA schema_version")).rows[0]![0]);

/** Applies the document with `fields` fields per type; how many schema changes it made. */
async function applyCounting(fields: number): Promise<number> {
  const before = await schemaVersion();
  const applied = await t.json("POST", `${SCHEMA}/apply/`, { body: { schema: schemaDoc(fields) } });
  expect(applied.status).toBe(200);
  return (await schemaVersion()) - before;
}

test("adding 50 columns per type changes the schema as often as adding 10: one edit for the columns", async () => {
  await applyCounting(1);
  const made = await t.json("POST", "/api/plugins/custom-objects/wide_0/", {
    body: { name: "before" },
  });
  expect(made.status).toBe(201);
  const ten = await applyCounting(11);
  const fifty = await applyCounting(FIELDS);
  expect(fifty).toBe(ten);

  for (let i = 0; i < TYPES; i++) {
    const info = await t.deps.db.client.execute(
      `SELECT name FROM pragma_table_info('co_${i + 1}')`,
    );
    const names = info.rows.map((r) => String(r[0]));
    for (let f = 1; f < FIELDS; f++) expect(names).toContain(`field_${f}`);
  }
  // The old row reads NULL in the new columns; a new row keeps its values.
  const old = await t.json("GET", `/api/plugins/custom-objects/wide_0/${made.body.id}/`);
  expect(old.body.field_3).toBeNull();
  const fresh = await t.json("POST", "/api/plugins/custom-objects/wide_0/", {
    body: { name: "after", field_3: 42, field_1: "long" },
  });
  expect(fresh.status).toBe(201);
  const read = await t.json("GET", `/api/plugins/custom-objects/wide_0/${fresh.body.id}/`);
  expect(read.body.field_3).toBe(42);
  expect(read.body.field_1).toBe("long");
  expect((await t.deps.db.client.execute("PRAGMA quick_check")).rows[0]![0]).toBe("ok");
});
