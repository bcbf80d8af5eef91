import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const changes = async (query: string) => {
  const r = await t.json("GET", `/api/core/object-changes/?limit=1000&${query}`);
  expect(r.status).toBe(200);
  return r.body.results as any[];
};
const withRequestId = (id: string) => ({ headers: { "x-request-id": id } });

describe("change records for host models", () => {
  test("create, update and delete of a site: one record each with the §7 shape", async () => {
    const created = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Log Site", slug: "log-site" },
      ...withRequestId("req-site-create"),
    });
    expect(created.status).toBe(201);
    expect(created.res.headers.get("x-request-id")).toBe("req-site-create");
    const id = created.body.id;
    await t.json("PATCH", `/api/dcim/sites/${id}/`, {
      body: { description: "after" },
      ...withRequestId("req-site-update"),
    });
    expect(
      (await t.req("DELETE", `/api/dcim/sites/${id}/`, withRequestId("req-site-delete"))).status,
    ).toBe(204);

    const records = await changes(
      `changed_object_type=dcim.site&changed_object_id=${id}&ordering=id`,
    );
    expect(records.map((r) => r.action)).toEqual([
      { value: "create", label: "Created" },
      { value: "update", label: "Updated" },
      { value: "delete", label: "Deleted" },
    ]);
    const [c, u, d] = records;
    for (const key of [
      "id",
      "url",
      "display",
      "time",
      "user",
      "user_name",
      "request_id",
      "action",
      "changed_object_type",
      "changed_object_id",
      "object_repr",
      "prechange_data",
      "postchange_data",
    ]) {
      expect(c).toHaveProperty(key);
    }
    expect(c.url).toBe(`${BASE}/api/core/object-changes/${c.id}/`);
    expect(c.changed_object_type).toBe("dcim.site");
    expect(c.changed_object_id).toBe(id);
    expect(c.object_repr).toBe("Log Site");
    expect(c.user).toMatchObject({
      username: "admin",
      url: expect.stringContaining("/api/users/users/"),
    });
    expect(c.user_name).toBe("admin");
    expect([c.request_id, u.request_id, d.request_id]).toEqual([
      "req-site-create",
      "req-site-update",
      "req-site-delete",
    ]);
    expect(Date.parse(c.time)).toBeGreaterThan(Date.now() - 60_000);

    expect(c.prechange_data).toBeNull();
    expect(c.postchange_data).toMatchObject({
      id,
      name: "Log Site",
      slug: "log-site",
      description: "",
    });
    expect(u.prechange_data.description).toBe("");
    expect(u.postchange_data.description).toBe("after");
    expect(d.prechange_data).toMatchObject({ id, description: "after" });
    expect(d.postchange_data).toBeNull();
    // stored as SQL NULL, not as the JSON text 'null', for other readers of the table
    const stored = await t.deps.db.client.execute({
      sql: "SELECT action, typeof(prechange_data) AS pre, typeof(postchange_data) AS post FROM object_changes WHERE id IN (?, ?, ?) ORDER BY id",
      args: [c.id, u.id, d.id],
    });
    expect(stored.rows.map((r) => [r.action, r.pre, r.post])).toEqual([
      ["create", "null", "text"],
      ["update", "text", "text"],
      ["delete", "text", "null"],
    ]);
  });

  test("an update that changes nothing writes no record", async () => {
    const site = await t.json("POST", "/api/dcim/sites/", { body: { name: "Same", slug: "same" } });
    await t.json("PATCH", `/api/dcim/sites/${site.body.id}/`, { body: { name: "Same" } });
    const records = await changes(
      `changed_object_type=dcim.site&changed_object_id=${site.body.id}`,
    );
    expect(records.map((r) => r.action.value)).toEqual(["create"]);
  });

  test("users, tags and tokens are logged; secrets never appear in the snapshots", async () => {
    const user = await t.json("POST", "/api/users/users/", {
      body: { username: "logged", password: "s3cret-pass" },
    });
    const tag = await t.json("POST", "/api/extras/tags/", {
      body: { name: "Logged", slug: "logged" },
    });
    const token = await t.json("POST", "/api/users/tokens/", { body: { user: user.body.id } });
    expect(token.status).toBe(201);
    const [u] = await changes(`changed_object_type=users.user&changed_object_id=${user.body.id}`);
    expect(u.postchange_data.username).toBe("logged");
    expect(JSON.stringify(u)).not.toContain("s3cret-pass");
    expect(JSON.stringify(u)).not.toContain("pbkdf2");
    expect(
      (await changes(`changed_object_type=extras.tag&changed_object_id=${tag.body.id}`)).length,
    ).toBe(1);
    const [tk] = await changes(
      `changed_object_type=users.token&changed_object_id=${token.body.id}`,
    );
    expect(tk.action.value).toBe("create");
    expect(JSON.stringify(tk)).not.toContain(token.body.token);
  });

  test("a failing bulk request writes no change records (same transaction)", async () => {
    const before = (await changes("changed_object_type=dcim.site")).length;
    const r = await t.json("POST", "/api/dcim/sites/", {
      body: [
        { name: "Bulk A", slug: "bulk-a" },
        { name: "Bulk B", slug: "bulk b" }, // invalid slug
      ],
      ...withRequestId("req-bulk-fail"),
    });
    expect(r.status).toBe(400);
    expect((await changes("changed_object_type=dcim.site")).length).toBe(before);
    expect(await changes("request_id=req-bulk-fail")).toEqual([]);

    const ok = await t.json("POST", "/api/dcim/sites/", {
      body: [
        { name: "Bulk C", slug: "bulk-c" },
        { name: "Bulk D", slug: "bulk-d" },
      ],
      ...withRequestId("req-bulk-ok"),
    });
    expect(ok.status).toBe(201);
    const logged = await changes("request_id=req-bulk-ok&ordering=id");
    expect(logged.map((r) => r.object_repr)).toEqual(["Bulk C", "Bulk D"]);
  });

  test("a refused delete (409) writes nothing", async () => {
    const site = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Has devices", slug: "has-devices" },
    });
    await t.json("POST", "/api/dcim/devices/", { body: { name: "dev1", site: site.body.id } });
    const del = await t.req(
      "DELETE",
      `/api/dcim/sites/${site.body.id}/`,
      withRequestId("req-refused"),
    );
    expect(del.status).toBe(409);
    expect(await changes("request_id=req-refused")).toEqual([]);
  });
});

