/**
 * Lists of type creates (decision 0142) as one scenario every backend runs: each item sees the
 * names the items before took, errors answer per item, nothing is written when one fails.
 * Answers a summary without ids or times.
 */
import { expect } from "bun:test";

const CO = "/api/plugins/custom-objects";

type Json = (
  method: string,
  path: string,
  body?: unknown,
) => Promise<{ status: number; body: any }>;

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
