/**
 * Security (issue 27, row 10): schema preview needs view on custom object types, and a type the
 * caller may not view is previewed as if it did not exist: no counting of its rows, no state
 * hash that confirms a guess of its fields (decision 0064). The unconvertible-value count reads
 * the column in bounded pages and still counts every row.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { addField, CO, makeCot } from "../custom-objects/fixtures";
import { doc, SCHEMA } from "../schema/helpers";

let t: TestApp;
let hiddenDoc: unknown;
const ROWS = 2_345;

beforeAll(async () => {
  t = await makeTestApp();
  for (const slug of ["vault", "open"]) {
    const cot = await makeCot(t, slug);
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    await addField(t, cot.id, { name: "codeword", type: "text" });
    const rows = Array.from({ length: ROWS }, (_, i) => ({
      name: `${slug}-${i}`,
      codeword: i % 3 === 0 ? String(i) : `word-${i}`,
    }));
    const r = await t.json("POST", `${CO}/${slug}/`, { body: rows });
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
  hiddenDoc = (await t.json("GET", `${SCHEMA}/export/?slug=vault`)).body;
});
afterAll(() => t.close());

/** The hidden type's document with `codeword` retyped to integer (a lossy change). */
const retype = (d: any) => ({
  ...d,
  types: d.types.map((ty: any) => ({
    ...ty,
    fields: ty.fields.map((f: any) => (f.name === "codeword" ? { ...f, type: "integer" } : f)),
  })),
});

describe("row 10: schema preview scope", () => {
  test("a user with no permission at all cannot preview", async () => {
    const { token } = await userWith(t, "nobody", []);
    const r = await t.json("POST", `${SCHEMA}/preview/`, { token, body: retype(hiddenDoc) });
    expect(r.status).toBe(403);
    expect(JSON.stringify(r.body)).not.toMatch(/vault|codeword|\d{3} value/);
  });

  test("a type the caller may not view previews as one that does not exist", async () => {
    const { token } = await userWith(t, "peeker", [
      [["view"], "custom_objects.customobjecttype", { slug: "open" }],
    ]);
    // the superuser's answer: the exact document is no change (from == to), the retype counts rows
    const exact = await t.json("POST", `${SCHEMA}/preview/`, { body: hiddenDoc });
    expect(exact.body.from_state_hash).toBe(exact.body.to_state_hash);
    // the peeker's: nothing to tell a right guess from a wrong one
    const guess = await t.json("POST", `${SCHEMA}/preview/`, { token, body: hiddenDoc });
    expect(guess.status).toBe(200);
    expect(guess.body.from_state_hash).not.toBe(guess.body.to_state_hash);
    const fresh = doc([{ name: "vault", slug: "vault", fields: [] }]);
    const absent = await t.json("POST", `${SCHEMA}/preview/`, { token, body: fresh });
    expect(guess.body.from_state_hash).toBe(absent.body.from_state_hash);
    const [d] = guess.body.diffs;
    expect(d).toMatchObject({ slug: "vault", is_new: true, destructive_changes: [] });
    const lossy = await t.json("POST", `${SCHEMA}/preview/`, { token, body: retype(hiddenDoc) });
    expect(lossy.status).toBe(200);
    expect(lossy.body.destructive_changes).toEqual([]);
    expect(lossy.body.diffs[0].is_new).toBe(true);
    // a removal of the hidden type is "already gone", not a count of its rows
    const remove = await t.json("POST", `${SCHEMA}/preview/`, {
      token,
      body: { schema_version: "1", types: [], removed_types: [{ slug: "vault" }] },
    });
    expect(remove.status).toBe(200);
    expect(remove.body.diffs).toEqual([]);
    expect(JSON.stringify([guess.body, lossy.body, remove.body])).not.toContain('codeword":"');
  });

  test("a visible type's lossy retype counts every unconvertible value", async () => {
    // a view of every object of the type: counts are told only then (decision 0181)
    const { token } = await userWith(t, "reader", [
      [["view"], "custom_objects.customobjecttype", { slug: "open" }],
      [["view"], "custom_objects.open", null],
    ]);
    const openDoc = (await t.json("GET", `${SCHEMA}/export/?slug=open`)).body;
    const r = await t.json("POST", `${SCHEMA}/preview/`, { token, body: retype(openDoc) });
    expect(r.status).toBe(200);
    const lossy = r.body.destructive_changes.find((g: any) => g.reason === "lossy_type_change");
    const convertible = Math.ceil(ROWS / 3);
    expect(lossy).toMatchObject({ slug: "open", field: "codeword", rows: ROWS - convertible });
  });
});
