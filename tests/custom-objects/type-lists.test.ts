/**
 * Lists of type and field updates and deletes (decision 0142): one read phase and one atomic
 * batch on a local file and on a remote database, the same answers and rows on both; no
 * transaction on either. A list that loses a race to another writer: 409, nothing written.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { waitFor } from "../helpers/wait";
import { addField, CO, makeCot } from "./fixtures";
import { typeListsScenario } from "./type-lists-scenario";
import { fieldCreatesScenario, typeCreatesScenario } from "./type-creates-scenario";
import {
  listManyRetypesScenario,
  listRetypeAfterEarlierScenario,
  listRetypeKeyScenario,
  listRetypeScenario,
} from "./list-retype-scenario";

let db: RemoteDb;
let local: TestApp;
let remote: TestApp;

beforeAll(async () => {
  db = await startRemoteDb("type-lists");
  local = await makeTestApp();
  remote = await makeTestApp({ DATABASE_URL: db.url });
});
afterAll(async () => {
  await local.close();
  await remote.close();
  await db.stop();
});

/** Counts the transactions `t`'s database opens while `work` runs. */
async function transactionsDuring<T>(t: TestApp, work: () => Promise<T>) {
  const database = servicesOf(t.app).db;
  const original = database.transaction;
  let n = 0;
  database.transaction = (work) => {
    n++;
    return original(work);
  };
  try {
    return { result: await work(), transactions: n };
  } finally {
    database.transaction = original;
  }
}

const jsonOf = (t: TestApp) => (method: string, path: string, body?: unknown) =>
  t.json(method, path, { body });

test("lists of type and field updates and deletes: the same answers and rows locally and remotely, no transaction", async () => {
  const onLocal = await transactionsDuring(local, () => typeListsScenario(jsonOf(local), "tl"));
  const onRemote = await transactionsDuring(remote, () => typeListsScenario(jsonOf(remote), "tl"));
  expect(onRemote.result).toEqual(onLocal.result);
  expect(onLocal.transactions).toBe(0);
  expect(onRemote.transactions).toBe(0);
});

/**
 * Runs `write` on the remote app with its first batch matching `match` held until `meanwhile`
 * has answered (a success), then lets it go; answers `write`'s answer.
 */
async function raced(
  match: RegExp | ((statements: string[]) => boolean),
  write: () => Promise<{ status: number; body: any }>,
  meanwhile: () => Promise<{ status: number; body: any }>,
) {
  db.proxy.hold((statements) =>
    typeof match === "function" ? match(statements) : statements.some((s) => match.test(s)),
  );
  try {
    const writing = write();
    await waitFor(() => db.proxy.held >= 1, { message: () => `${db.proxy.held} batches held` });
    const between = await meanwhile();
    expect(between.status, JSON.stringify(between.body)).toBeLessThan(300);
    db.proxy.release();
    return await writing;
  } finally {
    db.proxy.release();
  }
}

test("a list of field updates racing a write of one of them: 409, none of the list written", async () => {
  const cot = await makeCot(remote, "raced_list");
  const [p, q] = [
    await addField(remote, cot.id, { name: "p", type: "text" }),
    await addField(remote, cot.id, { name: "qq", type: "text" }),
  ];
  const listed = await raced(
    /rename column "p" to "p2"/i,
    () =>
      remote.json("PATCH", `${CO}/custom-object-type-fields/`, {
        body: [
          { id: p.id, name: "p2" },
          { id: q.id, label: "Q" },
        ],
      }),
    () =>
      remote.json("PATCH", `${CO}/custom-object-type-fields/${q.id}/`, {
        body: { label: "meanwhile" },
      }),
  );
  expect(listed.status, JSON.stringify(listed.body)).toBe(409);
  const fields = (await remote.json("GET", `${CO}/custom-object-types/${cot.id}/`)).body.fields;
  expect(fields.map((f: { name: string; label: string }) => `${f.name}:${f.label}`)).toEqual([
    "p:",
    "qq:meanwhile",
  ]);
});

test("a list of type deletes racing a field added to one of them: 409, both types kept", async () => {
  const [a, b] = [await makeCot(remote, "raced_a"), await makeCot(remote, "raced_b")];
  const gone = await raced(
    /^delete from "custom_object_types"/i,
    () =>
      remote.json("DELETE", `${CO}/custom-object-types/`, { body: [{ id: a.id }, { id: b.id }] }),
    () =>
      remote.json("POST", `${CO}/custom-object-type-fields/`, {
        body: { custom_object_type: b.id, name: "late", type: "text" },
      }),
  );
  expect(gone.status, JSON.stringify(gone.body)).toBe(409);
  for (const slug of ["raced_a", "raced_b"])
    expect((await remote.json("GET", `${CO}/${slug}/`)).status).toBe(200);
});