describe("change records for custom objects", () => {
  let cotId = 0;
  let objectTypeId = 0;
  test("COTs, COT fields and instances are logged with their object types", async () => {
    const cot = await makeCot(t, "circuit");
    cotId = cot.id;
    objectTypeId = cot.object_type.id;
    const field = await addField(t, cot.id, { name: "cid", type: "text", primary: true });
    const obj = await create(t, "circuit", { cid: "C-1" });
    await t.json("PATCH", `${CO}/circuit/${obj.id}/`, { body: { cid: "C-2" } });

    const [cotChange] = await changes(
      `changed_object_type=custom_objects.customobjecttype&changed_object_id=${cot.id}`,
    );
    expect(cotChange.action.value).toBe("create");
    expect(cotChange.postchange_data.slug).toBe("circuit");
    const [fieldChange] = await changes(
      `changed_object_type=custom-objects.customobjecttypefield&changed_object_id=${field.id}`,
    );
    expect(fieldChange.postchange_data).toMatchObject({
      name: "cid",
      type: "text",
      custom_object_type: cot.id,
    });

    const objChanges = await changes(`changed_object_type_id=${objectTypeId}&ordering=id`);
    expect(objChanges.map((r) => [r.action.value, r.object_repr])).toEqual([
      ["create", "C-1"],
      ["update", "C-2"],
    ]);
    expect(objChanges[0].changed_object_type).toBe("custom_objects.circuit");
    expect(objChanges[1].prechange_data.cid).toBe("C-1");
    expect(objChanges[1].postchange_data.cid).toBe("C-2");
    expect(objChanges[1].changed_object).toMatchObject({ id: obj.id, display: "C-2" });
  });

  test("cascade deletes through on_delete_behavior are logged too", async () => {
    const site = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Cascade", slug: "cascade" },
    });
    await addField(t, cotId, {
      name: "site",
      type: "object",
      related_object_type: "dcim.site",
      on_delete_behavior: "cascade",
    });
    const obj = await create(t, "circuit", { cid: "C-cascade", site: site.body.id });
    const del = await t.req(
      "DELETE",
      `/api/dcim/sites/${site.body.id}/`,
      withRequestId("req-cascade"),
    );
    expect(del.status).toBe(204);
    const logged = await changes("request_id=req-cascade&ordering=id");
    expect(logged.map((r) => [r.changed_object_type, r.changed_object_id, r.action.value])).toEqual(
      [
        ["custom_objects.circuit", obj.id, "delete"],
        ["dcim.site", site.body.id, "delete"],
      ],
    );
    expect(logged[0].prechange_data.cid).toBe("C-cascade");
  });

  test("a failing bulk create of custom objects writes no records", async () => {
    const before = (await changes(`changed_object_type_id=${objectTypeId}`)).length;
    const r = await t.json("POST", `${CO}/circuit/`, { body: [{ cid: "ok" }, { cid: 42 }] });
    expect(r.status).toBe(400);
    expect((await changes(`changed_object_type_id=${objectTypeId}`)).length).toBe(before);
  });
});

