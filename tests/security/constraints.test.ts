/**
 * Security: object permission constraints (NetBox semantics) hold on every path — list,
 * detail, single and bulk writes, custom object instances, linked-objects and nested related
 * objects. An object = AND of lookups, a list = OR, `$user` is the caller's id; a write must
 * match before and after the change.
 */
import { userWith } from "../helpers/grants";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
const ids: Record<string, number> = {};

/** A user with the given permissions; `[actions, label, constraints]`. */
const constrainedUser = (username: string, grants: Array<[string[], string, unknown]>) =>
  userWith(t, username, grants);

beforeAll(async () => {
  t = await makeTestApp();
  const cot = await makeCot(t, "sec_a");
  await addField(t, cot.id, { name: "name", type: "text", primary: true });
  await addField(t, cot.id, { name: "size", type: "integer" });
  await addField(t, cot.id, { name: "owner", type: "integer" });
  for (let i = 0; i < 5; i++)
    ids[`a${i}`] = (await create(t, "sec_a", { name: `a${i}`, size: i * 10 })).id;
  for (const [name, slug] of [
    ["HQ", "hq"],
    ["Lab", "lab"],
  ] as const) {
    ids[slug] = (await t.json("POST", "/api/dcim/sites/", { body: { name, slug } })).body.id;
  }
  for (const [name, site] of [
    ["hq-sw1", "hq"],
    ["hq-sw2", "hq"],
    ["lab-sw1", "lab"],
  ] as const) {
    ids[name] = (
      await t.json("POST", "/api/dcim/devices/", { body: { name, site: ids[site] } })
    ).body.id;
  }
});
afterAll(() => t.close());

const names = (body: any) => (body.results as { display: string }[]).map((r) => r.display).sort();

describe("the report's case: view, change and delete sec_a where name = a0", () => {
  let u: string;
  beforeAll(async () => {
    u = (
      await constrainedUser("alice", [
        [["view", "change", "delete"], "custom_objects.sec_a", { name: "a0" }],
      ])
    ).token;
  });

  test("the list shows only matching rows, and filters cannot widen it", async () => {
    const r = await t.json("GET", `${CO}/sec_a/`, { token: u });
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(1);
    expect(names(r.body)).toEqual(["a0"]);
    expect((await t.json("GET", `${CO}/sec_a/?name=a1`, { token: u })).body.count).toBe(0);
    expect((await t.json("GET", `${CO}/sec_a/?q=a`, { token: u })).body.count).toBe(1);
  });

  test("a row outside the constraint is not found on detail", async () => {
    expect((await t.json("GET", `${CO}/sec_a/${ids.a1}/`, { token: u })).status).toBe(404);
    expect((await t.json("GET", `${CO}/sec_a/${ids.a0}/`, { token: u })).status).toBe(200);
  });

  test("PATCH, PUT and bulk PATCH of a row outside the constraint change nothing", async () => {
    expect(
      (await t.json("PATCH", `${CO}/sec_a/${ids.a1}/`, { token: u, body: { size: 999 } })).status,
    ).toBe(404);
    expect(
      (await t.json("PUT", `${CO}/sec_a/${ids.a1}/`, { token: u, body: { name: "a1", size: 999 } }))
        .status,
    ).toBe(404);
    const bulk = await t.json("PATCH", `${CO}/sec_a/`, {
      token: u,
      body: [
        { id: ids.a0, size: 1 },
        { id: ids.a1, size: 999 },
      ],
    });
    // a list naming a row outside the view: NetBox 4.7's 400, as for a missing id (0200)
    expect(bulk.status).toBe(400);
    expect(bulk.body.errors).toEqual([
      { id: ids.a1, errors: { id: [`Object with ID ${ids.a1} does not exist`] } },
    ]);
    const a0 = await t.json("GET", `${CO}/sec_a/${ids.a0}/`);
    const a1 = await t.json("GET", `${CO}/sec_a/${ids.a1}/`);
    expect(a0.body.size).toBe(0); // all-or-nothing: the allowed item was rolled back too
    expect(a1.body.size).toBe(10);
  });

  test("a change that would move the row outside the constraint is 403 and not written", async () => {
    const r = await t.json("PATCH", `${CO}/sec_a/${ids.a0}/`, {
      token: u,
      body: { name: "renamed" },
    });
    expect(r.status).toBe(403);
    expect((await t.json("GET", `${CO}/sec_a/${ids.a0}/`)).body.name).toBe("a0");
    // a change that keeps it inside is fine
    expect(
      (await t.json("PATCH", `${CO}/sec_a/${ids.a0}/`, { token: u, body: { size: 5 } })).status,
    ).toBe(200);
  });

  test("bulk DELETE and DELETE of a row outside the constraint delete nothing", async () => {
    const bulk = await t.req("DELETE", `${CO}/sec_a/`, { token: u, body: [{ id: ids.a2 }] });
    expect(bulk.status).toBe(400); // as for a missing id (0200)
    expect((await t.req("DELETE", `${CO}/sec_a/${ids.a3}/`, { token: u })).status).toBe(404);
    expect((await t.json("GET", `${CO}/sec_a/`)).body.count).toBe(5);
  });
});

