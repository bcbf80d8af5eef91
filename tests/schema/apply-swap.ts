/**
 * A schema apply that swaps two fields' names (decision 0142), as one scenario every backend
 * runs: the values follow their fields, the search index and a compound key follow the names.
 * Answers a summary without ids or times.
 */
import { expect } from "bun:test";
import type { Json } from "../helpers/three-backends";

const CO = "/api/plugins/custom-objects";

export async function swapScenario(json: Json, prefix: string) {
  const slug = `${prefix}_swap`;
  const apply = (a: string, b: string) =>
    json("POST", `${CO}/schema/apply/`, {
      schema: {
        schema_version: "1",
        types: [
          {
            name: slug,
            slug,
            fields: [
              { id: 1, name: "code", type: "text", primary: true },
              { id: 2, name: a, type: "text" },
              { id: 3, name: b, type: "integer" },
              { id: 4, name: "sites", type: "multiobject", related_object_type: "dcim/site" },
            ],
          },
        ],
      },
    });
  const first = await apply("left", "right");
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  const made = await json("POST", `${CO}/${slug}/`, { code: "c1", left: "needle", right: 7 });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const swapped = await apply("right", "left");
  expect(swapped.status, JSON.stringify(swapped.body)).toBe(200);
  const after = (await json("GET", `${CO}/${slug}/${made.body.id}/`)).body;
  expect(after).toMatchObject({ right: "needle", left: 7 });
  const found = await json("GET", `${CO}/${slug}/?q=needle`);
  expect(found.body.count).toBe(1);
  // and back again
  const back = await apply("left", "right");
  expect(back.status, JSON.stringify(back.body)).toBe(200);
  const again = (await json("GET", `${CO}/${slug}/${made.body.id}/`)).body;
  expect(again).toMatchObject({ left: "needle", right: 7 });
  const type = (await json("GET", `${CO}/custom-object-types/?slug=${slug}`)).body.results[0];
  const changes = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.customobjecttypefield&limit=1000&ordering=id`,
  );
  const ids = new Set(type.fields.map((f: { id: number }) => f.id));
  return {
    after: { left: after.left, right: after.right },
    fields: type.fields.map((f: { name: string; type: string }) => `${f.name}:${f.type}`),
    renames: changes.body.results
      .filter((c: { changed_object_id: number }) => ids.has(c.changed_object_id))
      .filter((c: { action: { value: string } }) => c.action.value === "update")
      .map((c: any) => `${c.prechange_data?.name}->${c.postchange_data?.name}`),
  };
}