describe("change records for schema apply", () => {
  const SCHEMA = "/api/plugins/custom-objects/schema";
  const docOf = (fields: unknown[], removed: unknown[] = []) => ({
    schema_version: "1",
    types: [
      {
        name: "rack_unit",
        slug: "rack_unit",
        fields,
        ...(removed.length ? { removed_fields: removed } : {}),
      },
    ],
  });
  test("apply logs the COT and field creates, changes and removals; a no-op apply logs nothing", async () => {
    const first = await t.json("POST", `${SCHEMA}/apply/`, {
      body: {
        schema: docOf([
          { id: 1, name: "code", type: "text" },
          { id: 2, name: "size", type: "integer" },
        ]),
      },
      ...withRequestId("req-apply-1"),
    });
    expect(first.status).toBe(200);
    const created = await changes("request_id=req-apply-1&ordering=id");
    expect(created.map((r) => [r.changed_object_type, r.action.value, r.object_repr])).toEqual([
      ["custom_objects.customobjecttype", "create", "Rack_unit"],
      ["custom_objects.customobjecttypefield", "create", "code"],
      ["custom_objects.customobjecttypefield", "create", "size"],
    ]);

    const again = await t.json("POST", `${SCHEMA}/apply/`, {
      body: {
        schema: docOf([
          { id: 1, name: "code", type: "text" },
          { id: 2, name: "size", type: "integer" },
        ]),
      },
      ...withRequestId("req-apply-2"),
    });
    expect(again.status).toBe(200);
    expect(await changes("request_id=req-apply-2")).toEqual([]);

    const third = await t.json("POST", `${SCHEMA}/apply/`, {
      body: {
        schema: docOf(
          [{ id: 1, name: "code", type: "text", label: "Code" }],
          [{ id: 2, name: "size", type: "integer" }],
        ),
        allow_destructive: true,
      },
      ...withRequestId("req-apply-3"),
    });
    expect(third.status).toBe(200);
    const changed = await changes("request_id=req-apply-3&ordering=id");
    expect(changed.map((r) => [r.changed_object_type, r.action.value, r.object_repr])).toEqual([
      ["custom_objects.customobjecttype", "update", "Rack_unit"],
      ["custom_objects.customobjecttypefield", "update", "Code"],
      ["custom_objects.customobjecttypefield", "delete", "size"],
    ]);
    expect(changed[1].prechange_data.label).toBe("");
    expect(changed[1].postchange_data.label).toBe("Code");
  });

  test("a refused apply logs nothing", async () => {
    // a removal is gated only over values (issue 16): the type gets a row first
    expect(
      (await t.json("POST", "/api/plugins/custom-objects/rack_unit/", { body: { code: "U1" } }))
        .status,
    ).toBe(201);
    const r = await t.json("POST", `${SCHEMA}/apply/`, {
      body: { schema: docOf([], [{ id: 1, name: "code", type: "text" }]) },
      ...withRequestId("req-apply-refused"),
    });
    expect(r.status).toBe(409);
    expect(await changes("request_id=req-apply-refused")).toEqual([]);
  });
});

