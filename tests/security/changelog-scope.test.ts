/**
 * Security (issue 27, row 1): a change record shows only to callers who may view the object it
 * is about under the constraints of their view permission: list, detail, filters and counts,
 * for host models and custom objects. A deleted object's records show only to callers whose
 * view of its type is unconstrained (decision 0064).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { addField, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
const site: Record<string, number> = {};
let alice: string; // view + change site `a` only, view on the change log
let carol: string; // view + change inv rows named `x1` only, view on the change log

beforeAll(async () => {
  t = await makeTestApp();
  for (const slug of ["a", "b", "c"]) {
    const r = await t.json("POST", "/api/dcim/sites/", {
      body: { name: `Site ${slug}`, slug, comments: `vpn psk for ${slug}: SECRET-${slug}` },
    });
    site[slug] = r.body.id;
  }
  await t.json("PATCH", `/api/dcim/sites/${site.b}/`, { body: { comments: "SECRET-b2" } });
  // a site that is gone: its records keep its last data
  const d = await t.json("POST", "/api/dcim/sites/", {
    body: { name: "Site d", slug: "d", comments: "SECRET-d" },
  });
  await t.req("DELETE", `/api/dcim/sites/${d.body.id}/`);
  site.d = d.body.id;

  const inv = await makeCot(t, "inv");
  await addField(t, inv.id, { name: "name", type: "text", primary: true });
  await addField(t, inv.id, { name: "secret", type: "text" });
  await create(t, "inv", { name: "x1", secret: "open" });
  await create(t, "inv", { name: "x2", secret: "SECRET-x2" });

  alice = (
    await userWith(t, "alice", [
      [["view", "change"], "dcim.site", { slug: "a" }],
      [["view"], "core.objectchange", null],
    ])
  ).token;
  carol = (
    await userWith(t, "carol", [
      [["view", "change"], "custom_objects.inv", { name: "x1" }],
      [["view"], "core.objectchange", null],
    ])
  ).token;
});
afterAll(() => t.close());

const secrets = (body: unknown) => JSON.stringify(body).match(/SECRET-[a-z0-9]+/g) ?? [];

describe("row 1: the change log follows view constraints", () => {
  test("the attacker's probe: site b is a 404, and so is every record about it", async () => {
    expect((await t.json("GET", `/api/dcim/sites/${site.b}/`, { token: alice })).status).toBe(404);
    const list = await t.json("GET", "/api/core/object-changes/?limit=1000", { token: alice });
    expect(list.status).toBe(200);
    expect(secrets(list.body)).toEqual(["SECRET-a"]);
    expect(list.body.count).toBe(list.body.results.length);
    for (const r of list.body.results) {
      expect(r.changed_object_type).toBe("dcim.site");
      expect(r.changed_object_id).toBe(site.a);
    }
    // filters and counts cannot reach them either
    for (const q of [
      `changed_object_id=${site.b}`,
      `changed_object_type=dcim.site&changed_object_id=${site.c}`,
      `q=SECRET-b`,
      `changed_object_id=${site.d}`,
    ]) {
      const r = await t.json("GET", `/api/core/object-changes/?${q}`, { token: alice });
      expect(r.status).toBe(200);
      expect(r.body.count).toBe(0);
    }
    // the detail of a record about b is a 404, like a record that does not exist
    const all = await t.json(
      "GET",
      `/api/core/object-changes/?changed_object_type=dcim.site&changed_object_id=${site.b}`,
    );
    expect(all.body.count).toBe(2);
    const hidden = await t.json("GET", `/api/core/object-changes/${all.body.results[0].id}/`, {
      token: alice,
    });
    const missing = await t.json("GET", "/api/core/object-changes/999999/", { token: alice });
    expect(hidden.status).toBe(404);
    expect(hidden.body).toEqual(missing.body);
  });

  test("custom objects: only the records of rows the type's view constraint admits", async () => {
    const list = await t.json("GET", "/api/core/object-changes/?limit=1000", { token: carol });
    expect(list.status).toBe(200);
    expect(list.body.count).toBe(1);
    expect(list.body.results[0].changed_object_type).toBe("custom_objects.inv");
    expect(list.body.results[0].object_repr).toBe("x1");
    expect(secrets(list.body)).toEqual([]);
  });

  test("a deleted object's records show only to callers whose view of its type is unconstrained", async () => {
    const viewer = (
      await userWith(t, "viewer", [
        [["view"], "dcim.site", null],
        [["view"], "core.objectchange", null],
      ])
    ).token;
    const seen = await t.json(
      "GET",
      `/api/core/object-changes/?changed_object_type=dcim.site&changed_object_id=${site.d}`,
      {
        token: viewer,
      },
    );
    expect(seen.body.count).toBe(2);
    expect(secrets(seen.body)).toContain("SECRET-d");
  });

  test("the change log itself stays readable by its own permission only", async () => {
    const noLog = (await userWith(t, "nolog", [[["view"], "dcim.site", null]])).token;
    expect((await t.json("GET", "/api/core/object-changes/", { token: noLog })).status).toBe(403);
  });
});
