/**
 * Many custom object types made by one ordinary account (decision 0205): their number is bounded
 * (`MAX_CUSTOM_OBJECT_TYPES`), the type list's page is weighed with the fields it embeds, and
 * the whole-schema work they cost (the GraphQL schema, the OpenAPI document) gives the event loop
 * turns and is built once however many requests ask meanwhile. Turns are counted as `/livez`
 * answers with an injected turn clock; sizes as bytes: never milliseconds.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { GraphQLObjectType } from "graphql";
import { useTurnClock } from "../../src/turns";
import { askLivez, turnsAtEveryOtherCheck } from "../helpers/livez-probe";
import { makeTestApp, type TestApp } from "../helpers/app";

const TYPES_API = "/api/plugins/custom-objects/custom-object-types/";
const APPLY = "/api/plugins/custom-objects/schema/apply/";
const KINDS = ["text", "integer", "decimal", "boolean", "date", "datetime", "url", "json"];
/** Low enough that its tests are quick; the default is in `src/config.ts`. */
const MAX_TYPES = 80;
const BUDGET = 65_536;

const typeDoc = (prefix: string, n: number, fields = KINDS.length) => ({
  schema_version: "1",
  types: Array.from({ length: n }, (_, i) => ({
    name: `${prefix}_${i}`,
    slug: `${prefix}_${i}`,
    fields: Array.from({ length: fields }, (_, f) => ({
      id: f + 1,
      name: `field_${f}`,
      type: KINDS[f % KINDS.length]!,
      primary: f === 0,
    })),
  })),
});

let t: TestApp;
/** An ordinary account: it may add types and fields, nothing else. */
let maker: string;
beforeAll(async () => {
  t = await makeTestApp({
    MAX_CUSTOM_OBJECT_TYPES: String(MAX_TYPES),
    MAX_RESPONSE_BYTES: String(BUDGET),
  });
  maker = await t.user("maker", [
    [["view", "add", "change"], "custom_objects.customobjecttype"],
    [["view", "add", "change"], "custom_objects.customobjecttypefield"],
  ]);
});
afterAll(() => t.close());
afterEach(() => useTurnClock(null));

const typeCount = async () =>
  Number((await t.deps.db.client.execute("SELECT count(*) AS n FROM custom_object_types")).rows[0]!.n);

describe("the number of custom object types", () => {
  test("an apply past the limit answers 400 naming it, and writes nothing", async () => {
    expect((await t.json("POST", APPLY, { token: maker, body: typeDoc("many", 60) })).status).toBe(
      200,
    );
    const over = await t.json("POST", APPLY, { token: maker, body: typeDoc("many", 81) });
    expect(over.status).toBe(400);
    expect(over.body).toMatchObject({ error: "too_many_custom_object_types", limit: MAX_TYPES });
    expect(over.body.detail).toContain(`at most ${MAX_TYPES}`);
    expect(await typeCount()).toBe(60);
  });

  test("a create past the limit answers 400 (a single one and a bulk one)", async () => {
    expect((await t.json("POST", APPLY, { token: maker, body: typeDoc("many", 79) })).status).toBe(
      200,
    );
    const bulk = Array.from({ length: 2 }, (_, i) => ({ name: `bulk ${i}`, slug: `bulk-${i}` }));
    const refused = await t.json("POST", TYPES_API, { token: maker, body: bulk });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: "too_many_custom_object_types", limit: MAX_TYPES });
    const last = await t.json("POST", TYPES_API, { token: maker, body: { name: "last", slug: "last" } });
    expect(last.status).toBe(201);
    const one = await t.json("POST", TYPES_API, { token: maker, body: { name: "one", slug: "one" } });
    expect(one.status).toBe(400);
    expect(one.body).toMatchObject({ error: "too_many_custom_object_types", limit: MAX_TYPES });
    expect(await typeCount()).toBe(MAX_TYPES);
    // an apply changing the types there are still goes through
    const changed = typeDoc("many", 79);
    changed.types[0]!.name = "renamed";
    expect((await t.json("POST", APPLY, { token: maker, body: changed })).status).toBe(200);
  });
});

describe("the type list's page", () => {
  let own: TestApp;
  beforeAll(async () => {
    own = await makeTestApp({ MAX_RESPONSE_BYTES: String(BUDGET) });
  });
  afterAll(() => own.close());

  test("is weighed with the fields its types embed: past the budget it answers 400", async () => {
    // 4 types of 60 fields: ~55 KB each as listed (a field's record ~900 bytes), each type's own
    // stored values a few KB: the fields are most of what the page takes
    expect((await own.json("POST", APPLY, { body: typeDoc("wide", 4, 60) })).status).toBe(200);
    const res = await own.req("GET", `${TYPES_API}?limit=1000`);
    const text = await res.text();
    if (res.status === 200) expect(text.length).toBeLessThanOrEqual(BUDGET);
    expect(res.status).toBe(400);
    expect(JSON.parse(text)).toMatchObject({ error: "response_too_large", limit: BUDGET });
    const one = await own.json("GET", `${TYPES_API}?limit=1`);
    expect(one.status).toBe(200);
    expect(one.body.results[0].fields).toHaveLength(60);
  });
});