describe("/api/core/object-changes/", () => {
  test("is read-only: writes answer 405", async () => {
    const [any] = await changes("limit=1");
    for (const [method, path] of [
      ["POST", "/api/core/object-changes/"],
      ["PUT", `/api/core/object-changes/${any.id}/`],
      ["PATCH", `/api/core/object-changes/${any.id}/`],
      ["DELETE", `/api/core/object-changes/${any.id}/`],
    ] as const) {
      expect((await t.req(method, path, { body: {} })).status).toBe(405);
    }
    expect((await t.json("GET", `/api/core/object-changes/${any.id}/`)).body.id).toBe(any.id);
  });

  test("filters: action, user, request id, object, time; newest first by default", async () => {
    // view too: a caller may not change what they may not view (decision 0152)
    const key = await t.user("auditor", [
      [["add", "change", "view"], "tenancy.tenant"],
      [["view"], "core.objectchange"],
    ]);
    const tenant = await t.json("POST", "/api/tenancy/tenants/", {
      token: key,
      body: { name: "T1", slug: "t1" },
      ...withRequestId("req-auditor"),
    });
    expect(tenant.status).toBe(201);
    await t.json("PATCH", `/api/tenancy/tenants/${tenant.body.id}/`, {
      token: key,
      body: { name: "T1b" },
    });

    const byUser = await changes("user_name=auditor");
    expect(byUser.map((r) => r.action.value)).toEqual(["update", "create"]);
    const userId = byUser[0].user.id;
    expect((await changes(`user_id=${userId}`)).length).toBe(2);
    expect((await changes(`user_id=${userId}&action=create`)).map((r) => r.object_repr)).toEqual([
      "T1",
    ]);
    expect(
      (await changes("action=delete&changed_object_type=dcim.site")).every(
        (r) => r.action.value === "delete",
      ),
    ).toBe(true);
    expect((await changes("request_id=req-auditor")).length).toBe(1);
    expect((await changes("changed_object_type__n=dcim.site&user_name=auditor")).length).toBe(2);
    const tenantType = (
      await t.json("GET", "/api/core/object-types/?app_label=tenancy&model=tenant")
    ).body.results[0].id;
    expect(
      (await changes(`changed_object_type_id=${tenantType}&changed_object_id=${tenant.body.id}`))
        .length,
    ).toBe(2);

    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect(await changes(`time__gte=${encodeURIComponent(future)}`)).toEqual([]);
    const all = await changes("");
    expect((await changes(`time__gte=2000-01-01`)).length).toBe(all.length);
    const times = all.map((r) => r.time);
    expect([...times].sort().reverse()).toEqual(times);

    expect(
      (await t.json("GET", "/api/core/object-changes/?changed_object_type=nonsense")).status,
    ).toBe(400);
    expect((await t.json("GET", "/api/core/object-changes/?time__gte=yesterday")).status).toBe(400);
    const page = await t.json("GET", "/api/core/object-changes/?limit=2&brief=1");
    expect(page.body.results[0]).toEqual({
      id: expect.any(Number),
      url: expect.any(String),
      display: expect.any(String),
      time: expect.any(String),
      action: expect.any(Object),
    });
  });

  test("needs core.view_objectchange", async () => {
    const nobody = await t.user("nobody");
    expect((await t.req("GET", "/api/core/object-changes/", { token: nobody })).status).toBe(403);
    expect((await t.req("GET", "/api/core/object-changes/", { token: null })).status).toBe(403);
    const viewer = await t.user("viewer", [[["view"], "core.objectchange"]]);
    expect((await t.req("GET", "/api/core/object-changes/", { token: viewer })).status).toBe(200);
  });
});