describe("constraint semantics", () => {
  test("a list of objects is an OR; an object is an AND", async () => {
    const or = (
      await constrainedUser("or", [
        [["view"], "custom_objects.sec_a", [{ name: "a1" }, { name: "a2" }]],
      ])
    ).token;
    expect(names((await t.json("GET", `${CO}/sec_a/`, { token: or })).body)).toEqual(["a1", "a2"]);
    const and = (
      await constrainedUser("and", [
        [["view"], "custom_objects.sec_a", { name__startswith: "a", size__gte: 20, size__lt: 40 }],
      ])
    ).token;
    expect(names((await t.json("GET", `${CO}/sec_a/`, { token: and })).body)).toEqual(["a2", "a3"]);
  });

  test("Django lookups: in, icontains, isnull, iexact; NetBox spellings too", async () => {
    const cases: Array<[unknown, string[]]> = [
      [{ name__in: ["a3", "a4", "zz"] }, ["a3", "a4"]],
      [{ name__icontains: "A1" }, ["a1"]],
      [{ owner__isnull: true, size__gt: 30 }, ["a4"]],
      [{ name__iexact: "A2" }, ["a2"]],
      [{ name__ic: "4" }, ["a4"]],
      [{ id: ids.a1 }, ["a1"]],
    ];
    for (const [i, [constraints, expected]] of cases.entries()) {
      const u = (await constrainedUser(`lk${i}`, [[["view"], "custom_objects.sec_a", constraints]]))
        .token;
      expect(names((await t.json("GET", `${CO}/sec_a/`, { token: u })).body)).toEqual(expected);
    }
  });

  test("an unknown field or an unusable value matches nothing (never everything)", async () => {
    for (const [i, constraints] of [
      { nosuchfield: 1 },
      { size: "not-a-number" },
      { name__in: "a1" },
      [1, 2],
    ].entries()) {
      const u = (
        await constrainedUser(`bad${i}`, [[["view"], "custom_objects.sec_a", constraints]])
      ).token;
      const r = await t.json("GET", `${CO}/sec_a/`, { token: u });
      expect(r.status).toBe(200);
      expect(r.body.count).toBe(0);
    }
  });

  test("$user is the caller's id", async () => {
    const { token, id } = await constrainedUser("owner", [
      [["view", "add", "change"], "custom_objects.sec_a", { owner: "$user" }],
    ]);
    await t.json("PATCH", `${CO}/sec_a/${ids.a4}/`, { body: { owner: id } });
    expect(names((await t.json("GET", `${CO}/sec_a/`, { token })).body)).toEqual(["a4"]);
    // creating an object owned by someone else is refused; owned by oneself is fine
    const other = await t.json("POST", `${CO}/sec_a/`, {
      token,
      body: { name: "theirs", owner: id + 100 },
    });
    expect(other.status).toBe(403);
    const mine = await t.json("POST", `${CO}/sec_a/`, { token, body: { name: "mine", owner: id } });
    expect(mine.status).toBe(201);
    expect((await t.json("GET", `${CO}/sec_a/?name=theirs`)).body.count).toBe(0);
    // a bulk create with one bad item writes nothing
    const bulk = await t.json("POST", `${CO}/sec_a/`, {
      token,
      body: [
        { name: "ok2", owner: id },
        { name: "bad2", owner: 0 },
      ],
    });
    expect(bulk.status).toBe(403);
    expect((await t.json("GET", `${CO}/sec_a/?name=ok2`)).body.count).toBe(0);
    await t.req("DELETE", `${CO}/sec_a/${mine.body.id}/`);
  });

  test("an unconstrained grant of the same action lifts the constraint", async () => {
    const u = (
      await constrainedUser("both", [
        [["view"], "custom_objects.sec_a", { name: "a0" }],
        [["view"], "custom_objects.sec_a", null],
      ])
    ).token;
    expect((await t.json("GET", `${CO}/sec_a/`, { token: u })).body.count).toBe(5);
  });

  test("constraints granted through a group apply too", async () => {
    const u = await createUser(t.deps.db.orm, { username: "grouped" });
    const g = await t.json("POST", "/api/users/groups/", { body: { name: "net" } });
    await t.json("PATCH", `/api/users/users/${u.id}/`, { body: { groups: [g.body.id] } });
    const p = await t.json("POST", "/api/users/permissions/", {
      body: {
        name: "group-grant",
        actions: ["view"],
        object_types: ["dcim.device"],
        groups: [g.body.id],
        constraints: { name__startswith: "lab" },
      },
    });
    expect(p.status).toBe(201);
    const token = (await issueToken(t.deps.db.orm, { username: "grouped" })).key;
    expect(names((await t.json("GET", "/api/dcim/devices/", { token })).body)).toEqual(["lab-sw1"]);
  });
});

