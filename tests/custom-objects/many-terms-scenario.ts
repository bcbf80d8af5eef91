/**
 * Reads whose SQL takes a term per linking field or per related model (decision 0161), past the
 * five terms of a compound SELECT that D1 accepts: a site linked from seven fields of two types
 * (linked-objects, paged, read step by step and then in one read), and objects pointing at seven
 * models at once (their create, GET, list and GraphQL). One scenario every backend runs; answers
 * a summary without ids or times.
 */
import { expect } from "bun:test";
import type { Json } from "../helpers/three-backends";

const CO = "/api/plugins/custom-objects";

/** `body`, or a thrown error naming the status when it is not `want`. */
async function must(json: Json, want: number, method: string, path: string, body?: unknown) {
  const r = await json(method, path, body);
  if (r.status !== want)
    throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** A type with a primary `name` and the given fields. */
async function typeWith(json: Json, slug: string, fields: Record<string, unknown>[]) {
  const cot = await must(json, 201, "POST", `${CO}/custom-object-types/`, { name: slug, slug });
  await must(
    json,
    201,
    "POST",
    `${CO}/custom-object-type-fields/`,
    [{ name: "name", type: "text", primary: true }, ...fields].map((f) => ({
      custom_object_type: cot.id,
      ...f,
    })),
  );
  return cot;
}

const toSite = (name: string, type = "object") => ({
  name,
  type,
  related_object_type: "dcim.site",
});

/** A linked-objects row without ids: type, field, object. */
const rowOf = (r: any) => `${r.custom_object_type.slug}.${r.field_name}:${r.object.name}`;

/** The site linked from seven fields (three of `a`, four of `b`): every page, twice. */
async function linkedSeven(json: Json, prefix: string) {
  const site = await must(json, 201, "POST", "/api/dcim/sites/", {
    name: `${prefix} linked`,
    slug: `${prefix}-linked`,
  });
  const a = `${prefix}_la`;
  const b = `${prefix}_lb`;
  await typeWith(json, a, [toSite("home"), toSite("away"), toSite("many", "multiobject")]);
  await typeWith(json, b, [
    toSite("s1"),
    toSite("s2"),
    toSite("sm", "multiobject"),
    { name: "any", type: "object", is_polymorphic: true, related_object_types: ["dcim.site"] },
  ]);
  const s = site.id;
  for (const [slug, body] of [
    [a, { name: "a1", home: s, away: s, many: [s] }],
    [a, { name: "a2", home: s }],
    [b, { name: "b1", s1: s, s2: s, sm: [s], any: { object_type: "dcim.site", id: s } }],
    [b, { name: "b2", sm: [s] }],
  ] as const)
    await must(json, 201, "POST", `${CO}/${slug}/`, body);
  const linked = `${CO}/linked-objects/?object_type=dcim.site&object_id=${s}`;
  const read = async (query = "") => {
    const body = await must(json, 200, "GET", `${linked}${query}`);
    return { count: body.count, rows: body.results.map(rowOf) };
  };
  // the first read learns the linking fields (step by step where there is no change stamp), the
  // next ones read in one
  return {
    first: await read(),
    again: await read(),
    paged: [
      await read("&limit=3"),
      await read("&limit=3&offset=3"),
      await read("&limit=3&offset=6"),
    ],
  };
}

/** A nested form without ids or urls. */
const formOf = (n: any) => n?.display ?? n?.name ?? null;

/** Objects pointing at seven models: one object field each, and one polymorphic list of all. */
async function pointingAtSeven(json: Json, prefix: string) {
  const site = await must(json, 201, "POST", "/api/dcim/sites/", {
    name: `${prefix} target`,
    slug: `${prefix}-target`,
  });
  const device = await must(json, 201, "POST", "/api/dcim/devices/", {
    name: `${prefix}-dev`,
    site: site.id,
  });
  const tenant = await must(json, 201, "POST", "/api/tenancy/tenants/", {
    name: `${prefix} tenant`,
    slug: `${prefix}-tenant`,
  });
  const prefixRow = await must(json, 201, "POST", "/api/ipam/prefixes/", {
    prefix: "10.61.0.0/16",
  });
  const tag = await must(json, 201, "POST", "/api/extras/tags/", {
    name: `${prefix} tag`,
    slug: `${prefix}-tag`,
  });
  const x = `${prefix}_px`;
  const y = `${prefix}_py`;
  await typeWith(json, x, []);
  await typeWith(json, y, []);
  const xo = await must(json, 201, "POST", `${CO}/${x}/`, { name: "x1" });
  const yo = await must(json, 201, "POST", `${CO}/${y}/`, { name: "y1" });
  const targets: Array<[string, string, number]> = [
    ["site", "dcim.site", site.id],
    ["device", "dcim.device", device.id],
    ["tenant", "tenancy.tenant", tenant.id],
    ["prefix", "ipam.prefix", prefixRow.id],
    ["tag", "extras.tag", tag.id],
    ["x", `custom_objects.${x}`, xo.id],
    ["y", `custom_objects.${y}`, yo.id],
  ];
  const hub = `${prefix}_hub`;
  await typeWith(json, hub, [
    ...targets.map(([name, label]) => ({ name, type: "object", related_object_type: label })),
    {
      name: "all",
      type: "multiobject",
      is_polymorphic: true,
      related_object_types: targets.map(([, label]) => label),
    },
  ]);
  const body: Record<string, unknown> = { name: "h1" };
  for (const [name, , id] of targets) body[name] = id;
  body.all = targets.map(([, label, id]) => ({ object_type: label, id }));
  const made = await must(json, 201, "POST", `${CO}/${hub}/`, body);
  const summary = (o: any) => ({
    name: o.name,
    fields: targets.map(([name]) => formOf(o[name])),
    all: (o.all as any[]).map((n) => `${n.object_type}:${formOf(n)}`).sort(),
  });
  const got = await must(json, 200, "GET", `${CO}/${hub}/${made.id}/`);
  const listed = await must(json, 200, "GET", `${CO}/${hub}/`);
  const gql = await must(json, 200, "POST", "/graphql/", {
    query: `{ custom_objects_${hub}_list { name site { name } device { name } tenant { name } prefix { prefix } tag { name } x { name } y { name } } }`,
  });
  return {
    made: summary(made),
    got: summary(got),
    listed: listed.results.map(summary),
    gql: gql.errors
      ? gql.errors.map((e: any) => e.message)
      : gql.data[`custom_objects_${hub}_list`],
  };
}

export async function manyTermsScenario(json: Json, prefix: string) {
  const pointing = await pointingAtSeven(json, prefix);
  const linked = await linkedSeven(json, prefix);
  return { linked, pointing };
}

/** What every backend must answer (besides answering alike). */
export function expectManyTermsAnswers(r: Awaited<ReturnType<typeof manyTermsScenario>>) {
  const all = [
    "la.away:a1",
    "la.home:a1",
    "la.home:a2",
    "la.many:a1",
    "lb.any:b1",
    "lb.s1:b1",
    "lb.s2:b1",
    "lb.sm:b1",
    "lb.sm:b2",
  ];
  const strip = (rows: string[]) => rows.map((row) => row.replace(/^[^_]*_/, "")).sort();
  expect(r.linked.first.count).toBe(9);
  expect(strip(r.linked.first.rows)).toEqual(all);
  expect(r.linked.again).toEqual(r.linked.first);
  expect(r.linked.paged.flatMap((p) => p.rows)).toEqual(r.linked.first.rows);
  expect(r.pointing.made.fields.every((f: unknown) => typeof f === "string")).toBe(true);
  expect(r.pointing.made.all).toHaveLength(7);
  expect(r.pointing.got).toEqual(r.pointing.made);
  expect(r.pointing.listed).toEqual([r.pointing.made]);
  expect(r.pointing.gql).toEqual([
    {
      name: "h1",
      ...Object.fromEntries(
        ["site", "device", "tenant", "tag", "x", "y"].map((f, i) => [
          f,
          { name: r.pointing.made.fields[[0, 1, 2, 4, 5, 6][i]!] },
        ]),
      ),
      prefix: { prefix: "10.61.0.0/16" },
    },
  ]);
}

type JsonAs = (
  method: string,
  path: string,
  body?: unknown,
  token?: string,
) => Promise<{ status: number; body: any }>;

/**
 * A caller who may add only types whose slug starts with "ok" applies a schema adding six types:
 * all inside (200), then one outside among them (the transaction's 403 naming it, explained by
 * one read of the seven types as written, nothing written).
 */
export async function constrainedAddsScenario(json: JsonAs, prefix: string) {
  const TYPE = "custom_objects.customobjecttype";
  const user = await must(json, 201, "POST", "/api/users/users/", { username: `${prefix}-adder` });
  for (const [i, [actions, label, constraints]] of (
    [
      [["view", "add", "change"], TYPE, { slug__startswith: "ok" }],
      [["view", "add", "change", "delete"], "custom_objects.customobjecttypefield", null],
    ] as const
  ).entries())
    await must(json, 201, "POST", "/api/users/permissions/", {
      name: `${prefix}-adder-${i}`,
      actions,
      object_types: [label],
      users: [user.id],
      constraints,
    });
  const made = await must(json, 201, "POST", "/api/users/tokens/", { user: user.id });
  const token = `nbt_${made.key}.${made.token}`;
  const doc = (slugs: string[]) => ({
    schema: {
      schema_version: "1",
      types: slugs.map((slug) => ({
        name: slug,
        slug,
        fields: [{ id: 1, name: "code", type: "text" }],
      })),
    },
  });
  const apply = async (slugs: string[]) => {
    const r = await json("POST", `${CO}/schema/apply/`, doc(slugs), token);
    return { status: r.status, detail: r.status === 200 ? null : r.body.detail };
  };
  const six = (first: string) => Array.from({ length: 6 }, (_, i) => `${first}_${prefix}${i}`);
  const inside = await apply(six("ok"));
  const outside = await apply([...six("ok2"), `bad_${prefix}`]);
  const types = await must(json, 200, "GET", `${CO}/custom-object-types/?limit=100&ordering=slug`);
  return {
    inside,
    outside,
    slugs: types.results
      .map((t: { slug: string }) => t.slug)
      .filter((s: string) => /^(ok|bad)/.test(s)),
  };
}

/** A related object as a constrained caller is shown it: its display, or "hidden" (id alone). */
const shownOf = (n: any) => (n == null ? null : (n.display ?? "hidden"));

/**
 * The objects pointing at seven models read by a caller who may view some of them (decision
 * 0165): the site and `y` outside their constraints, the tenant, device and prefix not at all.
 */
export async function constrainedReadsScenario(json: JsonAs, prefix: string) {
  await pointingAtSeven(json, prefix);
  const user = await must(json, 201, "POST", "/api/users/users/", { username: `${prefix}-viewer` });
  const grants: Array<[string, unknown]> = [
    [`custom_objects.${prefix}_hub`, null],
    ["dcim.site", { slug: "none" }],
    ["extras.tag", null],
    [`custom_objects.${prefix}_px`, null],
    [`custom_objects.${prefix}_py`, { name: "none" }],
  ];
  for (const [i, [label, constraints]] of grants.entries())
    await must(json, 201, "POST", "/api/users/permissions/", {
      name: `${prefix}-viewer-${i}`,
      actions: ["view"],
      object_types: [label],
      users: [user.id],
      constraints,
    });
  const made = await must(json, 201, "POST", "/api/users/tokens/", { user: user.id });
  const token = `nbt_${made.key}.${made.token}`;
  const hub = `${prefix}_hub`;
  const fields = ["site", "device", "tenant", "prefix", "tag", "x", "y"];
  const summary = (o: any) => ({
    fields: fields.map((f) => shownOf(o[f])),
    all: (o.all as any[]).map((n) => `${n.object_type ?? "-"}:${shownOf(n)}`).sort(),
  });
  const read = async (path: string) => {
    const r = await json("GET", path, undefined, token);
    if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  const listed = await read(`${CO}/${hub}/`);
  const got = await read(`${CO}/${hub}/${listed.results[0].id}/`);
  // twice: the second from warm caches (one read where a round trip counts)
  const again = await read(`${CO}/${hub}/${listed.results[0].id}/`);
  return { listed: listed.results.map(summary), got: summary(got), again: summary(again) };
}
