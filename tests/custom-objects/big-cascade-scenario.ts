/**
 * A cascade of 500 objects (decision 0155) as one scenario every backend runs: a target, 100
 * objects cascading from it, 400 from those (tagged, with links), a holder pointing at them
 * (set null). One delete takes all 501, each logged once; nothing of them is left. Answers a
 * summary without ids or times; `count` reads a number from the database itself (tag rows).
 */
import { expect } from "bun:test";
import type { Json } from "../helpers/three-backends";

const CO = "/api/plugins/custom-objects";

/** Creates `n` objects of `slug` from `each(k)`, 100 a request. */
async function bulk(json: Json, slug: string, n: number, each: (k: number) => unknown) {
  const ids: number[] = [];
  for (let k = 0; k < n; k += 100) {
    const rows = Array.from({ length: Math.min(100, n - k) }, (_, i) => each(k + i));
    const made = await json("POST", `${CO}/${slug}/`, rows);
    expect(made.status, JSON.stringify(made.body).slice(0, 500)).toBe(201);
    ids.push(...made.body.map((r: { id: number }) => r.id));
  }
  return ids;
}

export async function bigCascadeScenario(
  json: Json,
  prefix: string,
  count: (objectTypeId: number) => Promise<number>,
) {
  const type = async (name: string, fields: Record<string, unknown>[]) => {
    const slug = `${prefix}_${name}`;
    const cot = (await json("POST", `${CO}/custom-object-types/`, { name: slug, slug })).body;
    const made = await json(
      "POST",
      `${CO}/custom-object-type-fields/`,
      [{ name: "name", type: "text", primary: true }, ...fields].map((f) => ({
        custom_object_type: cot.id,
        ...f,
      })),
    );
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    return { slug, cot };
  };
  const cascade = (name: string, to: string) => ({
    name,
    type: "object",
    related_object_type: `custom_objects.${to}`,
    on_delete_behavior: "cascade",
  });
  const top = await type("top", []);
  const mid = await type("mid", [cascade("top", top.slug)]);
  const leaf = await type("leaf", [
    cascade("mid", mid.slug),
    { name: "peers", type: "multiobject", related_object_type: `custom_objects.${mid.slug}` },
  ]);
  const holder = await type("holder", [
    {
      name: "leaf",
      type: "object",
      related_object_type: `custom_objects.${leaf.slug}`,
      on_delete_behavior: "set_null",
    },
  ]);
  const tag = `${prefix}-big`;
  expect((await json("POST", "/api/extras/tags/", { name: tag, slug: tag })).status).toBe(201);
  const root = (await json("POST", `${CO}/${top.slug}/`, { name: "root" })).body.id;
  const mids = await bulk(json, mid.slug, 100, (k) => ({ name: `m${k}`, top: root }));
  const leaves = await bulk(json, leaf.slug, 400, (k) => ({
    name: `l${k}`,
    mid: mids[k % 100],
    peers: [mids[(k + 1) % 100]],
    tags: [{ slug: tag }],
  }));
  const held = (await json("POST", `${CO}/${holder.slug}/`, { name: "held", leaf: leaves[399] }))
    .body.id;
  const tagged = await count(leaf.cot.object_type.id);
  const gone = await json("DELETE", `${CO}/${top.slug}/${root}/`);
  const left = async (slug: string) =>
    (await json("GET", `${CO}/${slug}/?limit=1`)).body.count as number;
  const deletes = async (slug: string) =>
    (
      await json(
        "GET",
        `/api/core/object-changes/?changed_object_type=custom_objects.${slug}&action=delete&limit=1`,
      )
    ).body.count as number;
  const logged = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.${leaf.slug}&action=delete&limit=1&ordering=id`,
  );
  return {
    gone: [gone.status, gone.body],
    left: [await left(top.slug), await left(mid.slug), await left(leaf.slug)],
    deletes: [await deletes(top.slug), await deletes(mid.slug), await deletes(leaf.slug)],
    first: {
      name: logged.body.results[0]?.prechange_data?.name,
      tags: logged.body.results[0]?.prechange_data?.tags?.map((t: { slug: string }) => t.slug),
      peers: logged.body.results[0]?.prechange_data?.peers?.length,
    },
    holder: (await json("GET", `${CO}/${holder.slug}/${held}/`)).body.leaf,
    tags: [tagged, await count(leaf.cot.object_type.id)],
  };
}
