/**
 * Wide custom object types on Cloudflare D1 (miniflare's), whose results hold at most 100 columns
 * and whose tables at most 100 (decision 0192): a type with 120 multiobject fields answers its
 * list, GET, GraphQL list, create and patch as the same type does on a local file; every field
 * type's value reads back the same through the wide statement as through the narrow one; a
 * table past D1's columns is refused when the field is defined, with a 400, never a 500 later.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { MAX_LINK_FIELDS_PER_TYPE } from "../../src/core/limits";
import { type D1Binding, d1Database } from "../../src/db/d1";
import { type D1App, startD1App } from "../helpers/d1-app";
import { makeTestApp, type TestApp } from "../helpers/app";
import { settleBeforeCounting } from "../helpers/settle";
import type { Json } from "../helpers/three-backends";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(300_000);

const CO = "/api/plugins/custom-objects";
let d1: D1App;
let local: TestApp;
let onD1: Json;
let onLocal: Json;
/** The round trips to D1 while set: each batch or lone statement sent, by its statements' texts. */
let sends: string[][] | null = null;

/**
 * The binding, each batch and each statement run alone added to `sends` (the texts it holds).
 * A statement is a proxy over D1's own, which a batch is given back unwrapped.
 */
function recording(binding: D1Binding): D1Binding {
  const own = new WeakMap<object, { target: any; text: string }>();
  const wrap = (target: any, text: string): any => {
    const proxy = new Proxy(target, {
      get(t, key) {
        if (key === "bind") return (...args: unknown[]) => wrap(t.bind(...args), text);
        const value = Reflect.get(t, key, t) as unknown;
        if (typeof value !== "function") return value;
        if (["all", "raw", "first", "run"].includes(String(key)))
          return (...args: unknown[]) => (sends?.push([text]), value.apply(t, args));
        return value.bind(t);
      },
    });
    own.set(proxy, { target, text });
    return proxy;
  };
  return new Proxy(binding, {
    get(target, key) {
      if (key === "prepare") return (text: string) => wrap(target.prepare(text), text);
      if (key === "batch")
        return (statements: object[]) => {
          sends?.push(statements.map((s) => own.get(s)?.text ?? "?"));
          return target.batch(statements.map((s) => own.get(s)?.target ?? s) as any);
        };
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * Multiobject fields of the wide type (its links' forms ride in the statement) and the huge one
 * (whose statement would pass D1's 100,000 bytes with them: the forms are read apart).
 */
const LINKS = 100;
const HUGE_LINKS = 250;
const linkName = (i: number) => `m${String(i).padStart(3, "0")}`;

/** One field of each type (but the links), and the values an object gives them. */
const PLAIN_FIELDS = [
  { name: "name", type: "text", primary: true },
  { name: "notes", type: "longtext" },
  { name: "count", type: "integer" },
  { name: "big", type: "integer" },
  { name: "ratio", type: "decimal" },
  { name: "tiny", type: "decimal" },
  { name: "on", type: "boolean" },
  { name: "off", type: "boolean" },
  { name: "day", type: "date" },
  { name: "at", type: "datetime" },
  { name: "doc", type: "json" },
  { name: "link", type: "url" },
];
const PLAIN_VALUES = {
  name: 'it\'s "wide" ☃',
  notes: "line 1\nline 2\t[1,2]",
  count: -42,
  big: 9_007_199_254_740_991,
  ratio: "0.30000000000000004",
  tiny: "1.2345678901234567e-7",
  on: true,
  off: false,
  day: "2024-02-29",
  at: "2024-02-29T12:34:56Z",
  doc: { a: [1, 2.5, "x", null, true], b: { c: 0.1 } },
  link: "https://example.com/a?b=1",
};

async function made(json: Json, path: string, body: unknown) {
  const r = await json("POST", path, body);
  if (r.status !== 201) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** A type `slug` with `fields` (each posted alone, as a client defines them), and its id. */
async function defineType(json: Json, slug: string, fields: Record<string, unknown>[]) {
  const cot = await made(json, `${CO}/custom-object-types/`, { name: slug, slug });
  for (const f of fields)
    await made(json, `${CO}/custom-object-type-fields/`, { custom_object_type: cot.id, ...f });
  return cot.id as number;
}

const links = (count: number) =>
  Array.from({ length: count }, (_, i) => ({
    name: linkName(i + 1),
    type: "multiobject",
    related_object_type: "dcim.site",
  }));

/** Both backends, the same types and sites, made in the same order (so the same ids). */
async function setUp(json: Json) {
  const sites: number[] = [];
  for (const x of ["a", "b", "c"])
    sites.push((await made(json, "/api/dcim/sites/", { name: `w ${x}`, slug: `w-${x}` })).id);
  await defineType(json, "narrow", PLAIN_FIELDS);
  await defineType(json, "wide", [...PLAIN_FIELDS, ...links(LINKS)]);
  await defineType(json, "huge", [...PLAIN_FIELDS, ...links(HUGE_LINKS)]);
  return sites;
}

let sites: number[];

beforeAll(async () => {
  d1 = await startD1App("wide-types", (_db, binding) => d1Database(recording(binding)));
  local = await makeTestApp();
  onD1 = (method, path, body) => d1.json(method, path, body);
  onLocal = async (method, path, body) => {
    const r = await local.json(method, path, { body });
    return { status: r.status, body: r.body };
  };
  sites = await setUp(onD1);
  expect(await setUp(onLocal)).toEqual(sites);
});
afterAll(async () => {
  await d1?.stop();
  await local?.close();
});

/** An answer without its times, which differ between the two backends. */
function timeless(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(timeless);
  if (value && typeof value === "object")
    return Object.fromEntries(
      Object.entries(value)
        .filter(([k]) => k !== "created" && k !== "last_updated")
        .map(([k, v]) => [k, timeless(v)]),
    );
  return value;
}

/** The same request on both backends: the status, and D1's answer as the local one. */
async function same(method: string, path: string, body?: unknown) {
  const [a, b] = [await onD1(method, path, body), await onLocal(method, path, body)];
  expect(a.status, JSON.stringify(a.body).slice(0, 500)).toBe(b.status);
  expect(timeless(a.body)).toEqual(timeless(b.body));
  return a;
}

const wideValues = (count: number) => ({
  ...PLAIN_VALUES,
  [linkName(1)]: [sites[0], sites[1]],
  [linkName(60)]: [sites[2]],
  [linkName(count)]: [sites[1], sites[0], sites[2]],
});

for (const [slug, count] of [
  ["wide", LINKS],
  ["huge", HUGE_LINKS],
] as const)
  test(`a type with ${count} multiobject fields: create, patch, GET, list and GraphQL list on D1 answer as on a local file`, async () => {
    const created = await same("POST", `${CO}/${slug}/`, wideValues(count));
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(created.body[linkName(count)].map((s: { id: number }) => s.id)).toEqual([
      sites[1],
      sites[0],
      sites[2],
    ]);
    const bulk = await same("POST", `${CO}/${slug}/`, [
      { name: "second", [linkName(2)]: [sites[2]] },
      { name: "third" },
    ]);
    expect(bulk.status).toBe(201);
    const patched = await same("PATCH", `${CO}/${slug}/${id}/`, {
      count: 7,
      [linkName(60)]: [],
      [linkName(99)]: [sites[0]],
    });
    expect(patched.status).toBe(200);
    expect(patched.body.count).toBe(7);
    const got = await same("GET", `${CO}/${slug}/${id}/`);
    expect(got.status).toBe(200);
    expect(got.body[linkName(99)]).toEqual([
      expect.objectContaining({ id: sites[0], name: "w a" }),
    ]);
    const list = await same("GET", `${CO}/${slug}/?limit=50`);
    expect(list.status).toBe(200);
    expect(list.body.count).toBe(3);
    expect(list.body.results[0]).toEqual(got.body);
    const briefs = await same("GET", `${CO}/${slug}/?brief=true`);
    expect(briefs.status).toBe(200);
    const filtered = await same("GET", `${CO}/${slug}/?${linkName(1)}_id=${sites[0]}`);
    expect(filtered.body.count).toBe(1);
    const query = `{ custom_objects_${slug}_list { id name count ${linkName(1)} { id name } ${linkName(count)} { id } } }`;
    const graphql = await same("POST", "/graphql/", { query });
    expect(graphql.status).toBe(200);
    expect(graphql.body.errors).toBeUndefined();
    expect(graphql.body.data[`custom_objects_${slug}_list`]).toHaveLength(3);
  });

test("every field type reads back the same through the wide statement as through the narrow one, on both backends", async () => {
  for (const json of [onD1, onLocal]) {
    const narrow = await made(json, `${CO}/narrow/`, PLAIN_VALUES);
    const wide = await made(json, `${CO}/wide/`, { ...PLAIN_VALUES, name: PLAIN_VALUES.name });
    const plain = (rec: Record<string, unknown>) =>
      Object.fromEntries(
        Object.keys(rec)
          .filter((k) => PLAIN_FIELDS.some((f) => k === f.name || k.startsWith(`${f.name}_`)))
          .map((k) => [k, rec[k]]),
      );
    const reads = [
      [narrow, wide],
      [
        (await json("GET", `${CO}/narrow/${narrow.id}/`)).body,
        (await json("GET", `${CO}/wide/${wide.id}/`)).body,
      ],
      [
        (await json("GET", `${CO}/narrow/?id=${narrow.id}`)).body.results[0],
        (await json("GET", `${CO}/wide/?id=${wide.id}`)).body.results[0],
      ],
    ];
    for (const [n, w] of reads) {
      expect(Object.keys(plain(n)).length).toBeGreaterThanOrEqual(PLAIN_FIELDS.length);
      expect(plain(w)).toEqual(plain(n));
    }
    const [n] = reads[1]!;
    expect(n.ratio).toBe(0.30000000000000004);
    expect(n.tiny).toBe(Number(PLAIN_VALUES.tiny));
    expect(n.big).toBe(9_007_199_254_740_991);
    expect(n.on).toBe(true);
    expect(n.off).toBe(false);
    expect(n.doc).toEqual(PLAIN_VALUES.doc);
  }
});

test("a field past the columns a D1 table takes is refused with a 400 when it is defined, and the type still reads", async () => {
  const cot = await made(onD1, `${CO}/custom-object-types/`, { name: "tall", slug: "tall" });
  let refused: { status: number; body: any } | null = null;
  let defined = 0;
  for (let i = 0; i < 150 && !refused; i++) {
    const r = await onD1("POST", `${CO}/custom-object-type-fields/`, {
      custom_object_type: cot.id,
      name: `t${i}`,
      type: "text",
    });
    if (r.status === 201) defined++;
    else refused = r;
  }
  expect(refused?.status, JSON.stringify(refused?.body)).toBe(400);
  expect(refused?.body.error).toBe("too_many_columns");
  expect(defined).toBeGreaterThan(90);
  // the refused field left nothing behind: the type has the fields defined before it
  const type = await onD1("GET", `${CO}/custom-object-types/${cot.id}/`);
  expect(type.body.fields).toHaveLength(defined);
  const obj = await made(onD1, `${CO}/tall/`, { t0: "first", [`t${defined - 1}`]: "last" });
  const got = await onD1("GET", `${CO}/tall/${obj.id}/`);
  expect(got.status).toBe(200);
  expect(got.body[`t${defined - 1}`]).toBe("last");
  const list = await onD1("GET", `${CO}/tall/`);
  expect(list.status).toBe(200);
  expect(list.body.results[0]).toEqual(got.body);
});

test("a wide type's GET and list take D1 as many round trips as a narrow type's: the folds add none", async () => {
  const narrow = await made(onD1, `${CO}/narrow/`, { name: "n round trips" });
  const wide = await made(onD1, `${CO}/wide/`, { name: "w round trips" });
  /** The round trips a request takes, but the token's use (the background's, settled first). */
  const roundTrips = async (path: string) => {
    await onD1("GET", path); // warm: the caches are filled by the first
    await settleBeforeCounting(d1.app, () => d1.json("GET", "/api/status/"));
    sends = [];
    const r = await onD1("GET", path);
    const sent = sends.filter((texts) => !texts.every((t) => /"tokens"/.test(t)));
    sends = null;
    expect(r.status).toBe(200);
    return sent;
  };
  const folded = (trips: string[][]) => trips.flat().some((t) => t.includes("json_array(quote("));
  const [narrowGet, wideGet] = [
    await roundTrips(`${CO}/narrow/${narrow.id}/`),
    await roundTrips(`${CO}/wide/${wide.id}/`),
  ];
  expect(folded(wideGet)).toBe(true);
  expect(folded(narrowGet)).toBe(false);
  expect(wideGet).toHaveLength(narrowGet.length);
  const [narrowList, wideList] = [
    await roundTrips(`${CO}/narrow/`),
    await roundTrips(`${CO}/wide/`),
  ];
  expect(folded(wideList)).toBe(true);
  expect(wideList).toHaveLength(narrowList.length);
});

test(`a type's multiobject field past ${MAX_LINK_FIELDS_PER_TYPE} is refused with a 400 when it is defined; one of ${MAX_LINK_FIELDS_PER_TYPE} reads on D1 as on a local file`, async () => {
  for (const json of [onD1, onLocal]) {
    const huge = (await json("GET", `${CO}/custom-object-types/?slug=huge`)).body.results[0];
    const more = links(MAX_LINK_FIELDS_PER_TYPE)
      .slice(HUGE_LINKS)
      .map((f) => ({ custom_object_type: huge.id, ...f }));
    for (const f of more) await made(json, `${CO}/custom-object-type-fields/`, f);
    const refused = await json("POST", `${CO}/custom-object-type-fields/`, {
      custom_object_type: huge.id,
      name: "one_more",
      type: "multiobject",
      related_object_type: "dcim.site",
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain(
      `at most ${MAX_LINK_FIELDS_PER_TYPE} multiobject fields`,
    );
    // a field of another type still fits
    await made(json, `${CO}/custom-object-type-fields/`, {
      custom_object_type: huge.id,
      name: "one_more",
      type: "text",
    });
  }
  const last = linkName(MAX_LINK_FIELDS_PER_TYPE);
  const made2 = await same("POST", `${CO}/huge/`, { name: "full", [last]: [sites[2]] });
  expect(made2.status).toBe(201);
  const got = await same("GET", `${CO}/huge/${made2.body.id}/`);
  expect(got.body[last]).toEqual([expect.objectContaining({ id: sites[2], name: "w c" })]);
  const list = await same("GET", `${CO}/huge/?limit=100`);
  expect(list.status).toBe(200);
});

test(`a schema document of a type past ${MAX_LINK_FIELDS_PER_TYPE} multiobject fields is refused at once, naming the limit`, async () => {
  const fields = links(MAX_LINK_FIELDS_PER_TYPE + 1).map((f, i) => ({
    id: i + 1,
    name: f.name,
    type: f.type,
    related_object_type: "dcim/site",
  }));
  const body = {
    schema: { schema_version: "1", types: [{ name: "links", slug: "links", fields }] },
  };
  for (const route of ["preview", "apply"]) {
    const r = await onLocal("POST", `${CO}/schema/${route}/`, body);
    expect(r.status).toBe(400);
    expect(r.body.schema_errors[0].path).toBe("$.types[0].fields");
    expect(r.body.schema_errors[0].message).toContain(
      `at most ${MAX_LINK_FIELDS_PER_TYPE} multiobject fields`,
    );
  }
});
