/**
 * Type and field writes by a caller whose permissions carry constraints (decision 0121): staged like
 * anyone's, the row as read checked in the read phase (403 when viewable, else 404), the row as
 * written guarded in the batch (403, nothing written). The same answers on a local file and on a
 * remote database, where each write is 2 round trips (it was a transaction).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TestApp } from "../helpers/app";
import { appOn, type BackendApp } from "../helpers/remote-db";
import type { CountingProxy } from "../helpers/counting-proxy";
import { userWith } from "../helpers/grants";
import { addField, CO, makeCot } from "./fixtures";
import { settleBeforeCounting } from "../helpers/settle";

const FIELDS = `${CO}/custom-object-type-fields/`;

function suite(backend: "local" | "remote") {
  describe(`constrained type and field writes (${backend})`, () => {
    let on: BackendApp;
    let t: TestApp;
    let proxy: CountingProxy | null = null;
    let token: string;
    let cotId: number;
    let other: number;
    beforeAll(async () => {
      on = await appOn(backend, "constrained-fields");
      ({ t, proxy } = on);
      cotId = (await makeCot(t, "gated")).id;
      other = (await addField(t, cotId, { name: "other", type: "text" })).id;
      const label = "custom_objects.customobjecttypefield";
      token = (
        await userWith(t, "fielder", [
          [["view"], label, null],
          [["view"], "custom_objects.customobjecttype", null],
          [["add", "change", "delete"], label, { name__startswith: "ok" }],
          [
            ["add", "change", "delete"],
            "custom_objects.customobjecttype",
            { slug__startswith: "ok" },
          ],
        ])
      ).token;
    });
    afterAll(() => on.close());
    const as = (method: string, path: string, body?: unknown) =>
      t.json(method, path, { token, body });
    /** Remote: one write's round trips, after the same write warmed the caches. */
    const counted = async (most: number, write: () => Promise<{ status: number; body: any }>) => {
      // earlier writes' search flush and the token's use run off the request: not the write's
      await settleBeforeCounting(t.app, () => as("GET", "/api/status/"), "fielder");
      proxy?.reset();
      const r = await write();
      if (proxy) expect(proxy.count, JSON.stringify(r.body)).toBeLessThanOrEqual(most);
      return r;
    };
    const names = async () =>
      (await t.json("GET", `${FIELDS}?custom_object_type_id=${cotId}`)).body.results
        .map((f: { name: string }) => f.name)
        .sort();

    test("creates inside the constraints land; outside them 403, nothing made", async () => {
      const made = await as("POST", FIELDS, {
        custom_object_type: cotId,
        name: "ok_a",
        type: "text",
      });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      const second = await counted(2, () =>
        as("POST", FIELDS, { custom_object_type: cotId, name: "ok_b", type: "text" }),
      );
      expect(second.status).toBe(201);
      const refused = await as("POST", FIELDS, {
        custom_object_type: cotId,
        name: "bad_a",
        type: "text",
      });
      expect(refused.status).toBe(403);
      expect(await names()).toEqual(["ok_a", "ok_b", "other"]);
    });

    test("updates: the row as read and the row as written both inside the constraints", async () => {
      const [a] = (await t.json("GET", `${FIELDS}?name=ok_a`)).body.results;
      expect((await as("PATCH", `${FIELDS}${a.id}/`, { label: "A" })).status).toBe(200);
      const relabelled = await counted(2, () => as("PATCH", `${FIELDS}${a.id}/`, { label: "AA" }));
      expect(relabelled.status, JSON.stringify(relabelled.body)).toBe(200);
      expect(relabelled.body.label).toBe("AA");
      // renamed out of the constraints: 403, the field as it was
      const out = await as("PATCH", `${FIELDS}${a.id}/`, { name: "bad_b" });
      expect(out.status, JSON.stringify(out.body)).toBe(403);
      expect(await names()).toEqual(["ok_a", "ok_b", "other"]);
      // a field outside them, which the caller may view: 403
      const theirs = await as("PATCH", `${FIELDS}${other}/`, { label: "mine" });
      expect(theirs.status).toBe(403);
      expect((await t.json("GET", `${FIELDS}${other}/`)).body.label).toBe("");
    });

    test("deletes: inside the constraints 204, outside 403", async () => {
      const [b] = (await t.json("GET", `${FIELDS}?name=ok_b`)).body.results;
      expect((await counted(2, () => as("DELETE", `${FIELDS}${b.id}/`))).status).toBe(204);
      expect((await as("DELETE", `${FIELDS}${other}/`)).status).toBe(403);
      expect(await names()).toEqual(["ok_a", "other"]);
    });

    test("types: creates, updates and deletes inside the constraints; outside them 403", async () => {
      const TYPES = `${CO}/custom-object-types/`;
      expect((await as("POST", TYPES, { name: "ok_one", slug: "ok_one" })).status).toBe(201);
      const made = await counted(2, () => as("POST", TYPES, { name: "ok_two", slug: "ok_two" }));
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      expect((await as("POST", TYPES, { name: "bad_one", slug: "bad_one" })).status).toBe(403);
      expect((await as("PATCH", `${TYPES}${made.body.id}/`, { description: "x" })).status).toBe(
        200,
      );
      const described = await counted(2, () =>
        as("PATCH", `${TYPES}${made.body.id}/`, { description: "y" }),
      );
      expect(described.status, JSON.stringify(described.body)).toBe(200);
      const out = await as("PATCH", `${TYPES}${made.body.id}/`, { slug: "bad_two" });
      expect(out.status, JSON.stringify(out.body)).toBe(403);
      expect((await as("PATCH", `${TYPES}${cotId}/`, { description: "mine" })).status).toBe(403);
      expect((await as("DELETE", `${TYPES}${cotId}/`)).status).toBe(403);
      const ids = (await t.json("GET", `${TYPES}?slug__isw=ok_`)).body.results.map(
        (r: { id: number }) => r.id,
      );
      expect(ids).toHaveLength(2);
      expect((await as("DELETE", `${TYPES}${ids[0]}/`)).status).toBe(204);
      expect((await counted(2, () => as("DELETE", `${TYPES}${ids[1]}/`))).status).toBe(204);
      const left = (await t.json("GET", TYPES)).body.results.map((r: { slug: string }) => r.slug);
      expect(left).toEqual(["gated"]);
    });
  });
}

suite("local");
suite("remote");