describe("host models, related lookups and nested objects", () => {
  test("a constraint follows a foreign key (site__slug) and the site id (site)", async () => {
    const bySlug = (
      await constrainedUser("hqops", [
        [["view", "change"], "dcim.device", { site__slug: "hq" }],
        [["view"], "dcim.site", null],
      ])
    ).token;
    expect(names((await t.json("GET", "/api/dcim/devices/", { token: bySlug })).body)).toEqual([
      "hq-sw1",
      "hq-sw2",
    ]);
    // moving a device to another (visible) site takes it outside the constraint: 403, not
    // written (a site they may not view would be a 400 like an unknown id: references.test.ts)
    const move = await t.json("PATCH", `/api/dcim/devices/${ids["hq-sw1"]}/`, {
      token: bySlug,
      body: { site: ids.lab },
    });
    expect(move.status).toBe(403);
    expect((await t.json("GET", `/api/dcim/devices/${ids["hq-sw1"]}/`)).body.site.id).toBe(ids.hq);
    const byId = (await constrainedUser("labops", [[["view"], "dcim.device", { site: ids.lab }]]))
      .token;
    expect(names((await t.json("GET", "/api/dcim/devices/", { token: byId })).body)).toEqual([
      "lab-sw1",
    ]);
  });

  test("a nested related object the caller may not view keeps only its id", async () => {
    // may view every device, but only the HQ site
    const u = (
      await constrainedUser("devview", [
        [["view"], "dcim.device", null],
        [["view"], "dcim.site", { slug: "hq" }],
      ])
    ).token;
    const list = await t.json("GET", "/api/dcim/devices/?ordering=name", { token: u });
    const bySite = Object.fromEntries((list.body.results as any[]).map((d) => [d.name, d.site]));
    expect(bySite["hq-sw1"].display).toBe("HQ");
    expect(bySite["lab-sw1"]).toEqual({ id: ids.lab });
    expect(JSON.stringify(list.body)).not.toContain("Lab");
    const one = await t.json("GET", `/api/dcim/devices/${ids["lab-sw1"]}/`, { token: u });
    expect(one.body.site.display).toBeUndefined();
    // no view permission on sites at all: every nested site is reduced
    const none = (await constrainedUser("nosites", [[["view"], "dcim.device", null]])).token;
    const all = await t.json("GET", "/api/dcim/devices/", { token: none });
    for (const d of all.body.results) expect(Object.keys(d.site)).toEqual(["id"]);
  });
});

