/**
 * Issue 32 item 2: `POST /api/core/object-changes/<id>/revert/` puts an object back as it was
 * before one change (update, delete, create), as a new write with its own change record through
 * the caller's permissions; conflicts answer 409 and write nothing, `force` reverts what it can,
 * `dry_run` writes nothing. Host models and custom objects alike (decision 0088).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { addField, choiceSet, CO, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

/** The latest change record of an object. */
async function lastChange(type: string, id: number) {
  const r = await t.json(
    "GET",
    `/api/core/object-changes/?changed_object_type=${type}&changed_object_id=${id}&ordering=-id&limit=1`,
  );
  return r.body.results[0] as Record<string, any>;
}
const changeCount = async () =>
  (await t.json("GET", "/api/core/object-changes/?limit=1")).body.count as number;
const revert = (id: number, query = "", token?: string) =>
  t.json("POST", `/api/core/object-changes/${id}/revert/${query}`, { token });

let seq = 0;
async function site(extra: Record<string, unknown> = {}) {
  const n = ++seq;
  const r = await t.json("POST", "/api/dcim/sites/", {
    body: { name: `Site ${n}`, slug: `s${n}`, ...extra },
  });
  expect(r.status).toBe(201);
  return r.body as Record<string, any> & { id: number };
}

describe("host models", () => {
  test("an update: the changed fields go back, as a new change record; dry_run writes nothing", async () => {
    const s = await site({ description: "before", comments: "kept" });
    await t.json("PATCH", `/api/dcim/sites/${s.id}/`, { body: { description: "after" } });
    const change = await lastChange("dcim.site", s.id);
    const before = await changeCount();

    const dry = await revert(change.id, "?dry_run=true");
    expect(dry.status).toBe(200);
    expect(dry.body.dry_run).toBe(true);
    expect(dry.body.changes).toEqual({ description: { from: "after", to: "before" } });
    expect(dry.body.change).toBeNull();
    expect(dry.body.object.description).toBe("before");
    expect(await changeCount()).toBe(before);
    expect((await t.json("GET", `/api/dcim/sites/${s.id}/`)).body.description).toBe("after");

    const done = await revert(change.id);
    expect(done.status).toBe(200);
    expect(done.body.action).toBe("update");
    expect(done.body.object.description).toBe("before");
    expect((await t.json("GET", `/api/dcim/sites/${s.id}/`)).body.description).toBe("before");
    const record = await lastChange("dcim.site", s.id);
    expect(record.id).toBe(done.body.change);
    expect(record.action.value).toBe("update");
    expect(record.prechange_data.description).toBe("after");
    expect(record.postchange_data.description).toBe("before");
  });

  test("a later change to the same field is a 409 naming it; force reverts the rest", async () => {
    const s = await site({ description: "d0", comments: "c0" });
    await t.json("PATCH", `/api/dcim/sites/${s.id}/`, {
      body: { description: "d1", comments: "c1" },
    });
    const change = await lastChange("dcim.site", s.id);
    await t.json("PATCH", `/api/dcim/sites/${s.id}/`, { body: { comments: "c2" } });
    const later = await lastChange("dcim.site", s.id);
    const before = await changeCount();

    const refused = await revert(change.id);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe("revert_conflict");
    expect(refused.body.conflicts).toEqual([
      expect.objectContaining({ reason: "later_change", field: "comments", changes: [later.id] }),
    ]);
    expect(await changeCount()).toBe(before);
    const now = (await t.json("GET", `/api/dcim/sites/${s.id}/`)).body;
    expect([now.description, now.comments]).toEqual(["d1", "c2"]);

    const forced = await revert(change.id, "?force=true");
    expect(forced.status).toBe(200);
    expect(forced.body.skipped.map((x: any) => x.field)).toEqual(["comments"]);
    const after = (await t.json("GET", `/api/dcim/sites/${s.id}/`)).body;
    expect([after.description, after.comments]).toEqual(["d0", "c2"]);
  });

  test("a delete: the object back under its id, with its tags", async () => {
    const tag = await t.json("POST", "/api/extras/tags/", { body: { name: "Gold", slug: "gold" } });
    const s = await site({ description: "gone soon", tags: [tag.body.id] });
    expect((await t.req("DELETE", `/api/dcim/sites/${s.id}/`)).status).toBe(204);
    const change = await lastChange("dcim.site", s.id);
    expect(change.action.value).toBe("delete");

    const done = await revert(change.id);
    expect(done.status).toBe(200);
    expect(done.body.action).toBe("create");
    const back = await t.json("GET", `/api/dcim/sites/${s.id}/`);
    expect(back.status).toBe(200);
    expect(back.body.description).toBe("gone soon");
    expect(back.body.tags.map((x: any) => x.slug)).toEqual(["gold"]);
    expect((await lastChange("dcim.site", s.id)).action.value).toBe("create");
    // reverting it again: the object exists, nothing to put back
    const again = await revert(change.id, "?force=true");
    expect(again.status).toBe(409);
    expect(again.body.conflicts[0].reason).toBe("object_exists");
  });

  test("a unique key taken since is a 409 naming the field, nothing written", async () => {
    const s = await site();
    await t.req("DELETE", `/api/dcim/sites/${s.id}/`);
    const change = await lastChange("dcim.site", s.id);
    await t.json("POST", "/api/dcim/sites/", { body: { name: "Other", slug: s.slug } });
    const before = await changeCount();
    const refused = await revert(change.id);
    expect(refused.status).toBe(409);
    expect(refused.body.conflicts).toEqual([
      expect.objectContaining({ reason: "unique", field: "slug" }),
    ]);
    expect(await changeCount()).toBe(before);
    expect((await t.json("GET", `/api/dcim/sites/${s.id}/`)).status).toBe(404);
  });

  test("a create: the object deleted; changed since, 409 unless forced", async () => {
    const a = await site();
    const created = await lastChange("dcim.site", a.id);
    expect((await revert(created.id)).status).toBe(200);
    expect((await t.json("GET", `/api/dcim/sites/${a.id}/`)).status).toBe(404);
    expect((await lastChange("dcim.site", a.id)).action.value).toBe("delete");

    const b = await site();
    const createdB = await lastChange("dcim.site", b.id);
    await t.json("PATCH", `/api/dcim/sites/${b.id}/`, { body: { description: "edited" } });
    const refused = await revert(createdB.id);
    expect(refused.status).toBe(409);
    expect(refused.body.conflicts[0].reason).toBe("later_change");
    expect((await t.json("GET", `/api/dcim/sites/${b.id}/`)).status).toBe(200);
    expect((await revert(createdB.id, "?force=true")).status).toBe(200);
    expect((await t.json("GET", `/api/dcim/sites/${b.id}/`)).status).toBe(404);
  });

  test("an update whose earlier target is gone: 409 target_gone; a bad flag is a 400", async () => {
    const tenant = await t.json("POST", "/api/tenancy/tenants/", {
      body: { name: "Gone tenant", slug: "gone-tenant" },
    });
    const s = await site({ tenant: tenant.body.id });
    await t.json("PATCH", `/api/dcim/sites/${s.id}/`, { body: { tenant: null } });
    const change = await lastChange("dcim.site", s.id);
    await t.req("DELETE", `/api/tenancy/tenants/${tenant.body.id}/`);
    const refused = await revert(change.id);
    expect(refused.status).toBe(409);
    expect(refused.body.conflicts).toEqual([
      expect.objectContaining({ reason: "target_gone", field: "tenant" }),
    ]);
    const bad = await revert(change.id, "?dry_run=maybe");
    expect(bad.status).toBe(400);
    expect(bad.body.dry_run).toBeDefined();
  });

  test("an object gone since an update: 409, even forced", async () => {
    const s = await site({ description: "x" });
    await t.json("PATCH", `/api/dcim/sites/${s.id}/`, { body: { description: "y" } });
    const change = await lastChange("dcim.site", s.id);
    await t.req("DELETE", `/api/dcim/sites/${s.id}/`);
    const refused = await revert(change.id, "?force=true");
    expect(refused.status).toBe(409);
    expect(refused.body.conflicts[0].reason).toBe("object_gone");
  });
});

