/**
 * Every GET the app serves, counted on a remote database (issue 28 item 2): each route of the
 * OpenAPI document the app generates, with its projections, filters, ordering and cursor pages,
 * for a superuser and for a token whose views are constrained, answers in 1 round trip with warm
 * caches (GraphQL with one level of relations ≤ 2), and answers as it did when warm.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { BASE, makeTestApp, objectTypeIdOf, type TestApp } from "../helpers/app";
import { anotherInstance } from "../helpers/instances";
import { userWith } from "../helpers/grants";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { CO, create } from "../custom-objects/fixtures";
import { seedSweep } from "./sweep-seed";
import { settleBeforeCounting } from "../helpers/settle";

let remote: RemoteDb;
let t: TestApp;
/** The constrained caller's token. */
let reader: string;
const ids: Record<string, number[]> = {};

/** A type's removed field and a removed type, in the schema trash (a schema apply puts them there). */
async function seedTrash() {
  const title = { id: 1, name: "title", type: "text", primary: true };
  const note = { id: 2, name: "note", type: "text" };
  const apply = async (types: unknown[], extra: Record<string, unknown> = {}) => {
    const r = await t.json("POST", `${CO}/schema/apply/`, {
      body: { schema: { schema_version: "1", types, ...extra }, allow_destructive: true },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  };
  await apply([
    { name: "scrap", slug: "scrap", fields: [title, note] },
    { name: "bin", slug: "bin", fields: [title] },
    { name: "vault", slug: "vault", fields: [title] },
  ]);
  await create(t, "scrap", { title: "kept", note: "in the trash" });
  await create(t, "bin", { title: "binned" });
  await create(t, "vault", { title: "locked" });
  await apply(
    [
      { name: "scrap", slug: "scrap", fields: [title], removed_fields: [note] },
      { name: "vault", slug: "vault", fields: [title] },
    ],
    {
      removed_types: [{ slug: "bin" }],
    },
  );
  const trash = (await t.json("GET", `${CO}/schema/trash/`)).body;
  expect(trash.results.map((r: { kind: string }) => r.kind).sort()).toEqual(["field", "type"]);
}

/** Jobs naming a site and a custom object (no route creates a job). */
async function seedJobs(readerId: number) {
  const orm = t.deps.db.orm;
  const typeOf = (app: string, model: string) => objectTypeIdOf(t, app, model);
  const [admin] = (await orm.all(sql`SELECT id FROM users WHERE username = 'admin'`)) as Array<{
    id: number;
  }>;
  const site = await typeOf("dcim", "site");
  const widget = await typeOf("custom_objects", "widget");
  for (const [name, type, id] of [
    ["job.site", site, ids.site![0]],
    ["job.widget", widget, ids.widget![0]],
    ["job.none", null, null],
    ["job.mine", site, ids.site![0]],
  ] as const)
    await orm.run(
      sql`INSERT INTO jobs (name, object_type_id, object_id, status, created, user_id) VALUES (${name}, ${type}, ${id}, 'completed', '2026-11-27T00:00:00Z', ${name === "job.mine" ? readerId : admin!.id})`,
    );
}

/** The constrained caller: every model viewable, most under a constraint that filters. */
async function constrainedReader(): Promise<{ token: string; id: number }> {
  const everything = (labels: string[]) =>
    labels.map((l) => [["view"], l, { id__gte: 1 }] as [string[], string, unknown]);
  return await userWith(t, "sweep-reader", [
    [["view"], "dcim.site", { status: "active" }],
    [["view"], "dcim.device", { name__isw: "dev-" }],
    [["view"], "tenancy.tenant", { slug__in: ["tenant-1", "tenant-2"] }],
    [["view"], "users.group", { name: "netops" }],
    [["view"], "custom_objects.customobjecttype", { slug__in: ["widget", "scrap"] }],
    [["view"], "extras.tag", { slug__in: ["alpha", "beta"] }],
    [["view"], "custom_objects.widget", { size__lte: 2 }],
    ...everything([
      "ipam.prefix",
      "ipam.ipaddress",
      "extras.webhook",
      "extras.eventrule",
      "extras.customfieldchoiceset",
      "core.job",
      "core.objectchange",
      "core.objecttype",
      "users.user",
      "users.owner",
      "users.ownergroup",
      "users.objectpermission",
      "users.token",
      "custom_objects.customobjecttypefield",
      "custom_objects.scrap",
      "custom_objects.vault",
    ]),
  ]);
}

beforeAll(async () => {
  remote = await startRemoteDb("round-trips-sweep");
  t = await makeTestApp({ DATABASE_URL: remote.url });
  await seedSweep(t, ids, seedTrash);
  const made = await constrainedReader();
  reader = made.token;
  await seedJobs(made.id);
});
afterAll(async () => {
  await t.close();
  await remote.stop();
});

interface Measured {
  who: string;
  method: string;
  path: string;
  status: number;
  trips: number;
  sql: string[][];
}

/** Round trips of one request after a first run that warms the caches; its answer unchanged. */
async function measure(
  who: "admin" | "reader",
  path: string,
  method = "GET",
  body?: unknown,
): Promise<Measured> {
  const token = who === "admin" ? t.admin : reader;
  const headers = { accept: "application/json" };
  const warm = await t.req(method, path, { token, body, headers });
  const warmText = await warm.text();
  // the warm run's search flush and token use run off the request: not the measured one's
  await settleBeforeCounting(
    t.app,
    () => t.req("GET", "/api/status/", { token }),
    who === "admin" ? "admin" : "sweep-reader",
  );
  remote.proxy.reset();
  const r = await t.req(method, path, { token, body, headers });
  const text = await r.text();
  const trips = remote.proxy.count;
  const sqls = remote.proxy.log.map((l) =>
    l.sql.filter((q) => !/^(BEGIN|COMMIT|ROLLBACK)\b/.test(q)),
  );
  expect({ path, who, status: r.status }).toEqual({ path, who, status: warm.status });
  if (!/^\/api\/status\/$/.test(path)) expect(text, `${who} ${path}`).toBe(warmText);
  return { who, method, path, status: r.status, trips, sql: sqls };
}

/** Every GET path of the document, its `{id}` filled with an object the caller may view. */
function documentPaths(doc: { paths: Record<string, Record<string, unknown>> }): string[] {
  return Object.entries(doc.paths)
    .filter(([, ops]) => ops.get)
    .map(([p]) => p);
}

const HEALTH = "/plugins/host_healthcheck_plugin/healthcheck/";
/** The health page without the checks of services the test app has none of (redis). */
const HEALTH_JSON = `${HEALTH}?format=json&exclude=HostRedisCacheHealthCheck&exclude=HostRedisTasksHealthCheck`;

/** A request id for the request filters (a UUID no request had: the read is what is counted). */
const REQUEST = "5b0e4a52-3f7b-4b57-9d43-1f0a7c2e9a01";

/** Filters on related fields and values a client would send, per list route. */
function filtersOf(list: string): string[] {
  const [s1] = ids.site!;
  const [t1] = ids.tenant!;
  const byRoute: Record<string, string[]> = {
    "/api/dcim/sites/": [
      ...[`tenant_id=${t1}`, "tag=alpha", "status=active", "q=site", "latitude__gte=0"],
      // a tag filter's check rides in the list's read: a 400 too, a cursor page too (0212)
      ...["tag=no-such-tag", "tag_id=999999", "start=1&tag=alpha", "start=1&tag=no-such-tag"],
      // the change log's request filters are a subquery of the list's read (0215)
      ...[`created_by_request=${REQUEST}`, `modified_by_request=${REQUEST}&status=active`],
    ],
    "/api/dcim/devices/": [`site_id=${s1}`, `tenant_id=${t1}`, "tag=alpha", "q=dev"],
    "/api/ipam/prefixes/": [`site_id=${s1}`, "tag=beta", "q=10.1"],
    "/api/ipam/ip-addresses/": [`tenant_id=${ids.tenant![1]}`, "q=host1"],
    "/api/tenancy/tenants/": ["tag=beta", "q=tenant"],
    "/api/extras/tags/": ["q=alpha"],
    "/api/core/jobs/": ["name__isw=job."],
    "/api/core/object-changes/": ["changed_object_type=dcim.site", "action=create"],
    "/api/users/users/": [`group_id=${ids.group![0]}`, "q=jane"],
    "/api/users/tokens/": ["user=admin"],
    [`${CO}/widget/`]: [
      ...[`site_id=${s1}`, "tag=alpha", "colour=red", "q=widget", "size__gte=2"],
      ...["tag=no-such-tag", `updated_by_request=${REQUEST}`],
    ],
    [`${CO}/custom-object-type-fields/`]: [`custom_object_type_id=${ids.customobjecttype![0]}`],
  };
  return (byRoute[list] ?? []).map((f) => `${list}?${f}`);
}

/** A list route's variants: projections, ordering, offset and cursor pages, its filters. */
function listVariants(list: string, firstId: number): string[] {
  return [
    list,
    `${list}?brief=1`,
    `${list}?fields=id,display`,
    `${list}?omit=description`,
    `${list}?ordering=-id`,
    `${list}?limit=2&offset=1`,
    `${list}?start=${firstId}&limit=2`,
    `${list}?id=${firstId}`,
    ...filtersOf(list),
  ];
}

/** A detail route's variants. */
const detailVariants = (detail: string) => [detail, `${detail}?brief=1`];

/** The paths of every GET `who` sends: list and detail routes, their variants, the rest. */
async function pathsFor(who: "admin" | "reader", docPaths: string[]): Promise<string[]> {
  const token = who === "admin" ? t.admin : reader;
  const out: string[] = [];
  const routes = [...docPaths, `${CO}/widget/`, `${CO}/widget/{id}/`];
  for (const p of new Set(routes)) {
    if (p.endsWith("/{id}/")) continue;
    if (routes.includes(`${p}{id}/`)) {
      const page = await t.json("GET", `${p}?ordering=id`, { token });
      const first = page.body.results?.[0]?.id as number | undefined;
      if (page.status !== 200 || first === undefined)
        throw new Error(`${who} sees nothing at ${p}: ${page.status}`);
      out.push(...listVariants(p, first), ...detailVariants(`${p}${first}/`));
    } else out.push(...otherVariants(p));
  }
  return out;
}

/** Routes that are no model's list: each as a client calls it. */
function otherVariants(p: string): string[] {
  const site = ids.site![0];
  const special: Record<string, string[]> = {
    "/api/docs/assets/{name}": [],
    [`${CO}/linked-objects/`]: [`${p}?object_type=dcim.site&object_id=${site}`],
    [`${CO}/schema/export/`]: [`${p}?slug=widget`, p],
    "/api/schema/": [`${p}?format=json`],
    "/graphql/": [
      `/graphql/?query=${encodeURIComponent("{ site_list { name tenant { name } tags { name } } }")}`,
    ],
    [HEALTH]: [HEALTH_JSON],
    "/plugins/host_healthcheck_plugin/healthcheck/{group}/": [],
  };
  return special[p] ?? [p];
}

/** GraphQL queries with one level of relations, sent as POST: ≤ 2 round trips each. */
const GRAPHQL = [
  "{ site_list { name tenant { name } tags { name } } }",
  "{ device_list { name site { name } tenant { name } } }",
  `{ site(id: SITE) { name tenant { name } } }`,
  "{ custom_objects_widget_list { title site { name } } }",
  "{ prefix_list { prefix site { name } } }",
];

const results: Measured[] = [];

test("every GET route of the document is swept, for both callers", async () => {
  const doc = (await t.json("GET", "/api/schema/?format=json")).body;
  const docPaths = documentPaths(doc);
  for (const who of ["admin", "reader"] as const)
    for (const path of await pathsFor(who, docPaths)) results.push(await measure(who, path));
  for (const who of ["admin", "reader"] as const)
    for (const q of GRAPHQL) {
      const query = q.replace("SITE", String(ids.site![0]));
      results.push(await measure(who, "/graphql/", "POST", { query }));
      results.at(-1)!.path = `POST /graphql/ ${query}`;
    }
  // every path of the document was asked (its {id} filled in), none left out by mistake
  const asked = new Set(results.map((r) => r.path.split("?")[0]!.replace(/\/\d+\/$/, "/{id}/")));
  const skipped = [
    "/api/docs/assets/{name}",
    "/plugins/host_healthcheck_plugin/healthcheck/{group}/",
  ];
  for (const p of docPaths) if (!skipped.includes(p)) expect(asked.has(p), p).toBe(true);
});

test("each answers in 1 round trip warm (GraphQL with one level of relations ≤ 2)", () => {
  const budget = (r: Measured) => (/^(POST )?\/graphql\//.test(r.path) ? 2 : 1);
  const over = results.filter((r) => r.trips > budget(r));
  // below the budget only where nothing is read: the landing page and the liveness probe
  const NO_READ = ["/", "/livez"];
  const under = results.filter(
    (r) => r.trips < budget(r) && !/graphql/.test(r.path) && !NO_READ.includes(r.path),
  );
  expect(under.map((r) => `${r.trips} ${r.who} ${r.path}`)).toEqual([]);
  expect(results.filter((r) => NO_READ.includes(r.path)).map((r) => r.trips)).toEqual([0, 0, 0, 0]);
  if (process.env.ROUND_TRIPS_LOG)
    for (const r of results)
      console.log(
        r.trips > budget(r) ? "OVER" : "ok  ",
        r.trips,
        r.who,
        r.status,
        r.path,
        r.trips > budget(r)
          ? r.sql
              .map((trip, i) => `\n  #${i + 1} ${trip.map((q) => q.slice(0, 160)).join("\n     ")}`)
              .join("")
          : "",
      );
  expect(results.length).toBeGreaterThan(100);
  expect(over.map((r) => `${r.trips} ${r.who} ${r.path}`)).toEqual([]);
});

test("both callers' lists and objects answer as the local path answers them (hiding asked after the read)", async () => {
  // related objects the caller may not view keep only their id: a site's tenant, a widget's site
  // and one of its devices, a user's group, a change record's snapshot of that site
  const get = async (path: string) => (await t.json("GET", path, { token: reader })).body;
  const [, s2, s3] = ids.site!;
  expect((await get(`/api/dcim/sites/${s2}/`)).tenant).toEqual({ id: ids.tenant![2] });
  const widgets = (await get(`${CO}/widget/?ordering=id`)).results;
  expect(widgets[0].devices).toContainEqual({ id: ids.device![3] });
  expect(widgets[1].site).toEqual({ id: s3 });
  expect((await get(`/api/users/users/${ids.user![0]}/`)).groups).toContainEqual({
    id: ids.group![1],
  });
  const changes = (
    await get(`/api/core/object-changes/?changed_object_id=${s2}&changed_object_type=dcim.site`)
  ).results;
  expect(changes[0].postchange_data.tenant).toEqual({ id: ids.tenant![2] });
  // a type the caller may not view is left out of the schema export, a removed one's entry too
  const slugsOf = (doc: { types: Array<{ slug: string }> }) => doc.types.map((x) => x.slug);
  expect(slugsOf(await get(`${CO}/schema/export/`))).toEqual(["widget", "scrap"]);
  expect(slugsOf((await t.json("GET", `${CO}/schema/export/`)).body)).toContain("vault");
  const trash = (await get(`${CO}/schema/trash/`)).results;
  const entryOf = (r: { kind: string; custom_object_type: { slug: string } }) => [
    r.kind,
    r.custom_object_type.slug,
  ];
  expect(trash.map(entryOf)).toEqual([["field", "scrap"]]);
  // the same file through a local app: no one read, each related model's view asked after it
  const local = await anotherInstance(`file:${remote.path}`);
  try {
    const modelPaths = results
      .filter((r) => r.method === "GET" && r.status === 200)
      .map((r) => ({ path: r.path, token: r.who === "admin" ? t.admin : reader }))
      .filter(({ path }) =>
        /^\/api\/(?!status\/|schema\/|docs\/)[a-z-]+\/[a-z-]+\/[^/]*/.test(path),
      );
    expect(modelPaths.length).toBeGreaterThan(200);
    for (const { path, token } of modelPaths) {
      const res = await local.app.request(BASE + path, {
        headers: { authorization: `Token ${token}`, accept: "application/json" },
      });
      const there = await res.text();
      const here = await (await t.req("GET", path, { token })).text();
      expect({ path, body: JSON.parse(here) }).toEqual({ path, body: JSON.parse(there) });
    }
    // GraphQL, whose relations load in one read each: as the local path answers, for both callers
    for (const [who, token] of [
      ["admin", t.admin],
      ["reader", reader],
    ] as const)
      for (const q of GRAPHQL) {
        const query = q.replace("SITE", String(ids.site![1]));
        const ask = (app: TestApp["app"]) =>
          app.request(`${BASE}/graphql/`, {
            method: "POST",
            headers: { authorization: `Token ${token}`, "content-type": "application/json" },
            body: JSON.stringify({ query }),
          });
        const there = await (await ask(local.app)).json();
        const here = await (await ask(t.app)).json();
        expect({ who, query, here }).toEqual({ who, query, here: there });
        expect(JSON.stringify(here)).not.toContain('"errors"');
      }
  } finally {
    await local.close();
  }
});