test("a field named twice in a list of updates or deletes: NetBox 4.7's 400 naming it (0200); nothing written", async () => {
  const cot = await makeCot(local, "twice_fields");
  const f = await addField(local, cot.id, { name: "once", type: "text" });
  const patched = await local.json("PATCH", `${CO}/custom-object-type-fields/`, {
    body: [
      { id: f.id, label: "A" },
      { id: f.id, label: "B" },
    ],
  });
  expect(patched.status, JSON.stringify(patched.body)).toBe(400);
  const twice = [
    {
      id: f.id,
      errors: { id: [`Each object may be specified only once; ID ${f.id} is listed 2 times`] },
    },
  ];
  expect(patched.body.errors).toEqual(twice);
  const gone = await local.json("DELETE", `${CO}/custom-object-type-fields/`, {
    body: [{ id: f.id }, { id: f.id }],
  });
  expect(gone.status, JSON.stringify(gone.body)).toBe(400);
  expect(gone.body.errors).toEqual(twice);
  const field = (await local.json("GET", `${CO}/custom-object-type-fields/${f.id}/`)).body;
  expect(field.label).toBe("");
});

test("lists of type creates: the same answers and rows locally and remotely, no transaction — was the transaction (0142)", async () => {
  const onLocal = await transactionsDuring(local, () => typeCreatesScenario(jsonOf(local), "tc"));
  const onRemote = await transactionsDuring(remote, () =>
    typeCreatesScenario(jsonOf(remote), "tc"),
  );
  expect(onRemote.result).toEqual(onLocal.result);
  expect(onLocal.transactions).toBe(0);
  expect(onRemote.transactions).toBe(0);
  const r = onLocal.result;
  expect(r.made.map((t: { slug: string }) => t.slug)).toEqual(["tc_one", "tc_two"]);
  for (const refused of [r.repeated, r.badKey, r.takenBefore]) {
    expect(refused[0]).toBe(400);
    expect(refused[1].errors.map((e: { index: number }) => e.index)).toEqual([1]);
  }
  expect(r.listed.map((t: { slug: string }) => t.slug)).toEqual(["tc_eight", "tc_one", "tc_two"]);
  expect(r.changes).toEqual(["create:tc_one", "create:tc_two", "create:tc_eight"]);
  expect(r.object).toBe(200);
});

test("a list of type creates racing a create of one of its slugs: the batch refuses it, the list reruns to its 400, none written (0142)", async () => {
  // the list's batch (two object types), not the single create's
  const listed = await raced(
    (statements) => statements.filter((s) => /^insert into "object_types"/i.test(s)).length > 1,
    () =>
      remote.json("POST", `${CO}/custom-object-types/`, {
        body: [
          { name: "race_c1", slug: "race_c1" },
          { name: "race_c2", slug: "race_c2" },
        ],
      }),
    () =>
      remote.json("POST", `${CO}/custom-object-types/`, {
        body: { name: "race_c2_meanwhile", slug: "race_c2" },
      }),
  );
  expect(listed.status, JSON.stringify(listed.body)).toBe(400);
  expect(listed.body.errors).toEqual([{ index: 1, errors: { slug: [expect.any(String)] } }]);
  expect((await remote.json("GET", `${CO}/race_c1/`)).status).toBe(404);
  const kept = await remote.json("GET", `${CO}/custom-object-types/?slug=race_c2`);
  expect(kept.body.results.map((t: { name: string }) => t.name)).toEqual(["race_c2_meanwhile"]);
});

