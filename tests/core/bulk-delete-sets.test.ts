/**
 * A bulk delete reads its delete hooks set-based, one statement per dependency for all its ids
 * (decision 0184): it answers as deleting one by one does. A target with dependants is refused
 * (409 naming them, nothing deleted); links set to null are cleared for all; protected links
 * refuse. On a local file and on D1, whose SQL (window functions, `FILTER`) the reads must pass.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type D1App, startD1App } from "../helpers/d1-app";
import type { Json } from "../helpers/three-backends";

const CO = "/api/plugins/custom-objects";

/** The scenarios, over one backend's `json`. */
function scenarios(name: string, open: () => Promise<{ json: Json; close(): Promise<void> }>) {
  describe(`bulk delete with dependants (${name})`, () => {
    let json: Json;
    let close: () => Promise<void>;
    const made = async (path: string, body: unknown) => {
      const r = await json("POST", path, body);
      if (r.status !== 201) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    };
    const sites = async (prefix: string, n: number): Promise<number[]> =>
      (
        await made(
          "/api/dcim/sites/",
          Array.from({ length: n }, (_, i) => ({ name: `${prefix} ${i}`, slug: `${prefix}-${i}` })),
        )
      ).map((s: { id: number }) => s.id);
    /** One bulk DELETE of `ids` at the list endpoint `path`. */
    const bulkDelete = (path: string, ids: number[]) =>
      json(
        "DELETE",
        path,
        ids.map((id) => ({ id })),
      );
    beforeAll(async () => {
      ({ json, close } = await open());
    });
    afterAll(() => close());

    test("a site with devices among many: 409 naming them, as alone; nothing deleted", async () => {
      const ids = await sites("busy", 60);
      const busy = ids[37]!;
      const devices: number[] = [];
      for (const d of ["d-1", "d-2"])
        devices.push((await made("/api/dcim/devices/", { name: d, site: busy })).id);
      const alone = await json("DELETE", `/api/dcim/sites/${busy}/`);
      expect(alone.status).toBe(409);
      const bulk = await bulkDelete("/api/dcim/sites/", ids);
      expect(bulk.status).toBe(409);
      expect(bulk.body).toEqual(alone.body);
      expect(bulk.body.protected_objects).toEqual(
        devices.map((id) => ({ object_type: "dcim.device", field_name: "site", object_id: id })),
      );
      expect((await json("GET", `/api/dcim/sites/${ids[0]}/`)).status).toBe(200);
      for (const id of devices)
        expect((await json("DELETE", `/api/dcim/devices/${id}/`)).status).toBe(204);
      expect((await bulkDelete("/api/dcim/sites/", ids)).status).toBe(204);
      expect((await json("GET", `/api/dcim/sites/${busy}/`)).status).toBe(404);
    });

    test("webhooks an event rule calls among many: 409 naming the rule, as alone", async () => {
      const hooks: number[] = [];
      for (const i of [1, 2, 3])
        hooks.push(
          (
            await made("/api/extras/webhooks/", {
              name: `h${i}`,
              payload_url: "https://example.invalid/x",
            })
          ).id,
        );
      const rule = await made("/api/extras/event-rules/", {
        name: "calls-h2",
        object_types: ["dcim.site"],
        event_types: ["object_created"],
        action_object_type: "extras.webhook",
        action_object_id: hooks[1],
      });
      const alone = await json("DELETE", `/api/extras/webhooks/${hooks[1]}/`);
      expect(alone.status).toBe(409);
      const bulk = await bulkDelete("/api/extras/webhooks/", hooks);
      expect(bulk.status).toBe(409);
      expect(bulk.body).toEqual(alone.body);
      expect((await json("GET", `/api/extras/webhooks/${hooks[0]}/`)).status).toBe(200);
      expect((await json("DELETE", `/api/extras/event-rules/${rule.id}/`)).status).toBe(204);
      expect((await bulkDelete("/api/extras/webhooks/", hooks)).status).toBe(204);
    });

    test("custom object links to many sites: set to null for all, or refused when protected", async () => {
      const cot = await made(`${CO}/custom-object-types/`, {
        name: "rack_note",
        slug: "rack-note",
      });
      for (const f of [
        { name: "name", type: "text", primary: true },
        { name: "site", type: "object", related_object_type: "dcim.site" },
        {
          name: "keep",
          type: "object",
          related_object_type: "dcim.site",
          on_delete_behavior: "protect",
        },
      ])
        await made(`${CO}/custom-object-type-fields/`, { custom_object_type: cot.id, ...f });
      const ids = await sites("linked", 60);
      const notes = await made(
        `${CO}/rack-note/`,
        ids.map((site, i) => ({ name: `n${i}`, site })),
      );
      // the fields pointing at sites are learned by a first delete: one of a single site
      expect((await json("DELETE", `/api/dcim/sites/${ids.pop()}/`)).status).toBe(204);
      const guard = await made(`${CO}/rack-note/`, { name: "guard", keep: ids[20] });
      const refused = await bulkDelete("/api/dcim/sites/", ids);
      expect(refused.status).toBe(409);
      expect(refused.body.error).toBe("protected");
      expect(refused.body.protected_objects).toEqual([
        { custom_object_type: cot.id, field_name: "keep", object_id: guard.id },
      ]);
      expect((await json("GET", `/api/dcim/sites/${ids[0]}/`)).status).toBe(200);
      expect((await json("DELETE", `${CO}/rack-note/${guard.id}/`)).status).toBe(204);
      expect((await bulkDelete("/api/dcim/sites/", ids)).status).toBe(204);
      const after = await json("GET", `${CO}/rack-note/${notes[0].id}/`);
      expect(after.status).toBe(200);
      expect(after.body.site).toBeNull();
    });
  });
}

scenarios("local file", async () => {
  const t: TestApp = await makeTestApp();
  return {
    json: (method, path, body) => t.json(method, path, { body }),
    close: () => t.close(),
  };
});

scenarios("D1", async () => {
  const d1: D1App = await startD1App("bulk-delete-sets");
  return { json: (method, path, body) => d1.json(method, path, body), close: () => d1.stop() };
});
