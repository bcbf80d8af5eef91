/**
 * Many custom object types made by one ordinary account (decision 0205): their number is bounded
 * (`MAX_CUSTOM_OBJECT_TYPES`), the type list's page is weighed with the fields it embeds, and
 * the whole-schema work they cost (the GraphQL schema, the OpenAPI document, the export, an
 * apply's plan) gives the event loop turns, the first two built once however many requests ask
 * meanwhile. Turns are the work counted between two `/livez` answers with an injected turn
 * clock; sizes are bytes: never milliseconds.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { __Type, GraphQLInputObjectType, GraphQLObjectType } from "graphql";
import { servicesOf } from "../../src/app";
import { OpenApiBuilder } from "../../src/openapi/builder";
import { toYaml } from "../../src/openapi/yaml";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { ReadPool } from "../../src/db/read-pool";
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

/**
 * Counts the objects `isOne` picks out as each is first kept in a Map, through the platform's Map
 * (which still keeps it), until restored. Each once: maps made from others (`new Map(entries)`)
 * keep the same objects.
 */
function countKept(isOne: (value: object) => boolean): {
  count: () => number;
  restore: () => void;
} {
  const set = Map.prototype.set;
  let kept = 0;
  const seen = new WeakSet<object>();
  Map.prototype.set = function (this: Map<unknown, unknown>, k: unknown, v: unknown) {
    if (v && typeof v === "object" && !seen.has(v) && isOne(v)) {
      seen.add(v);
      kept++;
    }
    return set.call(this, k, v);
  } as typeof set;
  return { count: () => kept, restore: () => void (Map.prototype.set = set) };
}

/**
 * Counts JSON.stringify's calls and the characters they write, through the platform's own (which
 * still runs), until restored.
 */
function watchStringify(): { calls: () => number; written: () => number; restore: () => void } {
  const stringify = JSON.stringify;
  let calls = 0;
  let written = 0;
  JSON.stringify = ((...a: Parameters<typeof stringify>) => {
    const out = stringify(...a);
    calls++;
    written += out?.length ?? 0;
    return out;
  }) as typeof stringify;
  return {
    calls: () => calls,
    written: () => written,
    restore: () => void (JSON.stringify = stringify),
  };
}

/**
 * The rows of statements matching `pattern`, as the read pool's connections answer them to the
 * event loop (each still runs), until restored: the largest answer and all of them.
 */
function watchReads(pattern: RegExp): {
  largest: () => number;
  rows: () => number;
  restore: () => void;
} {
  const proto = ReadPool.prototype as unknown as {
    execute: (...a: unknown[]) => Promise<{ rows: unknown[] }>;
  };
  const execute = proto.execute;
  let largest = 0;
  let rows = 0;
  proto.execute = async function (this: unknown, ...a: unknown[]) {
    const out = await execute.apply(this, a);
    const text = typeof a[0] === "string" ? a[0] : String((a[0] as { sql?: string }).sql);
    if (pattern.test(text)) {
      largest = Math.max(largest, out.rows.length);
      rows += out.rows.length;
    }
    return out;
  };
  return {
    largest: () => largest,
    rows: () => rows,
    restore: () => void (proto.execute = execute),
  };
}

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
  Number(
    (await t.deps.db.client.execute("SELECT count(*) AS n FROM custom_object_types")).rows[0]!.n,
  );

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
    const last = await t.json("POST", TYPES_API, {
      token: maker,
      body: { name: "last", slug: "last" },
    });
    expect(last.status).toBe(201);
    const one = await t.json("POST", TYPES_API, {
      token: maker,
      body: { name: "one", slug: "one" },
    });
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

