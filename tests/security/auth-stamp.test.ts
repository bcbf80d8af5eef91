/**
 * The auth stamps (migration 0018, decision 0209) cover every table a token look-up reads. A
 * remote app proves its cached token and grants by the token's own columns and its user's stamp,
 * which triggers move; a table whose triggers were missing would let a warm app answer from a
 * stale cache. Each case warms app A, changes one auth table directly in SQL from a second client
 * (another process, as far as A can tell), and asserts that A's very next GET answers what an app
 * with no caches answers, and that the change mattered (the answer moved).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createClient, type Client } from "@libsql/client";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";
import { anotherInstance } from "../helpers/instances";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";

let remote: RemoteDb;
let a: TestApp;
let raw: Client;
let siteId: number;
let siteTypeId: number;
let n = 0;

beforeAll(async () => {
  remote = await startRemoteDb("auth-stamp");
  a = await makeTestApp({ DATABASE_URL: remote.url });
  raw = createClient({ url: remote.url });
  const site = await a.json("POST", "/api/dcim/sites/", { body: { name: "s", slug: "s" } });
  siteId = site.body.id;
  const ot = await raw.execute(
    "SELECT id FROM object_types WHERE app_label = 'dcim' AND model = 'site'",
  );
  siteTypeId = Number(ot.rows[0]![0]);
});
afterAll(async () => {
  raw.close();
  await a.close();
  await remote.stop();
});

/** A user and token; `grant` gives them a permission to view sites, directly or through a group. */
async function caller(grant: "direct" | "group" | "none") {
  const username = `u${++n}`;
  const user = await createUser(a.deps.db.orm, { username });
  const group = (await a.json("POST", "/api/users/groups/", { body: { name: `g${n}` } })).body.id;
  const permission = await a.json("POST", "/api/users/permissions/", {
    body: {
      name: `p${n}`,
      actions: ["view"],
      object_types: ["dcim.site"],
      users: grant === "direct" ? [user.id] : [],
      groups: grant === "group" ? [group] : [],
    },
  });
  expect(permission.status).toBe(201);
  if (grant === "group") await raw.execute(`INSERT INTO user_groups VALUES (${user.id}, ${group})`);
  const token = (await issueToken(a.deps.db.orm, { username })).key;
  return { userId: user.id, groupId: group as number, permissionId: permission.body.id, token };
}

const getSite = async (app: TestApp["app"], token: string) =>
  (
    await app.request(`${BASE}/api/dcim/sites/${siteId}/`, {
      headers: { authorization: `Token ${token}` },
    })
  ).status;

/** What an app with no caches answers now. */
async function uncached(token: string): Promise<number> {
  const fresh = await anotherInstance(remote.url);
  try {
    return await getSite(fresh.app, token);
  } finally {
    await fresh.close();
  }
}

/**
 * Warms A with `token` (answering `before`), runs `change` from the second client, and expects
 * A's next GET to answer `after`, as an app with no caches does.
 */
async function seen(token: string, before: number, change: string | string[], after: number) {
  expect(await getSite(a.app, token)).toBe(before);
  expect(await getSite(a.app, token)).toBe(before);
  for (const statement of [change].flat()) await raw.execute(statement);
  const now = await getSite(a.app, token);
  expect({ now, uncached: await uncached(token) }).toEqual({ now: after, uncached: after });
}

test("users: deactivated, made superuser, deleted", async () => {
  const off = await caller("direct");
  await seen(off.token, 200, `UPDATE users SET is_active = 0 WHERE id = ${off.userId}`, 403);
  const up = await caller("none");
  await seen(up.token, 403, `UPDATE users SET is_superuser = 1 WHERE id = ${up.userId}`, 200);
  const gone = await caller("direct");
  await seen(
    gone.token,
    200,
    [
      `DELETE FROM tokens WHERE user_id = ${gone.userId}`,
      `DELETE FROM users WHERE id = ${gone.userId}`,
    ],
    403,
  );
});

