/**
 * Security: GraphQL holds permissions and constraints exactly as REST does — nothing the
 * caller may not view is returned or named, introspection included — with the same tokens.
 */
import { userWith as grantedUser } from "../helpers/grants";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
const ids: Record<string, number> = {};

async function userWith(
  username: string,
  grants: Array<[string[], string, unknown]>,
  opts: { writeEnabled?: boolean; expires?: string } = {},
): Promise<string> {
  return (await grantedUser(t, username, grants, opts)).token;
}

async function gql(token: string | null, query: string) {
  const res = await t.req("POST", "/graphql/", {
    token,
    body: { query },
    headers: { accept: "application/json" },
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, text };
}

const INTROSPECTION = `{ __schema { types { name fields { name } inputFields { name } possibleTypes { name } } queryType { fields { name } } } }`;

beforeAll(async () => {
  t = await makeTestApp();
  for (const [name, slug] of [
    ["HQ", "hq"],
    ["Lab", "lab"],
  ] as const)
    ids[slug] = (await t.json("POST", "/api/dcim/sites/", { body: { name, slug } })).body.id;
  const secret = await makeCot(t, "secret_thing");
  await addField(t, secret.id, { name: "codename_xyz", type: "text", primary: true });
  const s = await create(t, "secret_thing", { codename_xyz: "Nightingale" });
  const open = await makeCot(t, "open_thing");
  await addField(t, open.id, { name: "title", type: "text", primary: true });
  await addField(t, open.id, {
    name: "buddy",
    type: "object",
    related_object_type: "custom_objects.secret_thing",
  });
  await addField(t, open.id, { name: "site", type: "object", related_object_type: "dcim.site" });
  await addField(t, open.id, {
    name: "anything",
    type: "object",
    is_polymorphic: true,
    related_object_types: ["dcim.site", "custom_objects.secret_thing"],
  });
  ids.o1 = (
    await create(t, "open_thing", {
      title: "o-hq",
      buddy: s.id,
      site: ids.hq,
      anything: { object_type: "custom_objects.secret_thing", id: s.id },
    })
  ).id;
  ids.o2 = (
    await create(t, "open_thing", {
      title: "o-lab",
      site: ids.lab,
      anything: { object_type: "dcim.site", id: ids.lab },
    })
  ).id;
});
afterAll(() => t.close());

describe("authentication", () => {
  test("no token is refused like /api/; a bad or expired token too", async () => {
    const none = await gql(null, "{ site_list { id } }");
    expect(none.status).toBe(403);
    expect(none.body.detail).toBe("Authentication credentials were not provided.");
    expect((await gql("0".repeat(40), "{ site_list { id } }")).status).toBe(403);
    const expired = await userWith("old", [[["view"], "dcim.site", null]], {
      expires: "2001-01-01T00:00:00Z",
    });
    expect((await gql(expired, "{ site_list { id } }")).status).toBe(403);
  });

  test("a read-only token may query", async () => {
    const ro = await userWith("ro", [[["view"], "dcim.site", null]], { writeEnabled: false });
    const r = await gql(ro, "{ site_list { slug } }");
    expect(r.status).toBe(200);
    expect(r.body.data.site_list.length).toBe(2);
  });
});

describe("nothing unviewable is named", () => {
  test("introspection shows only the models the caller may view", async () => {
    const token = await userWith("openonly", [[["view"], "custom_objects.open_thing", null]]);
    const r = await gql(token, INTROSPECTION);
    expect(r.status).toBe(200);
    const roots = r.body.data.__schema.queryType.fields.map((f: any) => f.name).sort();
    expect(roots).toEqual(["custom_objects_open_thing", "custom_objects_open_thing_list"]);
    expect(r.text).not.toMatch(/secret|codename|SiteType|site_list|DeviceType|UserType/);
    // the object fields pointing at hidden types are not in the type at all
    const type = r.body.data.__schema.types.find((x: any) => x.name === "CustomObject_open_thing");
    expect(type.fields.map((f: any) => f.name)).not.toContain("buddy");
    expect(type.fields.map((f: any) => f.name)).not.toContain("site");
    expect(type.fields.map((f: any) => f.name)).toContain("title");
    // and cannot be queried
    const q = await gql(token, "{ custom_objects_open_thing_list { title buddy { id } } }");
    expect(q.body.errors[0].message).toContain("Cannot query field");
    expect(
      (await gql(token, "{ custom_objects_secret_thing_list { id } }")).body.errors[0].message,
    ).toContain("Cannot query field");
  });

  test("a polymorphic field names only the member types the caller may view", async () => {
    const token = await userWith("polyview", [
      [["view"], "custom_objects.open_thing", null],
      [["view"], "dcim.site", null],
    ]);
    const r = await gql(
      token,
      "{ custom_objects_open_thing_list { title anything { __typename ... on SiteType { slug } } } }",
    );
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.custom_objects_open_thing_list).toEqual([
      { title: "o-hq", anything: null },
      { title: "o-lab", anything: { __typename: "SiteType", slug: "lab" } },
    ]);
    expect((await gql(token, INTROSPECTION)).text).not.toMatch(/secret/);
  });
});

describe("constraints hold as on REST", () => {
  test("lists, single objects and relations are limited by view constraints", async () => {
    const token = await userWith("hqonly", [
      [["view"], "custom_objects.open_thing", null],
      [["view"], "dcim.site", { slug: "hq" }],
    ]);
    const r = await gql(
      token,
      `{ site_list { slug } lab: site(id: ${ids.lab}) { slug } custom_objects_open_thing_list { title site { slug } } }`,
    );
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.site_list).toEqual([{ slug: "hq" }]);
    expect(r.body.data.lab).toBeNull();
    expect(r.body.data.custom_objects_open_thing_list).toEqual([
      { title: "o-hq", site: { slug: "hq" } },
      { title: "o-lab", site: null },
    ]);
    expect(r.text).not.toContain("Lab");
  });

  test("filters cannot widen a constraint, and $user works", async () => {
    const u = await createUser(t.deps.db.orm, { username: "mine" });
    const r0 = await t.json("POST", "/api/users/permissions/", {
      body: {
        name: "mine-0",
        actions: ["view"],
        object_types: ["custom_objects.open_thing"],
        users: [u.id],
        constraints: [{ title: "o-lab" }, { id: "$user" }],
      },
    });
    expect(r0.status).toBe(201);
    const token = (await issueToken(t.deps.db.orm, { username: "mine" })).key;
    const r = await gql(
      token,
      `{ all: custom_objects_open_thing_list { title } widened: custom_objects_open_thing_list(filters: {OR: [{title: {exact: "o-hq"}}, {title: {exact: "o-lab"}}]}) { title } }`,
    );
    // o-lab by its title; o-hq only if its id equals the user's id
    const expected = ids.o1 === u.id ? ["o-hq", "o-lab"] : ["o-lab"];
    expect(r.body.data.all.map((x: any) => x.title).sort()).toEqual(expected);
    expect(r.body.data.widened.map((x: any) => x.title).sort()).toEqual(expected);
  });
});