describe("a record read lately (decision 0118)", () => {
  /** A site changed once: its change record, read (and so remembered) through the API. */
  async function changed() {
    const s = await site({ description: "before" });
    await t.json("PATCH", `/api/dcim/sites/${s.id}/`, { body: { description: "after" } });
    return { s, change: await lastChange("dcim.site", s.id) };
  }
  const description = async (id: number) =>
    (await t.json("GET", `/api/dcim/sites/${id}/`)).body.description;

  test("deleted since it was read (pruned): 404, nothing written", async () => {
    const { s, change } = await changed();
    await t.deps.db.orm.run(sql`DELETE FROM object_changes WHERE id = ${change.id}`);
    const before = await changeCount();
    for (const query of ["?dry_run=true", ""]) {
      const r = await revert(change.id, query);
      expect(r.status, JSON.stringify(r.body)).toBe(404);
    }
    expect(await changeCount()).toBe(before);
    expect(await description(s.id)).toBe("after");
  });

  test("the record as stored, not as remembered: its read is the proof", async () => {
    const { s, change } = await changed();
    // the stored row differs from the one the list answered (no route changes a record)
    const pre = JSON.stringify({ ...change.prechange_data, description: "as stored" });
    await t.deps.db.orm.run(
      sql`UPDATE object_changes SET prechange_data = ${pre} WHERE id = ${change.id}`,
    );
    const dry = await revert(change.id, "?dry_run=true");
    expect(dry.body.changes, JSON.stringify(dry.body)).toEqual({
      description: { from: "after", to: "as stored" },
    });
    const done = await revert(change.id);
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect(await description(s.id)).toBe("as stored");
  });
});

