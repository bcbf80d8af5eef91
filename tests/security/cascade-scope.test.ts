/**
 * An attacker's view of deletes that cascade or are protected (decisions 0109, 0120, 0136): a
 * constrained account deletes its own object while a type it may not view holds a `protect` link
 * to it, directly or below a cascade. The 409 says something still links to it and names nothing
 * of the hidden type (its id, field or objects), on a local file and a remote database, whichever
 * path (the staged batch, its explanation, a transaction) refuses it; nothing is deleted.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let app: BackendApp;
    const t = () => app.t;
    let attacker: string;
    let lockers: number;
    beforeAll(async () => {
      app = await appOn(backend, `cascade-scope-${backend}`);
      const crates = await makeCot(t(), "crates");
      await addField(t(), crates.id, { name: "name", type: "text", primary: true });
      await addField(t(), crates.id, { name: "owner", type: "text" });
      const parts = await makeCot(t(), "parts");
      await addField(t(), parts.id, { name: "name", type: "text", primary: true });
      await addField(t(), parts.id, {
        name: "crate",
        type: "object",
        related_object_type: "custom_objects.crates",
        on_delete_behavior: "cascade",
      });
      const l = await makeCot(t(), "lockers");
      lockers = l.id;
      await addField(t(), l.id, { name: "name", type: "text", primary: true });
      for (const [name, to] of [
        ["secretcrate", "custom_objects.crates"],
        ["secretpart", "custom_objects.parts"],
        ["secretsite", "dcim.site"],
      ] as const)
        await addField(t(), l.id, {
          name,
          type: "object",
          related_object_type: to,
          on_delete_behavior: "protect",
        });
      await addField(t(), l.id, {
        name: "secretmany",
        type: "multiobject",
        related_object_type: "custom_objects.crates",
        on_delete_behavior: "protect",
      });
      // a type the caller may not view that a crate's delete cascades to, protected below it
      const shadows = await makeCot(t(), "shadows");
      await addField(t(), shadows.id, { name: "name", type: "text", primary: true });
      await addField(t(), shadows.id, {
        name: "crate",
        type: "object",
        related_object_type: "custom_objects.crates",
        on_delete_behavior: "cascade",
      });
      await addField(t(), l.id, {
        name: "secretshadow",
        type: "object",
        related_object_type: "custom_objects.shadows",
        on_delete_behavior: "protect",
      });
      // a type the caller may view: its links are named as before
      const shelves = await makeCot(t(), "shelves");
      await addField(t(), shelves.id, { name: "name", type: "text", primary: true });
      await addField(t(), shelves.id, {
        name: "holds",
        type: "object",
        related_object_type: "custom_objects.crates",
        on_delete_behavior: "protect",
      });
      attacker = (
        await userWith(t(), `crate-owner-${backend}`, [
          [["view"], "custom_objects.shelves", null],
          [["view", "delete"], "custom_objects.crates", { owner: "me" }],
          [["view", "delete"], "custom_objects.parts", null],
          [["view", "delete"], "dcim.site", null],
        ])
      ).token;
    });
    afterAll(() => app.close());

    let serial = 0;
    const crate = () => create(t(), "crates", { name: `crate-${++serial}`, owner: "me" });
    const refusedQuietly = async (path: string) => {
      const r = await t().json("DELETE", path, { token: attacker });
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      const text = JSON.stringify(r.body);
      for (const hidden of [
        "secret",
        "locker",
        "shadow",
        `type ${lockers}`,
        `"custom_object_type":${lockers}`,
      ])
        expect(text).not.toContain(hidden);
      expect(r.body.protected_objects ?? []).toEqual([]);
      expect((await t().json("GET", path)).status).toBe(200);
      return r;
    };

    test("a protect link from a type the caller may not view", async () => {
      const c = await crate();
      await create(t(), "lockers", { name: "locker-a", secretcrate: c.id });
      await refusedQuietly(`${CO}/crates/${c.id}/`);
    });

    test("a protect link in a multiobject field of a type the caller may not view", async () => {
      const c = await crate();
      await create(t(), "lockers", { name: "locker-m", secretmany: [c.id] });
      await refusedQuietly(`${CO}/crates/${c.id}/`);
    });

    test("a protect link below a cascade", async () => {
      const c = await crate();
      const p = await create(t(), "parts", { name: `part-${serial}`, crate: c.id });
      await create(t(), "lockers", { name: "locker-b", secretpart: p.id });
      await refusedQuietly(`${CO}/crates/${c.id}/`);
      expect((await t().json("GET", `${CO}/parts/${p.id}/`)).status).toBe(200);
    });

    test("a host object protected by a type the caller may not view", async () => {
      const s = await t().json("POST", "/api/dcim/sites/", {
        body: { name: "guarded", slug: "guarded" },
      });
      await create(t(), "lockers", { name: "locker-s", secretsite: s.body.id });
      await refusedQuietly(`/api/dcim/sites/${s.body.id}/`);
    });

    test("a protect link to a cascaded object of a type the caller may not view", async () => {
      const c = await crate();
      const sh = await create(t(), "shadows", { name: `shade-${serial}`, crate: c.id });
      await create(t(), "lockers", { name: "locker-c", secretshadow: sh.id });
      await refusedQuietly(`${CO}/crates/${c.id}/`);
      expect((await t().json("GET", `${CO}/shadows/${sh.id}/`)).status).toBe(200);
    });

    // the same hook on either backend: one is enough for 200 objects
    if (backend === "local")
      test("a cascade past one batch's bound (a transaction) refuses as quietly", async () => {
        const c = await crate();
        const many = Array.from({ length: 201 }, (_, i) => ({ name: `bulk-${i}`, crate: c.id }));
        expect((await t().json("POST", `${CO}/parts/`, { body: many })).status).toBe(201);
        const last = await t().json("GET", `${CO}/parts/?ordering=-id&limit=1`);
        await create(t(), "lockers", { name: "locker-t", secretpart: last.body.results[0].id });
        await refusedQuietly(`${CO}/crates/${c.id}/`);
      });

    test("a protect link from a type the caller may view is named", async () => {
      const c = await crate();
      const shelf = await create(t(), "shelves", { name: "shelf", holds: c.id });
      const r = await t().json("DELETE", `${CO}/crates/${c.id}/`, { token: attacker });
      expect(r.status).toBe(409);
      expect(r.body.protected_objects).toEqual([
        expect.objectContaining({ field_name: "holds", object_id: shelf.id }),
      ]);
    });
  });
