/**
 * An attacker's view of changes to objects they may not view (decision 0174): a caller who may
 * view a custom object and a site, but not what they link to (another type's objects, a tenant)
 * nor their tags, watches them while those hidden objects are renamed and tags edited. Nothing
 * they see moves: not the answer, not its `ETag` (`last_updated`), not the change log they read.
 * An edit of the visible object's own hidden tags is an edit of that object: its stamp moves and
 * its record shows, naming no tag.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, create, namedCot } from "../custom-objects/fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

/** What the watcher sees: each object's ETag and answer, and the change log's records. */
async function seen(token: string, paths: string[]) {
  const out: unknown[] = [];
  for (const path of paths) {
    const r = await t.json("GET", path, { token });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    out.push([r.res.headers.get("etag"), r.body]);
  }
  const log = await t.json("GET", "/api/core/object-changes/?limit=100", { token });
  expect(log.status).toBe(200);
  out.push(log.body);
  return out;
}

test("renames and tag edits of hidden objects move nothing a watcher sees", async () => {
  await namedCot(t, "vault");
  const shelf = await namedCot(t, "shelf", { vault: { to: "custom_objects.vault" } });
  await addField(t, shelf.id, {
    name: "vaults",
    type: "multiobject",
    related_object_type: "custom_objects.vault",
  });
  await addField(t, shelf.id, {
    name: "tenant",
    type: "object",
    related_object_type: "tenancy.tenant",
  });
  const tag = (
    await t.json("POST", "/api/extras/tags/", { body: { name: "Quiet", slug: "quiet" } })
  ).body;
  const tenant = (
    await t.json("POST", "/api/tenancy/tenants/", { body: { name: "Covert", slug: "covert" } })
  ).body;
  const site = await t.json("POST", "/api/dcim/sites/", {
    body: { name: "Open", slug: "open", tenant: tenant.id, tags: [tag.id] },
  });
  const [v1, v2] = [
    await create(t, "vault", { name: "v1" }),
    await create(t, "vault", { name: "v2" }),
  ];
  const box = await create(t, "shelf", {
    name: "box",
    vault: v1!.id,
    vaults: [v1!.id, v2!.id],
    tenant: tenant.id,
    tags: [tag.id],
  });
  const watcher = await t.user("watcher", [
    [["view"], "custom_objects.shelf"],
    [["view"], "dcim.site"],
    [["view"], "core.objectchange"],
  ]);
  const paths = [`${CO}/shelf/${box.id}/`, `/api/dcim/sites/${site.body.id}/`];
  const before = await seen(watcher, paths);
  // renames of what the objects link to, a tag renamed and recoloured, another tag made
  const edits: Array<[string, string, unknown]> = [
    ["PATCH", `${CO}/vault/${v1!.id}/`, { name: "v1 moved" }],
    ["PATCH", `${CO}/vault/${v2!.id}/`, { name: "v2 moved" }],
    ["PATCH", `/api/tenancy/tenants/${tenant.id}/`, { name: "Covert 2", slug: "covert-2" }],
    ["PATCH", `/api/extras/tags/${tag.id}/`, { name: "Loud", color: "ff0000" }],
    ["POST", "/api/extras/tags/", { name: "Other", slug: "other" }],
  ];
  for (const [method, path, body] of edits) {
    const r = await t.json(method, path, { body });
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  }
  expect(await seen(watcher, paths)).toEqual(before);

  // the shelf's own hidden tags edited: the shelf was edited, its record names no tag
  const more = await t.json("PATCH", `${CO}/shelf/${box.id}/`, { body: { add_tags: ["other"] } });
  expect(more.status, JSON.stringify(more.body)).toBe(200);
  const [etag, shown] = (await seen(watcher, paths))[0] as [string, any];
  expect(etag).not.toBe((before[0] as [string])[0]);
  expect(shown.tags).toEqual([]);
  const log = await t.json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.shelf&ordering=-id&limit=1`,
    { token: watcher },
  );
  const record = log.body.results[0];
  expect(record.action.value).toBe("update");
  expect([record.prechange_data.tags, record.postchange_data.tags]).toEqual([[], []]);
  expect(JSON.stringify(record).toLowerCase()).not.toMatch(/quiet|loud|other/);
});
