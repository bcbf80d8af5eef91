/**
 * The custom object type cap (decision 0205) on D1: a trash restore of a type past it answers
 * the cap's 400 and writes nothing, and a preview lists the apply's refusal.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { type D1App, startD1App } from "../helpers/d1-app";

setDefaultTimeout(120_000);

const SCHEMA = "/api/plugins/custom-objects/schema";
const TYPES_API = "/api/plugins/custom-objects/custom-object-types/";
const MAX_TYPES = 3;
const CAPPED = { error: "too_many_custom_object_types", limit: MAX_TYPES };
const doc = (...slugs: string[]) => ({
  schema_version: "1",
  types: slugs.map((slug) => ({
    name: slug,
    slug,
    fields: [{ id: 1, name: "code", type: "text", primary: true }],
  })),
});

let d1: D1App;
beforeAll(async () => {
  d1 = await startD1App("type-cap", undefined, { MAX_CUSTOM_OBJECT_TYPES: String(MAX_TYPES) });
});
afterAll(() => d1.stop());

const typeSlugs = async () =>
  (await d1.json("GET", `${TYPES_API}?limit=100&ordering=slug`)).body.results.map(
    (r: { slug: string }) => r.slug,
  );

test("a trash restore of a type past the cap answers 400 and writes nothing (D1)", async () => {
  expect((await d1.json("POST", `${SCHEMA}/apply/`, doc("a", "b", "c"))).status).toBe(200);
  const removed = await d1.json("POST", `${SCHEMA}/apply/`, {
    schema: { schema_version: "1", types: [], removed_types: [{ slug: "c" }] },
    allow_destructive: true,
  });
  expect(removed.status).toBe(200);
  const entry = removed.body.trash[0] as number;
  await d1.made(TYPES_API, { name: "d", slug: "d" });
  const refused = await d1.json("POST", `${SCHEMA}/trash/${entry}/restore/`);
  expect(refused.status).toBe(400);
  expect(refused.body).toMatchObject(CAPPED);
  expect(await typeSlugs()).toEqual(["a", "b", "d"]);
  const trash = (await d1.json("GET", `${SCHEMA}/trash/`)).body.results;
  expect(trash.map((r: { id: number }) => r.id)).toContain(entry);
  const preview = await d1.json("POST", `${SCHEMA}/preview/`, doc("a", "b", "d", "e"));
  expect(preview.status).toBe(200);
  expect(preview.body.refusals).toEqual([expect.objectContaining({ status: 400, ...CAPPED })]);
});
