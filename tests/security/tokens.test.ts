/**
 * Security: tokens and account escalation, tried as an attacker with an ordinary account.
 * A non-superuser lists, creates, changes and deletes only their own tokens; a token never
 * grants more than its user has.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
let mallory: string; // may add, change, view and delete tokens
let malloryId: number;
let adminTokenId: number;

beforeAll(async () => {
  t = await makeTestApp();
  mallory = await t.user("mallory", [
    [["view", "add", "change", "delete"], "users.token"],
    [["view"], "users.user"],
  ]);
  const me = await t.json("GET", "/api/users/users/?username=mallory");
  malloryId = me.body.results[0].id;
  const tokens = await t.json("GET", "/api/users/tokens/?user_id=1");
  adminTokenId = tokens.body.results[0].id;
});
afterAll(() => t.close());

const count = async () => (await t.json("GET", "/api/users/tokens/")).body.count as number;

describe("tokens: a non-superuser manages only their own", () => {
  test("creating a token for another user is 403 and creates nothing", async () => {
    const before = await count();
    const r = await t.json("POST", "/api/users/tokens/", { token: mallory, body: { user: 1 } });
    expect(r.status).toBe(403);
    expect(JSON.stringify(r.body)).not.toContain('"key"');
    expect(await count()).toBe(before);
  });

  test("creating a token without naming a user makes one for the caller", async () => {
    const r = await t.json("POST", "/api/users/tokens/", {
      token: mallory,
      body: { description: "mine" },
    });
    expect(r.status).toBe(201);
    expect(r.body.user.id).toBe(malloryId);
    expect(typeof r.body.token).toBe("string");
  });

  test("moving one's own token to another user is 403 and the token stays", async () => {
    const own = (await t.json("GET", "/api/users/tokens/", { token: mallory })).body.results[0];
    const r = await t.json("PATCH", `/api/users/tokens/${own.id}/`, {
      token: mallory,
      body: { user: 1 },
    });
    expect(r.status).toBe(403);
    const after = await t.json("GET", `/api/users/tokens/${own.id}/`);
    expect(after.body.user.id).toBe(malloryId);
    // and by bulk update
    const bulk = await t.json("PATCH", "/api/users/tokens/", {
      token: mallory,
      body: [{ id: own.id, user: 1 }],
    });
    expect(bulk.status).toBe(403);
    expect((await t.json("GET", `/api/users/tokens/${own.id}/`)).body.user.id).toBe(malloryId);
  });

  test("the list and detail show only the caller's tokens; others' are not found", async () => {
    const list = await t.json("GET", "/api/users/tokens/", { token: mallory });
    expect(list.status).toBe(200);
    expect(list.body.count).toBeGreaterThan(0);
    for (const tok of list.body.results) expect(tok.user.id).toBe(malloryId);
    expect(
      (await t.json("GET", `/api/users/tokens/?user_id=1`, { token: mallory })).body.count,
    ).toBe(0);
    expect(
      (await t.json("GET", `/api/users/tokens/${adminTokenId}/`, { token: mallory })).status,
    ).toBe(404);
  });

  test("another user's token cannot be changed or deleted (404, unchanged)", async () => {
    const patch = await t.json("PATCH", `/api/users/tokens/${adminTokenId}/`, {
      token: mallory,
      body: { write_enabled: false },
    });
    expect(patch.status).toBe(404);
    const del = await t.req("DELETE", `/api/users/tokens/${adminTokenId}/`, { token: mallory });
    expect(del.status).toBe(404);
    const bulk = await t.req("DELETE", "/api/users/tokens/", {
      token: mallory,
      body: [{ id: adminTokenId }],
    });
    // a list's object not found: NetBox 4.7's 400, as for a token that does not exist (0200)
    expect(bulk.status).toBe(400);
    expect(await bulk.json()).toEqual({
      detail: "1 of 1 objects could not be found.",
      errors: [
        { id: adminTokenId, errors: { id: [`Object with ID ${adminTokenId} does not exist`] } },
      ],
    });
    const still = await t.json("GET", `/api/users/tokens/${adminTokenId}/`);
    expect(still.status).toBe(200);
    expect(still.body.write_enabled).toBe(true);
  });

  test("the escalation chain of the report ends at 403: no schema apply as superuser", async () => {
    const attempt = await t.json("POST", "/api/users/tokens/", {
      token: mallory,
      body: { user: 1, write_enabled: true },
    });
    expect(attempt.status).toBe(403);
    const apply = await t.json("POST", "/api/plugins/custom-objects/schema/apply/", {
      token: mallory,
      body: { schema: { schema_version: "1", types: [{ name: "pwned", slug: "pwned" }] } },
    });
    expect(apply.status).toBe(403);
    expect(
      (await t.json("GET", "/api/plugins/custom-objects/custom-object-types/?slug=pwned")).body
        .count,
    ).toBe(0);
  });

  test("a superuser may still create a token for another user", async () => {
    const r = await t.json("POST", "/api/users/tokens/", {
      body: { user: malloryId, description: "by admin" },
    });
    expect(r.status).toBe(201);
    expect(r.body.user.id).toBe(malloryId);
  });
});

describe("accounts: nobody but a superuser makes or touches a superuser", () => {
  let eve: string;
  beforeAll(async () => {
    eve = await t.user("eve", [[["view", "add", "change", "delete"], "users.user"]]);
  });

  test("a user admin cannot grant superuser status, to themselves or to a new account", async () => {
    const me = (await t.json("GET", "/api/users/users/?username=eve")).body.results[0];
    const self = await t.json("PATCH", `/api/users/users/${me.id}/`, {
      token: eve,
      body: { is_superuser: true },
    });
    expect(self.status).toBe(403);
    expect((await t.json("GET", `/api/users/users/${me.id}/`)).body.is_superuser).toBe(false);
    const made = await t.json("POST", "/api/users/users/", {
      token: eve,
      body: { username: "eve2", is_superuser: true },
    });
    expect(made.status).toBe(403);
    expect((await t.json("GET", "/api/users/users/?username=eve2")).body.count).toBe(0);
  });

  test("a user admin cannot change a superuser's password or delete a superuser", async () => {
    const pw = await t.json("PATCH", "/api/users/users/1/", {
      token: eve,
      body: { password: "taken-over-123" },
    });
    expect(pw.status).toBe(403);
    const login = await t.json("POST", "/api/users/tokens/provision/", {
      token: null,
      body: { username: "admin", password: "taken-over-123" },
    });
    expect(login.status).toBe(403);
    expect((await t.req("DELETE", "/api/users/users/1/", { token: eve })).status).toBe(403);
    expect((await t.json("GET", "/api/users/users/1/")).status).toBe(200);
  });

  test("ordinary accounts are still managed by a user admin", async () => {
    const made = await t.json("POST", "/api/users/users/", {
      token: eve,
      body: { username: "carol" },
    });
    expect(made.status).toBe(201);
    expect(
      (
        await t.json("PATCH", `/api/users/users/${made.body.id}/`, {
          token: eve,
          body: { first_name: "Carol" },
        })
      ).status,
    ).toBe(200);
  });
});

describe("a token never grants more than its user has", () => {
  test("a read-only token writes nothing, not even a new write-enabled token", async () => {
    const ro = await t.user(
      "reader",
      [
        [["view", "add", "change", "delete"], "users.token"],
        [["view", "add"], "dcim.site"],
      ],
      { writeEnabled: false },
    );
    expect((await t.json("GET", "/api/dcim/sites/", { token: ro })).status).toBe(200);
    const site = await t.json("POST", "/api/dcim/sites/", {
      token: ro,
      body: { name: "ro", slug: "ro" },
    });
    expect(site.status).toBe(403);
    const tok = await t.json("POST", "/api/users/tokens/", {
      token: ro,
      body: { write_enabled: true },
    });
    expect(tok.status).toBe(403);
  });

  test("an expired token is refused", async () => {
    const old = await t.user("expired", [[["view"], "dcim.site"]], {
      expires: "2000-01-01T00:00:00Z",
    });
    const r = await t.json("GET", "/api/dcim/sites/", { token: old });
    expect(r.status).toBe(403);
    expect(r.body.detail).toBe("Invalid token");
  });

  test("a user's token carries only their permissions, never a superuser's", async () => {
    const plain = await t.user("plain", [[["view"], "dcim.site"]]);
    expect((await t.json("GET", "/api/users/users/", { token: plain })).status).toBe(403);
    expect(
      (await t.json("POST", "/api/dcim/sites/", { token: plain, body: { name: "x", slug: "x" } }))
        .status,
    ).toBe(403);
  });
});

describe("a new token's answer hides what its caller may not view (decision 0170)", () => {
  /** A caller who manages tokens and views only the users named `username`. */
  async function viewingUsers(name: string, username: string) {
    const token = await t.user(name, [[["view", "add"], "users.token"]]);
    const id = (await t.json("GET", `/api/users/users/?username=${name}`)).body.results[0].id;
    const grant = await t.json("POST", "/api/users/permissions/", {
      body: {
        name: `${name}-views-${username}`,
        actions: ["view"],
        object_types: ["users.user"],
        users: [id],
        constraints: { username },
      },
    });
    expect(grant.status).toBe(201);
    return { token, id };
  }

  async function createdAndRead(token: string) {
    const made = await t.json("POST", "/api/users/tokens/", {
      token,
      body: { description: "answer" },
    });
    expect(made.status).toBe(201);
    const read = await t.json("GET", `/api/users/tokens/${made.body.id}/`, { token });
    expect(read.status).toBe(200);
    return { made: made.body, read: read.body };
  }

  test("a caller whose view of users leaves out their own: the create names the user by id only, as the GET", async () => {
    const { token, id } = await viewingUsers("eve-tokens", "someone-else");
    const { made, read } = await createdAndRead(token);
    expect(read.user).toEqual({ id });
    expect(made.user).toEqual(read.user);
    expect(JSON.stringify(made)).not.toContain("eve-tokens");
  });

  test("a caller who views their own user: the create answers it in full, as the GET", async () => {
    const { token, id } = await viewingUsers("fay-tokens", "fay-tokens");
    const { made, read } = await createdAndRead(token);
    expect(read.user).toMatchObject({ id, username: "fay-tokens" });
    expect(made.user).toEqual(read.user);
  });

  test("provisioning answers the token's user in full: the caller just proved who they are", async () => {
    const u = await t.json("POST", "/api/users/users/", {
      body: { username: "gil-tokens", password: "s3cret-pass" },
    });
    expect(u.status).toBe(201);
    const r = await t.json("POST", "/api/users/tokens/provision/", {
      token: null,
      body: { username: "gil-tokens", password: "s3cret-pass" },
    });
    expect(r.status).toBe(201);
    expect(r.body.user).toMatchObject({ id: u.body.id, username: "gil-tokens" });
    expect(typeof r.body.token).toBe("string");
  });
});
