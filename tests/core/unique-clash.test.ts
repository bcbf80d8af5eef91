/**
 * A write refused by unique indexes names every clashing field, as NetBox's per-field
 * `UniqueValidator`s do (SQLite reports only the first index that failed): host models and custom
 * objects, create, update and bulk, on a local file and on a remote database (decision 0146). A
 * clash with a row the caller may not view says only that the value is taken, as before.
 */
import { settleBeforeCounting } from "../helpers/settle";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";
import type { TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";

const SITE_NAME = ["site with this name already exists."];
const SITE_SLUG = ["site with this slug already exists."];

for (const where of ["local", "remote"] as const) {
  describe(`unique clashes (${where})`, () => {
    let on: BackendApp;
    let t: TestApp;
    let gadget: { id: number };
    beforeAll(async () => {
      on = await appOn(where, `unique-clash-${where}`);
      t = on.t;
      await t.json("POST", "/api/dcim/sites/", { body: { name: "Alpha", slug: "alpha" } });
      await t.json("POST", "/api/dcim/sites/", { body: { name: "Beta", slug: "beta" } });
      gadget = await makeCot(t, "gadget");
      await addField(t, gadget.id, { name: "title", type: "text", primary: true, unique: true });
      await addField(t, gadget.id, { name: "serial", type: "text", unique: true });
      await addField(t, gadget.id, { name: "rack", type: "text" });
      await addField(t, gadget.id, { name: "unit", type: "integer" });
      const key = await t.json("PATCH", `${CO}/custom-object-types/${gadget.id}/`, {
        body: { unique_together: [["rack", "unit"]] },
      });
      expect(key.status).toBe(200);
      await create(t, "gadget", { title: "g1", serial: "s1", rack: "r1", unit: 1 });
      await create(t, "gadget", { title: "g2", serial: "s2", rack: "r1", unit: 2 });
    });
    afterAll(() => on.close());

    test("a site create clashing on name and slug names both", async () => {
      const r = await t.json("POST", "/api/dcim/sites/", {
        body: { name: "Alpha", slug: "alpha" },
      });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ name: SITE_NAME, slug: SITE_SLUG });
      // one clash names its field alone
      const one = await t.json("POST", "/api/dcim/sites/", { body: { name: "Alpha", slug: "a2" } });
      expect(one.body).toEqual({ name: SITE_NAME });
    });

    test("a site update and a bulk create name every clash, per item", async () => {
      const beta = (await t.json("GET", "/api/dcim/sites/?slug=beta")).body.results[0];
      const r = await t.json("PATCH", `/api/dcim/sites/${beta.id}/`, {
        body: { name: "Alpha", slug: "alpha" },
      });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ name: SITE_NAME, slug: SITE_SLUG });
      // setting its own values again is no clash, and a key it leaves alone is not named
      const own = await t.json("PATCH", `/api/dcim/sites/${beta.id}/`, {
        body: { name: "Beta", slug: "alpha" },
      });
      expect(own.body).toEqual({ slug: SITE_SLUG });
      const bulk = await t.json("POST", "/api/dcim/sites/", {
        body: [
          { name: "Gamma", slug: "gamma" },
          { name: "Alpha", slug: "alpha" },
          { name: "Gamma", slug: "gamma" },
        ],
      });
      expect(bulk.status).toBe(400);
      expect(bulk.body.errors).toEqual([
        { index: 1, errors: { name: SITE_NAME, slug: SITE_SLUG } },
        { index: 2, errors: { name: SITE_NAME, slug: SITE_SLUG } },
      ]);
      expect((await t.json("GET", "/api/dcim/sites/?slug=gamma")).body.count).toBe(0);
    });

    test("a clash with a site the caller may not view names the fields, nothing more", async () => {
      await t.json("POST", "/api/dcim/sites/", {
        body: { name: "Hidden", slug: "hidden", description: "secret note" },
      });
      const { token } = await userWith(t, `narrow-${where}`, [
        [["view", "add"], "dcim.site", { description: "mine" }],
      ]);
      const r = await t.json("POST", "/api/dcim/sites/", {
        token,
        body: { name: "Hidden", slug: "hidden", description: "mine" },
      });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ name: SITE_NAME, slug: SITE_SLUG });
      expect(JSON.stringify(r.body)).not.toContain("secret");
    });

    test("a custom object names its unique fields and its compound key", async () => {
      const r = await t.json("POST", `${CO}/gadget/`, {
        body: { title: "g1", serial: "s1", rack: "r1", unit: 1 },
      });
      expect(r.status).toBe(400);
      const set = ["The fields rack, unit must make a unique set."];
      expect(r.body).toEqual({
        title: ["Gadget with this title already exists."],
        serial: ["Gadget with this serial already exists."],
        rack: set,
        unit: set,
      });
      const g2 = (await t.json("GET", `${CO}/gadget/?title=g2`)).body.results[0];
      const upd = await t.json("PATCH", `${CO}/gadget/${g2.id}/`, {
        body: { serial: "s1", unit: 1 },
      });
      expect(upd.status).toBe(400);
      expect(upd.body).toEqual({
        serial: ["Gadget with this serial already exists."],
        rack: set,
        unit: set,
      });
      const bulk = await t.json("POST", `${CO}/gadget/`, {
        body: [
          { title: "g3", serial: "s3" },
          { title: "g1", serial: "s1" },
        ],
      });
      expect(bulk.status).toBe(400);
      expect(bulk.body.errors).toEqual([
        {
          index: 1,
          errors: {
            title: ["Gadget with this title already exists."],
            serial: ["Gadget with this serial already exists."],
          },
        },
      ]);
    });

    if (where === "remote")
      test("the explanation costs one read after the refused batch", async () => {
        // earlier tests' deferred search flush and the token's use would land in the count
        await settleBeforeCounting(t.app, () => t.json("GET", "/api/status/"));
        on.proxy!.reset();
        const r = await t.json("POST", "/api/dcim/sites/", {
          body: { name: "Alpha", slug: "alpha" },
        });
        expect(r.body).toEqual({ name: SITE_NAME, slug: SITE_SLUG });
        expect(on.proxy!.count).toBe(2);
      });
  });
}