test("tokens: disabled, expired, deleted (the token's own columns)", async () => {
  const off = await caller("direct");
  await seen(off.token, 200, `UPDATE tokens SET enabled = 0 WHERE user_id = ${off.userId}`, 403);
  const old = await caller("direct");
  const past = "2000-01-01T00:00:00.000Z";
  await seen(
    old.token,
    200,
    `UPDATE tokens SET expires = '${past}' WHERE user_id = ${old.userId}`,
    403,
  );
  const gone = await caller("direct");
  await seen(gone.token, 200, `DELETE FROM tokens WHERE user_id = ${gone.userId}`, 403);
});

test("groups and memberships: joined, left, the group deleted", async () => {
  const joins = await caller("none");
  const granted = await caller("group");
  await seen(
    joins.token,
    403,
    `INSERT INTO user_groups VALUES (${joins.userId}, ${granted.groupId})`,
    200,
  );
  await seen(
    joins.token,
    200,
    `DELETE FROM user_groups WHERE user_id = ${joins.userId} AND group_id = ${granted.groupId}`,
    403,
  );
  const moved = await caller("group");
  const other = await caller("none");
  await seen(
    moved.token,
    200,
    `UPDATE user_groups SET group_id = ${other.groupId} WHERE user_id = ${moved.userId}`,
    403,
  );
  const dissolved = await caller("group");
  await seen(
    dissolved.token,
    200,
    [
      `DELETE FROM object_permission_groups WHERE group_id = ${dissolved.groupId}`,
      `DELETE FROM user_groups WHERE group_id = ${dissolved.groupId}`,
      `DELETE FROM groups WHERE id = ${dissolved.groupId}`,
    ],
    403,
  );
});

test("object permissions: disabled, actions and constraints changed, deleted", async () => {
  const off = await caller("direct");
  const where = (c: { permissionId: number }) => `WHERE id = ${c.permissionId}`;
  await seen(off.token, 200, `UPDATE object_permissions SET enabled = 0 ${where(off)}`, 403);
  const acts = await caller("group");
  await seen(
    acts.token,
    200,
    `UPDATE object_permissions SET actions = '["change"]' ${where(acts)}`,
    403,
  );
  const narrowed = await caller("direct");
  await seen(
    narrowed.token,
    200,
    `UPDATE object_permissions SET constraints = '{"id": ${siteId + 1000}}' ${where(narrowed)}`,
    404,
  );
  const gone = await caller("direct");
  await seen(
    gone.token,
    200,
    [
      `DELETE FROM object_permission_users WHERE permission_id = ${gone.permissionId}`,
      `DELETE FROM object_permission_object_types WHERE permission_id = ${gone.permissionId}`,
      `DELETE FROM object_permissions ${where(gone)}`,
    ],
    403,
  );
});

test("a permission's links: its users, groups and object types", async () => {
  const lost = await caller("direct");
  await seen(
    lost.token,
    200,
    `DELETE FROM object_permission_users WHERE user_id = ${lost.userId}`,
    403,
  );
  await seen(
    lost.token,
    403,
    `INSERT INTO object_permission_users VALUES (${lost.permissionId}, ${lost.userId})`,
    200,
  );
  const viaGroup = await caller("none");
  await raw.execute(`INSERT INTO user_groups VALUES (${viaGroup.userId}, ${viaGroup.groupId})`);
  await seen(
    viaGroup.token,
    403,
    `INSERT INTO object_permission_groups VALUES (${viaGroup.permissionId}, ${viaGroup.groupId})`,
    200,
  );
  await seen(
    viaGroup.token,
    200,
    `DELETE FROM object_permission_groups WHERE group_id = ${viaGroup.groupId}`,
    403,
  );
  const retyped = await caller("direct");
  await raw.execute("INSERT INTO object_types (app_label, model) VALUES ('zz', 'other')");
  const other = await raw.execute("SELECT id FROM object_types WHERE model = 'other'");
  await seen(
    retyped.token,
    200,
    `UPDATE object_permission_object_types SET object_type_id = ${Number(other.rows[0]![0])} WHERE permission_id = ${retyped.permissionId}`,
    403,
  );
  await seen(
    retyped.token,
    403,
    `UPDATE object_permission_object_types SET object_type_id = ${siteTypeId} WHERE permission_id = ${retyped.permissionId}`,
    200,
  );
});

