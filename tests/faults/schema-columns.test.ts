/**
 * Issue 30 item 4: a schema apply that adds many columns to a type edits the schema once per
 * table, not once per column (each `ALTER TABLE ADD COLUMN` made SQLite parse the whole schema
 * again, so an apply's cost grew with the number of other types). Counted by SQLite's own schema
 * version, which every schema change bumps; the columns work and the file stays sound.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { servicesOf } from "../../src/app";
import { appendedColumns } from "../../src/plugins/custom-objects/ddl";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import {
  indexPartNames,
  typesWithPending,
} from "../../src/plugins/custom-objects/search/search-index";
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
  expect(applied.status, JSON.stringify(applied.body)).toBe(200);
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

/** The columns of `table` as SQLite reads them: name and declared type, in order. */
async function tableInfo(table: string): Promise<string[]> {
  const info = await t.deps.db.client.execute(
    `SELECT name, type FROM pragma_table_info('${table}')`,
  );
  return info.rows.map((r) => `${r[0]} ${r[1]}`);
}

/** The columns the field records of type `cotId` say its table has, in the order they were added. */
async function recordedColumns(cotId: number): Promise<string[]> {
  const fields = (
    await t.deps.db.client.execute({
      sql: "SELECT name, type FROM custom_object_type_fields WHERE custom_object_type_id = ? ORDER BY id",
      args: [cotId],
    })
  ).rows.map((r) => ({ name: String(r[0]), type: String(r[1]) }));
  const sqlType: Record<string, string> = {
    text: "TEXT",
    longtext: "TEXT",
    json: "TEXT",
    boolean: "INTEGER",
    integer: "INTEGER",
    decimal: "REAL",
    date: "TEXT",
    datetime: "TEXT",
  };
  return fields
    .filter((f) => f.type !== "multiobject")
    .map((f) => `${f.name} ${sqlType[f.type] ?? "?"}`);
}

