/**
 * A filter's several values to equal ride as one JSON list (decision 0188): on Cloudflare D1
 * (miniflare's), a list request whose filters carry 150 values answers as the same request with 5
 * does, and sends D1 the same statement texts: one bound value a list, not one a value. Covered:
 * plain filters (`id`, a decimal field), tags, owners, object types, a multiselect field's choices
 * and a multiobject field's ids, each with its `__n`; and the pattern lookups (`__ic`, `__isw`,
 * `__iew`, `__ie`), each with its negation, their LIKE wildcards in a value matched as text.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { d1Database } from "../../src/db/d1";
import { type D1App, startD1App, statementRecorder } from "../helpers/d1-app";
import { settleBeforeCounting } from "../helpers/settle";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(180_000);

const CO = "/api/plugins/custom-objects";
let d1: D1App;
/** The statement texts the app prepares on D1. */
const statements = statementRecorder();

let sites: number[] = [];
let objects: number[] = [];

beforeAll(async () => {
  d1 = await startD1App("filter-lists", (_db, binding) => d1Database(statements.wrap(binding)));
  const tags = ["a", "b", "c"];
  for (const tag of tags)
    await d1.made("/api/extras/tags/", { name: `fl ${tag}`, slug: `fl-${tag}` });
  // tags every site holds (a conjoined `tag=` of up to 100 still matches) and tags none holds
  // (`tag__n=` of up to 50): a tag filter names tags that exist (NetBox's model choice filter)
  const padding = [
    ...Array.from({ length: MANY[0] }, (_, i) => `fl-pad-${i}`),
    ...Array.from({ length: MANY[1] }, (_, i) => `fl-spare-${i}`),
  ];
  await d1.made(
    "/api/extras/tags/",
    padding.map((slug) => ({ name: slug, slug })),
  );
  const pads = padding.filter((slug) => slug.startsWith("fl-pad-")).map((slug) => ({ slug }));
  const owners: number[] = [];
  for (const owner of tags)
    owners.push((await d1.made("/api/users/owners/", { name: `fl owner ${owner}` })).id);
  const made = await d1.made(
    "/api/dcim/sites/",
    tags.map((x, i) => ({
      name: `fl site ${x}`,
      slug: `fl-site-${x}`,
      tags: [{ slug: `fl-${x}` }, ...pads],
      owner: owners[i],
    })),
  );
  sites = made.map((s: { id: number }) => s.id);
  const choices = await d1.made("/api/extras/custom-field-choice-sets/", {
    name: "fl colours",
    extra_choices: ["red", "green", "blue"].map((v) => [v, v]),
  });
  const cot = await d1.made(`${CO}/custom-object-types/`, { name: "fl_obj", slug: "fl_obj" });
  for (const field of [
    { name: "name", type: "text", primary: true },
    { name: "colours", type: "multiselect", choice_set: choices.id },
    { name: "size", type: "decimal" },
    { name: "sites", type: "multiobject", related_object_type: "dcim.site" },
  ])
    await d1.made(`${CO}/custom-object-type-fields/`, { custom_object_type: cot.id, ...field });
  const rows = [
    { name: "o1", colours: ["red"], size: "1.5", sites: [sites[0]] },
    { name: "o2", colours: ["green", "blue"], size: "2.5", sites: [sites[1], sites[2]] },
    { name: "o3", colours: [], size: "3.5", sites: [] },
  ];
  objects = [];
  for (const row of rows) objects.push((await d1.made(`${CO}/fl_obj/`, row)).id);
});
afterAll(() => d1?.stop());

/**
 * `name=…&name__n=…` with `among` and `without` padded to `n` and `m` values by `absent(i)`,
 * values that match nothing: the answer depends on the given ones alone.
 */
function query(
  name: string,
  among: Array<string | number>,
  without: Array<string | number>,
  absent: (i: number) => string,
  [n, m]: [number, number],
  [is, isNot]: [string, string] = [name, `${name}__n`],
) {
  const pad = (given: Array<string | number>, to: number) => [
    ...given.map(String),
    ...Array.from({ length: to - given.length }, (_, i) => absent(i)),
  ];
  const params = new URLSearchParams();
  for (const v of pad(among, n)) params.append(is, v);
  for (const v of pad(without, m)) params.append(isNot, v);
  return params.toString();
}

