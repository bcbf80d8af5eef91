/**
 * Security: nothing a user may not view is returned or named — the plugin root, schema
 * preview and export, custom object type records, nested related objects and linked-objects.
 * (The OpenAPI document has its own file, leaks-openapi.test.ts.)
 */
import { userWith as grantedUser } from "../helpers/grants";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
let seer: string; // may view the `open` type (definition and objects), nothing about `secret`
let seerNoTypes: string; // may view objects of `open` only

async function userWith(username: string, grants: Array<[string[], string, unknown]>) {
  return (await grantedUser(t, username, grants)).token;
}

beforeAll(async () => {
  t = await makeTestApp();
  const open = await makeCot(t, "open", "open", { verbose_name: "Open things" });
  await addField(t, open.id, { name: "title", type: "text", primary: true });
  const secret = await makeCot(t, "secret", "secret", { verbose_name: "Secret things" });
  await addField(t, secret.id, { name: "codename_xyz", type: "text", primary: true });
  await addField(t, open.id, {
    name: "buddy",
    type: "object",
    related_object_type: "custom_objects.secret",
  });
  const s = await create(t, "secret", { codename_xyz: "Project Nightingale" });
  await create(t, "open", { title: "visible", buddy: s.id });
  seer = await userWith("seer", [
    [["view"], "custom_objects.open", null],
    [["view"], "custom_objects.customobjecttype", { slug: "open" }],
  ]);
  seerNoTypes = await userWith("seer2", [[["view"], "custom_objects.open", null]]);
});
afterAll(() => t.close());

const mentionsSecret = (body: unknown) =>
  /secret|codename_xyz|Nightingale/i.test(JSON.stringify(body));

describe("plugin root", () => {
  test("lists only the types whose objects the caller may view", async () => {
    const r = await t.json("GET", `${CO}/`, { token: seer });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body)).toEqual(["open"]);
    const admin = await t.json("GET", `${CO}/`);
    expect(Object.keys(admin.body).sort()).toEqual(["open", "secret"]);
  });
});

describe("custom object type records", () => {
  test("type and field lists follow the type permission's constraints", async () => {
    const types = await t.json("GET", `${CO}/custom-object-types/`, { token: seer });
    expect(types.status).toBe(200);
    expect(types.body.results.map((r: any) => r.slug)).toEqual(["open"]);
    expect(JSON.stringify(types.body.results[0].fields.map((f: any) => f.name))).not.toContain(
      "codename_xyz",
    );
    const secretId = (await t.json("GET", `${CO}/custom-object-types/?slug=secret`)).body.results[0]
      .id;
    expect(
      (await t.json("GET", `${CO}/custom-object-types/${secretId}/`, { token: seer })).status,
    ).toBe(404);
  });
});

