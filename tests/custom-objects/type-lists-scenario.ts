/**
 * Lists of type and field updates and deletes through REST (decision 0142), as one scenario every
 * backend runs: local file, remote (Hrana) and D1 must answer alike and leave the same rows.
 * Answers a summary without ids or times, for the backends to be compared.
 */
import { expect } from "bun:test";
import type { Json } from "../helpers/three-backends";
import { placed } from "./fixtures";

const CO = "/api/plugins/custom-objects";

async function made(json: Json, path: string, body: unknown) {
  const r = await json("POST", path, body);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}

/** The stored shape of both types and the object, without ids or times. */
async function shape(json: Json, slugs: string[]) {
  const out: Record<string, unknown> = {};
  for (const slug of slugs) {
    const r = await json("GET", `${CO}/custom-object-types/?slug=${slug}`);
    const t = r.body.results[0];
    out[slug] = t
      ? {
          description: t.description,
          unique_together: t.unique_together,
          fields: t.fields
            .map((f: { name: string; label: string }) => `${f.name}:${f.label}`)
            .sort(),
        }
      : null;
  }
  return out;
}

export async function typeListsScenario(json: Json, prefix: string) {
  const [a, b] = [`${prefix}_a`, `${prefix}_b`];
  const ta = await made(json, `${CO}/custom-object-types/`, { name: a, slug: a });
  const tb = await made(json, `${CO}/custom-object-types/`, { name: b, slug: b });
  const field = (cot: number, body: Record<string, unknown>) =>
    made(json, `${CO}/custom-object-type-fields/`, { custom_object_type: cot, ...body });
  const x = await field(ta.id, { name: "x", type: "text" });
  const y = await field(ta.id, { name: "y", type: "integer" });
  const z = await field(ta.id, { name: "z", type: "text" });
  const w = await field(tb.id, { name: "w", type: "text" });
  await field(tb.id, { name: "ref", type: "object", related_object_type: `custom_objects.${a}` });
  const keyed = await json("PATCH", `${CO}/custom-object-types/${ta.id}/`, {
    unique_together: [["x", "y"]],
  });
  expect(keyed.status, JSON.stringify(keyed.body)).toBe(200);
  const obj = await made(json, `${CO}/${a}/`, { x: "hello", y: 3, z: "zed" });
  const summary: Record<string, unknown> = {};

  // two types in one list: both records as GET answers them
  const types = await json("PATCH", `${CO}/custom-object-types/`, [
    { id: ta.id, description: "A" },
    { id: tb.id, description: "B" },
  ]);
  expect(types.status, JSON.stringify(types.body)).toBe(200);
  for (const rec of types.body)
    expect(rec).toEqual((await json("GET", `${CO}/custom-object-types/${rec.id}/`)).body);

  // fields of two types: a rename the compound key follows, labels; the search index follows
  const fields = await json("PATCH", `${CO}/custom-object-type-fields/`, [
    { id: x.id, name: "x2" },
    { id: y.id, label: "Y" },
    { id: w.id, label: "W" },
  ]);
  expect(fields.status, JSON.stringify(fields.body)).toBe(200);
  expect(fields.body.map((f: { name: string }) => f.name)).toEqual(["x2", "y", "w"]);
  for (const rec of fields.body)
    expect(rec).toEqual((await json("GET", `${CO}/custom-object-type-fields/${rec.id}/`)).body);
  expect((await json("GET", `${CO}/${a}/${obj.id}/`)).body).toMatchObject({ x2: "hello", y: 3 });
  expect((await json("GET", `${CO}/${a}/?q=hello`)).body.count).toBe(1);
  summary.afterUpdate = await shape(json, [a, b]);

  // one item refused: a 400 at its place in the list, nothing written (the first item neither)
  const refusing = [
    { id: y.id, label: "Y2" },
    { id: x.id, name: "z" },
  ];
  const refused = await json("PATCH", `${CO}/custom-object-type-fields/`, refusing);
  expect(refused.status, JSON.stringify(refused.body)).toBe(400);
  const at = (r: { body: { errors: Array<{ id: number; errors: object }> } }) =>
    r.body.errors.map((e) => [e.id, Object.keys(e.errors)]);
  expect(at(refused)).toEqual([[x.id, ["name"]]]);
  summary.refused = placed(refused.body, refusing);
  expect(await shape(json, [a, b])).toEqual(summary.afterUpdate as Record<string, unknown>);

  // a type named twice: NetBox 4.7's 400 naming its id (0200), nothing written
  const twice = await json("PATCH", `${CO}/custom-object-types/`, [
    { id: ta.id, description: "A2" },
    { id: ta.id, description: "A3" },
  ]);
  expect(twice.status).toBe(400);
  expect(twice.body.errors).toEqual([
    {
      id: ta.id,
      errors: { id: [`Each object may be specified only once; ID ${ta.id} is listed 2 times`] },
    },
  ]);
  expect(await shape(json, [a, b])).toEqual(summary.afterUpdate as Record<string, unknown>);

  // two fields of one type removed; the key holding one of them dropped with it
  const gone = await json("DELETE", `${CO}/custom-object-type-fields/`, [
    { id: x.id },
    { id: z.id },
  ]);
  expect(gone.status, JSON.stringify(gone.body)).toBe(204);
  const left = (await json("GET", `${CO}/${a}/${obj.id}/`)).body;
  expect(left).not.toHaveProperty("x2");
  expect(left).not.toHaveProperty("z");
  expect(left.y).toBe(3);
  summary.afterFieldDelete = await shape(json, [a, b]);

  // a type the other points at, first in the list: refused, nothing deleted
  const protectedFirst = await json("DELETE", `${CO}/custom-object-types/`, [
    { id: ta.id },
    { id: tb.id },
  ]);
  expect(protectedFirst.status, JSON.stringify(protectedFirst.body)).toBe(409);
  expect(await shape(json, [a, b])).toEqual(summary.afterFieldDelete as Record<string, unknown>);
  // the pointing type first: both go, as one by one
  const both = await json("DELETE", `${CO}/custom-object-types/`, [{ id: tb.id }, { id: ta.id }]);
  expect(both.status, JSON.stringify(both.body)).toBe(204);
  expect(await shape(json, [a, b])).toEqual({ [a]: null, [b]: null });
  expect((await json("GET", `${CO}/${a}/`)).status).toBe(404);

  const changes = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.customobjecttypefield&limit=1000`,
  );
  const ids = new Set([x.id, y.id, z.id, w.id]);
  summary.fieldChanges = changes.body.results
    .filter((c: { changed_object_id: number }) => ids.has(c.changed_object_id))
    .map((c: { action: { value: string } }) => c.action.value)
    .sort();
  return summary;
}
