/**
 * Outside probe (decision 0190): single requests of an ordinary, constrained account that held
 * the event loop for seconds or grew memory by hundreds of megabytes. Each test sends what the
 * attacker sent and expects the bounded answer; none measures time.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { CO, addField, makeCot } from "../custom-objects/fixtures";
import { GRAPHQL_LIMITS } from "../../src/graphql/limits";
import { MAX_JSON_DEPTH, MAX_LINKS_PER_VALUE, MAX_PROJECTION_NAMES } from "../../src/core/limits";

const BUDGET = 1_048_576;
let t: TestApp;
let eve: string;
/** May view custom object types: may preview schema documents. */
let viewer: string;
/** Objects of `node`, each linked to `LINKS` others through `peers`. */
const NODES = 100;
const LINKS = 20;
/** Objects of `blob`, each with a 30,000-character `notes`, each linked to every blob. */
const BLOBS = 20;

beforeAll(async () => {
  t = await makeTestApp({ MAX_RESPONSE_BYTES: String(BUDGET) });
  const node = await makeCot(t, "node");
  await addField(t, node.id, { name: "name", type: "text", primary: true });
  await addField(t, node.id, {
    name: "peers",
    type: "multiobject",
    related_object_type: "custom_objects.node",
  });
  const blob = await makeCot(t, "blob");
  await addField(t, blob.id, { name: "name", type: "text", primary: true });
  await addField(t, blob.id, { name: "notes", type: "longtext" });
  await addField(t, blob.id, {
    name: "peers",
    type: "multiobject",
    related_object_type: "custom_objects.blob",
  });
  const nodes = Array.from({ length: NODES }, (_, i) => ({ name: `n${i}` }));
  expect((await t.json("POST", `${CO}/node/`, { body: nodes })).status).toBe(201);
  const links = Array.from({ length: NODES }, (_, i) => ({
    id: i + 1,
    peers: Array.from({ length: LINKS }, (_, j) => ((i + j + 1) % NODES) + 1),
  }));
  expect((await t.json("PATCH", `${CO}/node/`, { body: links })).status).toBe(200);
  const blobs = Array.from({ length: BLOBS }, (_, i) => ({
    name: `b${i}`,
    notes: "x".repeat(30_000),
  }));
  expect((await t.json("POST", `${CO}/blob/`, { body: blobs })).status).toBe(201);
  const all = Array.from({ length: BLOBS }, (_, i) => i + 1);
  const linked = all.map((id) => ({ id, peers: all }));
  expect((await t.json("PATCH", `${CO}/blob/`, { body: linked })).status).toBe(200);
  // an ordinary account: it views what it attacks, under a constraint
  eve = (
    await userWith(t, "eve", [
      [["view"], "custom_objects.node", { name__isw: "n" }],
      [["view"], "custom_objects.blob", { name__isw: "b" }],
    ])
  ).token;
  viewer = (await userWith(t, "viewer", [[["view"], "custom_objects.customobjecttype", null]]))
    .token;
});
afterAll(() => t.close());

const graphql = (query: string) => t.json("POST", "/graphql/", { token: eve, body: { query } });