describe("schema preview and export", () => {
  const doc = {
    schema_version: "1",
    types: [
      {
        name: "open",
        slug: "open",
        fields: [{ id: 1, name: "title", type: "text", primary: true }],
      },
      { name: "secret", slug: "secret", fields: [] },
    ],
  };

  test("preview shows nothing of an existing type the caller may not view", async () => {
    // a type the caller may not view is previewed as a new one (issue 27, decision 0064)
    const r = await t.json("POST", `${CO}/schema/preview/`, { token: seer, body: doc });
    expect(r.status).toBe(200);
    const secret = r.body.diffs.find((d: any) => d.slug === "secret");
    expect(secret.is_new).toBe(true);
    expect(secret.field_changes).toEqual([]);
    expect(JSON.stringify(r.body)).not.toContain("codename_xyz");
    // without view on custom object types there is no preview at all
    const none = await t.json("POST", `${CO}/schema/preview/`, { token: seerNoTypes, body: doc });
    expect(none.status).toBe(403);
    // the type the caller may view is previewed in full
    const open = r.body.diffs.find((d: any) => d.slug === "open");
    expect(open.is_new).toBe(false);
    // a superuser sees the field the document leaves out
    const admin = await t.json("POST", `${CO}/schema/preview/`, { body: doc });
    expect(JSON.stringify(admin.body)).toContain("codename_xyz");
  });

  test("export leaves out types the caller may not view; asking for one is a 404 like a missing slug", async () => {
    const all = await t.json("GET", `${CO}/schema/export/`, { token: seer });
    expect(all.status).toBe(200);
    expect(all.body.types.map((x: any) => x.slug)).toEqual(["open"]);
    expect(JSON.stringify(all.body)).not.toContain("codename_xyz");
    const hidden = await t.json("GET", `${CO}/schema/export/?slug=secret`, { token: seer });
    const missing = await t.json("GET", `${CO}/schema/export/?slug=nosuch`, { token: seer });
    expect(hidden.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(hidden.body.detail.replace("secret", "nosuch")).toBe(missing.body.detail);
  });

  test("an apply may not change a type outside the caller's change constraint", async () => {
    const editor = await userWith("editor", [
      [["view", "add", "change"], "custom_objects.customobjecttype", { slug: "open" }],
    ]);
    const r = await t.json("POST", `${CO}/schema/apply/`, {
      token: editor,
      body: {
        schema: {
          schema_version: "1",
          types: [{ name: "secret", slug: "secret", description: "renamed", fields: [] }],
        },
      },
    });
    expect(r.status).toBe(403);
    expect(
      (await t.json("GET", `${CO}/custom-object-types/?slug=secret`)).body.results[0].description,
    ).toBe("");
    // nor create a type its add constraint does not cover
    const made = await t.json("POST", `${CO}/schema/apply/`, {
      token: editor,
      body: {
        schema: { schema_version: "1", types: [{ name: "other", slug: "other", fields: [] }] },
      },
    });
    expect(made.status).toBe(403);
    expect((await t.json("GET", `${CO}/custom-object-types/?slug=other`)).body.count).toBe(0);
    // its own type is fine
    const ok = await t.json("POST", `${CO}/schema/apply/`, {
      token: editor,
      body: {
        schema: {
          schema_version: "1",
          types: [{ name: "open", slug: "open", description: "now described", fields: [] }],
        },
      },
    });
    expect(ok.status).toBe(200);
  });
});

describe("nested related objects and linked-objects", () => {
  test("a visible object's link to an invisible one shows neither its display nor its fields", async () => {
    const r = await t.json("GET", `${CO}/open/`, { token: seer });
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(1);
    expect(r.body.results[0].buddy).toEqual({ id: expect.any(Number) });
    expect(JSON.stringify(r.body)).not.toContain("Nightingale");
  });

  test("linked-objects does not reveal whether an invisible object exists", async () => {
    const secretObj = (await t.json("GET", `${CO}/secret/`)).body.results[0].id;
    const exists = await t.json(
      "GET",
      `${CO}/linked-objects/?object_type=custom_objects.secret&object_id=${secretObj}`,
      { token: seer },
    );
    const absent = await t.json(
      "GET",
      `${CO}/linked-objects/?object_type=custom_objects.secret&object_id=424242`,
      { token: seer },
    );
    // holding nothing on the type, the caller hears it named unknown either way (decision 0178)
    expect(exists.status).toBe(400);
    expect(exists.body).toEqual(absent.body);
  });
});

describe("change log", () => {
  test("a user who may read the change log sees only changes to types whose objects they may view", async () => {
    const auditor = await userWith("auditor", [
      [["view"], "core.objectchange", null],
      [["view"], "custom_objects.open", null],
    ]);
    const r = await t.json("GET", "/api/core/object-changes/?limit=1000", { token: auditor });
    expect(r.status).toBe(200);
    expect(r.body.count).toBeGreaterThan(0);
    for (const ch of r.body.results) expect(ch.changed_object_type).toBe("custom_objects.open");
    expect(mentionsSecret(r.body)).toBe(false);
    const all = await t.json("GET", "/api/core/object-changes/?limit=1000");
    expect(mentionsSecret(all.body)).toBe(true);
  });
});

describe("schema trash (issue 16)", () => {
  test("entries of a type the caller may not view are not listed, and cannot be restored or purged by them", async () => {
    const secretId = (await t.json("GET", `${CO}/custom-object-types/?slug=secret`)).body.results[0]
      .id;
    await addField(t, secretId, { name: "hush", type: "text" });
    const [obj] = (await t.json("GET", `${CO}/secret/`)).body.results;
    expect(
      (await t.json("PATCH", `${CO}/secret/${obj.id}/`, { body: { hush: "Nightingale's nest" } }))
        .status,
    ).toBe(200);
    const doc = (await t.json("GET", `${CO}/schema/export/?slug=secret`)).body;
    const type = doc.types[0];
    const hush = type.fields.find((f: any) => f.name === "hush");
    const removing = {
      ...doc,
      types: [
        {
          ...type,
          fields: type.fields.filter((f: any) => f.name !== "hush"),
          removed_fields: [hush],
        },
      ],
    };
    expect(
      (
        await t.json("POST", `${CO}/schema/apply/`, {
          body: { schema: removing, allow_destructive: true },
        })
      ).status,
    ).toBe(200);
    const admin = await t.json("GET", `${CO}/schema/trash/`);
    const entry = admin.body.results.find((r: any) => r.name === "hush");
    expect(entry).toMatchObject({ custom_object_type: { slug: "secret" }, rows: 1 });
    const seen = await t.json("GET", `${CO}/schema/trash/`, { token: seer });
    expect(seen.status).toBe(200);
    expect(seen.body.count).toBe(0);
    expect(mentionsSecret(seen.body)).toBe(false);
    const changer = await userWith("trash-changer", [
      [["view", "add", "change", "delete"], "custom_objects.customobjecttype", { slug: "open" }],
    ]);
    for (const [method, path] of [
      ["POST", `${CO}/schema/trash/${entry.id}/restore/`],
      ["DELETE", `${CO}/schema/trash/${entry.id}/`],
    ] as const) {
      const r = await t.json(method, path, { token: changer });
      expect(r.status).toBe(404);
      expect(mentionsSecret(r.body)).toBe(false);
    }
    expect((await t.json("POST", `${CO}/schema/trash/${entry.id}/restore/`)).status).toBe(200);
  });
});
