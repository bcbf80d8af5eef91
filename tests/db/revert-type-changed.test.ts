/**
 * A revert of a custom object's change record that another app instance wrote, after the object's
 * type changed (issue 28 item 2: answers stay exact). The record shows the type as it was (its
 * name, the display its primary field gave, the `_context` its context fields gave); the revert
 * must answer, and record, the object as it is now — as a GET through the reverting instance
 * shows it — never the record's stale copy. Instance A writes the record and changes the type,
 * instance B (caches of its own, the record never seen) reverts it; on a remote database and on a
 * local file.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { BASE } from "../helpers/app";
import { anotherInstance } from "../helpers/instances";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";
import { settleBeforeCounting } from "../helpers/settle";

type Instance = Awaited<ReturnType<typeof anotherInstance>>;

for (const backend of ["remote", "local"] as const)
  describe(`a revert through instance B after A changed the type (${backend})`, () => {
    let on: BackendApp;
    let b: Instance;
    beforeAll(async () => {
      on = await appOn(backend, `revert-type-${backend}`);
      b = await anotherInstance(on.t.deps.config.database.url);
    });
    afterAll(async () => {
      await b.close();
      await on.close();
    });
    const a = () => on.t;

    /** A request through instance B as the superuser. */
    async function viaB(method: string, path: string, body?: unknown) {
      const headers: Record<string, string> = { authorization: `Token ${a().admin}` };
      if (body !== undefined) headers["content-type"] = "application/json";
      const res = await b.app.request(BASE + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    }
    const lastChange = async () =>
      Number(
        ((await a().deps.db.orm.all(sql`SELECT max(id) AS id FROM object_changes`)) as any[])[0].id,
      );

    let serial = 0;
    /**
     * A type with a primary `title`, a context field `code` and a `count`; an object of it, warm in
     * B's caches. Returns what the scenario needs.
     */
    async function typeWithObject() {
      const n = ++serial;
      const cot = await makeCot(a(), `rt${backend}${n}`);
      const title = await addField(a(), cot.id, { name: "title", type: "text", primary: true });
      await addField(a(), cot.id, { name: "code", type: "text", context: true });
      await addField(a(), cot.id, { name: "count", type: "integer" });
      const o = await create(a(), cot.slug, { title: "first", code: "c1", count: 1 });
      const url = `${CO}/${cot.slug}/${o.id}/`;
      // B caches the type's model and what its writes read (the event rules)
      expect((await viaB("PATCH", url, { count: 1 })).status).toBe(200);
      return { cot, title, url, id: o.id };
    }

    /**
     * Reverts `change` through B after the type changed (B read the object since, so its cached
     * model is current): the answer and the record it writes show the object as B reads it now.
     * Answers the answer and its remote round trips (`trips`, 0 on a local file).
     */
    async function revertedAsNow(change: number, url: string, expectObject: boolean) {
      const before = (await viaB("GET", url)).body;
      // earlier writes' search flush and the token's use (B's) run off their requests
      await settleBeforeCounting(b.app, () => viaB("GET", "/api/status/"), "admin");
      on.proxy?.reset();
      const r = await viaB("POST", `/api/core/object-changes/${change}/revert/`);
      const trips = on.proxy?.count ?? 0;
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const now = await viaB("GET", url);
      const written = await viaB("GET", `/api/core/object-changes/${r.body.change}/`);
      expect(written.status).toBe(200);
      if (expectObject) {
        expect(r.body.object).toEqual(now.body);
        expect(written.body.postchange_data).toEqual(now.body);
      } else {
        expect(now.status).toBe(404);
        expect(r.body.object).toBe(null);
      }
      // the record's "before" is the object as it was just before the revert, not the old record
      const { last_updated: _a, ...pre } = written.body.prechange_data;
      const { last_updated: _b, ...was } = before;
      expect(pre).toEqual(was);
      return { ...r.body, trips };
    }
    /** The round trips of a revert whose record is older than its type's last change. */
    const READ_FIRST = backend === "remote" ? 3 : 0; // the record's, the plan's, the batch

    test("an update's revert after the type was renamed: the new name, answered and recorded", async () => {
      const { cot, url } = await typeWithObject();
      expect((await a().json("PATCH", url, { body: { count: 2 } })).status).toBe(200);
      const change = await lastChange();
      const renamed = await a().json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
        body: { name: `renamed_${cot.slug}` },
      });
      expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
      const body = await revertedAsNow(change, url, true);
      expect(body.object.custom_object_type.name).toBe(`renamed_${cot.slug}`);
      expect(body.object.count).toBe(1);
      expect(body.trips).toBe(READ_FIRST);
    });

    test("an update's revert after the primary flag was removed: the display as now", async () => {
      const { title, url } = await typeWithObject();
      expect((await a().json("PATCH", url, { body: { title: "second" } })).status).toBe(200);
      const change = await lastChange();
      const unflagged = await a().json(
        "PATCH",
        `${CO}/custom-object-type-fields/${title.id}/?allow_destructive=true`,
        { body: { primary: false } },
      );
      expect(unflagged.status, JSON.stringify(unflagged.body)).toBe(200);
      const body = await revertedAsNow(change, url, true);
      expect(body.object.title).toBe("first");
      expect(body.object.display).not.toBe("first");
      expect(body.trips).toBe(READ_FIRST);
    });

    test("an update's revert of a context field: `_context` shows the value put back", async () => {
      const { url } = await typeWithObject();
      expect((await a().json("PATCH", url, { body: { code: "c2" } })).status).toBe(200);
      const change = await lastChange();
      const body = await revertedAsNow(change, url, true);
      expect(body.object._context).toEqual({ display: "c1" });
      expect(body.trips).toBe(backend === "remote" ? 2 : 0); // the type unchanged: built from the record
    });

    test("a create's revert after the type was renamed: the delete's record shows the new name", async () => {
      const { cot } = await typeWithObject();
      // B's deletes of the type learn what points at it (as after B's first)
      const warm = await create(a(), cot.slug, { title: "warm", code: "w", count: 0 });
      expect((await viaB("DELETE", `${CO}/${cot.slug}/${warm.id}/`)).status).toBe(204);
      const o = await create(a(), cot.slug, { title: "made", code: "m", count: 3 });
      const change = await lastChange();
      const renamed = await a().json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
        body: { name: `again_${cot.slug}` },
      });
      expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
      const url = `${CO}/${cot.slug}/${o.id}/`;
      expect((await revertedAsNow(change, url, false)).trips).toBe(READ_FIRST);
    });

    test("a delete's revert after the type was renamed: restored with the new name", async () => {
      const { cot } = await typeWithObject();
      const o = await create(a(), cot.slug, { title: "gone", code: "g", count: 4 });
      const url = `${CO}/${cot.slug}/${o.id}/`;
      expect((await a().req("DELETE", url)).status).toBe(204);
      const change = await lastChange();
      const renamed = await a().json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
        body: { name: `back_${cot.slug}` },
      });
      expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
      expect((await viaB("GET", `${CO}/${cot.slug}/`)).status).toBe(200); // B's model current
      const r = await viaB("POST", `/api/core/object-changes/${change}/revert/`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const now = await viaB("GET", url);
      expect(r.body.object).toEqual(now.body);
      expect(now.body.custom_object_type.name).toBe(`back_${cot.slug}`);
      const written = await viaB("GET", `/api/core/object-changes/${r.body.change}/`);
      expect(written.body.postchange_data).toEqual(now.body);
    });
  });