test("lists of field creates over two types: the same answers and rows locally and remotely, no transaction — was the transaction (0142)", async () => {
  const onLocal = await transactionsDuring(local, () => fieldCreatesScenario(jsonOf(local), "fc"));
  const onRemote = await transactionsDuring(remote, () =>
    fieldCreatesScenario(jsonOf(remote), "fc"),
  );
  expect(onRemote.result).toEqual(onLocal.result);
  expect(onLocal.transactions).toBe(0);
  expect(onRemote.transactions).toBe(0);
  const r = onLocal.result;
  expect(r.made).toEqual(["code:text:null", "size:integer:3", "flag:boolean:true"]);
  expect(r.refused[0]).toBe(400);
  expect(r.refused[1].errors.map((e: { index: number }) => e.index)).toEqual([1, 2, 3]);
  expect(r.row).toEqual({ code: null, flag: true });
  expect(r.found).toBe(1);
  expect(r.exported).toEqual(["1:code", "2:flag"]);
  expect(r.changes).toEqual(["create:code", "create:size", "create:flag"]);
});

test("a list of field creates racing a field added to its type: the batch's stamp guard fails, the list reruns to its 400, none written (0142)", async () => {
  const cot = await makeCot(remote, "raced_fields");
  // the list's batch (two field rows), not the single create's
  const listed = await raced(
    (statements) =>
      statements.filter((s) => /^insert into "custom_object_type_fields"/i.test(s)).length > 1,
    () =>
      remote.json("POST", `${CO}/custom-object-type-fields/`, {
        body: [
          { custom_object_type: cot.id, name: "p1", type: "text" },
          { custom_object_type: cot.id, name: "late", type: "text" },
        ],
      }),
    () =>
      remote.json("POST", `${CO}/custom-object-type-fields/`, {
        body: { custom_object_type: cot.id, name: "late", type: "integer" },
      }),
  );
  expect(listed.status, JSON.stringify(listed.body)).toBe(400);
  expect(listed.body.errors).toEqual([{ index: 1, errors: { name: [expect.any(String)] } }]);
  const fields = (await remote.json("GET", `${CO}/custom-object-types/${cot.id}/`)).body.fields;
  expect(fields.map((f: { name: string; type: string }) => `${f.name}:${f.type}`)).toEqual([
    "late:integer",
  ]);
});

test("lists of field updates that change types: the same answers and rows locally and remotely, no transaction — was the transaction (0142)", async () => {
  const onLocal = await transactionsDuring(local, () => listRetypeScenario(jsonOf(local), "lr"));
  const onRemote = await transactionsDuring(remote, () => listRetypeScenario(jsonOf(remote), "lr"));
  expect(onRemote.result).toEqual(onLocal.result);
  expect(onLocal.transactions).toBe(0);
  expect(onRemote.transactions).toBe(0);
  const r = onLocal.result;
  expect(r.lossy[0]).toBe(409);
  expect(r.refused[0]).toBe(400);
  // named by its id (NetBox 4.7), the id of the second item sent
  expect(r.refused[1].errors.map((e: { place: number }) => e.place)).toEqual([1]);
  expect(r.kept).toEqual([
    ["12", 1],
    ["twelve", 2],
  ]);
  expect(r.changed).toEqual([200, ["tag:text", "code:integer", "size:text", "flag:text"]]);
  expect(r.rows).toEqual([[12, "1", "x"], [null, "2", null], ["true"]]);
  expect(r.found).toBe(1);
  expect(r.changes.slice(-4)).toEqual([
    "update:tag:text",
    "update:code:integer",
    "update:size:text",
    "update:flag:text",
  ]);
});

test("a list whose retype breaks a compound key: the 400 in its place, locally and remotely alike, nothing written, no transaction (0142)", async () => {
  const onLocal = await transactionsDuring(local, () => listRetypeKeyScenario(jsonOf(local), "lk"));
  const onRemote = await transactionsDuring(remote, () =>
    listRetypeKeyScenario(jsonOf(remote), "lk"),
  );
  expect(onRemote.result).toEqual(onLocal.result);
  expect(onLocal.transactions).toBe(0);
  expect(onRemote.transactions).toBe(0);
  const r = onLocal.result;
  expect(r.clash[0], JSON.stringify(r.clash)).toBe(400);
  expect(r.clash[1].errors.map((e: { place: number }) => e.place)).toEqual([1]);
  expect(r.fields).toEqual(["part:text", "note:text"]);
  expect(r.rows).toEqual(["1", "01"]);
});