describe("GraphQL: relation lists multiply past the rows a query may return", () => {
  // NODES + NODES·LINKS + NODES·LINKS² = 42,100 objects from a 100-row page (5,000 allowed):
  // one level deeper was 5 s of held loop and 640 MB on the probe's data
  const nested = `{ custom_objects_node_list(pagination: {limit: ${NODES}}) { peers { peers { id } } } }`;

  test("nested multiobject lists past the object limit answer 400, no partial data", async () => {
    const r = await graphql(nested);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: "too_many_objects", limit: GRAPHQL_LIMITS.maxObjects });
    expect(r.body.errors[0].extensions.code).toBe("TOO_MANY_OBJECTS");
    expect(r.body.data).toBeUndefined();
  });

  test("a single object's nested lists count too", async () => {
    // 1 + 20 + 400 + 8,000 + 160,000 objects
    const r = await graphql(
      `{ custom_objects_node(id: 1) { peers { peers { peers { peers { id } } } } } }`,
    );
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("too_many_objects");
  });

  test("one level of relation lists within the limit still answers", async () => {
    const r = await graphql(
      `{ custom_objects_node_list(pagination: {limit: ${NODES}}) { id peers { id } } }`,
    );
    expect(r.status).toBe(200);
    expect(r.body.data.custom_objects_node_list).toHaveLength(NODES);
    expect(r.body.data.custom_objects_node_list[0].peers).toHaveLength(LINKS);
  });

  test("related objects are weighed against the byte budget: 400 response_too_large", async () => {
    // 20 rows of 30 KB pass the page budget (600 KB); their 400 related copies are 12 MB
    const page = await graphql(`{ custom_objects_blob_list { id notes } }`);
    expect(page.status).toBe(200);
    const r = await graphql(`{ custom_objects_blob_list { id peers { notes } } }`);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: "response_too_large", limit: BUDGET });
    expect(r.body.data).toBeUndefined();
  });
});

describe("REST: ?fields= and ?omit= name at most MAX_PROJECTION_NAMES fields", () => {
  // A real server takes a 16 KB query: 8,000 names, each compared with every key of 1,000 rows
  const names = (n: number) => Array.from({ length: n }, (_, i) => `x${i}`).join(",");

  test("a list past the limit answers 400 keyed by its parameter", async () => {
    for (const param of ["fields", "omit"]) {
      const r = await t.json("GET", `${CO}/node/?limit=1000&${param}=${names(8_000)}`, {
        token: eve,
      });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({
        [param]: [`Name at most ${MAX_PROJECTION_NAMES} fields.`],
      });
    }
    // on one object too
    const one = await t.json("GET", `${CO}/node/1/?omit=${names(MAX_PROJECTION_NAMES + 1)}`, {
      token: eve,
    });
    expect(one.status).toBe(400);
  });

  test("the limit counts names across repeated parameters; at the limit the list answers", async () => {
    const half = names(MAX_PROJECTION_NAMES / 2 + 1);
    const past = await t.json("GET", `${CO}/node/?omit=${half}&omit=${half}`, { token: eve });
    expect(past.status).toBe(400);
    const at = await t.json(
      "GET",
      `${CO}/node/?limit=1000&omit=name,${names(MAX_PROJECTION_NAMES - 1)}&fields=id,name`,
      { token: eve },
    );
    expect(at.status).toBe(200);
    expect(at.body.results[0]).toEqual({ id: 1 });
  });
});

describe(`REST: a multiobject value holds at most MAX_LINKS_PER_VALUE references`, () => {
  // 20,000 ids held the loop ~3 s (each compared with every other), 100,000 a further 0.7 s
  const ids = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
  const refused = {
    peers: [`Ensure this field has no more than ${MAX_LINKS_PER_VALUE} elements.`],
  };

  test("a longer list answers 400 naming the limit, on one object and in a bulk write", async () => {
    const writer = (
      await userWith(t, "writer", [[["view", "add", "change"], "custom_objects.node", null]])
    ).token;
    const one = await t.json("PATCH", `${CO}/node/1/`, {
      token: writer,
      body: { peers: ids(20_000) },
    });
    expect(one.status).toBe(400);
    expect(one.body).toEqual(refused);
    const bulk = await t.json("POST", `${CO}/node/`, {
      token: writer,
      body: [{ name: "ok" }, { name: "long", peers: ids(100_000) }],
    });
    expect(bulk.status).toBe(400);
    expect(bulk.body.errors).toEqual([{ index: 1, errors: refused }]);
    // at the limit (ids repeat: each counts as sent) the write goes through
    const at = await t.json("PATCH", `${CO}/node/2/`, {
      token: writer,
      body: { peers: ids(MAX_LINKS_PER_VALUE).map((i) => (i % NODES) + 1) },
    });
    expect(at.status).toBe(200);
    expect(at.body.peers).toHaveLength(NODES);
  });
});

