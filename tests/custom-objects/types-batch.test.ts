/**
 * Types and fields through REST as one read phase and one atomic batch (decision 0108): races
 * between writers are caught inside the batch (ids read ahead, the unique indexes, the type's
 * `last_updated`) and answered as one writer at a time would be, never half-applied.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, create, makeCot } from "./fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const columns = async (table: string) =>
  (await t.deps.db.client.execute(`PRAGMA table_info("${table}")`)).rows.map((r) => String(r.name));

test("concurrent type creates: each its own id and table; the same slug twice: one 201, one 400", async () => {
  const made = await Promise.all(
    [1, 2, 3, 4].map((n) =>
      t.json("POST", `${CO}/custom-object-types/`, {
        body: { name: `race_${n}`, slug: `race_${n}` },
      }),
    ),
  );
  expect(made.map((r) => r.status)).toEqual([201, 201, 201, 201]);
  const ids = made.map((r) => r.body.id as number);
  expect(new Set(ids).size).toBe(4);
  for (const [i, r] of made.entries()) {
    expect(r.body).toEqual((await t.json("GET", `${CO}/custom-object-types/${ids[i]}/`)).body);
    expect(await columns(`co_${ids[i]}`)).toContain("id");
    expect((await t.json("GET", `${CO}/race_${i + 1}/`)).status).toBe(200);
  }
  const twice = await Promise.all(
    [1, 2].map(() =>
      t.json("POST", `${CO}/custom-object-types/`, { body: { name: "twin", slug: "twin" } }),
    ),
  );
  expect(twice.map((r) => r.status).sort()).toEqual([201, 400]);
  const refused = twice.find((r) => r.status === 400)!;
  expect(Object.keys(refused.body).sort()).toEqual(expect.arrayContaining(["slug"]));
  const list = await t.json("GET", `${CO}/custom-object-types/?slug=twin`);
  expect(list.body.count).toBe(1);
});

test("concurrent field creates on one type: all 201, each a schema id and a column", async () => {
  const cot = await makeCot(t, "busy_type");
  const made = await Promise.all(
    ["a1", "a2", "a3", "a4"].map((name) =>
      t.json("POST", `${CO}/custom-object-type-fields/`, {
        body: { custom_object_type: cot.id, name, type: "text" },
      }),
    ),
  );
  expect(made.map((r) => r.status)).toEqual([201, 201, 201, 201]);
  expect(new Set(made.map((r) => r.body.schema_id)).size).toBe(4);
  expect(await columns(`co_${cot.id}`)).toEqual(expect.arrayContaining(["a1", "a2", "a3", "a4"]));
  // the same name twice: one field, the other answer a 400 on name
  const twice = await Promise.all(
    [1, 2].map(() =>
      t.json("POST", `${CO}/custom-object-type-fields/`, {
        body: { custom_object_type: cot.id, name: "dup", type: "integer" },
      }),
    ),
  );
  expect(twice.map((r) => r.status).sort()).toEqual([201, 400]);
  expect(twice.find((r) => r.status === 400)!.body.name).toBeDefined();
  const obj = await create(t, "busy_type", { a1: "x", dup: 3 });
  expect(obj).toMatchObject({ a1: "x", dup: 3 });
});

test("records and change records agree with GET; a stale If-Match is 412 and changes nothing", async () => {
  const cot = await makeCot(t, "audited", "audited", { description: "first" });
  const field = await addField(t, cot.id, { name: "size", type: "integer", label: "Size" });
  const changes = async (model: string, id: number) =>
    (
      await t.json(
        "GET",
        `/api/core/object-changes/?changed_object_type=custom_objects.${model}&changed_object_id=${id}`,
      )
    ).body.results as Array<{ action: { value: string }; postchange_data: unknown }>;
  const [typeCreated] = await changes("customobjecttype", cot.id);
  expect(typeCreated!.postchange_data).toEqual(cot);
  const [fieldCreated] = await changes("customobjecttypefield", field.id);
  expect(fieldCreated!.postchange_data).toEqual(
    (await t.json("GET", `${CO}/custom-object-type-fields/${field.id}/`)).body,
  );

  const etag = (await t.req("GET", `${CO}/custom-object-types/${cot.id}/`)).headers.get("etag")!;
  expect(etag).toBeTruthy();
  const ok = await t.json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
    body: { description: "second" },
    headers: { "If-Match": etag },
  });
  expect(ok.status).toBe(200);
  const stale = await t.json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
    body: { description: "third" },
    headers: { "If-Match": etag },
  });
  expect(stale.status).toBe(412);
  const gone = await t.json("DELETE", `${CO}/custom-object-types/${cot.id}/`, {
    headers: { "If-Match": etag },
  });
  expect(gone.status).toBe(412);
  const now = await t.json("GET", `${CO}/custom-object-types/${cot.id}/`);
  expect(now.body.description).toBe("second");
  expect(now.body.fields.map((f: { name: string }) => f.name)).toEqual(["size"]);
});

test("a new type's empty tags, unique_together and checks are staged like its other attributes", async () => {
  const r = await t.json("POST", `${CO}/custom-object-types/`, {
    body: { name: "bare", slug: "bare", tags: [], unique_together: [], checks: [] },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  expect(r.body).toMatchObject({ tags: [], unique_together: [], checks: [], fields: [] });
  expect(r.body).toEqual((await t.json("GET", `${CO}/custom-object-types/${r.body.id}/`)).body);
});

test("a unique field whose default would repeat over existing rows: 400 on unique, nothing changes", async () => {
  const cot = await makeCot(t, "filled");
  await addField(t, cot.id, { name: "n", type: "integer" });
  await create(t, "filled", { n: 1 });
  await create(t, "filled", { n: 2 });
  const before = await columns(`co_${cot.id}`);
  const r = await t.json("POST", `${CO}/custom-object-type-fields/`, {
    body: { custom_object_type: cot.id, name: "code", type: "text", unique: true, default: "x" },
  });
  expect(r.status).toBe(400);
  expect(r.body.unique[0]).toContain('"code"');
  expect(await columns(`co_${cot.id}`)).toEqual(before);
  const type = await t.json("GET", `${CO}/custom-object-types/${cot.id}/`);
  expect(type.body.fields.map((f: { name: string }) => f.name)).toEqual(["n"]);
});

test("keys racing each other and a field add: each lands or answers 409, the stored keys are the enforced ones (0119)", async () => {
  const cot = await makeCot(t, "raced", "raced");
  for (const name of ["a", "b", "c"]) await addField(t, cot.id, { name, type: "integer" });
  const url = `${CO}/custom-object-types/${cot.id}/`;
  const answers = await Promise.all([
    t.json("PATCH", url, { body: { unique_together: [["a", "b"]] } }),
    t.json("PATCH", url, { body: { unique_together: [["a", "c"]] } }),
    t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: cot.id, name: "d", type: "text" },
    }),
  ]);
  for (const a of answers.slice(0, 2)) expect([200, 409]).toContain(a.status);
  expect(answers[2]!.status).toBe(201);
  // a 409 lost to a write that changed the type since its read: nothing of it stays
  const landed = [[["a", "b"]], [["a", "c"]]].filter((_, i) => answers[i]!.status === 200);
  let stored = (await t.json("GET", url)).body.unique_together as string[][];
  if (!landed.length) {
    expect(stored).toEqual([]);
    expect((await t.json("PATCH", url, { body: { unique_together: [["a", "b"]] } })).status).toBe(
      200,
    );
    stored = [["a", "b"]];
  } else expect(landed).toContainEqual(stored);
  // the stored pair refuses a repeat; the other pair does not
  const other = stored[0]![1] === "b" ? "c" : "b";
  const kept = stored[0]![1]!;
  await create(t, "raced", { a: 1, [kept]: 1, [other]: 1 });
  expect(
    (await t.json("POST", `${CO}/raced/`, { body: { a: 1, [kept]: 1, [other]: 2 } })).status,
  ).toBe(400);
  expect(
    (await t.json("POST", `${CO}/raced/`, { body: { a: 1, [kept]: 2, [other]: 1 } })).status,
  ).toBe(201);
  // the change record of the keys' write is the record GET answers after it
  const [last] = (
    await t.json(
      "GET",
      `/api/core/object-changes/?changed_object_type=custom_objects.customobjecttype&changed_object_id=${cot.id}&ordering=-id&limit=1`,
    )
  ).body.results as Array<{ postchange_data: { unique_together: unknown } }>;
  expect(last!.postchange_data.unique_together).toEqual(stored);
});
