/**
 * Security (issue 27, row 11): purging a schema trash entry needs the delete permission, and
 * restoring one the change permission, under their constraints for the entry's type; a removed
 * type's entry only with that action unconstrained (decision 0064).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { addField, create, makeCot } from "../custom-objects/fixtures";
import { SCHEMA } from "../schema/helpers";

let t: TestApp;
const entry = { inv: 0, other: 0, gone: 0 };

/** Removes field `note` of `slug` (or the type itself) through a schema apply; returns its entry. */
async function trash(slug: string, whole = false): Promise<number> {
  const doc = (await t.json("GET", `${SCHEMA}/export/?slug=${slug}`)).body;
  const type = doc.types[0];
  const note = type.fields.find((f: any) => f.name === "note");
  const schema = whole
    ? { ...doc, types: [], removed_types: [{ slug }] }
    : {
        ...doc,
        types: [
          {
            ...type,
            fields: type.fields.filter((f: any) => f.name !== "note"),
            removed_fields: [note],
          },
        ],
      };
  const r = await t.json("POST", `${SCHEMA}/apply/`, { body: { schema, allow_destructive: true } });
  if (r.status !== 200) throw new Error(JSON.stringify(r.body));
  const list = await t.json("GET", `${SCHEMA}/trash/`);
  return list.body.results.find(
    (e: any) =>
      e.custom_object_type.slug === slug && (whole ? e.kind === "type" : e.name === "note"),
  ).id;
}

beforeAll(async () => {
  t = await makeTestApp();
  for (const slug of ["inv", "other", "gone"]) {
    const cot = await makeCot(t, slug);
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    await addField(t, cot.id, { name: "note", type: "text" });
    await create(t, slug, { name: `${slug}-1`, note: "kept in the trash" });
  }
  entry.inv = await trash("inv");
  entry.other = await trash("other");
  entry.gone = await trash("gone", true);
});
afterAll(() => t.close());

const present = async (id: number) =>
  (await t.json("GET", `${SCHEMA}/trash/`)).body.results.some((e: any) => e.id === id);

describe("row 11: trash purge and restore follow the action's constraints", () => {
  test("delete limited to inv: another type's entry cannot be purged", async () => {
    const { token } = await userWith(t, "deleter", [
      [["view"], "custom_objects.customobjecttype", null],
      [["delete"], "custom_objects.customobjecttype", { slug: "inv" }],
    ]);
    const r = await t.json("DELETE", `${SCHEMA}/trash/${entry.other}/`, { token });
    expect(r.status).toBe(403);
    expect(await present(entry.other)).toBe(true);
    // a removed type's entry: its type is gone, so only an unconstrained delete reaches it
    const g = await t.json("DELETE", `${SCHEMA}/trash/${entry.gone}/`, { token });
    expect(g.status).toBe(403);
    expect(await present(entry.gone)).toBe(true);
    // their own type's entry they may purge
    expect((await t.json("DELETE", `${SCHEMA}/trash/${entry.inv}/`, { token })).status).toBe(204);
    expect(await present(entry.inv)).toBe(false);
  });

  test("change limited to inv: another type's entry cannot be restored", async () => {
    const { token } = await userWith(t, "restorer", [
      [["view", "add"], "custom_objects.customobjecttype", null],
      [["change"], "custom_objects.customobjecttype", { slug: "inv" }],
    ]);
    for (const id of [entry.other, entry.gone]) {
      const r = await t.json("POST", `${SCHEMA}/trash/${id}/restore/`, { token });
      expect(r.status).toBe(403);
      expect(await present(id)).toBe(true);
    }
  });

  test("without view on the entry's type it is a 404, as before", async () => {
    const { token } = await userWith(t, "outsider", [
      [["view", "delete"], "custom_objects.customobjecttype", { slug: "inv" }],
    ]);
    const r = await t.json("DELETE", `${SCHEMA}/trash/${entry.other}/`, { token });
    expect(r.status).toBe(404);
  });
});