// The schema edit (decision 0095): the records equal what SQLite reads, other connections and a
// restart read the edited schema, every row and link survives, and a failed apply leaves it as it was.
test("the one-edit column addition: table_info equals the records, data and links survive, a failure rolls it back", async () => {
  const fieldsOf = (n: number) =>
    Array.from({ length: n }, (_, f) => ({
      id: f + 101,
      name: `col_${f}`,
      type: KINDS[f % KINDS.length]!,
    }));
  const typeDoc = (extra: unknown[]) =>
    doc([
      {
        name: "kept",
        slug: "kept",
        fields: [
          { id: 1, name: "name", type: "text", primary: true },
          { id: 100, name: "peers", type: "multiobject", related_object_type: "dcim/site" },
          ...(extra as object[]),
        ],
      },
    ]);
  const created = await t.json("POST", `${SCHEMA}/apply/`, { body: { schema: typeDoc([]) } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const cot = (await t.json("GET", "/api/plugins/custom-objects/custom-object-types/?slug=kept"))
    .body.results[0];
  const site = await t.json("POST", "/api/dcim/sites/", { body: { name: "k1", slug: "k1" } });
  const rows: number[] = [];
  for (const name of ["a", "b", "c"]) {
    const made = await t.json("POST", "/api/plugins/custom-objects/kept/", {
      body: { name, peers: [site.body.id] },
    });
    expect(made.status).toBe(201);
    rows.push(made.body.id);
  }
  const table = `co_${cot.id}`;
  const before = await tableInfo(table);
  await flushSearchIndexesNow(servicesOf(t.app));
  const entries = async () =>
    Number(
      (
        await t.deps.db.client.execute(
          `SELECT count(*) FROM co_search_docsize WHERE id BETWEEN ${cot.id} * 1099511627776 AND ${cot.id} * 1099511627776 + 1099511627775`,
        )
      ).rows[0]![0],
    );
  expect(await entries()).toBe(3);

  // A failing apply: the unique field's fill gives every row the same value; nothing changes.
  const failing = await t.json("POST", `${SCHEMA}/apply/`, {
    body: {
      schema: typeDoc([
        ...fieldsOf(20),
        { id: 300, name: "code", type: "text", unique: true, default: "same" },
      ]),
    },
  });
  expect(failing.status, JSON.stringify(failing.body)).toBe(400);
  expect(await tableInfo(table)).toEqual(before);
  // the full-text index's entries are as they were
  expect(await entries()).toBe(3);

  // The real one: 40 columns in one edit.
  const applied = await t.json("POST", `${SCHEMA}/apply/`, {
    body: { schema: typeDoc(fieldsOf(40)) },
  });
  expect(applied.status, JSON.stringify(applied.body)).toBe(200);
  const info = await tableInfo(table);
  const system = ["id INTEGER", "created TEXT", "last_updated TEXT", "owner__id INTEGER"];
  expect(info).toEqual([...system, ...(await recordedColumns(cot.id))]);
  expect(info.length).toBe(before.length + 40);

  // Another connection (as another process would) reads the edited schema, and so does a restart.
  const { default: Sqlite } = await import("libsql");
  const other = new Sqlite(t.dbUrl.slice("file:".length));
  try {
    const columns = other.prepare(`SELECT name FROM pragma_table_info('${table}')`).all() as Array<{
      name: string;
    }>;
    expect(columns.map((c) => c.name)).toEqual(info.map((c) => c.split(" ")[0]!));
    expect(
      (other.prepare("PRAGMA integrity_check").all() as Array<{ integrity_check: string }>)[0]!
        .integrity_check,
    ).toBe("ok");
  } finally {
    other.close();
  }
  // Every row and every link survived, and the new columns take values.
  for (const [i, id] of rows.entries()) {
    const read = await t.json("GET", `/api/plugins/custom-objects/kept/${id}/`);
    expect(read.body.name).toBe(["a", "b", "c"][i]);
    expect(read.body.peers.map((p: { id: number }) => p.id)).toEqual([site.body.id]);
    expect(read.body.col_0).toBeNull();
  }
  const patched = await t.json("PATCH", `/api/plugins/custom-objects/kept/${rows[0]}/`, {
    body: { col_1: { x: 1 }, col_3: 7 },
  });
  expect(patched.status, JSON.stringify(patched.body)).toBe(200);
  expect(patched.body.col_3).toBe(7);
});

test("the text edit touches only the shape createCotTable writes; anything else takes ALTER TABLE", () => {
  const ours =
    'CREATE TABLE "co_7" (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, last_updated TEXT NOT NULL, "owner__id" INTEGER REFERENCES "owners"(id), "name" TEXT, "local_context_data" TEXT)';
  expect(
    appendedColumns(ours, "co_7", [
      ["a_b", "TEXT"],
      ["n", "REAL"],
    ]),
  ).toBe(`${ours.slice(0, -1)}, "a_b" TEXT, "n" REAL)`);
  const refused = [
    `${ours.slice(0, -1)}, UNIQUE ("name"))`, // a table constraint: a column after it is invalid
    `${ours.slice(0, -1)}, CONSTRAINT c CHECK (1))`,
    `${ours} STRICT`,
    `${ours} WITHOUT ROWID`,
    ours.replace('"name" TEXT', "\"name\" TEXT DEFAULT ')'"),
    ours.replace('"co_7"', "co_7"), // written by something else
  ];
  for (const text of refused) expect(appendedColumns(text, "co_7", [["x", "TEXT"]])).toBeNull();
  expect(appendedColumns(ours, "other", [["x", "TEXT"]])).toBeNull();
  expect(() => appendedColumns(ours, "co_7", [['x" TEXT, "y', "TEXT"]])).toThrow();
  expect(() => appendedColumns(ours, "co_7", [["x", "BLOB" as "TEXT"]])).toThrow();
});

/** How many rows of type `cotId` are pending in the shared full-text index. */
async function pendingOf(cotId: number): Promise<number> {
  const rows = await t.deps.db.client.execute(
    `SELECT count(*) FROM co_search_pending WHERE type_id = ${cotId}`,
  );
  return Number(rows.rows[0]![0]);
}

/** The definitions of the full-text index parts (triggers) of type `cotId`, by name. */
async function indexParts(cotId: number): Promise<Map<string, string>> {
  const rows = await t.deps.db.client.execute(
    `SELECT name, sql FROM sqlite_schema WHERE name IN (${indexPartNames(cotId)
      .map((n) => `'${n}'`)
      .join(", ")})`,
  );
  return new Map(rows.rows.map((r) => [String(r[0]), String(r[1])]));
}

// Every DDL statement makes SQLite scan its whole schema (and a schema reload walks every table
// once per FTS5 table), so what an apply re-creates for nothing costs time in proportion to the
// number of types. Adding searchable columns changes only the column list of the update trigger
// (decision 0130: the full-text index is shared): the edit that adds the columns rewrites it.
test("adding searchable columns changes the schema once: the full-text index is redefined in the column edit; search stays exact", async () => {
  const searchable = ["text", "longtext", "json", "url"];
  const typeDoc = (extra: number) =>
    doc([
      {
        name: "searched",
        slug: "searched",
        fields: [
          { id: 1, name: "name", type: "text", primary: true },
          ...Array.from({ length: extra }, (_, f) => ({
            id: f + 2,
            name: `s_${f}`,
            type: searchable[f % searchable.length]!,
          })),
        ],
      },
    ]);
  expect((await t.json("POST", `${SCHEMA}/apply/`, { body: { schema: typeDoc(1) } })).status).toBe(
    200,
  );
  const cot = (
    await t.json("GET", "/api/plugins/custom-objects/custom-object-types/?slug=searched")
  ).body.results[0];
  const made = await t.json("POST", "/api/plugins/custom-objects/searched/", {
    body: { name: "wombat-row", s_0: "quokka" },
  });
  expect(made.status).toBe(201);
  await flushSearchIndexesNow(servicesOf(t.app));
  const before = await indexParts(cot.id);
  const version = await schemaVersion();

  const applied = await t.json("POST", `${SCHEMA}/apply/`, { body: { schema: typeDoc(21) } });
  expect(applied.status, JSON.stringify(applied.body)).toBe(200);
  const after = await indexParts(cot.id);
  // The insert and delete triggers are as they were...
  for (const name of [`co_${cot.id}_fts_ai`, `co_${cot.id}_fts_ad`])
    expect({ name, sql: after.get(name) }).toEqual({ name, sql: before.get(name) });
  // ...the update trigger names the new columns (the shared index has no per-type columns).
  const au = `co_${cot.id}_fts_au`;
  expect(after.get(au)).not.toBe(before.get(au));
  expect(after.get(au)).toContain('"s_20"');
  // One schema change (SQLite's schema version moves by one a DDL statement): the edit. Dropping
  // and making every part of a per-type index again made 15.
  expect((await schemaVersion()) - version).toBe(1);
  // The new columns are NULL in every row, which adds nothing to an entry: nothing to re-index.
  expect(await pendingOf(cot.id)).toBe(0);

  // Search stays exact, through the rebuilt index once flushed.
  const search = async (q: string) =>
    (await t.json("GET", `/api/plugins/custom-objects/searched/?q=${q}`)).body.results.map(
      (r: { id: number }) => r.id,
    );
  expect(await search("quokka")).toEqual([made.body.id]);
  const patched = await t.json("PATCH", `/api/plugins/custom-objects/searched/${made.body.id}/`, {
    body: { s_20: "platypus" },
  });
  expect(patched.status, JSON.stringify(patched.body)).toBe(200);
  await flushSearchIndexesNow(servicesOf(t.app));
  expect(await pendingOf(cot.id)).toBe(0);
  const indexed = await t.deps.db.client.execute(
    `SELECT rowid - ${cot.id} * 1099511627776 FROM co_search WHERE co_search MATCH '"platypus"' AND rowid BETWEEN ${cot.id} * 1099511627776 AND ${cot.id} * 1099511627776 + 1099511627775`,
  );
  expect(indexed.rows.map((r) => Number(r[0]))).toEqual([made.body.id]);
  expect(await search("platypus")).toEqual([made.body.id]);
  expect(await search("quokka")).toEqual([made.body.id]);
  const old = await t.deps.db.client.execute(
    `SELECT rowid - ${cot.id} * 1099511627776 FROM co_search WHERE co_search MATCH '"quokka"' AND rowid BETWEEN ${cot.id} * 1099511627776 AND ${cot.id} * 1099511627776 + 1099511627775`,
  );
  expect(old.rows.map((r) => Number(r[0]))).toEqual([made.body.id]);
  expect((await t.deps.db.client.execute("PRAGMA integrity_check")).rows[0]![0]).toBe("ok");
});

// The sweep (at start-up and every minute) flushed every type, and each flush reads the schema
// table, which SQLite scans in full: a cost in the square of the type count. It now visits only
// the types whose pending table holds ids.
test("the search sweep visits only the types with pending rows", async () => {
  const made = await t.json("POST", `${SCHEMA}/apply/`, {
    body: {
      schema: doc(
        ["swept_a", "swept_b", "swept_c"].map((slug) => ({
          name: slug,
          slug,
          fields: [{ id: 1, name: "name", type: "text", primary: true }],
        })),
      ),
    },
  });
  expect(made.status, JSON.stringify(made.body)).toBe(200);
  const idOf = async (slug: string) =>
    (await t.json("GET", `/api/plugins/custom-objects/custom-object-types/?slug=${slug}`)).body
      .results[0].id as number;
  const b = await idOf("swept_b");
  await flushSearchIndexesNow(servicesOf(t.app));
  const db = t.deps.db.orm;
  expect(await typesWithPending(db)).toEqual([]);
  // an id marked pending by plain SQL (as another process would): only its type is visited
  await t.deps.db.client.execute(
    `INSERT INTO co_search_pending(type_id, id) VALUES (${b}, 424242)`,
  );
  expect(await typesWithPending(db)).toEqual([b]);
  await flushSearchIndexesNow(servicesOf(t.app));
  expect(await typesWithPending(db)).toEqual([]);
});
