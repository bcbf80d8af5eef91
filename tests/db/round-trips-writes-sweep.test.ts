/**
 * Every write the app serves, counted on a remote database (issue 28 item 2): for each model with
 * write routes in the OpenAPI document (POST on its list, PATCH/PUT/DELETE on an object, with
 * If-Match too, bulk PATCH/PUT/DELETE on its list, add_tags / remove_tags where tagged) and a
 * plain custom object type's objects, with bulk creates of 100, for a superuser and for a token whose add/change/delete/view are constrained (related
 * objects partly hidden from its view): ≤ 2 round trips each with warm caches (one batch of
 * reads, one atomic batch of writes), and each answer as a local app on the same file answers a
 * GET of what was written.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";
import { anotherInstance } from "../helpers/instances";
import { userWith } from "../helpers/grants";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { settleBeforeCounting } from "../helpers/settle";
import { CO } from "../custom-objects/fixtures";
import { type SeedIds, seedSweep } from "./sweep-seed";

let remote: RemoteDb;
let t: TestApp;
let local: Awaited<ReturnType<typeof anotherInstance>>;
/** The constrained caller's token. */
let writer: string;
const ids: SeedIds = {};

type Who = "admin" | "writer";
type Body = Record<string, unknown>;
const tokenOf = (who: Who) => (who === "admin" ? t.admin : writer);

let serial = 0;
const next = () => ++serial;

/**
 * A model's writes: what a create sends, an object both callers may change whose related objects
 * are partly hidden from the constrained caller (`target`), and what a PATCH and a PUT of it send.
 */
interface Spec {
  list: string;
  /** The constrained caller's add/change/delete/view: what every written object satisfies. */
  label: string;
  allowed: Body;
  create: (n: number) => Body;
  /** Made by the superuser before the sweep; its PATCH and PUT keep it within `allowed`. */
  target: Body;
  patch: (n: number) => Body;
  put: (n: number) => Body;
  /** Whether the caller makes its own targets and victims (tokens are the caller's). */
  own?: boolean;
  /** A bulk create of 100 is swept too. */
  bulk100?: boolean;
  /** Tagged: NetBox 4.6's `add_tags` / `remove_tags` are swept too. */
  tagged?: boolean;
}

