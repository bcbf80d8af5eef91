/**
 * An attacker's view of reverts (decisions 0118, 0133, 0139): an ordinary account whose change,
 * add and delete permissions on a type are constrained to its own objects reverts change records
 * a superuser wrote. Whether the record is one the process remembers (the revert's read riding in
 * its write) or one it never saw (the write built from the record alone, proven in its batch),
 * on a local file and a remote database: nothing outside the constraints is written, put back or
 * removed, the refusal names none of the hidden object's values, and related objects the caller
 * may not view stay hidden in the answer.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { forgetChange, seenChange } from "../../src/core/changes/seen";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

const ITEMS = `${CO}/items`;

for (const backend of ["local", "remote"] as const)
  for (const mode of ["remembered", "forgotten"] as const)
    describe(`${backend}, record ${mode}`, () => {
      let app: BackendApp;
      const t = () => app.t;
      let attacker: string;
      /** Views every item and site (so reads deleted objects' records), writes only its own. */
      let auditor: string;
      let vault: number;
      let serial = 0;
      beforeAll(async () => {
        app = await appOn(backend, `revert-scope-${backend}-${mode}`);
        const v = await makeCot(t(), "vault");
        await addField(t(), v.id, { name: "name", type: "text", primary: true });
        vault = (await create(t(), "vault", { name: "launch-codes" })).id;
        const cot = await makeCot(t(), "items");
        await addField(t(), cot.id, { name: "name", type: "text", primary: true });
        await addField(t(), cot.id, { name: "owner", type: "text" });
        await addField(t(), cot.id, { name: "note", type: "text" });
        await addField(t(), cot.id, { name: "size", type: "integer" });
        await addField(t(), cot.id, {
          name: "vault",
          type: "object",
          related_object_type: "custom_objects.vault",
        });
        attacker = (
          await userWith(t(), "attacker", [
            [["view", "add", "change", "delete"], "custom_objects.items", { owner: "me" }],
            [["view"], "core.objectchange", null],
            [["view", "add", "change", "delete"], "dcim.site", { description: "mine" }],
          ])
        ).token;
      });
      afterAll(() => app.close());
      beforeAll(async () => {
        auditor = (
          await userWith(t(), "auditor", [
            [["view"], "custom_objects.items", null],
            [["add", "change", "delete"], "custom_objects.items", { owner: "me" }],
            [["view"], "dcim.site", null],
            [["add", "change", "delete"], "dcim.site", { description: "mine" }],
            [["view"], "core.objectchange", null],
          ])
        ).token;
      });

      const lastChange = async () =>
        Number(
          ((await t().deps.db.orm.all(sql`SELECT max(id) AS id FROM object_changes`)) as any[])[0]
            .id,
        );
      /** The record as the revert finds it: remembered by the process, or never seen by it. */
      const prepare = async (change: number) => {
        const services = servicesOf(t().app);
        if (mode === "remembered")
          expect((await t().json("GET", `/api/core/object-changes/${change}/`)).status).toBe(200);
        else forgetChange(services, change);
        expect(seenChange(services, change) !== undefined).toBe(mode === "remembered");
      };
      const revert = async (change: number, query = "", token = attacker) => {
        await prepare(change);
        return t().json("POST", `/api/core/object-changes/${change}/revert/${query}`, { token });
      };
      const item = (owner: string, extra: Record<string, unknown> = {}) =>
        create(t(), "items", {
          name: `item-${++serial}`,
          owner,
          note: "n-before",
          size: 1,
          ...extra,
        });
      const patch = async (id: number, body: Record<string, unknown>) => {
        const r = await t().json("PATCH", `${ITEMS}/${id}/`, { body });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        return lastChange();
      };
      const now = async (id: number) => (await t().json("GET", `${ITEMS}/${id}/`)).body;
      const refused = (r: { status: number; body: unknown }, ...hidden: string[]) => {
        expect([403, 404]).toContain(r.status);
        for (const h of hidden) expect(JSON.stringify(r.body)).not.toContain(h);
      };

      test("an update of an object outside the constraints is not put back", async () => {
        const o = await item("other");
        const change = await patch(o.id, { note: "n-secret-after", size: 2 });
        for (const query of ["?dry_run=true", "", "?force=true"]) {
          refused(await revert(change, query), "n-secret", "other");
          expect(await now(o.id)).toMatchObject({ note: "n-secret-after", size: 2 });
        }
      });

      test("an update whose prechange lies outside the constraints is refused", async () => {
        const o = await item("other");
        const change = await patch(o.id, { owner: "me" }); // now the attacker's to view and change
        // a dry run answers as the write would: the constraints on the row after it are judged
        // on the values the record puts back, though no batch is sent
        for (const query of ["", "?force=true", "?dry_run=true", "?dry_run=true&force=true"]) {
          const r = await revert(change, query);
          expect(r.status, `${query} ${JSON.stringify(r.body)}`).toBe(403);
          expect(JSON.stringify(r.body)).not.toContain("other");
          expect(await now(o.id)).toMatchObject({ owner: "me" });
        }
        // with a plain field beside it: the write built from the record carries both
        const p = await item("other");
        const both = await patch(p.id, { owner: "me", size: 5 });
        for (const query of ["", "?dry_run=true"]) {
          const r = await revert(both, query);
          expect(r.status, `${query} ${JSON.stringify(r.body)}`).toBe(403);
          expect(await now(p.id)).toMatchObject({ owner: "me", size: 5 });
        }
        // inside the constraints before and after: the dry run and the write both go through
        const q = await item("me");
        const mine = await patch(q.id, { note: "n-mine-after" });
        const dry = await revert(mine, "?dry_run=true");
        expect(dry.status, JSON.stringify(dry.body)).toBe(200);
        expect(dry.body.changes.note.to).toBe("n-before");
        expect((await revert(mine)).status).toBe(200);
      });

      test("a delete of an object outside the constraints is not restored", async () => {
        const o = await item("other", { note: "n-deleted-secret" });
        expect((await t().json("DELETE", `${ITEMS}/${o.id}/`)).status).toBe(204);
        const change = await lastChange();
        for (const query of ["?dry_run=true", "", "?force=true"]) {
          refused(await revert(change, query), "n-deleted-secret");
          expect((await t().json("GET", `${ITEMS}/${o.id}/`)).status).toBe(404);
        }
      });

      test("a create of an object outside the constraints is not removed", async () => {
        const o = await item("other", { note: "n-created-secret" });
        const change = await lastChange();
        for (const query of ["?dry_run=true", ""]) {
          refused(await revert(change, query), "n-created-secret");
          expect((await t().json("GET", `${ITEMS}/${o.id}/`)).status).toBe(200);
        }
      });

      test("a related object the caller may not view stays hidden in the answer", async () => {
        const o = await item("me", { vault });
        const change = await patch(o.id, { size: 9 });
        const dry = await revert(change, "?dry_run=true");
        expect(dry.status, JSON.stringify(dry.body)).toBe(200);
        const r = await revert(change);
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        for (const body of [dry.body, r.body]) {
          const text = JSON.stringify(body);
          expect(text).not.toContain("launch-codes");
          expect(text).not.toContain("/vault/");
        }
        expect(await now(o.id)).toMatchObject({ size: 1 });
      });

      test("a restore of an object linked to one the caller may not view names nothing of it", async () => {
        const o = await item("me", { vault });
        expect((await t().json("DELETE", `${ITEMS}/${o.id}/`)).status).toBe(204);
        const change = await lastChange();
        for (const query of ["?dry_run=true", ""]) {
          const r = await revert(change, query);
          expect(r.status).toBeLessThan(500);
          const text = JSON.stringify(r.body);
          expect(text).not.toContain("launch-codes");
          expect(text).not.toContain("/vault/");
        }
      });

      test("a record of a type the caller may not view is not reverted and names nothing", async () => {
        const r0 = await t().json("PATCH", `${CO}/vault/${vault}/`, { body: { name: "codes-2" } });
        expect(r0.status).toBe(200);
        const change = await lastChange();
        for (const query of ["?dry_run=true", ""]) {
          const r = await revert(change, query);
          expect([403, 404]).toContain(r.status);
          expect(JSON.stringify(r.body)).not.toContain("codes");
          expect(JSON.stringify(r.body)).not.toContain("vault");
        }
        expect((await t().json("GET", `${CO}/vault/${vault}/`)).body.name).toBe("codes-2");
        await t().json("PATCH", `${CO}/vault/${vault}/`, { body: { name: "launch-codes" } });
      });

      test("a host model's records: the same refusals, read or built from the record", async () => {
        const site = async (description: string) => {
          const n = ++serial;
          const body = { name: `s-${n}`, slug: `s-${n}`, description, comments: "c-before" };
          const r = await t().json("POST", "/api/dcim/sites/", { body });
          expect(r.status).toBe(201);
          return r.body.id as number;
        };
        const sitePatch = async (id: number, body: Record<string, unknown>) => {
          expect((await t().json("PATCH", `/api/dcim/sites/${id}/`, { body })).status).toBe(200);
          return lastChange();
        };
        const siteNow = async (id: number) =>
          (await t().json("GET", `/api/dcim/sites/${id}/`)).body;
        const theirs = await site("other");
        const c1 = await sitePatch(theirs, { comments: "c-secret" });
        refused(await revert(c1), "c-secret", "other");
        expect((await siteNow(theirs)).comments).toBe("c-secret");
        const moved = await site("other");
        const c2 = await sitePatch(moved, { description: "mine", comments: "c-after" });
        for (const query of ["", "?dry_run=true"])
          expect((await revert(c2, query)).status).toBe(403);
        expect(await siteNow(moved)).toMatchObject({ description: "mine", comments: "c-after" });
        const gone = await site("other");
        expect((await t().json("DELETE", `/api/dcim/sites/${gone}/`)).status).toBe(204);
        refused(await revert(await lastChange()), "c-before");
        expect((await t().json("GET", `/api/dcim/sites/${gone}/`)).status).toBe(404);
      });

      test("a delete put back by a caller who sees it but may add only inside constraints", async () => {
        const o = await item("other", { note: "n-restore" });
        expect((await t().json("DELETE", `${ITEMS}/${o.id}/`)).status).toBe(204);
        const change = await lastChange();
        for (const query of ["", "?force=true", "?dry_run=true"]) {
          const r = await revert(change, query, auditor);
          expect(r.status, `${query} ${JSON.stringify(r.body)}`).toBe(403);
          expect((await t().json("GET", `${ITEMS}/${o.id}/`)).status).toBe(404);
        }
        const s = await t().json("POST", "/api/dcim/sites/", {
          body: { name: `rs-${++serial}`, slug: `rs-${serial}`, description: "other" },
        });
        expect((await t().json("DELETE", `/api/dcim/sites/${s.body.id}/`)).status).toBe(204);
        const siteChange = await lastChange();
        for (const query of ["", "?force=true", "?dry_run=true"]) {
          const r = await revert(siteChange, query, auditor);
          expect(r.status, JSON.stringify(r.body)).toBe(403);
          expect((await t().json("GET", `/api/dcim/sites/${s.body.id}/`)).status).toBe(404);
        }
      });

      test("a delete put back with a link to an object the caller may not view", async () => {
        const o = await item("me", { vault });
        expect((await t().json("DELETE", `${ITEMS}/${o.id}/`)).status).toBe(204);
        const change = await lastChange();
        // what the same create answers when the caller sends it
        const direct = await t().json("POST", `${ITEMS}/`, {
          token: auditor,
          body: { name: "direct", owner: "me", vault },
        });
        expect(direct.status).toBe(400);
        const r = await revert(change, "", auditor);
        // refused as the create is: the link names an unknown id, nothing more
        expect(r.status, JSON.stringify(r.body)).toBe(409);
        expect(r.body.detail).toContain(direct.body.vault[0]);
        expect((await t().json("GET", `${ITEMS}/${o.id}/`)).status).toBe(404);
        const text = JSON.stringify(r.body);
        expect(text).not.toContain("launch-codes");
        expect(text).not.toContain("/vault/");
      });

      test("a site put back with a tenant the caller may not view", async () => {
        const tenant = await t().json("POST", "/api/tenancy/tenants/", {
          body: { name: `hidden-tenant-${++serial}`, slug: `ht-${serial}` },
        });
        const site = await t().json("POST", "/api/dcim/sites/", {
          body: {
            name: `ts-${serial}`,
            slug: `ts-${serial}`,
            description: "mine",
            tenant: tenant.body.id,
          },
        });
        expect((await t().json("DELETE", `/api/dcim/sites/${site.body.id}/`)).status).toBe(204);
        const change = await lastChange();
        const direct = await t().json("POST", "/api/dcim/sites/", {
          token: auditor,
          body: { name: "direct", slug: "direct", description: "mine", tenant: tenant.body.id },
        });
        expect(direct.status).toBe(400);
        for (const query of ["?dry_run=true", ""]) {
          const r = await revert(change, query, auditor);
          expect(r.status, JSON.stringify(r.body)).toBe(409);
          expect(JSON.stringify(r.body)).not.toContain("hidden-tenant");
        }
        expect((await t().json("GET", `/api/dcim/sites/${site.body.id}/`)).status).toBe(404);
      });

      test("a read-only token reverts nothing, remembered record or not", async () => {
        const reader = (
          await userWith(
            t(),
            `reader-${++serial}`,
            [
              [["view", "add", "change", "delete"], "custom_objects.items", null],
              [["view"], "core.objectchange", null],
            ],
            { writeEnabled: false },
          )
        ).token;
        const o = await item("me");
        const change = await patch(o.id, { size: 7 });
        for (const query of ["?dry_run=true", "", "?force=true"]) {
          const r = await revert(change, query, reader);
          expect(r.status, JSON.stringify(r.body)).toBe(403);
        }
        expect(await now(o.id)).toMatchObject({ size: 7 });
      });

      test("a site's update put back shows its hidden tenant by id alone", async () => {
        const tenant = await t().json("POST", "/api/tenancy/tenants/", {
          body: { name: `veiled-${++serial}`, slug: `veiled-${serial}` },
        });
        const site = await t().json("POST", "/api/dcim/sites/", {
          body: {
            name: `vs-${serial}`,
            slug: `vs-${serial}`,
            description: "mine",
            comments: "c-1",
            tenant: tenant.body.id,
          },
        });
        const patched = await t().json("PATCH", `/api/dcim/sites/${site.body.id}/`, {
          body: { comments: "c-2" },
        });
        expect(patched.status).toBe(200);
        const change = await lastChange();
        for (const query of ["?dry_run=true", ""]) {
          const r = await revert(change, query);
          expect(r.status, JSON.stringify(r.body)).toBe(200);
          expect(JSON.stringify(r.body)).not.toContain("veiled");
          expect(r.body.object.tenant).toEqual({ id: tenant.body.id });
        }
        expect((await t().json("GET", `/api/dcim/sites/${site.body.id}/`)).body.comments).toBe(
          "c-1",
        );
      });
    });
