/**
 * Outside probe, second round (decision 0196): a tag list of 150,000 references in a 1 MiB body
 * was resolved item by item; on a custom object each is two statements in the write's transaction
 * (ten objects of 15,000 tags held the loop 5.8 s). Lists past `MAX_TAGS_PER_VALUE` answer 400
 * before any is looked up.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MAX_TAGS_PER_VALUE, TOO_MANY_TAGS_MESSAGE } from "../../src/core/limits";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { CO, addField, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
let eve: string;
const TAGS = 20;
/** `n` references to the tags, each named many times over. */
const refs = (n: number) => Array.from({ length: n }, (_, i) => (i % TAGS) + 1);

beforeAll(async () => {
  t = await makeTestApp();
  const tags = Array.from({ length: TAGS }, (_, i) => ({ name: `t${i}`, slug: `t${i}` }));
  expect((await t.json("POST", "/api/extras/tags/", { body: tags })).status).toBe(201);
  const cot = await makeCot(t, "node");
  await addField(t, cot.id, { name: "name", type: "text", primary: true });
  eve = (
    await userWith(t, "eve", [
      [["view", "add", "change"], "dcim.site", null],
      [["view", "add", "change"], "custom_objects.node", null],
      [["view"], "extras.tag", null],
    ])
  ).token;
});
afterAll(() => t.close());

describe("a tag list names at most MAX_TAGS_PER_VALUE tags", () => {
  const long = refs(150_000);

  test("tags, add_tags and remove_tags past the limit answer 400 keyed by the list", async () => {
    const site = await t.json("POST", "/api/dcim/sites/", {
      token: eve,
      body: { name: "s", slug: "s", tags: long },
    });
    expect(site.status).toBe(400);
    expect(site.body).toEqual({ tags: [TOO_MANY_TAGS_MESSAGE] });
    const made = await t.json("POST", "/api/dcim/sites/", {
      token: eve,
      body: { name: "s", slug: "s" },
    });
    for (const key of ["add_tags", "remove_tags"]) {
      const r = await t.json("PATCH", `/api/dcim/sites/${made.body.id}/`, {
        token: eve,
        body: { [key]: long },
      });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ [key]: [TOO_MANY_TAGS_MESSAGE] });
    }
  });

  test("on custom objects too, one and in a bulk write", async () => {
    const one = await t.json("POST", `${CO}/node/`, {
      token: eve,
      body: { name: "x", tags: long },
    });
    expect(one.status).toBe(400);
    expect(one.body).toEqual({ tags: [TOO_MANY_TAGS_MESSAGE] });
    const bulk = await t.json("POST", `${CO}/node/`, {
      token: eve,
      body: Array.from({ length: 10 }, (_, i) => ({ name: `y${i}`, tags: refs(15_000) })),
    });
    expect(bulk.status).toBe(400);
    expect(bulk.body.errors[0]).toEqual({ index: 0, errors: { tags: [TOO_MANY_TAGS_MESSAGE] } });
    const listed = await t.json("GET", `${CO}/node/?limit=1`, { token: eve });
    expect(listed.body.count).toBe(0);
  });

  test("at the limit a list still writes, each tag once", async () => {
    const at = refs(MAX_TAGS_PER_VALUE);
    const site = await t.json("POST", "/api/dcim/sites/", {
      token: eve,
      body: { name: "at", slug: "at", tags: at },
    });
    expect(site.status).toBe(201);
    expect(site.body.tags).toHaveLength(TAGS);
    const node = await t.json("POST", `${CO}/node/`, {
      token: eve,
      body: { name: "at", tags: at },
    });
    expect(node.status).toBe(201);
    expect(node.body.tags).toHaveLength(TAGS);
  });
});
