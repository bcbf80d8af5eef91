/**
 * Security (issue 27, row 8): group membership, permission assignment and other users'
 * passwords change only with the rights over them, and nobody hands out (least of all to
 * themselves) more than they hold (decision 0065).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";

let t: TestApp;
let admins: number; // a group holding everything on users and sites
let everything: number; // the permission admins hold

beforeAll(async () => {
  t = await makeTestApp();
  admins = (await t.json("POST", "/api/users/groups/", { body: { name: "admins" } })).body.id;
  everything = (
    await t.json("POST", "/api/users/permissions/", {
      body: {
        name: "everything",
        actions: ["view", "add", "change", "delete"],
        object_types: ["users.user", "users.group", "users.objectpermission", "dcim.site"],
        groups: [admins],
      },
    })
  ).body.id;
});
afterAll(() => t.close());

const provision = (username: string, password: string) =>
  t.json("POST", "/api/users/tokens/provision/", { token: null, body: { username, password } });

describe("row 8: group membership", () => {
  test("a user who may change only their own record cannot join a group they cannot view", async () => {
    const me = await userWith(t, "selfish", [[["view", "change"], "users.user", { id: "$user" }]]);
    const join = await t.json("PATCH", `/api/users/users/${me.id}/`, {
      token: me.token,
      body: { groups: [admins] },
    });
    const unknown = await t.json("PATCH", `/api/users/users/${me.id}/`, {
      token: me.token,
      body: { groups: [987654] },
    });
    // a group they may not view answers exactly as one that does not exist
    expect(join.status).toBe(400);
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(join.body).replace(String(admins), "N")).toBe(
      JSON.stringify(unknown.body).replace("987654", "N"),
    );
    // and they hold nothing more
    const perms = await t.json("GET", "/api/users/permissions/", { token: me.token });
    expect(perms.status).toBe(403);
    const mine = await t.json("GET", `/api/users/users/${me.id}/`);
    expect(mine.body.groups).toEqual([]);
  });

  test("a membership the user already has may be sent back unchanged", async () => {
    const me = await userWith(t, "member", [[["view", "change"], "users.user", { id: "$user" }]]);
    const vault = (await t.json("POST", "/api/users/groups/", { body: { name: "vault" } })).body.id;
    await t.json("PATCH", `/api/users/users/${me.id}/`, { body: { groups: [vault] } });
    const mine = await t.json("GET", `/api/users/users/${me.id}/`, { token: me.token });
    expect(mine.body.groups).toEqual([{ id: vault }]);
    const echo = await t.json("PATCH", `/api/users/users/${me.id}/`, {
      token: me.token,
      body: { first_name: "M", groups: mine.body.groups },
    });
    expect(echo.status).toBe(200);
    // leaving a group they may not change is a change of its membership too
    const leave = await t.json("PATCH", `/api/users/users/${me.id}/`, {
      token: me.token,
      body: { groups: [] },
    });
    expect(leave.status).toBe(403);
  });

  test("viewing a group is not enough: joining it needs change on it", async () => {
    const me = await userWith(t, "viewer", [
      [["view", "change"], "users.user", { id: "$user" }],
      [["view"], "users.group", null],
    ]);
    const r = await t.json("PATCH", `/api/users/users/${me.id}/`, {
      token: me.token,
      body: { groups: [admins] },
    });
    expect(r.status).toBe(403);
    expect((await t.json("GET", `/api/users/users/${me.id}/`)).body.groups).toEqual([]);
  });

  test("change on a group still does not let anyone hand out what the group grants beyond their own rights", async () => {
    const me = await userWith(t, "groupie", [
      [["view", "change"], "users.user", null],
      [["view", "change"], "users.group", null],
    ]);
    const other = await userWith(t, "puppet", []);
    for (const id of [me.id, other.id]) {
      const r = await t.json("PATCH", `/api/users/users/${id}/`, {
        token: me.token,
        body: { groups: [admins] },
      });
      expect(r.status).toBe(403);
    }
    // a group that grants only what they hold is theirs to fill
    const readers = (await t.json("POST", "/api/users/groups/", { body: { name: "readers" } })).body
      .id;
    await t.json("POST", "/api/users/permissions/", {
      body: {
        name: "read users",
        actions: ["view"],
        object_types: ["users.user"],
        groups: [readers],
      },
    });
    const ok = await t.json("PATCH", `/api/users/users/${other.id}/`, {
      token: me.token,
      body: { groups: [readers] },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.groups.map((g: any) => g.id)).toEqual([readers]);
  });
});

describe("row 8: permission assignment", () => {
  test("a user who may add permissions cannot grant themselves what they do not hold", async () => {
    const me = await userWith(t, "granter", [
      [["view", "add", "change"], "users.objectpermission", null],
      [["view"], "users.user", null],
      [["view"], "dcim.site", { slug: "a" }],
    ]);
    const wider = await t.json("POST", "/api/users/permissions/", {
      token: me.token,
      body: {
        name: "mine",
        actions: ["view", "change", "delete"],
        object_types: ["dcim.site"],
        users: [me.id],
      },
    });
    expect(wider.status).toBe(403);
    // lifting their own constraint is widening too
    const unconstrained = await t.json("POST", "/api/users/permissions/", {
      token: me.token,
      body: { name: "mine", actions: ["view"], object_types: ["dcim.site"], users: [me.id] },
    });
    expect(unconstrained.status).toBe(403);
    // and joining an existing permission that grants more
    const join = await t.json("PATCH", `/api/users/permissions/${everything}/`, {
      token: me.token,
      body: { users: [me.id] },
    });
    expect(join.status).toBe(403);
    const after = await t.json("GET", `/api/users/permissions/${everything}/`);
    expect(after.body.users).toEqual([]);
    // what they hold themselves they may pass on
    const other = await userWith(t, "receiver", []);
    const ok = await t.json("POST", "/api/users/permissions/", {
      token: me.token,
      body: {
        name: "site a for receiver",
        actions: ["view"],
        object_types: ["dcim.site"],
        users: [other.id],
        constraints: { slug: "a" },
      },
    });
    expect(ok.status).toBe(201);
  });

  test("attaching a permission to a group needs change on that group", async () => {
    const me = await userWith(t, "attacher", [
      [["view", "add", "change"], "users.objectpermission", null],
      [["view"], "users.group", null],
      [["view"], "dcim.site", null],
    ]);
    const r = await t.json("POST", "/api/users/permissions/", {
      token: me.token,
      body: { name: "to admins", actions: ["view"], object_types: ["dcim.site"], groups: [admins] },
    });
    expect(r.status).toBe(403);
  });
});

describe("row 8: passwords", () => {
  test("plain change_user cannot reset another user's password", async () => {
    const victim = await userWith(t, "victim", []);
    await t.json("PATCH", `/api/users/users/${victim.id}/`, {
      body: { password: "victim-pass-1" },
    });
    const me = await userWith(t, "resetter", [[["view", "change"], "users.user", null]]);
    const r = await t.json("PATCH", `/api/users/users/${victim.id}/`, {
      token: me.token,
      body: { password: "attacker-pass" },
    });
    expect(r.status).toBe(403);
    expect((await provision("victim", "attacker-pass")).status).toBe(403);
    expect((await provision("victim", "victim-pass-1")).status).toBe(201);
    // their own password they may change
    const own = await t.json("PATCH", `/api/users/users/${me.id}/`, {
      token: me.token,
      body: { password: "my-new-pass" },
    });
    expect(own.status).toBe(200);
    expect((await provision("resetter", "my-new-pass")).status).toBe(201);
  });
});

describe("row 8 in bulk and on delete (staged writes, decision 0092)", () => {
  test("a bulk PATCH cannot join a group, reset another's password or hand out grants; nothing of it is written", async () => {
    const vault = (await t.json("POST", "/api/users/groups/", { body: { name: "bulk-vault" } }))
      .body.id;
    const victim = await userWith(t, "bulk-victim", []);
    await t.json("PATCH", `/api/users/users/${victim.id}/`, {
      body: { password: "victim-pass-2" },
    });
    const me = await userWith(t, "bulk-me", [
      [["view", "change"], "users.user", null],
      [["view"], "users.group", null],
      [["add", "change", "view"], "users.objectpermission", null],
    ]);
    const joins = await t.json("PATCH", "/api/users/users/", {
      token: me.token,
      body: [
        { id: me.id, first_name: "fine" },
        { id: victim.id, groups: [vault] },
      ],
    });
    expect(joins.status).toBe(403);
    const resets = await t.json("PATCH", "/api/users/users/", {
      token: me.token,
      body: [
        { id: me.id, first_name: "fine" },
        { id: victim.id, password: "attacker-pass-2" },
      ],
    });
    expect(resets.status).toBe(403);
    expect((await provision("bulk-victim", "attacker-pass-2")).status).toBe(403);
    const mine = (await t.json("GET", `/api/users/users/${me.id}/`)).body;
    expect(mine.first_name).toBe("");
    expect((await t.json("GET", `/api/users/users/${victim.id}/`)).body.groups).toEqual([]);
    // a permission granting what the writer lacks, made in bulk for themselves: refused whole
    const grants = await t.json("POST", "/api/users/permissions/", {
      token: me.token,
      body: [
        { name: "bulk-ok", actions: ["view"], object_types: ["users.user"], users: [me.id] },
        { name: "bulk-wide", actions: ["delete"], object_types: ["dcim.site"], users: [me.id] },
      ],
    });
    expect(grants.status).toBe(403);
    const made = await t.json("GET", "/api/users/permissions/?name=bulk-ok");
    expect(made.body.count).toBe(0);
  });

  test("a superuser account is deleted by a superuser only", async () => {
    const root = await t.json("POST", "/api/users/users/", {
      body: { username: "bulk-root", is_superuser: true },
    });
    const me = await userWith(t, "deleter", [[["view", "delete"], "users.user", null]]);
    const r = await t.json("DELETE", `/api/users/users/${root.body.id}/`, { token: me.token });
    expect(r.status).toBe(403);
    const bulk = await t.json("DELETE", "/api/users/users/", {
      token: me.token,
      body: [{ id: root.body.id }],
    });
    expect(bulk.status).toBe(403);
    expect((await t.json("GET", `/api/users/users/${root.body.id}/`)).status).toBe(200);
    expect((await t.json("DELETE", `/api/users/users/${root.body.id}/`)).status).toBe(204);
  });
});
