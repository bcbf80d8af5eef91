/**
 * The response budget weighs a page's links in the page's SQL (decision 0190), on Cloudflare D1
 * too: a type of 90 multiobject fields sums 90 link counts there (a balanced tree: D1 refuses
 * an expression deeper than 100) and its pages answer.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startD1App, type D1App } from "../helpers/d1-app";

const CO = "/api/plugins/custom-objects";
const LINK_FIELDS = 90;
let d1: D1App;

beforeAll(async () => {
  d1 = await startD1App("stall-budget-d1");
  const fields = [
    { id: 1, name: "name", type: "text", primary: true },
    ...Array.from({ length: LINK_FIELDS }, (_, i) => ({
      id: i + 2,
      name: `l${i}`,
      type: "multiobject",
      related_object_type: "dcim/site",
    })),
  ];
  const apply = await d1.json("POST", `${CO}/schema/apply/`, {
    schema: { schema_version: "1", types: [{ name: "wide", slug: "wide", fields }] },
  });
  expect(apply.status).toBe(200);
  await d1.made(`${CO}/wide/`, { name: "w" });
}, 120_000);
afterAll(() => d1?.stop());

test(`a page of a type with ${LINK_FIELDS} link fields is weighed and answered on D1`, async () => {
  const r = await d1.json("GET", `${CO}/wide/`);
  expect(r.status).toBe(200);
  expect(r.body.results).toHaveLength(1);
  const g = await d1.json("POST", "/graphql/", { query: "{ custom_objects_wide_list { id } }" });
  expect(g.status).toBe(200);
  expect(g.body.data.custom_objects_wide_list).toHaveLength(1);
});
