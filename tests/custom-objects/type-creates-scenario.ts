/**
 * Lists of type creates (decision 0142) as one scenario every backend runs: each item sees the
 * names the items before took, errors answer per item, nothing is written when one fails.
 * Answers a summary without ids or times.
 */
import { expect } from "bun:test";
import type { Json } from "../helpers/three-backends";

const CO = "/api/plugins/custom-objects";

export async function typeCreatesScenario(json: Json, prefix: string) {
  const type = (name: string, extra: Record<string, unknown> = {}) => ({
    name: `${prefix}_${name}`,
    slug: `${prefix}_${name}`,
    ...extra,
  });
  const types = `${CO}/custom-object-types/`;
  const made = await json("POST", types, [
    type("one", { description: "first", unique_together: [] }),
    type("two", { verbose_name_plural: "twos" }),
  ]);
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  // the second item takes the first's slug: 400 on it, the first not written either
  const repeated = await json("POST", types, [
    type("three"),
    { ...type("four"), slug: `${prefix}_three` },
  ]);
  const badKey = await json("POST", types, [type("five"), type("six", { checks: "no" })]);
  const takenBefore = await json("POST", types, [type("seven"), type("one")]);
  const single = await json("POST", types, [type("eight")]);
  const listed = await json("GET", `${types}?slug__isw=${prefix}_&ordering=slug`);
  const changes = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.customobjecttype&limit=1000&ordering=id`,
  );
  const ids = new Set(listed.body.results.map((t: { id: number }) => t.id));
  const object = (await json("GET", `${CO}/${prefix}_two/`)).status;
  const summary = (r: any) => ({
    name: r.name,
    slug: r.slug,
    description: r.description,
    verbose_name_plural: r.verbose_name_plural,
    fields: r.fields,
    unique_together: r.unique_together,
    object_type: r.object_type?.model,
  });
  return {
    made: made.body.map(summary),
    repeated: [repeated.status, repeated.body],
    badKey: [badKey.status, badKey.body],
    takenBefore: [takenBefore.status, takenBefore.body],
    single: [single.status, Array.isArray(single.body) ? single.body.map(summary) : single.body],
    listed: listed.body.results.map(summary),
    object,
    changes: changes.body.results
      .filter((c: { changed_object_id: number }) => ids.has(c.changed_object_id))
      .map((c: any) => `${c.action.value}:${c.postchange_data?.slug}`),
  };
}

/**
 * Lists of field creates (decision 0142) over two types: each item sees its type as the items
 * before left it (names, schema ids), values and search follow. Answers a summary without ids.
 */
export async function fieldCreatesScenario(json: Json, prefix: string) {
  const types = `${CO}/custom-object-types/`;
  const fields = `${CO}/custom-object-type-fields/`;
  const [a, b] = (
    await json("POST", types, [
      { name: `${prefix}_fa`, slug: `${prefix}_fa` },
      { name: `${prefix}_fb`, slug: `${prefix}_fb` },
    ])
  ).body;
  expect((await json("POST", `${CO}/${prefix}_fa/`, {})).status).toBe(201);
  const made = await json("POST", fields, [
    { custom_object_type: a.id, name: "code", type: "text", search_weight: 100 },
    { custom_object_type: b.id, name: "size", type: "integer", default: 3 },
    { custom_object_type: a.id, name: "flag", type: "boolean", default: true },
  ]);
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const refused = await json("POST", fields, [
    { custom_object_type: a.id, name: "x1", type: "text" },
    { custom_object_type: a.id, name: "x1", type: "text" },
    { custom_object_type: 999_999, name: "x2", type: "text" },
    { name: "x3", type: "text" },
  ]);
  const row = (await json("GET", `${CO}/${prefix}_fa/`)).body.results[0];
  expect((await json("PATCH", `${CO}/${prefix}_fa/${row.id}/`, { code: "needle" })).status).toBe(
    200,
  );
  const found = await json("GET", `${CO}/${prefix}_fa/?q=needle`);
  const exported = await json("GET", `${CO}/schema/export?slug=${prefix}_fa`);
  const changes = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.customobjecttypefield&limit=1000&ordering=id`,
  );
  const ids = new Set(made.body.map((f: { id: number }) => f.id));
  return {
    made: made.body.map((f: any) => `${f.name}:${f.type}:${f.default}`),
    refused: [refused.status, refused.body],
    row: { code: row.code, flag: row.flag },
    found: found.body.count,
    exported: exported.body.types[0].fields.map((f: any) => `${f.id}:${f.name}`),
    changes: changes.body.results
      .filter((c: { changed_object_id: number }) => ids.has(c.changed_object_id))
      .map((c: any) => `${c.action.value}:${c.postchange_data?.name}`),
  };
}