/** Every model with write routes, and the plain custom object type. */
function specs(): Record<string, Spec> {
  const [t1, , t3] = ids.tenant!;
  const [s1, , s3] = ids.site!;
  const [d1, , , d4] = ids.device!;
  const [alpha, , gamma] = ids.tag!;
  const [netops, auditors] = ids.group! as [number, number];
  const og = ids.ownergroup![0]!;
  const hook = ids.webhook![0]!;
  const seenHook = ids.seenhook![0]!;
  const d = (n: number) => ({ description: `d${n}` });
  return {
    tenant: {
      tagged: true,
      list: "/api/tenancy/tenants/",
      label: "tenancy.tenant",
      allowed: { slug__isw: "w-" },
      create: (n) => ({ name: `w-tenant ${n}`, slug: `w-tenant-${n}`, tags: [alpha] }),
      target: { name: "w-tenant target", slug: "w-tenant-target", tags: [alpha, gamma] },
      patch: d,
      put: (n) => ({ name: "w-tenant target", slug: "w-tenant-target", ...d(n) }),
    },
    site: {
      tagged: true,
      list: "/api/dcim/sites/",
      label: "dcim.site",
      allowed: { status: "active" },
      create: (n) => ({
        name: `w-site ${n}`,
        slug: `w-site-${n}`,
        status: "active",
        tenant: t1,
        tags: [alpha],
      }),
      target: { name: "w-site target", slug: "w-site-target", tenant: t3, tags: [alpha, gamma] },
      patch: d,
      put: (n) => ({ name: "w-site target", slug: "w-site-target", status: "active", ...d(n) }),
      bulk100: true,
    },
    device: {
      tagged: true,
      list: "/api/dcim/devices/",
      label: "dcim.device",
      allowed: { name__isw: "dev-" },
      create: (n) => ({ name: `dev-w${n}`, site: s1, tenant: t1, status: "active", tags: [alpha] }),
      target: { name: "dev-target", site: s3, tenant: t3, status: "active", tags: [alpha, gamma] },
      patch: d,
      put: (n) => ({ name: "dev-target", site: s3, ...d(n) }),
      bulk100: true,
    },
    prefix: {
      tagged: true,
      list: "/api/ipam/prefixes/",
      label: "ipam.prefix",
      allowed: { status: "active" },
      create: (n) => ({ prefix: `172.16.${n % 250}.0/24`, site: s1, tenant: t1, status: "active" }),
      target: { prefix: "10.200.0.0/16", site: s3, tenant: t3, status: "active", tags: [gamma] },
      patch: d,
      put: (n) => ({ prefix: "10.200.0.0/16", ...d(n) }),
    },
    ipaddress: {
      tagged: true,
      list: "/api/ipam/ip-addresses/",
      label: "ipam.ipaddress",
      allowed: { status: "active" },
      create: (n) => ({
        address: `10.50.${(n >> 8) & 255}.${n & 255}/24`,
        tenant: t1,
        status: "active",
        tags: [alpha],
      }),
      target: { address: "10.60.0.1/24", tenant: t3, status: "active", tags: [alpha, gamma] },
      patch: d,
      put: (n) => ({ address: "10.60.0.1/24", ...d(n) }),
      bulk100: true,
    },
    tag: {
      list: "/api/extras/tags/",
      label: "extras.tag",
      allowed: { slug__isw: "w-" },
      create: (n) => ({ name: `w-tag ${n}`, slug: `w-tag-${n}`, object_types: ["dcim.site"] }),
      target: { name: "w-tag target", slug: "w-tag-target", object_types: ["dcim.site"] },
      patch: d,
      put: (n) => ({ name: "w-tag target", slug: "w-tag-target", ...d(n) }),
    },
    webhook: {
      list: "/api/extras/webhooks/",
      label: "extras.webhook",
      allowed: { name__isw: "w-" },
      create: (n) => ({ name: `w-hook ${n}`, payload_url: "https://example.com/w" }),
      target: { name: "w-hook target", payload_url: "https://example.com/t" },
      patch: d,
      put: (n) => ({ name: "w-hook target", payload_url: "https://example.com/t", ...d(n) }),
    },
    eventrule: {
      list: "/api/extras/event-rules/",
      label: "extras.eventrule",
      allowed: { name__isw: "w-" },
      // a new rule names a webhook its writer may view (decision 0194); the target holds one
      // the constrained caller may not view, and its PUT sends it back
      create: (n) => ({ name: `w-rule ${n}`, ...rule(seenHook) }),
      target: { name: "w-rule target", ...rule(hook) },
      patch: d,
      put: (n) => ({ name: "w-rule target", ...rule(hook), ...d(n) }),
    },
    customfieldchoiceset: {
      list: "/api/extras/custom-field-choice-sets/",
      label: "extras.customfieldchoiceset",
      allowed: { name__isw: "w-" },
      create: (n) => ({ name: `w-cs ${n}`, extra_choices: [["a", "A"]] }),
      target: { name: "w-cs target", extra_choices: [["a", "A"]] },
      patch: d,
      put: (n) => ({ name: "w-cs target", extra_choices: [["a", "A"]], ...d(n) }),
    },
    group: {
      list: "/api/users/groups/",
      label: "users.group",
      allowed: { name__isw: "w-" },
      create: (n) => ({ name: `w-group ${n}` }),
      target: { name: "w-group target" },
      patch: d,
      put: (n) => ({ name: "w-group target", ...d(n) }),
    },
    user: {
      list: "/api/users/users/",
      label: "users.user",
      allowed: { username__isw: "w-" },
      create: (n) => ({ username: `w-user${n}` }),
      target: { username: "w-user-target", groups: [netops, auditors] },
      patch: (n) => ({ first_name: `f${n}` }),
      put: (n) => ({ username: "w-user-target", first_name: `f${n}` }),
    },
    owner: {
      list: "/api/users/owners/",
      label: "users.owner",
      allowed: { name__isw: "w-" },
      create: (n) => ({ name: `w-owner ${n}`, user_groups: [netops] }),
      target: { name: "w-owner target", group: og, user_groups: [netops, auditors] },
      patch: d,
      put: (n) => ({ name: "w-owner target", ...d(n) }),
    },
    ownergroup: {
      list: "/api/users/owner-groups/",
      label: "users.ownergroup",
      allowed: { name__isw: "w-" },
      create: (n) => ({ name: `w-og ${n}` }),
      target: { name: "w-og target" },
      patch: d,
      put: (n) => ({ name: "w-og target", ...d(n) }),
    },
    objectpermission: {
      list: "/api/users/permissions/",
      label: "users.objectpermission",
      allowed: { name__isw: "w-" },
      create: (n) => ({ name: `w-perm ${n}`, ...permission([]) }),
      target: { name: "w-perm target", ...permission([]) },
      patch: d,
      put: (n) => ({
        name: "w-perm target",
        actions: ["view"],
        object_types: ["dcim.site"],
        ...d(n),
      }),
    },
    token: {
      list: "/api/users/tokens/",
      label: "users.token",
      allowed: { description__isw: "w-" },
      create: (n) => ({ description: `w-token ${n}` }),
      target: { description: "w-token target" },
      patch: (n) => ({ description: `w-token ${n}` }),
      put: (n) => ({ description: `w-token ${n}` }),
      own: true,
    },
    customobjecttype: {
      list: `${CO}/custom-object-types/`,
      label: "custom_objects.customobjecttype",
      allowed: { slug__isw: "w_" },
      create: (n) => ({ name: `w_kind_${n}`, slug: `w_kind_${n}` }),
      target: { name: "w_target", slug: "w_target" },
      patch: d,
      put: (n) => ({ name: "w_target", slug: "w_target", ...d(n) }),
    },
    customobjecttypefield: {
      list: `${CO}/custom-object-type-fields/`,
      label: "custom_objects.customobjecttypefield",
      allowed: { name__isw: "w_" },
      create: (n) => ({ custom_object_type: ids.wtype![0], name: `w_f${n}`, type: "text" }),
      target: { custom_object_type: ids.customobjecttype![0], name: "w_note", type: "text" },
      patch: d,
      put: (n) => ({
        custom_object_type: ids.customobjecttype![0],
        name: "w_note",
        type: "text",
        ...d(n),
      }),
    },
    widget: {
      tagged: true,
      list: `${CO}/widget/`,
      label: "custom_objects.widget",
      allowed: { size__lte: 2 },
      create: (n) => ({
        title: `w widget ${n}`,
        size: 1,
        colour: "red",
        site: s1,
        devices: [d1],
        tags: [alpha],
      }),
      target: { title: "w widget target", size: 2, site: s3, devices: [d1, d4], tags: [gamma] },
      patch: (n) => ({ colour: n % 2 ? "red" : "green" }),
      put: (n) => ({ title: "w widget target", size: 2, colour: n % 2 ? "red" : "green" }),
      bulk100: true,
    },
  };
}

