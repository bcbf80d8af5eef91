/**
 * A relation field's checks answered from the write's one read phase (decision 0159): every
 * spelling of the related type (an id, a label, `{app_label, model}`, upstream's top-level
 * `app_label`/`model`, the internal `table<N>model`), an unknown one, a type the caller may not
 * view, a reverse name taken, and a list closing a cycle through its own items — the answers a
 * read per check gave, local file and remote alike; remote, in two round trips.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { settleBeforeCounting } from "../helpers/settle";
import { addField, CO, choiceSet, makeCot } from "./fixtures";

const FIELDS = `${CO}/custom-object-type-fields/`;

for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let on: BackendApp;
    let host: { id: number };
    let seen: { id: number };
    let unseen: { id: number; object_type: { id: number } };
    let token: string;
    beforeAll(async () => {
      on = await appOn(backend, `reads-ahead-${backend}`);
      host = await makeCot(on.t, "ra_host");
      seen = await makeCot(on.t, "ra_seen");
      unseen = await makeCot(on.t, "ra_unseen");
      token = (
        await userWith(on.t, `ra-${backend}`, [
          [["view"], "custom_objects.customobjecttype", { slug__in: ["ra_host", "ra_seen"] }],
          [["view", "add", "change"], "custom_objects.customobjecttypefield", null],
        ])
      ).token;
    });
    afterAll(() => on.close());

    const post = (body: unknown, as?: string) => on.t.json("POST", FIELDS, { body, token: as });
    let n = 0;
    const field = (related: Record<string, unknown>) => ({
      custom_object_type: host.id,
      name: `f${++n}`,
      type: "object",
      ...related,
    });
    const target = async (r: { status: number; body: any }) => {
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body.related_object_type;
    };

    test("every spelling of the related type resolves as before; unknown ones are 400s", async () => {
      const site = { app_label: "dcim", model: "site" };
      expect(await target(await post(field({ related_object_type: "dcim.site" })))).toMatchObject(
        site,
      );
      expect(await target(await post(field({ related_object_type: site })))).toMatchObject(site);
      // upstream's spelling: top-level app_label and model
      expect(await target(await post(field({ app_label: "dcim", model: "site" })))).toMatchObject(
        site,
      );
      // the internal model name of a custom object type (an alias the registry resolves)
      const alias = await post(
        field({ related_object_type: `custom_objects.table${seen.id}model` }),
      );
      expect(await target(alias)).toMatchObject({ app_label: "custom_objects", model: "ra_seen" });
      const byId = await post(field({ related_object_type: unseen.object_type.id }));
      expect(await target(byId)).toMatchObject({ model: "ra_unseen" });
      for (const [value, shown] of [
        ["dcim.nothing", '"dcim.nothing"'],
        [{ app_label: "dcim", model: "Site" }, '{"app_label":"dcim","model":"Site"}'],
        [987654, "987654"],
        ["custom_objects.table987654model", '"custom_objects.table987654model"'],
        [`table${seen.id}model`, `"table${seen.id}model"`],
      ] as const) {
        const r = await post(field({ related_object_type: value }));
        expect({ status: r.status, body: r.body }).toEqual({
          status: 400,
          body: { related_object_type: [`Unknown object type: ${shown}`] },
        });
      }
    });

    test("odd text in what is read ahead (a lone surrogate, quotes, control characters): a 400, never a 500", async () => {
      for (const odd of ["\ud800", 'a"b\\', "x\u0000y", "é✓"]) {
        const typed = await post(field({ related_object_type: { app_label: "dcim", model: odd } }));
        expect(typed.status, JSON.stringify(typed.body)).toBe(400);
        expect(Object.keys(typed.body)).toEqual(["related_object_type"]);
        const named = await post(field({ related_object_type: "dcim.site", related_name: odd }));
        expect(named.status, JSON.stringify(named.body)).toBeLessThan(500);
        const set = await post({
          custom_object_type: host.id,
          name: `o${++n}`,
          type: "select",
          choice_set: odd,
        });
        expect(set.status, JSON.stringify(set.body)).toBe(400);
      }
    });

    test("a type the caller may not view is unknown to them, in every spelling and in a list", async () => {
      for (const value of ["custom_objects.ra_unseen", unseen.object_type.id]) {
        const r = await post(field({ related_object_type: value }), token);
        expect({ status: r.status, body: r.body }).toEqual({
          status: 400,
          body: { related_object_type: [`Unknown object type: ${JSON.stringify(value)}`] },
        });
      }
      const poly = await post(
        field({
          is_polymorphic: true,
          related_object_types: ["dcim.site", "custom_objects.ra_unseen"],
        }),
        token,
      );
      expect({ status: poly.status, body: poly.body }).toEqual({
        status: 400,
        body: { related_object_types: ['Unknown object type: "custom_objects.ra_unseen"'] },
      });
      const list = await post(
        [
          field({ related_object_type: "custom_objects.ra_seen" }),
          field({ related_object_type: "custom_objects.ra_unseen" }),
        ],
        token,
      );
      expect({ status: list.status, body: list.body }).toEqual({
        status: 400,
        body: {
          detail: "1 of 2 objects failed validation.",
          errors: [
            {
              index: 1,
              errors: { related_object_type: ['Unknown object type: "custom_objects.ra_unseen"'] },
            },
          ],
        },
      });
      const fine = await post(field({ related_object_type: "custom_objects.ra_seen" }), token);
      expect(fine.status, JSON.stringify(fine.body)).toBe(201);
    });

    test("a reverse name taken: the holder named only to who may view it; a held target sent back", async () => {
      const holder = await addField(on.t, unseen.id, {
        name: "home",
        type: "object",
        related_object_type: "dcim.site",
        related_name: "ra_dwellers",
      });
      const asked = field({ related_object_type: "dcim.site", related_name: "ra_dwellers" });
      const admin = await post(asked);
      expect({ status: admin.status, body: admin.body }).toEqual({
        status: 400,
        body: {
          related_name: [
            'Reverse relation name "ra_dwellers" is already used by field "home" on "ra_unseen".',
          ],
        },
      });
      const hidden = await post({ ...asked, name: `f${++n}` }, token);
      expect({ status: hidden.status, body: hidden.body }).toEqual({
        status: 400,
        body: {
          related_name: ['Reverse relation name "ra_dwellers" is already used by another field.'],
        },
      });
      // a field pointing at the hidden type, renamed by the caller: its target is held
      const pointing = await addField(on.t, host.id, {
        name: "pointing",
        type: "object",
        related_object_type: "custom_objects.ra_unseen",
      });
      const patch = await on.t.json("PATCH", `${FIELDS}${pointing.id}/`, {
        token,
        body: { related_name: "ra_pointers", related_object_type: "custom_objects.ra_unseen" },
      });
      expect(patch.status, JSON.stringify(patch.body)).toBe(200);
      const taken = await on.t.json("PATCH", `${FIELDS}${holder.id}/`, {
        body: { related_name: "ra_dwellers" },
      });
      expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    });

    test("a list closing a cycle through its own items: the closing item refused as one by one", async () => {
      const a = await makeCot(on.t, "ra_cycle_a");
      const b = await makeCot(on.t, "ra_cycle_b");
      const list = await post([
        {
          custom_object_type: a.id,
          name: "to_b",
          type: "object",
          related_object_type: "custom_objects.ra_cycle_b",
        },
        {
          custom_object_type: b.id,
          name: "to_a",
          type: "object",
          related_object_type: "custom_objects.ra_cycle_a",
        },
      ]);
      expect(list.status, JSON.stringify(list.body)).toBe(400);
      expect(JSON.stringify(list.body)).toContain("ra_cycle_b → ra_cycle_a → ra_cycle_b");
      const stored = (await on.t.json("GET", `${CO}/custom-object-types/${a.id}/`)).body;
      expect(stored.fields).toEqual([]);
      // one by one, the second is refused the same way
      await addField(on.t, a.id, {
        name: "to_b",
        type: "object",
        related_object_type: "custom_objects.ra_cycle_b",
      });
      const second = await post({
        custom_object_type: b.id,
        name: "to_a",
        type: "object",
        related_object_type: "custom_objects.ra_cycle_a",
      });
      expect(second.status, JSON.stringify(second.body)).toBe(400);
      expect(second.body.error).toBe("circular_dependency");
    });

    test("a choice set by id, name or {id}; unknown ones and defaults outside it are 400s", async () => {
      const set = await choiceSet(on.t, `ra_sizes_${backend}`, ["s", "m"]);
      const chosen = (choice_set: unknown, extra: Record<string, unknown> = {}) =>
        post({
          custom_object_type: host.id,
          name: `c${++n}`,
          type: "select",
          choice_set,
          ...extra,
        });
      const nested = {
        id: set.id,
        url: expect.stringContaining(`/custom-field-choice-sets/${set.id}/`),
        display: `ra_sizes_${backend}`,
        name: `ra_sizes_${backend}`,
        description: "",
      };
      for (const spelled of [set.id, `  ra_sizes_${backend} `, { id: set.id }]) {
        const r = await chosen(spelled, { default: "m" });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        expect(r.body.choice_set).toEqual(nested);
        const got = await on.t.json("GET", `${FIELDS}${r.body.id}/`);
        expect(r.body).toEqual(got.body);
      }
      for (const [spelled, shown] of [
        ["ra_nothing", '"ra_nothing"'],
        [987654, "987654"],
        [{ id: 987654 }, '{"id":987654}'],
      ] as const) {
        const r = await chosen(spelled);
        expect({ status: r.status, body: r.body }).toEqual({
          status: 400,
          body: { choice_set: [`Choice set not found: ${shown}`] },
        });
      }
      const outside = await chosen(set.id, { default: "xl" });
      expect(outside.status).toBe(400);
      expect(Object.keys(outside.body)).toEqual(["default"]);
      // an update naming no set: its default checked against the stored one
      const made = await chosen(set.id);
      const patch = (body: unknown) => on.t.json("PATCH", `${FIELDS}${made.body.id}/`, { body });
      const bad = await patch({ default: "xl" });
      expect({ status: bad.status, body: bad.body }).toEqual({
        status: outside.status,
        body: outside.body,
      });
      const good = await patch({ default: "s" });
      expect(good.status, JSON.stringify(good.body)).toBe(200);
      expect(good.body.choice_set).toEqual(nested);
    });

    if (backend === "remote")
      test("a caller whose view of types is limited: a relation to a type they see in 2 round trips", async () => {
        const body = () =>
          field({ related_object_type: "custom_objects.ra_seen", related_name: `ra_rn${n}` });
        expect((await post(body(), token)).status).toBe(201);
        // the warm-up's token use and the search index's flush run off the request: not this one's
        await settleBeforeCounting(
          on.t.app,
          () => on.t.json("GET", "/api/status/", { token }),
          `ra-${backend}`,
        );
        on.proxy!.reset();
        const r = await post(body(), token);
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        expect(on.proxy!.count).toBe(2);
      });
  });