describe("permissions", () => {
  test("view but not change: 403 and nothing written; a record they may not view: 404", async () => {
    const s = await site({ description: "one" });
    await t.json("PATCH", `/api/dcim/sites/${s.id}/`, { body: { description: "two" } });
    const change = await lastChange("dcim.site", s.id);
    const viewer = (
      await userWith(t, "rv-viewer", [
        [["view"], "dcim.site", null],
        [["view"], "core.objectchange", null],
      ])
    ).token;
    const other = (
      await userWith(t, "rv-other", [
        [["view", "change"], "dcim.site", { slug: "nope" }],
        [["view"], "core.objectchange", null],
      ])
    ).token;
    const before = await changeCount();
    expect((await revert(change.id, "", viewer)).status).toBe(403);
    expect((await revert(change.id, "?dry_run=true", viewer)).status).toBe(403);
    expect(await changeCount()).toBe(before);
    expect((await t.json("GET", `/api/dcim/sites/${s.id}/`)).body.description).toBe("two");

    const hidden = await revert(change.id, "", other);
    const missing = await revert(999999, "", other);
    expect(hidden.status).toBe(404);
    expect(hidden.body).toEqual(missing.body);
    expect(await changeCount()).toBe(before);
  });

  test("a constraint-limited user cannot revert an object outside their constraint", async () => {
    const s = await site({ description: "theirs" });
    await t.json("PATCH", `/api/dcim/sites/${s.id}/`, { body: { description: "mine" } });
    const change = await lastChange("dcim.site", s.id);
    const limited = (
      await userWith(t, "rv-limited", [
        [["view"], "dcim.site", null],
        [["change"], "dcim.site", { description: "mine" }],
        [["view"], "core.objectchange", null],
      ])
    ).token;
    // outside the constraint from the start: the object is not theirs to change at all
    const outside = await site({ description: "theirs" });
    await t.json("PATCH", `/api/dcim/sites/${outside.id}/`, { body: { description: "not mine" } });
    const outsideChange = await lastChange("dcim.site", outside.id);
    const before = await changeCount();
    const refused = await revert(change.id, "", limited);
    expect(refused.status).toBe(403);
    expect(await changeCount()).toBe(before);
    expect((await t.json("GET", `/api/dcim/sites/${s.id}/`)).body.description).toBe("mine");
    expect((await revert(outsideChange.id, "", limited)).status).toBe(403);
    expect(await changeCount()).toBe(before);
    expect((await t.json("GET", `/api/dcim/sites/${outside.id}/`)).body.description).toBe(
      "not mine",
    );
  });
});

describe("what the answer shows", () => {
  test("related objects the caller may not view are hidden in it", async () => {
    const tenant = await t.json("POST", "/api/tenancy/tenants/", {
      body: { name: "SECRET tenant", slug: "secret-tenant" },
    });
    expect(tenant.status).toBe(201);
    const s = await site();
    await t.json("PATCH", `/api/dcim/sites/${s.id}/`, { body: { tenant: tenant.body.id } });
    const change = await lastChange("dcim.site", s.id);
    const editor = (
      await userWith(t, "rv-editor", [
        [["view", "change"], "dcim.site", null],
        [["view"], "core.objectchange", null],
      ])
    ).token;
    for (const query of ["?dry_run=true", ""]) {
      const r = await revert(change.id, query, editor);
      expect(r.status).toBe(200);
      expect(JSON.stringify(r.body)).not.toContain("SECRET");
      expect(r.body.changes.tenant).toEqual({ from: { id: tenant.body.id }, to: null });
    }
    expect((await t.json("GET", `/api/dcim/sites/${s.id}/`)).body.tenant).toBeNull();
  });
});