/** An event rule's fields, its action the webhook `hook`. */
const rule = (hook: number) => ({
  object_types: ["dcim.site"],
  event_types: ["object_created"],
  action_type: "webhook",
  action_object_type: "extras.webhook",
  action_object_id: hook,
});
/** A permission's fields, given to `groups`. */
const permission = (groups: number[]) => ({
  // giving a permission to a group takes changing the group: the constrained caller gives none
  actions: ["view"],
  object_types: ["dcim.site"],
  groups,
});

/** The constrained caller: add/change/delete/view of every model within `allowed`, views narrower. */
async function constrainedWriter(all: Record<string, Spec>) {
  const views: Array<[string[], string, unknown]> = [
    [["view"], "tenancy.tenant", { slug__in: ["tenant-1", "tenant-2"] }],
    [["view"], "extras.tag", { slug__in: ["alpha", "beta"] }],
    [["view"], "users.group", { name: "netops" }],
    [["view"], "custom_objects.customobjecttype", { slug__in: ["widget"] }],
    [["view"], "core.objecttype", { id__gte: 1 }],
    [["view"], "core.objectchange", { id__gte: 1 }],
  ];
  const writes = Object.values(all).map(
    (s) => [["add", "change", "delete", "view"], s.label, s.allowed] as [string[], string, unknown],
  );
  return await userWith(t, "sweep-writer", [...views, ...writes]);
}

