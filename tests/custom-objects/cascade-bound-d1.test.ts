/**
 * The cascade bound on miniflare's D1 (decision 0198), at its edge: a delete that takes 10,000
 * objects in all (the target and 9,999 dependants) is one batch and succeeds, every object logged;
 * one more dependant (10,001) answers 409 `cascade_too_large`, nothing deleted. The dependants are
 * made in the database at once (the delete reads them as it reads any).
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { startD1App, type D1App } from "../helpers/d1-app";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(120_000);

const CO = "/api/plugins/custom-objects";
/** Objects one delete takes at most on D1, the target included (its 409 says "in all"). */
const BOUND = 10_000;

let d1: D1App;
beforeAll(async () => {
  d1 = await startD1App("cascade-bound");
});
afterAll(() => d1?.stop());

const count = async (path: string) => {
  const r = await d1.json("GET", path);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.count as number;
};
const deletes = (slug: string) =>
  count(
    `/api/core/object-changes/?changed_object_type=custom_objects.${slug}&action=delete&limit=1`,
  );

test("a delete of exactly 10,000 objects in all succeeds on D1; 10,001 answers 409, nothing deleted", async () => {
  const top = await d1.made(`${CO}/custom-object-types/`, { name: "top", slug: "top" });
  const item = await d1.made(`${CO}/custom-object-types/`, { name: "item", slug: "item" });
  await d1.made(`${CO}/custom-object-type-fields/`, [
    { custom_object_type: top.id, name: "name", type: "text", primary: true },
  ]);
  await d1.made(`${CO}/custom-object-type-fields/`, [
    { custom_object_type: item.id, name: "name", type: "text", primary: true },
    {
      custom_object_type: item.id,
      name: "top",
      type: "object",
      related_object_type: "custom_objects.top",
      on_delete_behavior: "cascade",
    },
  ]);
  const root = (await d1.made(`${CO}/top/`, { name: "root" })).id as number;
  // the target and BOUND dependants: one over the bound
  await d1.binding
    .prepare(
      `INSERT INTO co_${item.id} (created, last_updated, name, top_id) WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${BOUND}) SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'item ' || i, ? FROM s`,
    )
    .bind(root)
    .all();
  expect(await count(`${CO}/item/?top_id=${root}&limit=1`)).toBe(BOUND);

  const over = await d1.json("DELETE", `${CO}/top/${root}/`);
  expect(over).toEqual({
    status: 409,
    body: {
      detail:
        "This delete would cascade to more objects than one write takes on this database (at most 10,000 in all); delete the dependants first, in parts of at most that many.",
      error: "cascade_too_large",
    },
  });
  expect(await count(`${CO}/item/?limit=1`)).toBe(BOUND);
  expect(await count(`${CO}/top/?limit=1`)).toBe(1);
  expect(await deletes("item")).toBe(0);

  // one dependant less: the target and 9,999, exactly the bound
  const first = (await d1.json("GET", `${CO}/item/?ordering=id&limit=1`)).body.results[0];
  expect((await d1.json("DELETE", `${CO}/item/${first.id}/`)).status).toBe(204);
  const gone = await d1.json("DELETE", `${CO}/top/${root}/`);
  expect(gone.status, JSON.stringify(gone.body)).toBe(204);
  expect(await count(`${CO}/item/?limit=1`)).toBe(0);
  expect(await count(`${CO}/top/?limit=1`)).toBe(0);
  // every object's change record: the one deleted alone and the 9,999 the cascade took
  expect(await deletes("item")).toBe(BOUND);
  expect(await deletes("top")).toBe(1);
});