describe("whole-schema work after a schema change", () => {
  let own: TestApp;
  /** Types enough that building their schema takes many slices (each field a step or more). */
  const TYPES = 60;
  let generation = 0;
  /** A schema change: every GraphQL schema and OpenAPI document is built again after it. */
  const change = async () => {
    const doc = typeDoc("graph", TYPES);
    doc.types[0]!.name = `renamed_${++generation}`;
    doc.types[0]!.fields.push({
      id: 99,
      name: `extra_${generation}`,
      type: "text",
      primary: false,
    });
    const applied = await own.json("POST", APPLY, { body: doc });
    expect(applied.body).toMatchObject({ applied: true });
  };
  beforeAll(async () => {
    own = await makeTestApp();
    await change();
    // the engine's modules are loaded once, on the first query (decision 0117): not measured here
    expect(
      (await own.json("POST", "/graphql/", { body: { query: "{ __typename }" } })).status,
    ).toBe(200);
  });
  afterAll(() => own.close());

  /**
   * Counts, through the library's prototypes (each still runs), the types whose fields are
   * resolved from their thunks: what building a schema does per object type and filter input;
   * and, with `onRead`, every reading of a type's fields.
   */
  function countResolved(onResolved: (name: string) => void, onRead?: () => void): () => void {
    const patched = [GraphQLObjectType.prototype, GraphQLInputObjectType.prototype] as Array<{
      getFields(): unknown;
    }>;
    const originals = patched.map((p) => p.getFields);
    patched.forEach((proto, k) => {
      proto.getFields = function (this: { name: string; _fields: unknown }) {
        if (typeof this._fields === "function") onResolved(this.name);
        onRead?.();
        return originals[k]!.call(this);
      };
    });
    return () =>
      patched.forEach((proto, k) => {
        proto.getFields = originals[k]!;
      });
  }

  test("the first GraphQL query builds the schema with turns: /livez answers meanwhile", async () => {
    await change();
    let resolved = 0;
    const restore = countResolved(() => resolved++);
    turnsAtEveryOtherCheck();
    // the types resolved when each `/livez` answer arrived: the longest run between two answers
    // is the longest stretch the build held the event loop
    const marks = [resolved];
    const stop = askLivez(own, () => marks.push(resolved));
    try {
      const res = await own.req("POST", "/graphql/", { body: { query: "{ __typename }" } });
      expect(res.status).toBe(200);
    } finally {
      await stop();
      restore();
    }
    marks.push(resolved);
    expect(resolved).toBeGreaterThanOrEqual(TYPES * 2); // each type's object type and filter
    const longest = Math.max(...marks.slice(1).map((m, i) => m - marks[i]!));
    expect(longest).toBeLessThanOrEqual(4);
  });

  test("concurrent first queries build one schema between them", async () => {
    await change();
    let builds = 0;
    // the root type's fields are a thunk until its schema is built: resolved once per build
    const restore = countResolved((name) => {
      if (name === "Query") builds++;
    });
    try {
      const answers = await Promise.all(
        Array.from({ length: 4 }, () =>
          own.json("POST", "/graphql/", { body: { query: "{ __typename }" } }),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    } finally {
      restore();
    }
    expect(builds).toBe(1);
  });

  /**
   * Counts, through the library's prototypes (each still runs), every reading of an object
   * type's or filter input's fields, thunk or not: collecting a schema's type map reads each
   * type's, validating it reads each type's again.
   */
  function countFieldReads(): { count: () => number; restore: () => void } {
    let reads = 0;
    const restore = countResolved(
      () => {},
      () => reads++,
    );
    return { count: () => reads, restore };
  }

  test("the schema's type map is collected and validated with turns (decision 0217)", async () => {
    await change();
    const reads = countFieldReads();
    try {
      const run = await longestRun(reads.count, () =>
        own.req("POST", "/graphql/", { body: { query: "{ __typename }" } }),
      );
      // each type's fields read to resolve them, to collect the map and to validate it
      expect(run.total).toBeGreaterThanOrEqual(TYPES * 2 * 3);
      // before: graphql-js's constructor read every type's in one stretch, its validation in another
      expect(run.longest).toBeLessThan(run.total / 10);
    } finally {
      reads.restore();
    }
  });

  test("introspection answers a long list of types an item a step (decision 0217)", async () => {
    await change();
    const query = "{ __schema { types { name fields { name } } } }";
    // the schema first (with turns of its own): the query alone is measured
    expect((await own.json("POST", "/graphql/", { body: { query } })).status).toBe(200);
    // the names introspection gives types, through graphql-js's own resolver (each still runs)
    const name = __Type.getFields().name!;
    const resolve = name.resolve!;
    let named = 0;
    name.resolve = (...a) => {
      named++;
      return resolve(...a);
    };
    let body = "";
    try {
      const run = await longestRun(
        () => named,
        () =>
          own.req("POST", "/graphql/", { body: { query } }).then(async (res) => {
            body = await res.clone().text();
            return res;
          }),
      );
      expect(run.total).toBeGreaterThan(TYPES * 2);
      // before: every type's name and fields in one stretch of the executor (run === total)
      expect(run.longest).toBeLessThan(run.total / 10);
    } finally {
      name.resolve = resolve;
    }
    const types = JSON.parse(body).data.__schema.types as Array<{ name: string }>;
    expect(types.filter((t) => t.name.startsWith("CustomObject_graph_"))).toHaveLength(TYPES * 2);
  });

  /** Counts calls of the builder's per-model steps (each still runs) until restored. */
  function countBuilderSteps(onStep: (step: string) => void): () => void {
    const proto = OpenApiBuilder.prototype as unknown as Record<
      string,
      (...a: unknown[]) => unknown
    >;
    const names = ["resource", "addSchemas", "paths"];
    const originals = names.map((n) => proto[n]!);
    names.forEach((n, k) => {
      proto[n] = function (this: unknown, ...a: unknown[]) {
        onStep(n);
        return originals[k]!.apply(this, a);
      };
    });
    return () =>
      names.forEach((n, k) => {
        proto[n] = originals[k]!;
      });
  }

  test("the OpenAPI document is built with turns: /livez answers meanwhile", async () => {
    await change();
    let steps = 0;
    const restore = countBuilderSteps(() => steps++);
    turnsAtEveryOtherCheck();
    const marks = [steps];
    const stop = askLivez(own, () => marks.push(steps));
    let text = "";
    try {
      const res = await own.req("GET", "/api/schema/?format=json");
      expect(res.status).toBe(200);
      text = await res.text();
    } finally {
      await stop();
      restore();
    }
    marks.push(steps);
    const doc = JSON.parse(text);
    expect(Object.keys(doc.paths).filter((p) => p.includes("/graph_")).length).toBe(TYPES * 2);
    expect(steps).toBeGreaterThanOrEqual(TYPES * 3); // each type's schemas and two sets of paths
    // the longest run between two answers: the document's fixed parts (a few steps), never the types'
    const longest = Math.max(...marks.slice(1).map((m, i) => m - marks[i]!));
    expect(longest).toBeLessThanOrEqual(8);
  });

  test("a filtered copy of the OpenAPI document and its text are made with turns", async () => {
    await change();
    // a caller who may view none of the types: every one is pruned from the full document
    const viewer = await own.user(`viewer-${generation}`, [
      [["view"], "custom_objects.customobjecttype"],
    ]);
    expect((await own.req("GET", "/api/schema/?format=json")).status).toBe(200); // the full one
    // strings checked for a hidden type's name, and JSON text written, through the platform
    // (each still runs)
    const test = RegExp.prototype.test;
    const json = watchStringify();
    let checked = 0;
    RegExp.prototype.test = function (this: RegExp, s: string) {
      checked++;
      return test.call(this, s);
    };
    let runs: { checked: number; written: number };
    let total: { checked: number; written: number };
    try {
      turnsAtEveryOtherCheck();
      const marks = [{ checked, written: json.written() }];
      const stop = askLivez(own, () => marks.push({ checked, written: json.written() }));
      const res = await own.req("GET", "/api/schema/?format=json", { token: viewer });
      const text = await res.text();
      await stop();
      marks.push({ checked, written: json.written() });
      expect(res.status).toBe(200);
      expect(text).not.toContain("graph_1");
      const run = (k: "checked" | "written") =>
        Math.max(...marks.slice(1).map((m, i) => m[k] - marks[i]![k]));
      runs = { checked: run("checked"), written: run("written") };
      total = { checked: checked - marks[0]!.checked, written: json.written() - marks[0]!.written };
    } finally {
      RegExp.prototype.test = test;
      json.restore();
      useTurnClock(null);
    }
    // no run of the work between two answers is more than a small part of it
    expect(total.checked).toBeGreaterThan(10_000);
    expect(runs.checked).toBeLessThan(total.checked / 5);
    expect(total.written).toBeGreaterThan(500_000);
    expect(runs.written).toBeLessThan(total.written / 5);
  });

  /** Counts the types' models the registry builds (each as it is kept), until restored. */
  const countModels = () => countKept((v) => "cot" in v && "resource" in v);

  test("the OpenAPI document after a schema change builds the types' models a type a step", async () => {
    // a field more on every type: every type's shape moves, so every model is built again
    const doc = typeDoc("graph", TYPES);
    doc.types[0]!.name = `renamed_${++generation}`;
    for (const type of doc.types)
      type.fields.push({
        id: 100 + generation,
        name: `more_${generation}`,
        type: "text",
        primary: false,
      });
    expect((await own.json("POST", APPLY, { body: doc })).body).toMatchObject({ applied: true });
    const models = countModels();
    try {
      const run = await longestRun(models.count, () => own.req("GET", "/api/schema/?format=json"));
      expect(run.total).toBeGreaterThanOrEqual(TYPES);
      // before: every model built in one stretch (1,000 types held the loop ~1 s)
      expect(run.longest).toBeLessThanOrEqual(2);
    } finally {
      models.restore();
    }
  });

  test("the YAML text of the OpenAPI document is written with turns", async () => {
    await change();
    // the document itself is built (with turns) by a JSON answer first
    expect((await own.req("GET", "/api/schema/?format=json")).status).toBe(200);
    // scalars checked for a plain YAML form, through the platform (each still runs)
    const test = RegExp.prototype.test;
    let checked = 0;
    RegExp.prototype.test = function (this: RegExp, s: string) {
      checked++;
      return test.call(this, s);
    };
    try {
      const run = await longestRun(
        () => checked,
        () => own.req("GET", "/api/schema/?format=yaml"),
      );
      expect(run.total).toBeGreaterThan(10_000);
      // before: the whole text in one stretch (run === total)
      expect(run.longest).toBeLessThan(run.total / 10);
    } finally {
      RegExp.prototype.test = test;
    }
  });

  test("the text is written once per format, whatever the origin: only servers differ", async () => {
    await change();
    expect((await own.req("GET", "/api/schema/?format=json")).status).toBe(200);
    const json = watchStringify();
    const texts: string[] = [];
    try {
      for (const origin of ["http://a.example", "http://b.example", "http://c.example"]) {
        const res = await own.app.request(`${origin}/api/schema/?format=json`, {
          headers: { authorization: `Token ${own.admin}` },
        });
        texts.push(await res.text());
      }
    } finally {
      json.restore();
    }
    // before: each origin's text written whole (~1 MB at 60 types each); now a server each
    expect(json.written()).toBeLessThan(10_000);
    const docs = texts.map((text) => JSON.parse(text));
    expect(docs.map((d) => d.servers[0].url)).toEqual([
      "http://a.example",
      "http://b.example",
      "http://c.example",
    ]);
    expect({ ...docs[1], servers: [] }).toEqual({ ...docs[0], servers: [] });
  });

  test("each type's operations reference the components they share with every other", async () => {
    await change();
    const doc = (await own.json("GET", "/api/schema/?format=json")).body;
    const list = Object.keys(doc.paths).filter((p) => /\/graph_\d+\/$/.test(p));
    expect(list).toHaveLength(TYPES);
    const queued = { $ref: "#/components/responses/Queued" };
    for (const path of list) {
      const item = doc.paths[path];
      // before: each bulk write's 202 and the bulk delete's body written out in full
      for (const method of ["post", "put", "patch", "delete"])
        expect(item[method].responses["202"]).toEqual(queued);
      expect(item.delete.requestBody.content["application/json"].schema).toEqual({
        $ref: "#/components/schemas/BulkDestroyRequest",
      });
      // a filter's repeatability is its array schema's and `explode`'s to say, not its text's
      for (const p of item.get.parameters)
        expect(String(p.description ?? "")).not.toContain("repeat for any of several values");
      // every parameter stays inline (pynetbox's strict_filters reads their names, decision 0200)
      expect(item.get.parameters.every((p: { name?: string }) => typeof p.name === "string")).toBe(
        true,
      );
    }
    expect(doc.components.responses.Queued.content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/QueuedJob",
    });
  });

  test("a constrained caller's JSON, YAML and OPTIONS answers name only the types it may view", async () => {
    await change();
    const viewer = await own.user(`one-type-${generation}`, [
      [["view"], "custom_objects.customobjecttype"],
      [["view"], "custom_objects.graph_3"],
    ]);
    const named = (text: string) =>
      new Set([...text.matchAll(/\bgraph_(\d+)\b/g)].map((m) => Number(m[1])));
    for (const format of ["json", "yaml"]) {
      const res = await own.req("GET", `/api/schema/?format=${format}`, { token: viewer });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(named(text)).toEqual(new Set([3]));
      expect(text).not.toContain(`renamed_${generation}`);
    }
    const seen = await own.req("OPTIONS", "/api/plugins/custom-objects/graph_3/", {
      token: viewer,
    });
    expect(seen.status).toBe(200);
    const hidden = await own.req("OPTIONS", "/api/plugins/custom-objects/graph_4/", {
      token: viewer,
    });
    expect(hidden.status).toBe(404);
    expect(named(await hidden.text()).size).toBe(0);
    const types = await own.req("OPTIONS", TYPES_API, { token: viewer });
    expect(types.status).toBe(200);
    expect(named(await types.text()).size).toBe(0);
  });

  test("concurrent requests for the OpenAPI document build it once between them", async () => {
    await change();
    let builds = 0;
    const restore = countBuilderSteps((step) => {
      if (step === "paths") builds++;
    });
    try {
      const answers = await Promise.all(
        Array.from({ length: 4 }, () => own.req("GET", "/api/schema/?format=json")),
      );
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
      const texts = await Promise.all(answers.map((a) => a.text()));
      expect(new Set(texts).size).toBe(1);
    } finally {
      restore();
    }
    expect(builds).toBe(1);
  });

  /**
   * The longest run of `counted` work between two `/livez` answers while `request` runs, with
   * the turn clock injected; and the work counted in all.
   */
  async function longestRun(counted: () => number, request: () => Promise<Response>) {
    // the full-text index's rows pending after a schema change are indexed first: that work
    // gives turns of its own, which are not the request's
    await flushSearchIndexesNow(servicesOf(own.app));
    turnsAtEveryOtherCheck();
    const marks = [counted()];
    const stop = askLivez(own, () => marks.push(counted()));
    try {
      const res = await request();
      await res.arrayBuffer();
      expect(res.status).toBe(200);
    } finally {
      await stop();
      useTurnClock(null);
    }
    marks.push(counted());
    const longest = Math.max(...marks.slice(1).map((m, k) => m - marks[k]!));
    return { longest, total: marks.at(-1)! - marks[0]! };
  }

  /**
   * Counts the types' states read as a document sees them (`{cot, canonical, …}`) as each is
   * first kept, until restored.
   */
  const countStates = () => countKept((v) => "canonical" in v && "tombstones" in v);

  test("the schema export reads the types' state a type a step", async () => {
    const states = countStates();
    try {
      const run = await longestRun(states.count, () =>
        own.req("GET", "/api/plugins/custom-objects/schema/export/"),
      );
      expect(run.total).toBe(TYPES);
      expect(run.longest).toBeLessThanOrEqual(2);
    } finally {
      states.restore();
    }
  });

  test("the schema export writes its entries a type a step (decision 0217)", async () => {
    // JSON text written (each field attribute compared with its default), through the platform
    const json = watchStringify();
    try {
      const run = await longestRun(
        () => json.calls(),
        () => own.req("GET", "/api/plugins/custom-objects/schema/export/"),
      );
      expect(run.total).toBeGreaterThan(TYPES * 8 * 10);
      // before: every type's entry written in one stretch after the state was read
      expect(run.longest).toBeLessThan(run.total / 10);
    } finally {
      json.restore();
    }
  });

  test("the schema export's YAML text is written a type a step, the same text (decision 0217)", async () => {
    const yaml = { accept: "application/yaml" };
    // scalars checked for a plain YAML form (and the rest), through the platform (each still runs)
    const test = RegExp.prototype.test;
    let checked = 0;
    RegExp.prototype.test = function (this: RegExp, s: string) {
      checked++;
      return test.call(this, s);
    };
    let text = "";
    try {
      const run = await longestRun(
        () => checked,
        () =>
          own
            .req("GET", "/api/plugins/custom-objects/schema/export/", { headers: yaml })
            .then(async (res) => {
              text = await res.clone().text();
              return res;
            }),
      );
      expect(run.total).toBeGreaterThan(TYPES * 8 * 3);
      // before: the whole text in one stretch
      expect(run.longest).toBeLessThan(run.total / 10);
    } finally {
      RegExp.prototype.test = test;
    }
    // the text `toYaml` writes of the document the JSON answer gives
    const doc = (await own.json("GET", "/api/plugins/custom-objects/schema/export/")).body;
    expect(doc.types).toHaveLength(TYPES);
    expect(text).toBe(toYaml(doc));
    const json = await (await own.req("GET", "/api/plugins/custom-objects/schema/export/")).text();
    expect(json).toBe(JSON.stringify(doc));
  });

  test("an apply's plan reads the types' state a type a step", async () => {
    const doc = typeDoc("graph", TYPES);
    doc.types[1]!.name = "renamed_again";
    const states = countStates();
    try {
      const run = await longestRun(states.count, () => own.req("POST", APPLY, { body: doc }));
      expect(run.total).toBeGreaterThanOrEqual(TYPES);
      expect(run.longest).toBeLessThanOrEqual(2);
    } finally {
      states.restore();
    }
  });

  test("a preview hashes the plan's state and document a type a step", async () => {
    const doc = typeDoc("graph", TYPES);
    doc.types[2]!.name = "renamed_for_preview";
    // JSON text written for the hashes (and the rest), through the platform (each still runs)
    const json = watchStringify();
    try {
      const run = await longestRun(
        () => json.calls(),
        () => own.req("POST", "/api/plugins/custom-objects/schema/preview/", { body: doc }),
      );
      expect(run.total).toBeGreaterThan(TYPES * 100);
      // before: the state's snapshot, the document and the projection each hashed in one go
      expect(run.longest).toBeLessThan(run.total / 10);
    } finally {
      json.restore();
    }
  });

  test("the type list embeds each type's fields without going through all of them per type", async () => {
    // elements the page's filters go through, through the platform (each still runs)
    const filter = Array.prototype.filter;
    let visited = 0;
    Array.prototype.filter = function (this: unknown[], ...a: Parameters<typeof filter>) {
      visited += this.length;
      return filter.apply(this, a);
    } as typeof filter;
    const visits = async (limit: number) => {
      const before = visited;
      const res = await own.req("GET", `${TYPES_API}?limit=${limit}`);
      expect(res.status).toBe(200);
      expect((await res.json()).results).toHaveLength(limit);
      return visited - before;
    };
    let half: number;
    let all: number;
    try {
      half = await visits(TYPES / 2);
      all = await visits(TYPES);
    } finally {
      Array.prototype.filter = filter;
    }
    // twice the types, about twice the work (before: four times, every field for each type)
    expect(all / half).toBeLessThan(2.5);
  });

  /** Counts calls of a platform method (each still runs), until restored. */
  function countCalls<T extends object>(owner: T, name: keyof T & string) {
    const original = owner[name] as unknown as (...a: unknown[]) => unknown;
    let calls = 0;
    (owner as Record<string, unknown>)[name] = function (this: unknown, ...a: unknown[]) {
      calls++;
      return original.apply(this, a);
    };
    return {
      count: () => calls,
      restore: () => void ((owner as Record<string, unknown>)[name] = original),
    };
  }

  test("a preview validates its document a type a step", async () => {
    const doc = typeDoc("graph", TYPES);
    doc.types[3]!.name = "renamed_for_validation";
    // patterns tested (names, slugs, field names), through the platform (each still runs)
    const tests = countCalls(RegExp.prototype, "test");
    try {
      const run = await longestRun(tests.count, () =>
        own.req("POST", "/api/plugins/custom-objects/schema/preview/", { body: doc }),
      );
      expect(run.total).toBeGreaterThan(TYPES * 10);
      // before: the whole document validated in one stretch (valibot, then the rules per type)
      expect(run.longest).toBeLessThan(run.total / 10);
    } finally {
      tests.restore();
    }
  });

  test("an apply compares its change records a record a step", async () => {
    const doc = typeDoc("graph", TYPES);
    doc.types[4]!.name = `renamed_for_records_${++generation}`;
    // JSON text written (each record's before and after compared, the change rows, the rest)
    const json = watchStringify();
    try {
      const run = await longestRun(
        () => json.written(),
        () => own.req("POST", APPLY, { body: doc }),
      );
      // before: every type's and field's record compared in one stretch (a third of the text)
      expect(run.longest).toBeLessThan(run.total / 10);
    } finally {
      json.restore();
    }
  });

  test("the type list reads and builds a large page in slices", async () => {
    // the rows of statements reading field rows, as the read pool answers them (each still runs)
    const proto = ReadPool.prototype as unknown as {
      execute: (...a: unknown[]) => Promise<{ rows: unknown[] }>;
    };
    const execute = proto.execute;
    let rows = 0;
    proto.execute = async function (this: unknown, ...a: unknown[]) {
      const out = await execute.apply(this, a);
      const text = typeof a[0] === "string" ? a[0] : String((a[0] as { sql?: string }).sql);
      if (/^select .* from "custom_object_type_fields"/is.test(text)) rows += out.rows.length;
      return out;
    };
    try {
      const run = await longestRun(
        () => rows,
        () => own.req("GET", `${TYPES_API}?limit=${TYPES}`),
      );
      expect(run.total).toBeGreaterThanOrEqual(TYPES * 8);
      // before: every embedded field of the page read and built in one stretch (~7 KB a type).
      // Now four slices of ~16 types; the test's clock gives a turn at every other check, so two
      // slices can fall in one stretch (half the rows), never the page
      expect(run.longest).toBeLessThanOrEqual(run.total * 0.6);
    } finally {
      proto.execute = execute;
    }
  });

  test("the type list's JSON text is written a record a step", async () => {
    const json = watchStringify();
    let text = "";
    try {
      const run = await longestRun(
        () => json.written(),
        () =>
          own.req("GET", `${TYPES_API}?limit=${TYPES}`).then(async (res) => {
            text = await res.clone().text();
            return res;
          }),
      );
      expect(run.total).toBeGreaterThan(text.length);
      // before: the whole answer written in one go
      expect(run.longest).toBeLessThan(run.total / 10);
    } finally {
      json.restore();
    }
    // the same text `c.json` writes
    const body = JSON.parse(text);
    expect(body.results).toHaveLength(TYPES);
    expect(text).toBe(JSON.stringify(body));
  });

  test("the export reads the types' fields in bounded pages", async () => {
    // 30 more types of 20 fields: with the others, over a thousand fields
    expect((await own.json("POST", APPLY, { body: typeDoc("wide", 30, 20) })).status).toBe(200);
    const reads = watchReads(/^select .* from "custom_object_type_fields"/is);
    let exported: { types: Array<{ fields: unknown[] }> };
    try {
      exported = (await own.json("GET", "/api/plugins/custom-objects/schema/export/")).body;
    } finally {
      reads.restore();
    }
    const fields = exported.types.reduce((n, t) => n + t.fields.length, 0);
    expect(fields).toBeGreaterThan(1_000);
    expect(reads.rows()).toBeGreaterThanOrEqual(fields);
    // before: every field of every type in one statement (0210: ≤ 500; 0217: ≤ 250)
    expect(reads.largest()).toBeLessThanOrEqual(250);
  });

  test("a preview on a local file reads the types' fields in bounded pages", async () => {
    const exported = (await own.json("GET", "/api/plugins/custom-objects/schema/export/")).body;
    const fields = exported.types.reduce(
      (n: number, t: { fields: unknown[] }) => n + t.fields.length,
      0,
    );
    expect(fields).toBeGreaterThan(1_000);
    exported.types[0].name = "renamed_for_pages";
    // the rows of statements reading field rows, as the read pool answers them (each still runs)
    const proto = ReadPool.prototype as unknown as {
      execute: (...a: unknown[]) => Promise<{ rows: unknown[] }>;
    };
    const execute = proto.execute;
    let largest = 0;
    proto.execute = async function (this: unknown, ...a: unknown[]) {
      const out = await execute.apply(this, a);
      const text = typeof a[0] === "string" ? a[0] : String((a[0] as { sql?: string }).sql);
      if (/^select .* from "custom_object_type_fields"/is.test(text))
        largest = Math.max(largest, out.rows.length);
      return out;
    };
    try {
      const res = await own.json("POST", "/api/plugins/custom-objects/schema/preview/", {
        body: { schema: exported },
      });
      expect(res.status).toBe(200);
    } finally {
      proto.execute = execute;
    }
    // before: every field of every type in the preview's one read
    expect(largest).toBeGreaterThan(0);
    expect(largest).toBeLessThanOrEqual(500);
  });
});

describe("the schema export of more types than a page", () => {
  test("reads the types' rows in bounded pages (decision 0217)", async () => {
    const own = await makeTestApp();
    try {
      const TYPES = 260;
      expect((await own.json("POST", APPLY, { body: typeDoc("paged", TYPES, 1) })).status).toBe(
        200,
      );
      // more types asked by name than a page: every type but the first
      const asked = Array.from({ length: TYPES - 1 }, (_, i) => `paged_${i + 1}`);
      // the rows of statements reading whole type rows (their stored document among them)
      const reads = watchReads(/^select .*"schema_document".* from "custom_object_types"/is);
      let exported: { types: Array<{ slug: string }> };
      let seen: { types: Array<{ slug: string }> };
      try {
        exported = (await own.json("GET", "/api/plugins/custom-objects/schema/export/")).body;
        seen = (
          await own.json(
            "GET",
            `/api/plugins/custom-objects/schema/export/?slug=${asked.join(",")}`,
          )
        ).body;
      } finally {
        reads.restore();
      }
      expect(exported.types.map((t) => t.slug)).toEqual(
        Array.from({ length: TYPES }, (_, i) => `paged_${i}`),
      );
      expect(seen.types.map((t) => t.slug)).toEqual(asked);
      expect(reads.rows()).toBeGreaterThanOrEqual(TYPES * 2);
      // before: every type's row in one statement (1,000 held the loop ~20 ms)
      expect(reads.largest()).toBeLessThanOrEqual(250);
    } finally {
      await own.close();
    }
  });
});

describe("the OpenAPI texts kept for many visibility sets", () => {
  /** Counts the characters JSON.stringify writes while `work` runs. */
  const writtenBy = async (work: () => Promise<unknown>) => {
    const json = watchStringify();
    try {
      await work();
    } finally {
      json.restore();
    }
    return json.written();
  };

  /** An app with 40 types and two readers, each kept from one type: two visibility sets. */
  const twoReaders = async (cacheMb: string) => {
    const app = await makeTestApp({ OPENAPI_CACHE_MB: cacheMb });
    expect((await app.json("POST", APPLY, { body: typeDoc("kept", 40) })).status).toBe(200);
    const reader = (n: number) =>
      app.user(`reader-${n}`, [
        [["view"], "custom_objects.customobjecttype"],
        ...Array.from(
          { length: 40 },
          (_, i) => [["view"], `custom_objects.kept_${i}`] as [string[], string],
        ).filter((_, i) => i !== n),
      ]);
    const readers = [await reader(1), await reader(2)];
    const json = async (token: string) => {
      const res = await app.req("GET", "/api/schema/?format=json", { token });
      expect(res.status).toBe(200);
      return (await res.text()).length;
    };
    return { app, readers, json };
  };

  test("past OPENAPI_CACHE_MB another set's text is dropped and written again when asked", async () => {
    const { app, readers, json } = await twoReaders("1");
    try {
      const [a, b] = readers as [string, string];
      const size = await json(a);
      // one set's text alone is past the 1 MB budget: the second set's drops the first's
      expect(size).toBeGreaterThan(1024 * 1024);
      await json(b);
      const again = await writtenBy(() => json(a));
      expect(again).toBeGreaterThan(size / 2);
    } finally {
      await app.close();
    }
  });

  test("within the budget each set's text is written once", async () => {
    const { app, readers, json } = await twoReaders("256");
    try {
      const [a, b] = readers as [string, string];
      await json(a);
      await json(b);
      // only `servers` is written per answer
      expect(await writtenBy(() => json(a))).toBeLessThan(10_000);
    } finally {
      await app.close();
    }
  });
});