describe("custom objects", () => {
  let rack: { id: number };
  beforeAll(async () => {
    rack = await makeCot(t, "rack");
    await addField(t, rack.id, { name: "name", type: "text", primary: true });
    await addField(t, rack.id, { name: "height", type: "integer" });
    await addField(t, rack.id, {
      name: "sites",
      type: "multiobject",
      related_object_type: "dcim.site",
    });
  });

  test("update and delete reverted; a link whose target is gone is a 409, forced it is left out", async () => {
    const s1 = await site();
    const s2 = await site();
    const r = await create(t, "rack", { name: "r1", height: 10, sites: [s1.id, s2.id] });
    await t.json("PATCH", `${CO}/rack/${r.id}/`, { body: { height: 42 } });
    const update = await lastChange("custom_objects.rack", r.id);
    const undone = await revert(update.id);
    expect(undone.status).toBe(200);
    expect((await t.json("GET", `${CO}/rack/${r.id}/`)).body.height).toBe(10);

    await t.req("DELETE", `${CO}/rack/${r.id}/`);
    const deleted = await lastChange("custom_objects.rack", r.id);
    await t.req("DELETE", `/api/dcim/sites/${s2.id}/`);
    const refused = await revert(deleted.id);
    expect(refused.status).toBe(409);
    expect(refused.body.conflicts).toEqual([
      expect.objectContaining({ reason: "target_gone", field: "sites" }),
    ]);
    expect((await t.json("GET", `${CO}/rack/${r.id}/`)).status).toBe(404);

    const forced = await revert(deleted.id, "?force=true");
    expect(forced.status).toBe(200);
    const back = await t.json("GET", `${CO}/rack/${r.id}/`);
    expect(back.status).toBe(200);
    expect(back.body.name).toBe("r1");
    expect(back.body.sites.map((x: any) => x.id)).toEqual([s1.id]);
  });

  test("a check the earlier value breaks is a 409 naming the check; nothing written", async () => {
    const cab = await makeCot(t, "cab");
    await addField(t, cab.id, { name: "name", type: "text", primary: true });
    await addField(t, cab.id, { name: "size", type: "integer" });
    const r = await create(t, "cab", { name: "c1", size: 500 });
    await t.json("PATCH", `${CO}/cab/${r.id}/`, { body: { size: 5 } });
    const change = await lastChange("custom_objects.cab", r.id);
    const set = await t.json("PATCH", `${CO}/custom-object-types/${cab.id}/`, {
      body: { checks: [{ name: "small", condition: { size__lte: 100 } }] },
    });
    expect(set.status).toBe(200);
    const before = await changeCount();
    const refused = await revert(change.id);
    expect(refused.status).toBe(409);
    expect(refused.body.conflicts).toEqual([
      expect.objectContaining({ reason: "invalid", field: "size" }),
    ]);
    expect(refused.body.conflicts[0].detail).toContain('check "small"');
    expect(await changeCount()).toBe(before);
    expect((await t.json("GET", `${CO}/cab/${r.id}/`)).body.size).toBe(5);
  });

  test("a dry run makes the write's checks: an earlier choice removed since is the write's 409", async () => {
    const set = await choiceSet(t, "finishes", ["matt", "gloss"]);
    const panel = await makeCot(t, "panel");
    await addField(t, panel.id, { name: "name", type: "text", primary: true });
    await addField(t, panel.id, { name: "finish", type: "select", choice_set: set.id });
    const p = await create(t, "panel", { name: "p1", finish: "matt" });
    await t.json("PATCH", `${CO}/panel/${p.id}/`, { body: { finish: "gloss" } });
    const change = await lastChange("custom_objects.panel", p.id);
    const cut = await t.json("PATCH", `/api/extras/custom-field-choice-sets/${set.id}/`, {
      body: { extra_choices: [["gloss", "GLOSS"]] },
    });
    expect(cut.status, JSON.stringify(cut.body)).toBe(200);
    const before = await changeCount();
    // decision 0118: the dry run runs the write up to its batch, so it refuses what the write does
    const dry = await revert(change.id, "?dry_run=true");
    const write = await revert(change.id);
    expect(write.status, JSON.stringify(write.body)).toBe(409);
    expect([dry.status, dry.body.conflicts]).toEqual([409, write.body.conflicts]);
    expect(write.body.conflicts).toEqual([
      expect.objectContaining({ reason: "invalid", field: "finish" }),
    ]);
    expect(await changeCount()).toBe(before);
    const finish = (await t.json("GET", `${CO}/panel/${p.id}/`)).body.finish;
    expect(finish?.value ?? finish).toBe("gloss");
  });

  test("schema changes are not reverted here: 400 not_revertable", async () => {
    const type = await makeCot(t, "shelf");
    const created = await lastChange("custom_objects.customobjecttype", type.id);
    const r = await revert(created.id);
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("not_revertable");
    expect((await t.json("GET", `${CO}/custom-object-types/${type.id}/`)).status).toBe(200);
  });

  test("a field removed since: 409 naming it", async () => {
    const extra = await addField(t, rack.id, { name: "note", type: "text" });
    const r = await create(t, "rack", { name: "r2", note: "n1" });
    await t.json("PATCH", `${CO}/rack/${r.id}/`, { body: { note: "n2" } });
    const change = await lastChange("custom_objects.rack", r.id);
    await t.req("DELETE", `${CO}/custom-object-type-fields/${extra.id}/`);
    const refused = await revert(change.id);
    expect(refused.status).toBe(409);
    expect(refused.body.conflicts).toEqual([
      expect.objectContaining({ reason: "fields_changed", field: "note" }),
    ]);
  });
});