test("object types: a type a user's permission names, renamed or deleted, moves that user's stamp", async () => {
  const stampOf = async (userId: number) =>
    (await raw.execute(`SELECT stamp FROM auth_stamp WHERE user_id = ${userId}`)).rows[0]?.[0] ??
    null;
  const c = await caller("direct");
  await raw.execute("INSERT INTO object_types (app_label, model) VALUES ('zz', 'renamed')");
  const typeId = Number(
    (await raw.execute("SELECT id FROM object_types WHERE app_label = 'zz'")).rows[0]![0],
  );
  await raw.execute(
    `INSERT INTO object_permission_object_types VALUES (${c.permissionId}, ${typeId})`,
  );
  const linked = await stampOf(c.userId);
  const bystander = await caller("direct");
  const untouched = await stampOf(bystander.userId);
  await raw.execute(`UPDATE object_types SET model = 'renamed_again' WHERE id = ${typeId}`);
  const renamed = await stampOf(c.userId);
  expect(renamed).not.toBe(linked);
  await raw.execute(`DELETE FROM object_types WHERE id = ${typeId}`);
  expect(await stampOf(c.userId)).not.toBe(renamed);
  // a change that reaches no permission of theirs leaves another user's stamp alone
  expect(await stampOf(bystander.userId)).toBe(untouched);
  await seen(c.token, 200, "SELECT 1", 200);
});

test("what a look-up does not read moves no stamp: a token's last use, a user's name fields", async () => {
  const c = await caller("direct");
  const stamp = async () =>
    (await raw.execute(`SELECT stamp FROM auth_stamp WHERE user_id = ${c.userId}`)).rows[0]?.[0];
  const before = await stamp();
  await raw.execute(`UPDATE tokens SET last_used = '2030-01-01' WHERE user_id = ${c.userId}`);
  await raw.execute(`UPDATE users SET first_name = 'x', email = 'x@x' WHERE id = ${c.userId}`);
  expect(await stamp()).toBe(before);
  await seen(c.token, 200, "SELECT 1", 200);
});

test("a refused token is looked up again: re-enabled, extended, reactivated, made later", async () => {
  // a refusal the cache remembered must not outlive the change that lifts it
  const off = await caller("direct");
  await raw.execute(`UPDATE tokens SET enabled = 0 WHERE user_id = ${off.userId}`);
  await seen(off.token, 403, `UPDATE tokens SET enabled = 1 WHERE user_id = ${off.userId}`, 200);
  const old = await caller("direct");
  await raw.execute(
    `UPDATE tokens SET expires = '2000-01-01T00:00:00.000Z' WHERE user_id = ${old.userId}`,
  );
  await seen(old.token, 403, `UPDATE tokens SET expires = NULL WHERE user_id = ${old.userId}`, 200);
  const asleep = await caller("direct");
  await raw.execute(`UPDATE users SET is_active = 0 WHERE id = ${asleep.userId}`);
  await seen(asleep.token, 403, `UPDATE users SET is_active = 1 WHERE id = ${asleep.userId}`, 200);
  // a secret first presented before any token had it (another instance wrote the row since)
  const later = await caller("direct");
  const moved = await raw.execute(`SELECT key_hash FROM tokens WHERE user_id = ${later.userId}`);
  const hash = String(moved.rows[0]![0]);
  await raw.execute(`UPDATE tokens SET key_hash = 'elsewhere' WHERE user_id = ${later.userId}`);
  await seen(
    later.token,
    403,
    `UPDATE tokens SET key_hash = '${hash}' WHERE user_id = ${later.userId}`,
    200,
  );
});