describe("REST: a page's link forms are weighed against the byte budget", () => {
  // 20 objects of 1,000 links each: a 2 MB page (its stored values are a few bytes) passed the
  // 1 MiB budget; 500 of 500 links made 23 MB past the default 4 MiB
  const HUBS = 20;

  test("a page whose links pass the budget answers 400 response_too_large; smaller pages work", async () => {
    const leaf = await makeCot(t, "leaf");
    await addField(t, leaf.id, { name: "name", type: "text", primary: true });
    const leaves = Array.from({ length: MAX_LINKS_PER_VALUE }, (_, i) => ({ name: `l${i}` }));
    expect((await t.json("POST", `${CO}/leaf/`, { body: leaves })).status).toBe(201);
    const hub = await makeCot(t, "hub");
    await addField(t, hub.id, { name: "name", type: "text", primary: true });
    await addField(t, hub.id, {
      name: "leaves",
      type: "multiobject",
      related_object_type: "custom_objects.leaf",
    });
    const all = Array.from({ length: MAX_LINKS_PER_VALUE }, (_, i) => i + 1);
    const hubs = Array.from({ length: HUBS }, (_, i) => ({ name: `h${i}`, leaves: all }));
    expect((await t.json("POST", `${CO}/hub/`, { body: hubs })).status).toBe(201);
    const reader = (
      await userWith(t, "reader", [
        [["view"], "custom_objects.hub", null],
        [["view"], "custom_objects.leaf", null],
      ])
    ).token;
    const page = await t.json("GET", `${CO}/hub/?limit=${HUBS}`, { token: reader });
    expect(page.status).toBe(400);
    expect(page.body).toMatchObject({ error: "response_too_large", limit: BUDGET });
    const small = await t.json("GET", `${CO}/hub/?limit=5`, { token: reader });
    expect(small.status).toBe(200);
    expect(small.body.results[0].leaves).toHaveLength(MAX_LINKS_PER_VALUE);
    // GraphQL pages are weighed the same way
    const gq = await t.json("POST", "/graphql/", {
      token: reader,
      body: { query: `{ custom_objects_hub_list { id } }` },
    });
    expect(gq.status).toBe(400);
    expect(gq.body.error).toBe("response_too_large");
  });
});

/** A schema preview of YAML `text` by a viewer of custom object types. */
async function yamlPreview(text: string) {
  const res = await t.req("POST", `${CO}/schema/preview/`, {
    token: viewer,
    raw: text,
    headers: { "content-type": "application/yaml" },
  });
  return { status: res.status, body: await res.json() };
}

describe("schema documents in YAML: nesting refused before the parser recurses", () => {
  // 500,000 `[` in a 1 MB body held the loop 1.9 s and 400 MB before the parser's stack overflowed
  const deep = {
    "flow collections": `types: ${"[".repeat(500_000)}${"]".repeat(500_000)}`,
    "flow maps": `types: ${"{a: ".repeat(200_000)}1${"}".repeat(200_000)}`,
    "compact block sequences": `types:\n  ${"- ".repeat(250_000)}x`,
    "explicit keys": `${"? ".repeat(200_000)}x`,
  };

  for (const [what, text] of Object.entries(deep))
    test(`${what} past ${MAX_JSON_DEPTH} levels answer 400 naming the limit`, async () => {
      const r = await yamlPreview(text);
      expect(r.status).toBe(400);
      expect(r.body.error).toBe("invalid_schema");
      expect(r.body.schema_errors).toEqual([
        { path: "$", message: `nests deeper than ${MAX_JSON_DEPTH} levels` },
      ]);
    });

  test("brackets in quoted text and balanced flow within the limit still parse", async () => {
    const nested = `${"[".repeat(MAX_JSON_DEPTH - 2)}1${"]".repeat(MAX_JSON_DEPTH - 2)}`;
    const doc = `schema_version: "1"\ntypes:\n  - name: q\n    slug: q\n    description: "]]]] [x"\n    fields: []\nx: ${nested}\n`;
    const r = await yamlPreview(doc);
    // parsed: refused for its unknown key, not for its nesting
    expect(r.status).toBe(400);
    expect(r.body.schema_errors[0].path).toBe("$.x");
  });
});
