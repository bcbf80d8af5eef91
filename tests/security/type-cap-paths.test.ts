/**
 * The custom object type cap (`MAX_CUSTOM_OBJECT_TYPES`, decision 0205) on every path that makes a
 * type, on a local file (transactions) and on a remote database (one read phase and one batch):
 * a trash restore past the cap answers its 400 and writes nothing; a schema preview says an apply
 * would meet it; a change-log revert of a type's delete makes no type at all.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { holdNextWrite } from "../helpers/hold-write";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";

const SCHEMA = "/api/plugins/custom-objects/schema";
const TYPES_API = "/api/plugins/custom-objects/custom-object-types/";
/** Small, so that the cap is reached by a few writes. */
const MAX_TYPES = 3;

const typeEntry = (slug: string) => ({
  name: slug,
  slug,
  fields: [{ id: 1, name: "code", type: "text", primary: true }],
});
const doc = (...slugs: string[]) => ({ schema_version: "1", types: slugs.map(typeEntry) });
const CAPPED = { error: "too_many_custom_object_types", limit: MAX_TYPES };

function capSuite(backend: "local" | "remote") {
  describe(`the type cap on every path that makes a type (${backend})`, () => {
    let t: TestApp;
    let remote: RemoteDb | null = null;
    beforeAll(async () => {
      remote = backend === "remote" ? await startRemoteDb("type-cap") : null;
      t = await makeTestApp({
        MAX_CUSTOM_OBJECT_TYPES: String(MAX_TYPES),
        ...(remote ? { DATABASE_URL: remote.url } : {}),
      });
    });
    afterAll(async () => {
      await t.close();
      await remote?.stop();
    });
    const typeSlugs = async () =>
      (await t.json("GET", `${TYPES_API}?limit=100&ordering=slug`)).body.results.map(
        (r: { slug: string }) => r.slug,
      );
    const trashIds = async () =>
      (await t.json("GET", `${SCHEMA}/trash/`)).body.results.map((r: { id: number }) => r.id);

    test("a trash restore past the cap answers 400 and writes nothing", async () => {
      expect((await t.json("POST", `${SCHEMA}/apply/`, { body: doc("a", "b", "c") })).status).toBe(
        200,
      );
      const removed = await t.json("POST", `${SCHEMA}/apply/`, {
        body: {
          schema: { schema_version: "1", types: [], removed_types: [{ slug: "c" }] },
          allow_destructive: true,
        },
      });
      expect(removed.status).toBe(200);
      const entry = removed.body.trash[0] as number;
      // the place the removed type left is taken again
      const made = await t.json("POST", TYPES_API, { body: { name: "d", slug: "d" } });
      expect(made.status).toBe(201);
      const refused = await t.json("POST", `${SCHEMA}/trash/${entry}/restore/`);
      expect(refused.status).toBe(400);
      expect(refused.body).toMatchObject(CAPPED);
      expect(await typeSlugs()).toEqual(["a", "b", "d"]);
      expect(await trashIds()).toContain(entry);
      // a place freed, the same restore goes through
      expect((await t.req("DELETE", `${TYPES_API}${made.body.id}/`)).status).toBe(204);
      const restored = await t.json("POST", `${SCHEMA}/trash/${entry}/restore/`);
      expect(restored.status).toBe(200);
      expect(await typeSlugs()).toEqual(["a", "b", "c"]);
    });

    test("a preview says an apply past the cap would be refused, and what it would answer", async () => {
      const over = await t.json("POST", `${SCHEMA}/preview/`, { body: doc("a", "b", "c", "e") });
      expect(over.status).toBe(200);
      expect(over.body.refusals).toEqual([
        expect.objectContaining({ status: 400, ...CAPPED, detail: expect.any(String) }),
      ]);
      const applied = await t.json("POST", `${SCHEMA}/apply/`, { body: doc("a", "b", "c", "e") });
      expect(applied.status).toBe(400);
      expect(applied.body).toMatchObject(CAPPED);
      // within the cap (a type removed as one is added): nothing to refuse
      const within = await t.json("POST", `${SCHEMA}/preview/`, {
        body: { ...doc("a", "b", "e"), removed_types: [{ slug: "c" }] },
      });
      expect(within.status).toBe(200);
      expect(within.body.refusals).toEqual([]);
      // and the apply agrees, on either path: the removal counts as the creation does
      const swapped = await t.json("POST", `${SCHEMA}/apply/`, {
        body: {
          schema: { ...doc("a", "b", "e"), removed_types: [{ slug: "c" }] },
          allow_destructive: true,
        },
      });
      expect(swapped.status, JSON.stringify(swapped.body)).toBe(200);
      expect(await typeSlugs()).toEqual(["a", "b", "e"]);
      const back = await t.json("POST", `${SCHEMA}/apply/`, {
        body: {
          schema: { ...doc("a", "b", "c"), removed_types: [{ slug: "e" }] },
          allow_destructive: true,
        },
      });
      expect(back.status, JSON.stringify(back.body)).toBe(200);
      // a caller who may not apply is told nothing of it (the cap counts types hidden from them)
      const viewer = await t.user(`viewer-${backend}`, [
        [["view"], "custom_objects.customobjecttype"],
      ]);
      const viewed = await t.json("POST", `${SCHEMA}/preview/`, {
        token: viewer,
        body: doc("a", "b", "c", "e"),
      });
      expect(viewed.status).toBe(200);
      expect(viewed.body.refusals).toEqual([]);
    });

    test("a revert of a type's delete makes no type: types are not revertable", async () => {
      const [c] = (await t.json("GET", `${TYPES_API}?slug=c`)).body.results;
      const deleted = await t.req("DELETE", `${TYPES_API}${c.id}/`, {
        headers: { "X-Request-Id": "delete-c" },
      });
      expect(deleted.status).toBe(204);
      const [change] = (await t.json("GET", "/api/core/object-changes/?request_id=delete-c")).body
        .results;
      expect(change).toMatchObject({ action: { value: "delete" } });
      const reverted = await t.json("POST", `/api/core/object-changes/${change.id}/revert/`);
      expect(reverted.status).toBe(400);
      expect(reverted.body).toMatchObject({ error: "not_revertable" });
      expect(await typeSlugs()).toEqual(["a", "b"]);
    });

    if (backend === "remote")
      test("a restore that lost a race to a create runs again, then answers 400", async () => {
        const removed = await t.json("POST", `${SCHEMA}/apply/`, {
          body: { schema: doc("a", "b", "g"), allow_destructive: true },
        });
        expect(removed.status).toBe(200);
        const gone = await t.json("POST", `${SCHEMA}/apply/`, {
          body: {
            schema: { schema_version: "1", types: [], removed_types: [{ slug: "g" }] },
            allow_destructive: true,
          },
        });
        const entry = gone.body.trash[0] as number;
        // the restore's batch waits after its read phase counted 2 types; a create takes the third
        const held = holdNextWrite(t.deps.db, (statements) =>
          statements.some((s) => /delete from "custom_object_trash"/i.test(s)),
        );
        try {
          const restoring = t.json("POST", `${SCHEMA}/trash/${entry}/restore/`);
          await held.arrived;
          const made = await t.json("POST", TYPES_API, { body: { name: "h", slug: "h" } });
          expect(made.status).toBe(201);
          held.release();
          const refused = await restoring;
          expect(refused.status).toBe(400);
          expect(refused.body).toMatchObject(CAPPED);
        } finally {
          held.release();
        }
        expect(await typeSlugs()).toEqual(["a", "b", "h"]);
        expect(await trashIds()).toContain(entry);
      });
  });
}

capSuite("local");
capSuite("remote");