/** The ids a list request answers and the statement texts it sent D1 (background settled). */
async function listed(path: string) {
  await settleBeforeCounting(d1.app, () => d1.json("GET", "/api/status/"));
  const { answer: r, texts } = await statements.sent(() => d1.json("GET", path));
  if (r.status !== 200)
    throw new Error(`${path.slice(0, 80)}…: ${r.status} ${JSON.stringify(r.body)}`);
  return { ids: (r.body.results as { id: number }[]).map((x) => x.id), texts };
}

const FEW: [number, number] = [3, 2];
const MANY: [number, number] = [100, 50];

/** One case: `path` + the query for FEW and for MANY values answers `expected`, in one text. */
function both(
  what: string,
  path: string,
  q: (size: [number, number]) => string,
  expected: () => number[] | Promise<number[]>,
) {
  test(`${what}: ${MANY[0] + MANY[1]} values answer as ${FEW[0] + FEW[1]} do on D1, in the same statements`, async () => {
    await listed(`${path}?${q(FEW)}`); // warm: the caches are filled by the first
    const few = await listed(`${path}?${q(FEW)}`);
    const many = await listed(`${path}?${q(MANY)}`);
    const want = await expected();
    expect(want.length).toBeGreaterThan(0);
    expect(few.ids).toEqual(want);
    expect(many.ids).toEqual(want);
    expect(many.texts).toEqual(few.texts);
  });
}

const absentId = (i: number) => String(900_000 + i);

both(
  "sites by id",
  "/api/dcim/sites/",
  (size) => query("id", sites, [sites[2]!], absentId, size),
  () => sites.slice(0, 2),
);
both(
  "sites by tag (all of them, none of them: NetBox's conjoined TagFilter)",
  "/api/dcim/sites/",
  ([n, m]) => {
    const params = new URLSearchParams();
    for (let i = 0; i < n; i++) params.append("tag", `fl-pad-${i}`);
    params.append("tag__n", "fl-c");
    for (let i = 1; i < m; i++) params.append("tag__n", `fl-spare-${i}`);
    return params.toString();
  },
  () => sites.slice(0, 2),
);
both(
  "sites by owner",
  "/api/dcim/sites/",
  (size) =>
    query(
      "owner",
      ["fl owner a", "fl owner b", "fl owner c"],
      ["fl owner c"],
      (i) => `none ${i}`,
      size,
    ),
  () => sites.slice(0, 2),
);
both(
  "object changes by object type",
  "/api/core/object-changes/",
  (size) =>
    `${query("changed_object_type", ["dcim.site"], ["extras.tag"], (i) => `dcim.none${i}`, size)}&limit=1000&fields=id`,
  // the site changes, asked for with one value (`= ?`, not a list)
  async () =>
    (await listed("/api/core/object-changes/?changed_object_type=dcim.site&limit=1000&fields=id"))
      .ids,
);
both(
  "custom objects by multiselect choice",
  `${CO}/fl_obj/`,
  (size) => query("colours", ["red", "green"], ["blue"], (i) => `none-${i}`, size),
  () => objects.slice(0, 1),
);
both(
  "custom objects by decimal (fractions: no SQL literal stands in for them)",
  `${CO}/fl_obj/`,
  (size) => query("size", ["1.5", "2.5"], ["2.5"], (i) => `${1000 + i}.25`, size),
  () => objects.slice(0, 1),
);
both(
  "custom objects by multiobject ids",
  `${CO}/fl_obj/`,
  (size) => query("sites_id", [sites[0]!, sites[1]!], [sites[2]!], absentId, size),
  () => objects.slice(0, 1),
);

/** Values that match nothing, unless `%` and `_` were taken as LIKE wildcards. */
const wild = (i: number) => `%_none_${i}`;

both(
  "sites by name__ic / name__nic (case-folded, wildcards as text)",
  "/api/dcim/sites/",
  (size) => query("name", ["SITE A", "site b"], ["E B"], wild, size, ["name__ic", "name__nic"]),
  () => sites.slice(0, 1),
);
both(
  "sites by slug__isw / slug__nisw",
  "/api/dcim/sites/",
  (size) => query("slug", ["FL-SITE"], ["fl-site-c"], wild, size, ["slug__isw", "slug__nisw"]),
  () => sites.slice(0, 2),
);
both(
  "custom objects by name__iew / name__niew",
  `${CO}/fl_obj/`,
  (size) => query("name", ["1", "2", "3"], ["O3"], wild, size, ["name__iew", "name__niew"]),
  () => objects.slice(0, 2),
);
both(
  "custom objects by name__ie / name__nie",
  `${CO}/fl_obj/`,
  (size) => query("name", ["O1", "o2"], ["O2"], wild, size, ["name__ie", "name__nie"]),
  () => objects.slice(0, 1),
);