/** POSTs `body` to `list` as `who`, answering the new object's id. */
async function made(who: Who, list: string, body: Body): Promise<number> {
  const r = await t.json("POST", list, { body, token: tokenOf(who) });
  if (r.status !== 201) throw new Error(`${who} ${list}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.id;
}

const targets: Record<string, Partial<Record<Who, number>>> = {};

beforeAll(async () => {
  remote = await startRemoteDb("round-trips-writes-sweep");
  t = await makeTestApp({ DATABASE_URL: remote.url });
  await seedSweep(t, ids);
  ids.wtype = [
    await made("admin", `${CO}/custom-object-types/`, { name: "w_fields", slug: "w_fields" }),
  ];
  ids.seenhook = [
    await made("admin", "/api/extras/webhooks/", {
      name: "w-hook seen",
      payload_url: "https://example.com/seen",
    }),
  ];
  const all = specs();
  writer = (await constrainedWriter(all)).token;
  for (const [key, s] of Object.entries(all)) {
    const admin = await made("admin", s.list, s.target);
    // a token is its caller's: the constrained caller changes one of its own
    targets[key] = { admin, writer: s.own ? await made("writer", s.list, s.target) : admin };
  }
  local = await anotherInstance(`file:${remote.path}`);
});
afterAll(async () => {
  await local?.close();
  await t.close();
  await remote.stop();
});

interface Measured {
  who: Who;
  name: string;
  status: number;
  trips: number;
  sql: string[][];
}

/** The deferred search-index flush done, and {who}'s token use recently recorded. */
const settle = (who: Who) =>
  settleBeforeCounting(
    t.app,
    () => t.req("GET", "/api/status/", { token: tokenOf(who) }),
    who === "admin" ? "admin" : "sweep-writer",
  );

/** A write as sent: its path, body and headers (`If-Match`). */
interface Sent {
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * Round trips of one write after a warm run of the same write (each with its own body from
 * `send`), with the status it must answer; the answer is kept for the comparison.
 */
async function measure(
  who: Who,
  name: string,
  method: string,
  send: () => Promise<Sent>,
  status: number,
): Promise<Measured & { answer: unknown; path: string }> {
  const token = tokenOf(who);
  const warm = await send();
  const w = await t.json(method, warm.path, { token, body: warm.body, headers: warm.headers });
  expect({ who, name, status: w.status, body: w.status === status ? null : w.body }).toEqual({
    who,
    name,
    status,
    body: null,
  });
  const measured = await send();
  await settle(who);
  remote.proxy.reset();
  const r = await t.json(method, measured.path, {
    token,
    body: measured.body,
    headers: measured.headers,
  });
  const trips = remote.proxy.count;
  const sqls = remote.proxy.log.map((l) =>
    l.sql.filter((q) => !/^(BEGIN|COMMIT|ROLLBACK)\b/.test(q)),
  );
  expect({ who, name, status: r.status }).toEqual({ who, name, status });
  return { who, name, status: r.status, trips, sql: sqls, answer: r.body, path: measured.path };
}

/** The objects a write answered: none for a delete, a revert's object, the list or the one. */
function objectsOf(r: { status: number; name: string; answer: unknown }): Body[] {
  if (r.status === 204) return [];
  if (/revert/.test(r.name)) return [(r.answer as { object: Body }).object];
  return (Array.isArray(r.answer) ? r.answer : [r.answer]) as Body[];
}

/** What a local app on the same file answers `who` for a GET of `path`, right after the write. */
async function localAnswer(who: Who, path: string): Promise<unknown> {
  const res = await local.app.request(BASE + path, {
    headers: { authorization: `Token ${tokenOf(who)}`, accept: "application/json" },
  });
  return res.status === 200 ? await res.json() : { status: res.status };
}

/** Each write measured, with what a local app answered a GET of each object it wrote. */
const results: Array<Measured & { answer: unknown; path: string; list: string; there: unknown[] }> =
  [];

/** Every write of `spec` as `who`: create, PATCH, PUT, DELETE, bulk PATCH/PUT/DELETE, bulk 100. */
async function sweepModel(key: string, s: Spec, who: Who) {
  const target = targets[key]![who]!;
  const victim = async () => made(s.own ? who : "admin", s.list, s.create(next()));
  const run = async (name: string, method: string, send: () => Promise<Sent>, status = 200) => {
    const m = await measure(who, `${key} ${name}`, method, send, status);
    const there = [];
    for (const one of objectsOf(m)) there.push(await localAnswer(who, `${s.list}${one.id}/`));
    results.push({ ...m, list: s.list, there });
  };
  await run("create", "POST", async () => ({ path: s.list, body: s.create(next()) }), 201);
  await run("PATCH", "PATCH", async () => ({ path: `${s.list}${target}/`, body: s.patch(next()) }));
  await run("PUT", "PUT", async () => ({ path: `${s.list}${target}/`, body: s.put(next()) }));
  await run("DELETE", "DELETE", async () => ({ path: `${s.list}${await victim()}/` }), 204);
  await run("bulk PATCH", "PATCH", async () => ({
    path: s.list,
    body: [
      { id: target, ...s.patch(next()) },
      { id: await victim(), ...s.patch(next()) },
    ],
  }));
  await run("bulk PUT", "PUT", async () => ({
    path: s.list,
    body: [{ id: target, ...s.put(next()) }],
  }));
  await run(
    "bulk DELETE",
    "DELETE",
    async () => ({ path: s.list, body: [{ id: await victim() }, { id: await victim() }] }),
    204,
  );
  // a client that sends the version it read (NetBox 4.6's ETag): the condition rides in the batch
  const etagOf = async (id: number) => {
    const read = await t.req("GET", `${s.list}${id}/`, { token: t.admin });
    await read.body?.cancel();
    const etag = read.headers.get("etag");
    expect({ key, etag: !!etag }).toEqual({ key, etag: true });
    return { "if-match": etag! };
  };
  await run("PATCH with If-Match", "PATCH", async () => ({
    path: `${s.list}${target}/`,
    body: s.patch(next()),
    headers: await etagOf(target),
  }));
  await run(
    "DELETE with If-Match",
    "DELETE",
    async () => {
      const id = await victim();
      return { path: `${s.list}${id}/`, headers: await etagOf(id) };
    },
    204,
  );
  if (s.tagged) {
    // a revert from the change log of the caller's own last change of the target
    await run("revert of an update", "POST", async () => {
      const patched = await t.json("PATCH", `${s.list}${target}/`, {
        token: tokenOf(who),
        body: s.patch(next()),
      });
      expect(patched.status).toBe(200);
      const [app, model] = s.label.split(".");
      const last = await t.json(
        "GET",
        `/api/core/object-changes/?changed_object_type=${app}.${model}&changed_object_id=${target}&ordering=-id&limit=1`,
      );
      return { path: `/api/core/object-changes/${last.body.results[0].id}/revert/` };
    });
    // alternately adds and removes a tag the caller views, beside one it does not (the target's)
    const edit = (n: number) => (n % 2 ? { add_tags: ["alpha"] } : { remove_tags: ["alpha"] });
    await run("tag edits PATCH", "PATCH", async () => ({
      path: `${s.list}${target}/`,
      body: edit(next()),
    }));
    await run(
      "create with add_tags",
      "POST",
      async () => {
        const { tags: _tags, ...body } = s.create(next());
        return { path: s.list, body: { ...body, add_tags: ["alpha"] } };
      },
      201,
    );
    await run("bulk tag edits PATCH", "PATCH", async () => ({
      path: s.list,
      body: [{ id: target, ...edit(next()) }],
    }));
  }
  if (s.bulk100)
    await run(
      "bulk create of 100",
      "POST",
      async () => ({ path: s.list, body: Array.from({ length: 100 }, () => s.create(next())) }),
      201,
    );
}

test("every model with write routes in the document is swept", async () => {
  const doc = (await t.json("GET", "/api/schema/?format=json")).body;
  const paths = doc.paths as Record<string, Record<string, unknown>>;
  const lists = Object.entries(paths)
    .filter(([p, ops]) => ops.post && paths[`${p}{id}/`]?.patch)
    .map(([p]) => p);
  const swept = Object.values(specs()).map((s) => s.list);
  // every custom object type's objects are served by the same routes: the widget's stand for them
  const objectRoutes = (p: string) => p.startsWith(CO) && !/\/custom-object-type/.test(p);
  expect(lists.filter((p) => !swept.includes(p) && !objectRoutes(p))).toEqual([]);
  expect(lists).toContain(`${CO}/widget/`);
  for (const [key, s] of Object.entries(specs()))
    for (const who of ["admin", "writer"] as const) await sweepModel(key, s, who);
});

/**
 * Token create, pinned at ≤ 3 in round-trips.test.ts (the caller's token read first, decision
 * 0089), measures 2 here. A constrained caller's revert of an update from the change log (not a
 * model's route, swept beside them) is 2 as well: whether the caller may view the change record,
 * and view and change its object, ride in the plan's one read (decision 0168; it was 7).
 */
test("each write is ≤ 2 round trips warm: one read, one atomic batch", () => {
  const name = (r: Measured) => `${r.who} ${r.name}`;
  const over = results.filter((r) => r.trips > 2);
  if (process.env.ROUND_TRIPS_LOG)
    for (const r of results)
      console.log(
        r.trips > 2 ? "OVER" : "ok  ",
        r.trips,
        name(r),
        r.trips > 2
          ? r.sql
              .map((trip, i) => `\n  #${i + 1} ${trip.map((q) => q.slice(0, 200)).join("\n     ")}`)
              .join("")
          : "",
      );
  expect(over.map((r) => `${r.trips} ${name(r)}`)).toEqual([]);
  // the constrained caller's reverts were measured (the writes swept for it)
  const reverts = results.filter((r) => r.who === "writer" && /revert/.test(r.name));
  expect(reverts.length).toBe(6);
});

test("each write answers what a local app on the same file answers a GET of it, for both callers", async () => {
  let compared = 0;
  // a new token's answer holds its key, which no later GET shows
  const keyless = (r: { name: string }, one: Body) =>
    /token create/.test(r.name) ? { ...one, key: undefined, token: undefined } : one;
  for (const r of results) {
    const written = objectsOf(r);
    const write = `${r.who} ${r.name}`;
    // no exception: a constrained caller's new token hides its user as a GET does (decision 0170)
    expect({ write, body: written.map((one) => keyless(r, one)) }).toEqual({
      write,
      body: (r.there as Body[]).map((one) => keyless(r, one)),
    });
    compared += written.length;
  }
  expect(compared).toBeGreaterThan(100);
  // the constrained caller's answers hide what it may not view: the target site's tenant
  const site = results.find((r) => r.who === "writer" && r.name === "site PATCH")!.answer as Body;
  expect(site.tenant).toEqual({ id: ids.tenant![2] });
});
