/**
 * Deleting a host object that other host objects still reference answers 409 naming the
 * dependants (model, field, ids), like custom object fields with `protect`; dependants the caller
 * may not view are neither counted nor named (decision 0180). Nullable references are cleared as before.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

describe("host object delete conflicts", () => {
  test("a site with devices: 409 naming each device and the field; deletable once they are gone", async () => {
    const site = (
      await t.json("POST", "/api/dcim/sites/", { body: { name: "Busy", slug: "busy" } })
    ).body;
    const ids: number[] = [];
    for (const name of ["edge-1", "edge-2"])
      ids.push(
        (await t.json("POST", "/api/dcim/devices/", { body: { name, site: site.id } })).body.id,
      );
    const r = await t.json("DELETE", `/api/dcim/sites/${site.id}/`);
    expect(r.status).toBe(409);
    expect(r.body.error).toBe("protected");
    expect(r.body.detail).toBe(
      `Cannot delete dcim.site ${site.id}: 2 dcim.device (field "site": ${ids.join(", ")}) still link to it. Delete or change them first.`,
    );
    expect(r.body.protected_objects).toEqual(
      ids.map((id) => ({ object_type: "dcim.device", field_name: "site", object_id: id })),
    );
    expect((await t.json("GET", `/api/dcim/sites/${site.id}/`)).status).toBe(200);

    for (const id of ids)
      expect((await t.req("DELETE", `/api/dcim/devices/${id}/`)).status).toBe(204);
    expect((await t.req("DELETE", `/api/dcim/sites/${site.id}/`)).status).toBe(204);
  });

  test("a caller who may not view devices learns that something links, not how many or which", async () => {
    const site = (
      await t.json("POST", "/api/dcim/sites/", { body: { name: "Quiet", slug: "quiet" } })
    ).body;
    await t.json("POST", "/api/dcim/devices/", { body: { name: "hidden-box", site: site.id } });
    const deleter = await t.user("site-deleter", [[["view", "delete"], "dcim.site"]]);
    const r = await t.json("DELETE", `/api/dcim/sites/${site.id}/`, { token: deleter });
    expect(r.status).toBe(409);
    expect(r.body.detail).toBe(
      `Cannot delete dcim.site ${site.id}: other objects you may not view still link to it. Delete or change them first.`,
    );
    expect(r.body.protected_objects).toEqual([]);
  });

  test("nullable references (a site's tenant) are cleared, not refused", async () => {
    const tenant = (
      await t.json("POST", "/api/tenancy/tenants/", { body: { name: "Owner", slug: "owner" } })
    ).body;
    const site = (
      await t.json("POST", "/api/dcim/sites/", {
        body: { name: "Owned", slug: "owned", tenant: tenant.id },
      })
    ).body;
    expect((await t.req("DELETE", `/api/tenancy/tenants/${tenant.id}/`)).status).toBe(204);
    expect((await t.json("GET", `/api/dcim/sites/${site.id}/`)).body.tenant).toBeNull();
  });
});
