/**
 * Reads stay exact across app instances (issue 28 item 2, decision 0085): two apps on one remote
 * database (the project's Hrana server), each with its own caches, warmed first. A change made
 * through instance A is seen by the very next read through instance B — a token revoked, a
 * permission removed, a field added to a custom object type, a row changed — while B's reads
 * still cost one round trip when nothing changed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp, servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { loadConfig } from "../../src/config";
import { openDatabase } from "../../src/db/local";
import { createCache } from "../../src/services/cache";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";
import { anotherInstance, revokeTokensOf } from "../helpers/instances";
import { waitFor } from "../helpers/wait";
import type { CountingProxy } from "../helpers/counting-proxy";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";
import { settleBeforeCounting } from "../helpers/settle";

let remote: RemoteDb;
let proxy: CountingProxy;
let a: TestApp;
let b: Awaited<ReturnType<typeof anotherInstance>>;
let cotId: number;
let objectId: number;

/** A request through instance B with `token`. */
async function viaB(method: string, path: string, token: string) {
  const res = await b.app.request(BASE + path, {
    method,
    headers: { authorization: `Token ${token}` },
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** A write through instance B with `token` and a JSON body. */
async function writeViaB(method: string, path: string, token: string, body: unknown) {
  const res = await b.app.request(BASE + path, {
    method,
    headers: { authorization: `Token ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/**
 * Runs both instances' deferred search-index flushes now: an earlier test's custom-object writes
 * leave one armed, and its statements would land in the next count.
 */
async function settleBackground(as: { token: string; username: string } | null = null) {
  await flushSearchIndexesNow(servicesOf(a.app));
  // and the token's use, recorded off B's requests, once a minute: the counts are of B's work
  const { token, username } = as ?? { token: a.admin, username: "admin" };
  await settleBeforeCounting(b.app, () => viaB("GET", "/api/status/", token), username);
}

/** How many sites named `name` the database holds (read through A). */
async function sitesNamed(name: string) {
  return (await a.json("GET", `/api/dcim/sites/?name=${encodeURIComponent(name)}`)).body.count;
}

/** Removes the permission named `name` through instance A. */
async function removePermission(name: string) {
  const perms = await a.json("GET", `/api/users/permissions/?name=${name}`);
  expect(perms.body.count).toBe(1);
  const id = perms.body.results[0].id;
  expect((await a.req("DELETE", `/api/users/permissions/${id}/`)).status).toBe(204);
}

/** Whether every token of `username` has its first use recorded (written off the request). */
async function tokenUsed(username: string) {
  const mine = (await a.json("GET", "/api/users/tokens/?limit=1000")).body.results.filter(
    (t: { user: { username: string } }) => t.user.username === username,
  );
  return mine.length > 0 && mine.every((t: { last_used: string | null }) => t.last_used);
}

beforeAll(async () => {
  remote = await startRemoteDb("freshness");
  proxy = remote.proxy;
  a = await makeTestApp({ DATABASE_URL: remote.url });
  // Instance B: another app with caches of its own on the same database (another process or
  // isolate, as far as the caches can tell).
  b = await anotherInstance(remote.url);
  const cot = await makeCot(a, "gadget");
  cotId = cot.id;
  await addField(a, cotId, { name: "title", type: "text", primary: true });
  objectId = (await create(a, "gadget", { title: "first" })).id;
});
afterAll(async () => {
  await b.close();
  await a.close();
  await remote.stop();
});

describe("a change through instance A is seen by the next read through instance B", () => {
  test("a token revoked", async () => {
    const token = await a.user("revoked-user", [[["view"], "dcim.site"]]);
    expect((await viaB("GET", "/api/dcim/sites/", token)).status).toBe(200);
    expect((await viaB("GET", "/api/dcim/sites/", token)).status).toBe(200); // warm
    await revokeTokensOf(a, "revoked-user");
    const after = await viaB("GET", "/api/dcim/sites/", token);
    expect(after.status).toBe(403);
    expect(after.body.error).toBe("invalid_token");
  });

  test("a token revoked, on a route that does not fold the check into its read", async () => {
    const token = await a.user("revoked-status", [[["view"], "dcim.site"]]);
    expect((await viaB("GET", "/api/status/", token)).status).toBe(200);
    expect((await viaB("GET", "/api/status/", token)).status).toBe(200); // warm
    await revokeTokensOf(a, "revoked-status");
    expect((await viaB("GET", "/api/status/", token)).status).toBe(403);
  });

  test("a permission removed", async () => {
    const token = await a.user("unpermitted", [[["view"], "dcim.site"]]);
    expect((await viaB("GET", "/api/dcim/sites/", token)).status).toBe(200);
    expect((await viaB("GET", "/api/dcim/sites/", token)).status).toBe(200); // warm
    const perms = await a.json("GET", "/api/users/permissions/?name=unpermitted-dcim.site-view");
    expect(perms.body.count).toBe(1);
    const id = perms.body.results[0].id;
    expect((await a.req("DELETE", `/api/users/permissions/${id}/`)).status).toBe(204);
    expect((await viaB("GET", "/api/dcim/sites/", token)).status).toBe(403);
  });

  test("a field added to a custom object type", async () => {
    const path = `${CO}/gadget/${objectId}/`;
    expect((await viaB("GET", path, a.admin)).body).not.toHaveProperty("colour");
    await addField(a, cotId, { name: "colour", type: "text" });
    const after = await viaB("GET", path, a.admin);
    expect(after.status).toBe(200);
    expect(after.body).toHaveProperty("colour", null);
    const list = await viaB("GET", `${CO}/gadget/`, a.admin);
    expect(list.body.results[0]).toHaveProperty("colour", null);
  });

  test("a row changed", async () => {
    const path = `${CO}/gadget/${objectId}/`;
    const before = await viaB("GET", path, a.admin);
    const title = `${before.body.title}-changed`;
    expect((await a.json("PATCH", path, { body: { title } })).status).toBe(200);
    expect((await viaB("GET", path, a.admin)).body.title).toBe(title);
    const site = await a.json("POST", "/api/dcim/sites/", { body: { name: "n1", slug: "n1" } });
    expect((await viaB("GET", `/api/dcim/sites/${site.body.id}/`, a.admin)).body.name).toBe("n1");
    await a.json("PATCH", `/api/dcim/sites/${site.body.id}/`, { body: { name: "n2" } });
    expect((await viaB("GET", `/api/dcim/sites/${site.body.id}/`, a.admin)).body.name).toBe("n2");
  });

  test("linked objects in one read answer what the step-by-step path answers, and see a new link", async () => {
    const site = (await a.json("POST", "/api/dcim/sites/", { body: { name: "L", slug: "l" } })).body
      .id;
    const cot = await makeCot(a, "linker");
    await addField(a, cot.id, { name: "name", type: "text", primary: true });
    await addField(a, cot.id, { name: "home", type: "object", related_object_type: "dcim.site" });
    await addField(a, cot.id, {
      name: "visits",
      type: "multiobject",
      related_object_type: "dcim.site",
    });
    for (let i = 0; i < 5; i++)
      await create(a, "linker", {
        name: `l${i}`,
        home: i % 2 ? site : null,
        visits: i % 3 ? [site] : [],
      });
    for (const page of ["", "&limit=2", "&limit=2&offset=1", "&limit=3&offset=2", "&offset=50"]) {
      const path = `${CO}/linked-objects/?object_type=dcim.site&object_id=${site}${page}`;
      const stepwise = await viaB("GET", path, a.admin); // the first asks keeps the fields
      await settleBackground(); // A's deferred flush and the token's use, not in B's count
      proxy.reset();
      const oneRead = await viaB("GET", path, a.admin);
      // one read: the multiobject field's links and their nested forms ride on the rows
      expect(proxy.count).toBe(1);
      expect(oneRead).toEqual(stepwise);
      // a cold instance answers step by step again: the same
      expect((await a.json("GET", path)).body).toEqual(oneRead.body);
    }
    const all = `${CO}/linked-objects/?object_type=dcim.site&object_id=${site}`;
    expect((await viaB("GET", all, a.admin)).body.count).toBe(2 + 3);
    // a field added through A that points at sites is counted by B's next read
    await addField(a, cot.id, { name: "away", type: "object", related_object_type: "dcim.site" });
    await a.json(
      "PATCH",
      `${CO}/linker/${(await viaB("GET", all, a.admin)).body.results[0].object.id}/`,
      {
        body: { away: site },
      },
    );
    expect((await viaB("GET", all, a.admin)).body.count).toBe(2 + 3 + 1);
    expect(
      (await viaB("GET", `${CO}/linked-objects/?object_type=dcim.site&object_id=999999`, a.admin))
        .status,
    ).toBe(404);
  });

  test("GraphQL: a field added and a token revoked through A are seen by B's next query", async () => {
    const token = await a.user("graphql-user", [[["view"], "custom_objects.gadget"]]);
    const query = (q: string, as = token) =>
      b.app.request(`${BASE}/graphql/`, {
        method: "POST",
        headers: { authorization: `Token ${as}`, "content-type": "application/json" },
        body: JSON.stringify({ query: q }),
      });
    const first = await (await query("{ custom_objects_gadget_list { title } }")).json();
    expect(first.errors).toBeUndefined();
    await addField(a, cotId, { name: "weight", type: "integer" });
    const after = await query("{ custom_objects_gadget_list { title weight } }");
    const body = await after.json();
    expect(body.errors).toBeUndefined();
    expect(body.data.custom_objects_gadget_list[0]).toHaveProperty("weight", null);
    await revokeTokensOf(a, "graphql-user");
    expect((await query("{ custom_objects_gadget_list { title } }")).status).toBe(403);
  });

  test("the response budget holds in the one read: an over-budget page carries no rows", async () => {
    const config = loadConfig(
      { LOG_LEVEL: "silent", DATABASE_URL: proxy.url, MAX_RESPONSE_BYTES: "65536" },
      "bun",
    );
    const db = await openDatabase(config.database.url);
    try {
      const small = await createApp({ config, db, cache: createCache("memory", {}) });
      const big = "x".repeat(60_000);
      for (const i of [1, 2]) await create(a, "gadget", { title: `big ${i} ${big}` });
      await settleBackground();
      proxy.reset();
      const res = await small.request(`${BASE}${CO}/gadget/?limit=10`, {
        headers: { authorization: `Token ${a.admin}` },
      });
      expect(res.status).toBe(400);
      expect((await res.json()).error).toBe("response_too_large");
      // the rows' statement answered nothing: no 120 kB of values crossed the link
      expect(proxy.bytesIn).toBeLessThan(60_000);
      const one = await small.request(`${BASE}${CO}/gadget/?limit=1`, {
        headers: { authorization: `Token ${a.admin}` },
      });
      expect(one.status).toBe(200);
    } finally {
      await db.close();
    }
  });

  test("a custom type pointed at, renamed and reshaped through A: B's next read of a type pointing at it names it as it now is, as an app with no caches does (decision 0165)", async () => {
    const tgt = await makeCot(a, "fr_tgt");
    await addField(a, tgt.id, { name: "name", type: "text", primary: true });
    const t1 = await create(a, "fr_tgt", { name: "t1" });
    const t2 = await create(a, "fr_tgt", { name: "t2" });
    const hub = await makeCot(a, "fr_hub");
    await addField(a, hub.id, { name: "name", type: "text", primary: true });
    const to = { related_object_type: "custom_objects.fr_tgt" };
    await addField(a, hub.id, { name: "one", type: "object", ...to });
    await addField(a, hub.id, { name: "many", type: "multiobject", ...to });
    await addField(a, hub.id, {
      name: "anys",
      type: "multiobject",
      is_polymorphic: true,
      related_object_types: ["dcim.site", "custom_objects.fr_tgt"],
    });
    const h1 = await create(a, "fr_hub", {
      name: "h1",
      one: t1.id,
      many: [t1.id, t2.id],
      anys: [{ object_type: "custom_objects.fr_tgt", id: t2.id }],
    });
    const path = `${CO}/fr_hub/${h1.id}/`;
    /** B's answer and its round trips, and the answer of an app with no caches. */
    const readB = async (p = path) => {
      await settleBackground();
      proxy.reset();
      const got = await viaB("GET", p, a.admin);
      const trips = proxy.count;
      if (process.env.ROUND_TRIPS_LOG)
        console.log(
          p,
          trips,
          JSON.stringify(
            proxy.log.map((l) => l.sql.map((q) => q.slice(0, 120))),
            null,
            1,
          ),
        );
      const cold = await anotherInstance(remote.url);
      try {
        const res = await cold.app.request(BASE + p, {
          headers: { authorization: `Token ${a.admin}` },
        });
        expect(got.body).toEqual(await res.json());
      } finally {
        await cold.close();
      }
      return { trips, body: got.body };
    };
    await readB();
    expect((await readB()).trips).toBe(1); // warm: the target type's model from B's cache
    // renamed: its objects' urls and the polymorphic label follow
    const renamed = await a.json("PATCH", `${CO}/custom-object-types/${tgt.id}/`, {
      body: { slug: "fr_tgt2" },
    });
    expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
    const afterRename = await readB();
    expect(afterRename.body.one.url).toContain("/fr_tgt2/");
    expect(afterRename.body.anys[0].object_type).toBe("custom_objects.fr_tgt2");
    // reshaped: a field its display expression reads
    await addField(a, tgt.id, { name: "code", type: "text" });
    await a.json("PATCH", `${CO}/fr_tgt2/${t1.id}/`, { body: { code: "C1" } });
    await a.json("PATCH", `${CO}/custom-object-types/${tgt.id}/`, {
      body: { display_expression: "{{ code }} {{ name }}" },
    });
    const reshaped = await readB();
    expect(reshaped.body.one.display).toBe("C1 t1");
    expect(reshaped.body.many.map((n: { display: string }) => n.display)).toEqual(["C1 t1", "t2"]);
    // an object pointed at deleted: its id alone, as a read of it answers
    expect((await a.req("DELETE", `${CO}/fr_tgt2/${t2.id}/`)).status).toBe(204);
    const deleted = await readB();
    expect(deleted.body.many).toHaveLength(1);
    expect((await readB()).trips).toBe(1);
    expect((await readB(`${CO}/fr_hub/`)).trips).toBe(1);
    // a stale model: the guards' read, one read of the type as it now is, the read again
    expect([afterRename.trips, reshaped.trips, deleted.trips]).toEqual([3, 3, 1]);
  });

  test("and while nothing changes, B's reads stay one round trip", async () => {
    const path = `${CO}/gadget/${objectId}/`;
    await viaB("GET", path, a.admin);
    await settleBackground();
    proxy.reset();
    expect((await viaB("GET", path, a.admin)).status).toBe(200);
    expect(proxy.count).toBe(1);
  });
});

describe("a change through instance A holds for the next write through instance B (decision 0089)", () => {
  test("a token revoked: B's next write is refused and writes nothing (decision 0089)", async () => {
    const token = await a.user("revoked-writer", [[["view", "add", "change"], "dcim.site"]]);
    const site = await writeViaB("POST", "/api/dcim/sites/", token, { name: "w0", slug: "w0" });
    expect(site.status).toBe(201); // warm: B holds the token and its grants
    await revokeTokensOf(a, "revoked-writer");
    await settleBackground();
    proxy.reset();
    const after = await writeViaB("POST", "/api/dcim/sites/", token, { name: "w1", slug: "w1" });
    expect(after.status).toBe(403);
    expect(after.body.error).toBe("invalid_token");
    expect(proxy.count).toBeLessThanOrEqual(2);
    expect(await sitesNamed("w1")).toBe(0);
    const patch = await writeViaB("PATCH", `/api/dcim/sites/${site.body.id}/`, token, {
      name: "w0-changed",
    });
    expect(patch.status).toBe(403);
    expect(await sitesNamed("w0-changed")).toBe(0);
  });

  test("a permission removed: B's next write is checked on the fresh grants, nothing written", async () => {
    const token = await a.user("unpermitted-writer", [
      [["view"], "dcim.site"],
      [["add", "delete"], "dcim.site"],
    ]);
    const site = await writeViaB("POST", "/api/dcim/sites/", token, { name: "p0", slug: "p0" });
    expect(site.status).toBe(201); // warm
    await removePermission("unpermitted-writer-dcim.site-add-delete");
    const after = await writeViaB("POST", "/api/dcim/sites/", token, { name: "p1", slug: "p1" });
    expect(after.status).toBe(403);
    expect(after.body.error).not.toBe("invalid_token");
    expect(await sitesNamed("p1")).toBe(0);
    const gone = await a.user("unpermitted-deleter", [[["view", "add", "delete"], "dcim.site"]]);
    const victim = await writeViaB("POST", "/api/dcim/sites/", gone, { name: "p2", slug: "p2" });
    expect(victim.status).toBe(201); // warm
    await removePermission("unpermitted-deleter-dcim.site-view-add-delete");
    expect((await writeViaB("DELETE", `/api/dcim/sites/${victim.body.id}/`, gone, {})).status).toBe(
      403,
    );
    expect(await sitesNamed("p2")).toBe(1);
  });

  test("a permission added: B's next write is let through on the fresh grants", async () => {
    const token = await a.user("late-writer", [[["view"], "dcim.site"]]);
    const refused = await writeViaB("POST", "/api/dcim/sites/", token, { name: "q0", slug: "q0" });
    expect(refused.status).toBe(403); // warm: B holds grants without "add"
    const u = (await a.json("GET", "/api/users/users/?username=late-writer")).body.results[0].id;
    const grant = await a.json("POST", "/api/users/permissions/", {
      body: { name: "late-writer-add", actions: ["add"], object_types: ["dcim.site"], users: [u] },
    });
    expect(grant.status).toBe(201);
    const after = await writeViaB("POST", "/api/dcim/sites/", token, { name: "q1", slug: "q1" });
    expect(after.status).toBe(201);
    expect(await sitesNamed("q1")).toBe(1);
  });

  test("a permission removed under the one-trip create: B's next create is refused, nothing written (decision 0107)", async () => {
    const token = await a.user("one-trip-writer", [
      [["view"], "dcim.site"],
      [["add"], "dcim.site"],
    ]);
    const warm = await writeViaB("POST", "/api/dcim/sites/", token, { name: "o0", slug: "o0" });
    expect(warm.status).toBe(201); // B holds the token and its grants
    await waitFor(async () => (await tokenUsed("one-trip-writer")) === true);
    await settleBackground({ token, username: "one-trip-writer" });
    proxy.reset();
    const steady = await writeViaB("POST", "/api/dcim/sites/", token, { name: "o1", slug: "o1" });
    expect(steady.status).toBe(201);
    expect(proxy.count).toBe(1); // the create is its batch alone: the one-trip path
    await removePermission("one-trip-writer-dcim.site-add");
    await settleBackground({ token, username: "one-trip-writer" });
    proxy.reset();
    const after = await writeViaB("POST", "/api/dcim/sites/", token, { name: "o2", slug: "o2" });
    expect(after.status).toBe(403);
    expect(after.body.error).not.toBe("invalid_token");
    // the batch that carried the stale grants, the read that refreshed them: no write after
    expect(proxy.count).toBe(2);
    expect(await sitesNamed("o2")).toBe(0);
    // and a custom object the same way: a type without choice sets reads nothing before its batch
    const maker = await a.user("one-trip-maker", [[["view", "add"], "custom_objects.gadget"]]);
    const path = `${CO}/gadget/`;
    expect((await writeViaB("POST", path, maker, { title: "m0" })).status).toBe(201);
    await waitFor(async () => (await tokenUsed("one-trip-maker")) === true);
    await settleBackground({ token: maker, username: "one-trip-maker" });
    proxy.reset();
    expect((await writeViaB("POST", path, maker, { title: "m1" })).status).toBe(201);
    expect(proxy.count).toBe(1);
    await removePermission("one-trip-maker-custom_objects.gadget-view-add");
    const refused = await writeViaB("POST", path, maker, { title: "m2" });
    // holding nothing on the type any more, the maker hears it unknown (decision 0178)
    expect(refused.status).toBe(404);
    expect((await a.json("GET", `${path}?title=m2`)).body.count).toBe(0);
  });

  test("a referenced site renamed or deleted through A: B's next one-trip create sees it (decision 0107)", async () => {
    const ref = (await a.json("POST", "/api/dcim/sites/", { body: { name: "r0", slug: "r0" } }))
      .body.id;
    await addField(a, cotId, { name: "place", type: "object", related_object_type: "dcim.site" });
    const path = `${CO}/gadget/`;
    const first = await writeViaB("POST", path, a.admin, { title: "ref0", place: ref });
    expect(first.status).toBe(201); // warm: B holds the site's nested form
    await settleBackground();
    proxy.reset();
    const steady = await writeViaB("POST", path, a.admin, { title: "ref1", place: ref });
    expect(steady.status).toBe(201);
    expect(proxy.count).toBe(1);
    expect(steady.body.place.name).toBe("r0");
    expect(
      (await a.json("PATCH", `/api/dcim/sites/${ref}/`, { body: { name: "r0b" } })).status,
    ).toBe(200);
    const renamed = await writeViaB("POST", path, a.admin, { title: "ref2", place: ref });
    expect(renamed.status).toBe(201);
    expect(renamed.body.place.name).toBe("r0b");
    const changes = await a.json(
      "GET",
      "/api/core/object-changes/?changed_object_type=custom_objects.gadget&limit=1000",
    );
    const recorded = changes.body.results.find(
      (r: { changed_object_id: number }) => r.changed_object_id === renamed.body.id,
    );
    expect(recorded.postchange_data.place.name).toBe("r0b"); // the change record holds it too
    expect((await a.req("DELETE", `/api/dcim/sites/${ref}/`)).status).toBe(204);
    const gone = await writeViaB("POST", path, a.admin, { title: "ref3", place: ref });
    expect(gone.status).toBe(400);
    expect((await a.json("GET", `${path}?title=ref3`)).body.count).toBe(0);
  });

  test("a one-trip create its own guard refuses (outside the permission's constraints) answers 403, nothing written", async () => {
    const site = (await a.json("POST", "/api/dcim/sites/", { body: { name: "c0", slug: "c0" } }))
      .body.id;
    const limited = await makeCot(a, "limited");
    await addField(a, limited.id, { name: "title", type: "text", primary: true });
    await addField(a, limited.id, {
      name: "spot",
      type: "object",
      related_object_type: "dcim.site",
    });
    const token = await a.user("constrained-maker", [
      [["view"], "custom_objects.limited"],
      [["view"], "dcim.site"],
    ]);
    const u = (await a.json("GET", "/api/users/users/?username=constrained-maker")).body.results[0];
    const grant = await a.json("POST", "/api/users/permissions/", {
      body: {
        name: "constrained-maker-add",
        actions: ["add"],
        object_types: ["custom_objects.limited"],
        users: [u.id],
        constraints: { title: "ok" },
      },
    });
    expect(grant.status).toBe(201);
    const path = `${CO}/limited/`;
    // warm: B holds the token, its grants and the site's nested form
    expect((await writeViaB("POST", path, token, { title: "ok", spot: site })).status).toBe(201);
    const refused = await writeViaB("POST", path, token, { title: "no", spot: site });
    expect(refused.status).toBe(403);
    expect((await a.json("GET", `${path}?title=no`)).body.count).toBe(0);
    expect((await writeViaB("POST", path, token, { title: "ok", spot: site })).status).toBe(201);
  });

  test("a revert through B of a record B remembers, its type's field removed through A: 409, nothing written (decision 0118)", async () => {
    const cot = await makeCot(a, "keepsake");
    await addField(a, cot.id, { name: "title", type: "text", primary: true });
    const note = await addField(a, cot.id, { name: "note", type: "text" });
    const kept = await create(a, "keepsake", { title: "k1", note: "n1" });
    const patched = await a.json("PATCH", `${CO}/keepsake/${kept.id}/`, { body: { note: "n2" } });
    expect(patched.status).toBe(200);
    const renamed = await a.json("PATCH", `${CO}/keepsake/${kept.id}/`, { body: { title: "k2" } });
    expect(renamed.status).toBe(200);
    // B holds the type's model and both change records (as a caller who looked at them)
    expect((await viaB("GET", `${CO}/keepsake/${kept.id}/`, a.admin)).body.note).toBe("n2");
    const changes = await viaB(
      "GET",
      `/api/core/object-changes/?changed_object_type=custom_objects.keepsake&changed_object_id=${kept.id}&ordering=-id&limit=2`,
      a.admin,
    );
    const [titleChange, noteChange] = changes.body.results.map((r: { id: number }) => r.id);
    expect((await a.req("DELETE", `${CO}/custom-object-type-fields/${note.id}/`)).status).toBe(204);
    const count = async () =>
      (await a.json("GET", "/api/core/object-changes/?limit=1")).body.count as number;
    const before = await count();
    const refused = await writeViaB(
      "POST",
      `/api/core/object-changes/${noteChange}/revert/`,
      a.admin,
      {},
    );
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);
    expect(refused.body.conflicts).toEqual([
      expect.objectContaining({ reason: "fields_changed", field: "note" }),
    ]);
    expect(await count()).toBe(before);
    // and a revert B's stale model could not have made goes through on the type as it now is
    const done = await writeViaB(
      "POST",
      `/api/core/object-changes/${titleChange}/revert/`,
      a.admin,
      {},
    );
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    const now = await a.json("GET", `${CO}/keepsake/${kept.id}/`);
    expect(now.body.title).toBe("k1");
    expect(now.body).not.toHaveProperty("note");
  });

  test("and while nothing changes, B's writes are one read and one write", async () => {
    const token = await a.user("steady-writer", [[["view", "add", "change"], "dcim.site"]]);
    expect(
      (await writeViaB("POST", "/api/dcim/sites/", token, { name: "s0", slug: "s0" })).status,
    ).toBe(201);
    // The first use records the token's `last_used` without holding the answer: let it land
    // before counting, or it may be counted as one of the next write's round trips.
    await waitFor(async () => {
      const mine = (await a.json("GET", "/api/users/tokens/?limit=1000")).body.results.filter(
        (t: { user: { username: string } }) => t.user.username === "steady-writer",
      );
      return mine.length > 0 && mine.every((t: { last_used: string | null }) => t.last_used);
    });
    await settleBackground({ token, username: "steady-writer" });
    proxy.reset();
    const site = await writeViaB("POST", "/api/dcim/sites/", token, { name: "s1", slug: "s1" });
    expect(site.status).toBe(201);
    // a create that reads nothing: its batch alone, carrying the token guard (decision 0107)
    expect(proxy.count).toBe(1);
    await settleBackground({ token, username: "steady-writer" });
    proxy.reset();
    const patch = await writeViaB("PATCH", `/api/dcim/sites/${site.body.id}/`, token, {
      description: "steady",
    });
    expect(patch.status).toBe(200);
    expect(proxy.count).toBe(2);
  });
});
