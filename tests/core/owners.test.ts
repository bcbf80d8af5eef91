/**
 * Owners (NetBox 4.5): `/api/users/owners/` and `/api/users/owner-groups/`, the nullable `owner`
 * of host objects and custom objects, the `owner_id` / `owner` / `owner_group_id` /
 * `owner_group` filters, permission constraints through the owner, and GraphQL's `owner`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
let netops: { id: number; name: string };
let noc: Record<string, any>;
let audit: Record<string, any>;
let alice: number;
let admins: number;

beforeAll(async () => {
  t = await makeTestApp();
  alice = (await t.json("POST", "/api/users/users/", { body: { username: "alice" } })).body.id;
  admins = (await t.json("POST", "/api/users/groups/", { body: { name: "admins" } })).body.id;
});
afterAll(() => t.close());

const ids = (body: { results: { id: number }[] }) =>
  body.results.map((r) => r.id).sort((a, b) => a - b);

describe("owners and owner groups", () => {
  test("an owner group is created, listed with its member count and found by name", async () => {
    const r = await t.json("POST", "/api/users/owner-groups/", {
      body: { name: "NetOps", description: "Network operations" },
    });
    expect(r.status).toBe(201);
    netops = r.body;
    expect(r.body).toMatchObject({
      name: "NetOps",
      description: "Network operations",
      display: "NetOps",
      member_count: 0,
    });
    expect(r.body.url).toBe(`http://host.test/api/users/owner-groups/${r.body.id}/`);
    const dup = await t.json("POST", "/api/users/owner-groups/", { body: { name: "NetOps" } });
    expect(dup.status).toBe(400);
    expect(Object.keys(dup.body)).toEqual(["name"]);
    expect((await t.json("GET", "/api/users/owner-groups/?name=NetOps")).body.count).toBe(1);
  });

  test("an owner carries its group, users and user groups in nested form", async () => {
    const r = await t.json("POST", "/api/users/owners/", {
      body: {
        name: "NOC",
        group: netops.id,
        description: "Night shift",
        users: [alice],
        user_groups: [admins],
      },
    });
    expect(r.status).toBe(201);
    noc = r.body;
    expect(r.body.group).toMatchObject({
      id: netops.id,
      name: "NetOps",
      url: `http://host.test/api/users/owner-groups/${netops.id}/`,
    });
    expect(r.body.users.map((u: any) => u.username)).toEqual(["alice"]);
    expect(r.body.user_groups.map((g: any) => g.name)).toEqual(["admins"]);
    audit = (await t.json("POST", "/api/users/owners/", { body: { name: "Audit" } })).body;
    expect(audit.group).toBeNull();
    expect((await t.json("GET", `/api/users/owner-groups/${netops.id}/`)).body.member_count).toBe(
      1,
    );
    expect(ids((await t.json("GET", `/api/users/owners/?group_id=${netops.id}`)).body)).toEqual([
      noc.id,
    ]);
    const brief = (await t.json("GET", `/api/users/owners/${noc.id}/?brief=1`)).body;
    expect(Object.keys(brief).sort()).toEqual(["description", "display", "id", "name", "url"]);
  });

  test("PATCH and bad input: unknown group is a 400 keyed by field", async () => {
    const r = await t.json("PATCH", `/api/users/owners/${audit.id}/`, {
      body: { description: "Books" },
    });
    expect(r.status).toBe(200);
    expect(r.body.description).toBe("Books");
    const bad = await t.json("PATCH", `/api/users/owners/${audit.id}/`, { body: { group: 9999 } });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body)).toEqual(["group"]);
  });

  test("a group with owners cannot be deleted (409 naming them); an empty one can", async () => {
    const r = await t.json("DELETE", `/api/users/owner-groups/${netops.id}/`);
    expect(r.status).toBe(409);
    expect(r.body.protected_objects).toEqual([
      { object_type: "users.owner", field_name: "group", object_id: noc.id },
    ]);
    const spare = (await t.json("POST", "/api/users/owner-groups/", { body: { name: "Spare" } }))
      .body;
    expect((await t.req("DELETE", `/api/users/owner-groups/${spare.id}/`)).status).toBe(204);
  });
});

describe("owner on host objects", () => {
  let s1: number, s2: number, s3: number;
  test("sites take an owner by id or {id}, read it nested, and refuse an unknown one", async () => {
    const r = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Owned 1", slug: "owned-1", owner: noc.id },
    });
    expect(r.status).toBe(201);
    s1 = r.body.id;
    expect(r.body.owner).toEqual({
      id: noc.id,
      url: `http://host.test/api/users/owners/${noc.id}/`,
      display: "NOC",
      name: "NOC",
      description: "Night shift",
    });
    s2 = (
      await t.json("POST", "/api/dcim/sites/", {
        body: { name: "Owned 2", slug: "owned-2", owner: { id: audit.id } },
      })
    ).body.id;
    const free = await t.json("POST", "/api/dcim/sites/", { body: { name: "Free", slug: "free" } });
    s3 = free.body.id;
    expect(free.body.owner).toBeNull();
    const bad = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Bad", slug: "bad", owner: 4242 },
    });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body)).toEqual(["owner"]);
  });

  test("owner_id, owner (name), owner_group_id and owner_group filter sites; bad ids are a 400", async () => {
    expect(ids((await t.json("GET", `/api/dcim/sites/?owner_id=${noc.id}`)).body)).toEqual([s1]);
    expect(
      ids((await t.json("GET", `/api/dcim/sites/?owner_id=${noc.id}&owner_id=${audit.id}`)).body),
    ).toEqual([s1, s2]);
    expect(ids((await t.json("GET", "/api/dcim/sites/?owner=Audit")).body)).toEqual([s2]);
    expect(ids((await t.json("GET", `/api/dcim/sites/?owner_group_id=${netops.id}`)).body)).toEqual(
      [s1],
    );
    expect(ids((await t.json("GET", "/api/dcim/sites/?owner_group=NetOps")).body)).toEqual([s1]);
    expect(
      ids((await t.json("GET", `/api/dcim/sites/?owner_group_id__n=${netops.id}`)).body),
    ).toEqual([s2, s3]);
    expect(ids((await t.json("GET", "/api/dcim/sites/?owner_id__empty=true")).body)).toEqual([s3]);
    const bad = await t.json("GET", "/api/dcim/sites/?owner_group_id=abc");
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body)).toEqual(["owner_group_id"]);
  });

  test("tenants, devices, prefixes and IP addresses carry an owner too", async () => {
    const tenant = await t.json("POST", "/api/tenancy/tenants/", {
      body: { name: "T", slug: "t", owner: noc.id },
    });
    const device = await t.json("POST", "/api/dcim/devices/", {
      body: { name: "d1", site: s1, owner: noc.id },
    });
    const prefix = await t.json("POST", "/api/ipam/prefixes/", {
      body: { prefix: "10.0.0.0/8", owner: noc.id },
    });
    const ip = await t.json("POST", "/api/ipam/ip-addresses/", {
      body: { address: "10.0.0.1/8", owner: noc.id },
    });
    for (const [r, path] of [
      [tenant, "tenancy/tenants"],
      [device, "dcim/devices"],
      [prefix, "ipam/prefixes"],
      [ip, "ipam/ip-addresses"],
    ] as const) {
      expect(r.status).toBe(201);
      expect(r.body.owner.id).toBe(noc.id);
      expect(ids((await t.json("GET", `/api/${path}/?owner_group_id=${netops.id}`)).body)).toEqual([
        r.body.id,
      ]);
    }
    await t.req("DELETE", `/api/dcim/devices/${device.body.id}/`);
    await t.req("DELETE", `/api/tenancy/tenants/${tenant.body.id}/`);
    await t.req("DELETE", `/api/ipam/prefixes/${prefix.body.id}/`);
    await t.req("DELETE", `/api/ipam/ip-addresses/${ip.body.id}/`);
  });

  test("an owner in use cannot be deleted: 409 naming the objects", async () => {
    const r = await t.json("DELETE", `/api/users/owners/${audit.id}/`);
    expect(r.status).toBe(409);
    expect(r.body.error).toBe("protected");
    expect(r.body.protected_objects).toEqual([
      { object_type: "dcim.site", field_name: "owner", object_id: s2 },
    ]);
  });

  test("a user constrained by owner sees only that owner's sites (owner__name, owner_id, owner)", async () => {
    for (const [i, constraints] of [
      { owner__name: "NOC" },
      { owner_id: noc.id },
      { owner: noc.id },
      { owner__group__name: "NetOps" },
    ].entries()) {
      const perm = await t.json("POST", "/api/users/permissions/", {
        body: {
          name: `noc-sites-${i}`,
          actions: ["view"],
          object_types: ["dcim.site"],
          constraints,
        },
      });
      expect(perm.status).toBe(201);
      const username = `viewer${i}`;
      const token = await t.user(username);
      const uid = (await t.json("GET", `/api/users/users/?username=${username}`)).body.results[0]
        .id;
      await t.json("PATCH", `/api/users/permissions/${perm.body.id}/`, { body: { users: [uid] } });
      const r = await t.json("GET", "/api/dcim/sites/", { token });
      expect(r.status).toBe(200);
      expect(ids(r.body)).toEqual([s1]);
      expect((await t.req("GET", `/api/dcim/sites/${s2}/`, { token })).status).toBe(404);
    }
  });

  test("GraphQL reads a site's owner and its group", async () => {
    const res = await t.json("POST", "/graphql/", {
      body: { query: `{ site(id: ${s1}) { name owner { name group { name } } } }` },
    });
    expect(res.status).toBe(200);
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.site).toEqual({
      name: "Owned 1",
      owner: { name: "NOC", group: { name: "NetOps" } },
    });
    const list = await t.json("POST", "/graphql/", { body: { query: `{ owner_list { name } }` } });
    expect(list.body.data.owner_list.map((o: any) => o.name)).toEqual(["Audit", "NOC"]);
  });
});

describe("owner on custom objects", () => {
  let a: number, b: number, c: number;
  test("instances read owner (null by default), take it on create, PATCH and clear it", async () => {
    const cot = await makeCot(t, "circuit", "circuits");
    await addField(t, cot.id, { name: "cid", type: "text", primary: true });
    const first = await create(t, "circuits", { cid: "c-1", owner: noc.id });
    a = first.id;
    expect(first.owner).toMatchObject({
      id: noc.id,
      name: "NOC",
      url: `http://host.test/api/users/owners/${noc.id}/`,
    });
    const second = await create(t, "circuits", { cid: "c-2" });
    b = second.id;
    expect(second.owner).toBeNull();
    c = (await create(t, "circuits", { cid: "c-3", owner: { id: audit.id } })).id;
    const patched = await t.json("PATCH", `${CO}/circuits/${b}/`, { body: { owner: audit.id } });
    expect(patched.status).toBe(200);
    expect(patched.body.owner.name).toBe("Audit");
    expect(
      (await t.json("PATCH", `${CO}/circuits/${b}/`, { body: { owner: null } })).body.owner,
    ).toBeNull();
    expect((await t.json("GET", `${CO}/circuits/${a}/`)).body.owner.id).toBe(noc.id);
    const bad = await t.json("POST", `${CO}/circuits/`, { body: { cid: "c-x", owner: 777 } });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({
      owner: ["Related object not found using the provided numeric ID: 777"],
    });
    const wrong = await t.json("POST", `${CO}/circuits/`, { body: { cid: "c-y", owner: "NOC" } });
    expect(wrong.status).toBe(400);
    expect(Object.keys(wrong.body)).toEqual(["owner"]);
  });

  test("owner_id, owner_group_id, owner and owner_group filter instances", async () => {
    expect(ids((await t.json("GET", `${CO}/circuits/?owner_id=${noc.id}`)).body)).toEqual([a]);
    expect(ids((await t.json("GET", `${CO}/circuits/?owner_id=${audit.id}`)).body)).toEqual([c]);
    expect(ids((await t.json("GET", `${CO}/circuits/?owner_group_id=${netops.id}`)).body)).toEqual([
      a,
    ]);
    expect(
      ids((await t.json("GET", "/api/plugins/custom-objects/circuits/?owner=Audit")).body),
    ).toEqual([c]);
    expect(
      ids((await t.json("GET", "/api/plugins/custom-objects/circuits/?owner_group=NetOps")).body),
    ).toEqual([a]);
    expect(ids((await t.json("GET", `${CO}/circuits/?owner_id__empty=true`)).body)).toEqual([b]);
  });

  test("an owner used by custom objects only cannot be deleted", async () => {
    const lonely = (await t.json("POST", "/api/users/owners/", { body: { name: "Lonely" } })).body;
    const obj = await create(t, "circuits", { cid: "c-4", owner: lonely.id });
    const r = await t.json("DELETE", `/api/users/owners/${lonely.id}/`);
    expect(r.status).toBe(409);
    expect((await t.json("GET", `${CO}/circuits/${obj.id}/`)).body.owner.id).toBe(lonely.id);
    expect((await t.req("DELETE", `${CO}/circuits/${obj.id}/`)).status).toBe(204);
    expect((await t.req("DELETE", `/api/users/owners/${lonely.id}/`)).status).toBe(204);
  });

  test("a user constrained by owner__name sees only that owner's instances", async () => {
    const perm = await t.json("POST", "/api/users/permissions/", {
      body: {
        name: "noc-circuits",
        actions: ["view"],
        object_types: ["custom_objects.circuits"],
        constraints: { owner__name: "NOC" },
      },
    });
    expect(perm.status).toBe(201);
    const token = await t.user("circuit-viewer");
    const uid = (await t.json("GET", "/api/users/users/?username=circuit-viewer")).body.results[0]
      .id;
    await t.json("PATCH", `/api/users/permissions/${perm.body.id}/`, { body: { users: [uid] } });
    const r = await t.json("GET", `${CO}/circuits/`, { token });
    expect(r.status).toBe(200);
    expect(ids(r.body)).toEqual([a]);
  });

  test("GraphQL reads an instance's owner", async () => {
    const res = await t.json("POST", "/graphql/", {
      body: { query: `{ custom_objects_circuits_list { cid owner { name group { name } } } }` },
    });
    expect(res.body.errors).toBeUndefined();
    const byCid = Object.fromEntries(
      res.body.data.custom_objects_circuits_list.map((o: any) => [o.cid, o.owner]),
    );
    expect(byCid["c-1"]).toEqual({ name: "NOC", group: { name: "NetOps" } });
    expect(byCid["c-2"]).toBeNull();
  });

  test("a type with a field of its own named owner keeps its field", async () => {
    const cot = await makeCot(t, "ticket", "tickets");
    await addField(t, cot.id, { name: "owner", type: "text" });
    const obj = await create(t, "tickets", { owner: "bob" });
    expect(obj.owner).toBe("bob");
    expect(ids((await t.json("GET", `${CO}/tickets/?owner=bob`)).body)).toEqual([obj.id]);
  });

  test("the OpenAPI document describes owner on instances and the owner endpoints", async () => {
    const doc = (await t.json("GET", "/api/schema/?format=json")).body;
    const names = Object.keys(doc.components.schemas);
    const circuit = names.find(
      (n) =>
        doc.components.schemas[n].properties?.cid && doc.components.schemas[n].properties?.owner,
    );
    expect(circuit).toBeDefined();
    expect(doc.paths["/api/users/owners/"]).toBeDefined();
    expect(doc.paths["/api/users/owner-groups/{id}/"]).toBeDefined();
  });
});

describe("custom object tables made before owners", () => {
  test("start-up migrations add owner__id to existing object tables (and the trash's), not to link tables", async () => {
    const { runMigrations } = await import("../../src/migrations");
    const { sql } = await import("drizzle-orm");
    const db = t.deps.db;
    await db.orm.run(
      sql.raw(
        `CREATE TABLE "co_9001" (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, last_updated TEXT NOT NULL, name TEXT)`,
      ),
    );
    await db.orm.run(
      sql.raw(
        `CREATE TABLE "trash__9001_table" (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, last_updated TEXT NOT NULL)`,
      ),
    );
    await db.orm.run(
      sql.raw(
        `CREATE TABLE "co_9001_f1_links" (source_id INTEGER NOT NULL, target_type INTEGER, target_id INTEGER NOT NULL, position INTEGER NOT NULL DEFAULT 0)`,
      ),
    );
    await runMigrations(db);
    const cols = async (table: string) =>
      (
        (await db.orm.all(sql`SELECT name FROM pragma_table_info(${table})`)) as { name: string }[]
      ).map((c) => c.name);
    expect(await cols("co_9001")).toContain("owner__id");
    expect(await cols("trash__9001_table")).toContain("owner__id");
    expect(await cols("co_9001_f1_links")).not.toContain("owner__id");
    await runMigrations(db); // once only
    expect((await cols("co_9001")).filter((c) => c === "owner__id")).toHaveLength(1);
  });
});