describe("custom objects pointing at host objects: linked-objects and nested forms", () => {
  let viewer: string;
  beforeAll(async () => {
    const cot = await makeCot(t, "sec_link");
    await addField(t, cot.id, { name: "label", type: "text", primary: true });
    await addField(t, cot.id, { name: "site", type: "object", related_object_type: "dcim.site" });
    await addField(t, cot.id, {
      name: "peers",
      type: "multiobject",
      related_object_type: "dcim.device",
    });
    await create(t, "sec_link", {
      label: "l-hq-1",
      site: ids.hq,
      peers: [ids["hq-sw1"], ids["lab-sw1"]],
    });
    await create(t, "sec_link", { label: "l-hq-2", site: ids.hq, peers: [ids["hq-sw2"]] });
    await create(t, "sec_link", { label: "l-lab", site: ids.lab, peers: [ids["lab-sw1"]] });
    viewer = (
      await constrainedUser("linkview", [
        [["view"], "custom_objects.sec_link", { label__startswith: "l-hq" }],
        [["view"], "dcim.site", { slug: "hq" }],
        [["view"], "dcim.device", { name__startswith: "hq" }],
      ])
    ).token;
  });

  test("linked-objects counts and lists only linking objects the caller may view", async () => {
    const r = await t.json(
      "GET",
      `${CO}/linked-objects/?object_type=dcim.site&object_id=${ids.hq}`,
      { token: viewer },
    );
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(2);
    const admin = await t.json(
      "GET",
      `${CO}/linked-objects/?object_type=dcim.device&object_id=${ids["hq-sw1"]}`,
    );
    expect(admin.body.count).toBe(1);
    const multi = await t.json(
      "GET",
      `${CO}/linked-objects/?object_type=dcim.device&object_id=${ids["hq-sw1"]}`,
      { token: viewer },
    );
    expect(multi.body.count).toBe(1);
    // the linking record's nested device outside the caller's view is reduced
    const peers = multi.body.results[0].object.peers as any[];
    const lab = peers.find((p) => p.id === ids["lab-sw1"]);
    expect(lab.display).toBeUndefined();
    expect(peers.find((p) => p.id === ids["hq-sw1"]).display).toBe("hq-sw1");
  });

  test("linked-objects for an object the caller may not view answers exactly like a missing one", async () => {
    const hidden = await t.json(
      "GET",
      `${CO}/linked-objects/?object_type=dcim.site&object_id=${ids.lab}`,
      { token: viewer },
    );
    const missing = await t.json(
      "GET",
      `${CO}/linked-objects/?object_type=dcim.site&object_id=99999`,
      { token: viewer },
    );
    expect(hidden.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(hidden.body.detail).toBe(missing.body.detail.replace("99999", String(ids.lab)));
    // no view permission on the type at all: the same 404
    const noSites = (
      await constrainedUser("nositeperm", [[["view"], "custom_objects.sec_link", null]])
    ).token;
    expect(
      (
        await t.json("GET", `${CO}/linked-objects/?object_type=dcim.site&object_id=${ids.hq}`, {
          token: noSites,
        })
      ).status,
    ).toBe(404);
  });

  test("a custom object's nested site and devices are reduced when the caller may not view them", async () => {
    const u = (await constrainedUser("cotonly", [[["view"], "custom_objects.sec_link", null]]))
      .token;
    const r = await t.json("GET", `${CO}/sec_link/?label=l-lab`, { token: u });
    const rec = r.body.results[0];
    expect(Object.keys(rec.site)).toEqual(["id"]);
    for (const p of rec.peers) expect(Object.keys(p)).toEqual(["id"]);
    expect(JSON.stringify(r.body)).not.toContain("Lab");
  });

  test("constraints follow a custom object's object field (site__slug)", async () => {
    const u = (
      await constrainedUser("cotrel", [
        [["view"], "custom_objects.sec_link", { site__slug: "lab" }],
      ])
    ).token;
    expect(names((await t.json("GET", `${CO}/sec_link/`, { token: u })).body)).toEqual(["l-lab"]);
  });
});