test("a list retyping a keyed and checked field after earlier items changed its type: the transaction's 400s in its place, counted over the converted values, then staged — was the transaction (0142)", async () => {
  const onLocal = await transactionsDuring(local, () =>
    listRetypeAfterEarlierScenario(jsonOf(local), "le"),
  );
  const onRemote = await transactionsDuring(remote, () =>
    listRetypeAfterEarlierScenario(jsonOf(remote), "le"),
  );
  expect(onRemote.result).toEqual(onLocal.result);
  expect(onLocal.transactions).toBe(0);
  expect(onRemote.transactions).toBe(0);
  // what the transaction answered (item by item) before this list was staged
  const r = onLocal.result;
  const refusedAt2 = (errors: Record<string, string[]>) => [
    400,
    { detail: "1 of 3 objects failed validation.", errors: [{ place: 2, errors }] },
  ];
  expect(r.check).toEqual(
    refusedAt2({ checks: ['1 existing row(s) do not match the check "parted".'] }),
  );
  expect(r.clash).toEqual(
    refusedAt2({
      unique_together: [
        "2 existing row(s) share values of lane, part; they must make a unique set.",
      ],
    }),
  );
  const untouched = ["part:text", "queue:text", "size:integer"];
  expect(r.afterCheck).toEqual({
    fields: untouched,
    rows: [
      ["1", "7", 1],
      ["x", "07", 2],
    ],
  });
  expect(r.afterClash).toEqual({
    fields: untouched,
    rows: [
      ["1", "7", 1],
      ["01", "07", 2],
    ],
  });
  expect(r.done).toEqual([200, ["lane:integer", "size:text", "part:integer"]]);
  expect(r.afterDone).toEqual({
    fields: ["part:integer", "lane:integer", "size:text"],
    rows: [
      [1, 7, "1"],
      [2, 7, "2"],
    ],
  });
  expect(r.keys).toEqual([
    [["lane", "part"]],
    [{ name: "parted", condition: { part__isnull: false } }],
  ]);
  expect([r.refused[0], r.refused[2]]).toEqual([400, 400]);
});

test("a list retyping a keyed field after an earlier item retyped its type, racing a write of a value it read: the key's 400 of the values as written, nothing written (0142, 0199)", async () => {
  const cot = await makeCot(remote, "raced_after");
  const part = await addField(remote, cot.id, { name: "part", type: "text" });
  const queue = await addField(remote, cot.id, { name: "queue", type: "text" });
  const keyed = await remote.json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
    body: { unique_together: [["part", "queue"]] },
  });
  expect(keyed.status, JSON.stringify(keyed.body)).toBe(200);
  const rows = `${CO}/raced_after/`;
  await remote.json("POST", rows, { body: { part: "1", queue: "7" } });
  const second = (await remote.json("POST", rows, { body: { part: "2", queue: "07" } })).body;
  // meanwhile "2" becomes "01": the database converts the values as they are when the batch runs
  // (0199), so the answer is the one a list sent after that write gets: the key's 400
  const listed = await raced(
    /"queue__retype"/,
    () =>
      remote.json("PATCH", `${CO}/custom-object-type-fields/`, {
        body: [
          { id: queue.id, name: "lane", type: "integer" },
          { id: part.id, type: "integer" },
        ],
      }),
    () => remote.json("PATCH", `${rows}${second.id}/`, { body: { part: "01" } }),
  );
  expect(listed.status, JSON.stringify(listed.body)).toBe(400);
  expect(listed.body.errors[0].errors.unique_together[0]).toContain("lane, part");
  const after = (await remote.json("GET", `${rows}?ordering=id`)).body.results;
  expect(after.map((r: Record<string, unknown>) => [r.part, r.queue])).toEqual([
    ["1", "7"],
    ["01", "07"],
  ]);
});

test("a list of eight retypes read and converted, then a compound key's field: its 400 counted in one flat statement, locally and remotely alike — was a 500 (parser stack overflow)", async () => {
  const onLocal = await transactionsDuring(local, () =>
    listManyRetypesScenario(jsonOf(local), "lm", 8),
  );
  const onRemote = await transactionsDuring(remote, () =>
    listManyRetypesScenario(jsonOf(remote), "lm", 8),
  );
  expect(onRemote.result).toEqual(onLocal.result);
  expect(onLocal.transactions).toBe(0);
  const r = onLocal.result;
  expect(r.list).toEqual([
    400,
    {
      detail: "1 of 9 objects failed validation.",
      errors: [
        {
          place: 8,
          errors: {
            unique_together: [
              "2 existing row(s) share values of a, b; they must make a unique set.",
            ],
          },
        },
      ],
    },
  ]);
  expect(onRemote.transactions).toBe(0);
  expect(r.rows).toEqual([
    ["1", "0"],
    ["01", "0"],
  ]);
});
