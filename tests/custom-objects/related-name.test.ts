/**
 * A reverse relation name (`related_name`) names one field per related object type (upstream's
 * check, decision 0052; within one document and one list too, decision 0142): a second field
 * taking it is a 400 on `related_name`, on REST and schema apply, local and remote alike.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { openDatabase } from "../../src/db/local";
import { createCache } from "../../src/services/cache";
import { BASE, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { holdNextWrite } from "../helpers/hold-write";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { reverseNameRaces } from "./related-name-race";
import { SCHEMA, doc } from "../schema/helpers";
import { addField, CO, makeCot } from "./fixtures";

/** Another process's app on `t`'s database (its own connections and caches), as `t`'s superuser. */
async function otherApp(t: TestApp) {
  const config = loadConfig({ LOG_LEVEL: "silent", DATABASE_URL: t.dbUrl }, "bun");
  const db = await openDatabase(config.database.url);
  const app = await createApp({ config, db, cache: createCache("memory", {}) });
  const json = async (method: string, path: string, body?: unknown) => {
    const res = await app.request(BASE + path, {
      method,
      headers: { authorization: `Token ${t.admin}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
  return { json, close: () => db.close() };
}

for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let on: BackendApp;
    beforeAll(async () => {
      on = await appOn(backend, `related-name-${backend}`);
    });
    afterAll(() => on.close());

    const site = (name: string, related_name: string, id = 1) => ({
      id,
      name,
      type: "object",
      related_object_type: "dcim/site",
      related_name,
    });
    const apply = (types: unknown[]) =>
      on.t.json("POST", `${SCHEMA}/apply/`, { body: { schema: doc(types) } });
    const fieldNames = async (slug: string) =>
      (
        (await on.t.json("GET", `${CO}/custom-object-types/?slug=${slug}`)).body.results[0]
          ?.fields ?? []
      ).map((f: { name: string }) => f.name);

    test("two new fields of one document taking one reverse name on one target: 400, nothing applied", async () => {
      const twoTypes = await apply([
        { name: "rn_a", slug: "rn_a", fields: [site("home", "residents")] },
        { name: "rn_b", slug: "rn_b", fields: [site("base", "residents")] },
      ]);
      expect(twoTypes.status, JSON.stringify(twoTypes.body)).toBe(400);
      expect(JSON.stringify(twoTypes.body)).toContain("related_name");
      expect(JSON.stringify(twoTypes.body)).toContain("residents");
      const oneType = await apply([
        {
          name: "rn_c",
          slug: "rn_c",
          fields: [site("home", "dwellers"), site("work", "dwellers", 2)],
        },
      ]);
      expect(oneType.status, JSON.stringify(oneType.body)).toBe(400);
      expect(JSON.stringify(oneType.body)).toContain("related_name");
      for (const slug of ["rn_a", "rn_b", "rn_c"])
        expect((await on.t.json("GET", `${CO}/custom-object-types/?slug=${slug}`)).body.count).toBe(
          0,
        );
      // other targets, or other names: fine
      const fine = await apply([
        { name: "rn_d", slug: "rn_d", fields: [site("home", "homes"), site("work", "works", 2)] },
      ]);
      expect(fine.status, JSON.stringify(fine.body)).toBe(200);
    });

    test("a document's new field taking an existing field's reverse name: 400", async () => {
      const cot = await makeCot(on.t, "rn_held");
      await addField(on.t, cot.id, {
        name: "home",
        type: "object",
        related_object_type: "dcim.site",
        related_name: "holders",
      });
      const taken = await apply([
        { name: "rn_taker", slug: "rn_taker", fields: [site("home", "holders")] },
      ]);
      expect(taken.status, JSON.stringify(taken.body)).toBe(400);
      expect(JSON.stringify(taken.body)).toContain("holders");
      expect(await fieldNames("rn_taker")).toEqual([]);
    });

    test("REST: a field, or a list of field updates, taking a taken reverse name: 400, nothing written", async () => {
      const cot = await makeCot(on.t, "rn_rest");
      const body = (name: string, related_name: string) => ({
        custom_object_type: cot.id,
        name,
        type: "object",
        related_object_type: "dcim.site",
        related_name,
      });
      const first = await addField(on.t, cot.id, body("one", "ones"));
      const clash = await on.t.json("POST", `${CO}/custom-object-type-fields/`, {
        body: body("two", "ones"),
      });
      expect(clash.status, JSON.stringify(clash.body)).toBe(400);
      expect(Object.keys(clash.body)).toEqual(["related_name"]);
      const second = await addField(on.t, cot.id, body("two", "twos"));
      const third = await addField(on.t, cot.id, body("three", "threes"));
      // two items of one list taking the same free name
      const listed = await on.t.json("PATCH", `${CO}/custom-object-type-fields/`, {
        body: [
          { id: second.id, related_name: "many" },
          { id: third.id, related_name: "many" },
        ],
      });
      expect(listed.status, JSON.stringify(listed.body)).toBe(400);
      expect(JSON.stringify(listed.body)).toContain("related_name");
      const names = (
        await on.t.json("GET", `${CO}/custom-object-types/${cot.id}/`)
      ).body.fields.map((f: { related_name: string }) => f.related_name);
      expect(names.sort()).toEqual(["ones", "threes", "twos"]);
      expect(first.id).toBeGreaterThan(0);
    });

    test("two processes racing for one reverse name (a REST update, a REST create, an apply, each against a REST update): the database refuses the later batch, 400, one holder", async () => {
      const other = await otherApp(on.t);
      try {
        const a = async (method: string, path: string, body?: unknown) => {
          const r = await on.t.json(method, path, { body });
          return { status: r.status, body: r.body };
        };
        const races = await reverseNameRaces(
          a,
          other.json,
          (match) => holdNextWrite(on.t.deps.db, match),
          `rnr_${backend}`,
          { apply: backend !== "local" },
        );
        for (const [kind, race] of Object.entries(races)) {
          if (!race) continue;
          const said = `${kind}: ${JSON.stringify(race)}`;
          expect(race.holders, said).toEqual([`rnr_${backend}_b.base`]);
          expect(race.status, said).toBe(400);
          expect(race.again.status, said).toBe(400);
          expect(race.body, said).toEqual(race.again.body);
          expect(JSON.stringify(race.body), said).toContain("related_name");
        }
      } finally {
        await other.close();
      }
    });

    test("a reverse name held by a field of a type the caller may not view: 400 naming neither that field nor its type", async () => {
      const vault = await makeCot(on.t, "rn_vault", "rn_vault", { group_name: "secret" });
      await addField(on.t, vault.id, {
        name: "secret_home",
        type: "object",
        related_object_type: "dcim.site",
        related_name: "vaulted",
      });
      const lab = await makeCot(on.t, "rn_lab", "rn_lab", { group_name: "lab" });
      const { token } = await userWith(on.t, `rn_prober_${backend}`, [
        [["view", "add", "change"], "custom_objects.customobjecttype", { group_name: "lab" }],
        [["view", "add", "change"], "custom_objects.customobjecttypefield", null],
      ]);
      const body = (related_name: string) => ({
        custom_object_type: lab.id,
        name: "home",
        type: "object",
        related_object_type: "dcim.site",
        related_name,
      });
      const hidden = await on.t.json("POST", `${CO}/custom-object-type-fields/`, {
        token,
        body: body("vaulted"),
      });
      expect(hidden.status, JSON.stringify(hidden.body)).toBe(400);
      expect(hidden.body).toEqual({
        related_name: ['Reverse relation name "vaulted" is already used by another field.'],
      });
      // a holder they may view is named, as to a superuser
      await addField(on.t, lab.id, { ...body("labbed"), name: "lab_home" });
      const seen = await on.t.json("POST", `${CO}/custom-object-type-fields/`, {
        token,
        body: body("labbed"),
      });
      expect(seen.body).toEqual({
        related_name: [
          'Reverse relation name "labbed" is already used by field "lab_home" on "rn_lab".',
        ],
      });
      // a schema apply taking it: the same, the holder unnamed
      const applied = await on.t.json("POST", `${SCHEMA}/apply/`, {
        token,
        body: {
          schema: doc([
            {
              name: "rn_lab2",
              slug: "rn_lab2",
              group_name: "lab",
              fields: [site("home", "vaulted")],
            },
          ]),
        },
      });
      expect(applied.status, JSON.stringify(applied.body)).toBe(400);
      expect(JSON.stringify(applied.body)).toContain("vaulted");
      expect(JSON.stringify(applied.body)).not.toContain("secret_home");
      expect(JSON.stringify(applied.body)).not.toContain("rn_vault");
    });

    test("a trashed field or type restored after another field took its reverse name: 409 restore_conflict, nothing restored, one holder", async () => {
      const code = { id: 1, name: "code", type: "text" };
      const typeDoc = (slug: string, fields: unknown[], extra = {}) => ({
        schema: doc([{ name: slug, slug, fields, ...extra }]),
        allow_destructive: true,
      });
      const holders = async (name: string) =>
        (await on.t.json("GET", `${CO}/custom-object-type-fields/?related_name=${name}`)).body
          .count;
      const restore = async (slug: string) => {
        const [entry] = (await on.t.json("GET", `${SCHEMA}/trash/?slug=${slug}`)).body.results;
        return on.t.json("POST", `${SCHEMA}/trash/${entry.id}/restore/`);
      };
      const taker = await makeCot(on.t, "rn_taker_back");
      const take = (related_name: string) =>
        addField(on.t, taker.id, {
          name: related_name,
          type: "object",
          related_object_type: "dcim.site",
          related_name,
        });
      // a field removed to the trash, then its reverse name taken
      expect(
        (
          await apply([
            { name: "rn_binned", slug: "rn_binned", fields: [code, site("home", "binned", 2)] },
          ])
        ).status,
      ).toBe(200);
      await on.t.json("POST", `${CO}/rn_binned/`, { body: { code: "kept" } });
      const removed = await on.t.json("POST", `${SCHEMA}/apply/`, {
        body: typeDoc("rn_binned", [code], { removed_fields: [{ id: 2, name: "home" }] }),
      });
      expect(removed.status, JSON.stringify(removed.body)).toBe(200);
      await take("binned");
      const field = await restore("rn_binned");
      expect(field.status, JSON.stringify(field.body)).toBe(409);
      expect(field.body).toEqual({
        error: "restore_conflict",
        detail:
          'What the entry restores (type "rn_binned", field "home") takes a reverse relation name another field uses now; change one of them first.',
      });
      expect(await holders("binned")).toBe(1);
      expect(await fieldNames("rn_binned")).toEqual(["code"]);
      // a whole type removed to the trash, then its field's reverse name taken
      expect(
        (
          await apply([
            { name: "rn_gone", slug: "rn_gone", fields: [code, site("home", "gone", 2)] },
          ])
        ).status,
      ).toBe(200);
      const gone = await on.t.json("POST", `${SCHEMA}/apply/`, {
        body: {
          schema: { schema_version: "1", types: [], removed_types: [{ slug: "rn_gone" }] },
          allow_destructive: true,
        },
      });
      expect(gone.status, JSON.stringify(gone.body)).toBe(200);
      await take("gone");
      const type = await restore("rn_gone");
      expect(type.status, JSON.stringify(type.body)).toBe(409);
      expect(type.body.error).toBe("restore_conflict");
      expect(await holders("gone")).toBe(1);
      expect((await on.t.json("GET", `${SCHEMA}/trash/?slug=rn_gone`)).body.count).toBe(1);
    });
  });
