/**
 * Issue 32 item 1: conditional constraints (decision 0087). Partial unique keys
 * (`unique_together` entries `{fields, condition}`) and checks (`{name, condition}`) in the REST
 * type API and schema documents, conditions in the NetBox permission-constraint language over
 * the type's own fields, enforced by the database on every path, gated in preview, exported.
 * Each test runs on a local file and on a remote libSQL server (the Hrana tool, as Turso is
 * reached), where type writes and schema applies are one batch (decisions 0108, 0111, 0119).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TestApp } from "../helpers/app";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { addField, CO, create, makeCot } from "./fixtures";
import { doc, dump, SCHEMA } from "../schema/helpers";

for (const where of ["local", "remote"] as const)
  describe(where, () => {
    let t: TestApp;
    let on: BackendApp;
    let vlan: { id: number };
    const TYPE = () => `${CO}/custom-object-types/${vlan.id}/`;
    const KEY = { fields: ["vid"], condition: { status__n: "retired" } };
    const RANGE = { name: "vid_range", condition: { vid__gte: 1, vid__lte: 4094 } };

    beforeAll(async () => {
      on = await appOn(where, "conditional");
      t = on.t;
      vlan = await makeCot(t, "vlan");
      await addField(t, vlan.id, { name: "name", type: "text", primary: true });
      await addField(t, vlan.id, { name: "vid", type: "integer" });
      await addField(t, vlan.id, { name: "status", type: "text" });
    });
    afterAll(() => on.close());

    const instanceSchemas = async () => {
      const s = (await t.json("GET", "/api/schema/")).body.components.schemas;
      return JSON.stringify(Object.entries(s).filter(([k]) => /vlan/i.test(k)));
    };

    describe("REST type API", () => {
      let openapiBefore = "";
      test("partial keys and checks are set, answered and enforced on writes", async () => {
        openapiBefore = await instanceSchemas();
        const set = await t.json("PATCH", TYPE(), {
          body: { unique_together: [KEY], checks: [RANGE] },
        });
        expect(set.status).toBe(200);
        expect(set.body.unique_together).toEqual([KEY]);
        expect(set.body.checks).toEqual([RANGE]);

        await create(t, "vlan", { name: "a", vid: 10, status: "active" });
        const clash = await t.json("POST", `${CO}/vlan/`, {
          body: { name: "b", vid: 10, status: "active" },
        });
        expect(clash.status).toBe(400);
        expect(clash.body.vid[0]).toContain('matching {"status__n":"retired"}');
        // outside the condition the values may repeat
        await create(t, "vlan", { name: "c", vid: 10, status: "retired" });
        await create(t, "vlan", { name: "d", vid: 10, status: "retired" });

        const out = await t.json("POST", `${CO}/vlan/`, { body: { name: "e", vid: 5000 } });
        expect(out.status).toBe(400);
        expect(out.body.vid[0]).toContain('check "vid_range"');
        const c = await create(t, "vlan", { name: "f", vid: 20, status: "active" });
        const patched = await t.json("PATCH", `${CO}/vlan/${c.id}/`, { body: { vid: 0 } });
        expect(patched.status).toBe(400);
        expect(patched.body.vid[0]).toContain("vid_range");
        const bulk = await t.json("POST", `${CO}/vlan/`, {
          body: [
            { name: "g", vid: 30 },
            { name: "h", vid: 9999 },
          ],
        });
        expect(bulk.status).toBe(400);
        expect((await t.json("GET", `${CO}/vlan/?name=g`)).body.count).toBe(0);
      });

      test("the database itself refuses a violating row (any path, not only the API)", async () => {
        const client = t.deps.db.client;
        const table = `co_${vlan.id}`;
        const now = new Date().toISOString();
        await expect(
          client.execute({
            sql: `INSERT INTO "${table}" (created, last_updated, name, vid) VALUES (?, ?, 'raw', 0)`,
            args: [now, now],
          }),
        ).rejects.toThrow(/host_check:vid_range/);
        await expect(
          client.execute({
            sql: `INSERT INTO "${table}" (created, last_updated, name, vid, status) VALUES (?, ?, 'raw', 10, 'active')`,
            args: [now, now],
          }),
        ).rejects.toThrow(/UNIQUE/);
      });

      test("a constraint over existing rows that break it is a 400 counting them; nothing changes", async () => {
        const before = await dump(t);
        const r = await t.json("PATCH", TYPE(), {
          body: { checks: [RANGE, { name: "named_a", condition: { name__isw: "a" } }] },
        });
        expect(r.status).toBe(400);
        expect(r.body.checks[0]).toMatch(/^\d+ existing row\(s\) do not match the check "named_a"/);
        const dup = await t.json("PATCH", TYPE(), {
          body: { unique_together: [KEY, { fields: ["vid"], condition: { status: "retired" } }] },
        });
        expect(dup.status).toBe(400);
        expect(dup.body.unique_together[0]).toContain("2 existing row(s)");
        expect(await dump(t)).toBe(before);
      });

      test("conditions: own fields only, no $user, values checked, identifiers never reach SQL", async () => {
        const before = await dump(t);
        for (const condition of [
          { site__name: "x" },
          { status: "$user" },
          { nope: 1 },
          { vid__gte: "many" },
          { 'vid" OR 1=1 --': 1 },
          { vid__ic: ["a"] },
          {},
          [],
          "vid > 1",
        ]) {
          const r = await t.json("PATCH", TYPE(), {
            body: { checks: [RANGE, { name: "probe", condition }] },
          });
          expect(r.status).toBe(400);
          expect(r.body.checks.length).toBeGreaterThan(0);
        }
        expect(await dump(t)).toBe(before);
        // a quote in a value is a value: the check admits the row that holds exactly that text
        const quoted = "x'); DROP TABLE users; --";
        const ok = await t.json("PATCH", TYPE(), {
          body: {
            checks: [RANGE, { name: "quoted", condition: [{ status__n: quoted }, { vid: 1 }] }],
          },
        });
        expect(ok.status).toBe(200);
        expect(
          (await t.json("POST", `${CO}/vlan/`, { body: { name: "q", vid: 2, status: quoted } }))
            .status,
        ).toBe(400);
        expect(
          (await t.json("POST", `${CO}/vlan/`, { body: { name: "q", vid: 1, status: quoted } }))
            .status,
        ).toBe(201);
        expect((await t.json("GET", "/api/users/users/")).status).toBe(200);
        expect((await t.json("PATCH", TYPE(), { body: { checks: [RANGE] } })).status).toBe(200);
      });

      test("a renamed field is followed; a field a constraint reads cannot be removed", async () => {
        const fields = (await t.json("GET", TYPE())).body.fields as Array<{
          id: number;
          name: string;
        }>;
        const vid = fields.find((f) => f.name === "vid")!;
        const renamed = await t.json("PATCH", `${CO}/custom-object-type-fields/${vid.id}/`, {
          body: { name: "vlan_id" },
        });
        expect(renamed.status).toBe(200);
        const type = (await t.json("GET", TYPE())).body;
        expect(type.checks).toEqual([
          { name: "vid_range", condition: { vlan_id__gte: 1, vlan_id__lte: 4094 } },
        ]);
        expect(type.unique_together).toEqual([{ fields: ["vlan_id"], condition: KEY.condition }]);
        const out = await t.json("POST", `${CO}/vlan/`, { body: { name: "z", vlan_id: 0 } });
        expect(out.status).toBe(400);
        expect(out.body.vlan_id[0]).toContain("vid_range");
        const removed = await t.json("DELETE", `${CO}/custom-object-type-fields/${vid.id}/`);
        expect(removed.status).toBe(400);
        expect(await instanceSchemas()).toBe(openapiBefore.replaceAll('"vid"', '"vlan_id"'));
      });
    });

    describe("schema documents", () => {
      test("preview gates a check over violating rows; export round-trips", async () => {
        const exported = await t.json("GET", `${SCHEMA}/export?slug=vlan`);
        expect(exported.status).toBe(200);
        const entry = exported.body.types[0];
        expect(entry.unique_together).toEqual([{ fields: ["vlan_id"], condition: KEY.condition }]);
        expect(entry.checks).toHaveLength(1);
        const same = await t.json("POST", `${SCHEMA}/preview`, { body: exported.body });
        expect(same.status).toBe(200);
        expect(same.body.diffs[0].has_changes).toBe(false);

        const stricter = structuredClone(exported.body);
        stricter.types[0].checks.push({ name: "named", condition: { name__isw: "a" } });
        const preview = await t.json("POST", `${SCHEMA}/preview`, { body: stricter });
        expect(preview.status).toBe(200);
        const gate = preview.body.diffs[0].destructive_changes;
        expect(gate).toEqual([
          expect.objectContaining({ reason: "check_over_violations", field: "named" }),
        ]);
        expect(gate[0].rows).toBeGreaterThan(0);
        const before = await dump(t);
        const applied = await t.json("POST", `${SCHEMA}/apply`, { body: stricter });
        expect(applied.status).toBe(409);
        expect(await dump(t)).toBe(before);

        const bad = structuredClone(exported.body);
        bad.types[0].checks.push({ name: "rel", condition: { site__name: "x" } });
        const refused = await t.json("POST", `${SCHEMA}/preview`, { body: bad });
        expect(refused.status).toBe(400);
        expect(JSON.stringify(refused.body)).toContain("checks");
      });

      test("a document that renames a field a check reads, and loosens the check, applies", async () => {
        const exported = (await t.json("GET", `${SCHEMA}/export?slug=vlan`)).body;
        const next = structuredClone(exported);
        const type = next.types[0];
        type.fields.find((f: { name: string }) => f.name === "vlan_id").name = "tag";
        type.unique_together = [{ fields: ["tag"], condition: { status__n: "retired" } }];
        type.checks = [{ name: "tag_range", condition: { tag__gte: 1, tag__lte: 100 } }];
        const applied = await t.json("POST", `${SCHEMA}/apply`, { body: next });
        expect(applied.status).toBe(200);
        const out = await t.json("POST", `${CO}/vlan/`, { body: { name: "r", tag: 101 } });
        expect(out.status).toBe(400);
        expect(out.body.tag[0]).toContain("tag_range");
        expect((await t.json("POST", `${CO}/vlan/`, { body: { name: "r", tag: 99 } })).status).toBe(
          201,
        );
        const again = (await t.json("GET", `${SCHEMA}/export?slug=vlan`)).body;
        expect(again.types[0].checks).toEqual(type.checks);
        expect(again.types[0].unique_together).toEqual(type.unique_together);
      });

      test("a document that adds a field keeps the constraints in force", async () => {
        const next = (await t.json("GET", `${SCHEMA}/export?slug=vlan`)).body;
        next.types[0].fields.push({ id: 98, name: "note", type: "text" });
        expect((await t.json("POST", `${SCHEMA}/apply`, { body: next })).status).toBe(200);
        const out = await t.json("POST", `${CO}/vlan/`, {
          body: { name: "n", tag: 101, note: "x" },
        });
        expect(out.status).toBe(400);
        expect(out.body.tag[0]).toContain("tag_range");
      });

      test("a check over a field the document adds counts every row as empty", async () => {
        const exported = (await t.json("GET", `${SCHEMA}/export?slug=vlan`)).body;
        const rows = (await t.json("GET", `${CO}/vlan/?limit=1`)).body.count;
        const next = structuredClone(exported);
        const type = next.types[0];
        type.fields.push({ id: 99, name: "level", type: "integer" });
        expect(exported.types[0].fields.some((f: { name: string }) => f.name === "note")).toBe(
          true,
        );
        type.checks.push({ name: "leveled", condition: { level__gte: 1 } });
        const preview = await t.json("POST", `${SCHEMA}/preview`, { body: next });
        expect(preview.status).toBe(200);
        expect(preview.body.diffs[0].destructive_changes).toEqual([
          expect.objectContaining({ reason: "check_over_violations", field: "leveled", rows }),
        ]);
      });

      test("a new type with a partial key and a check from a document is enforced", async () => {
        const body = doc([
          {
            name: "port",
            slug: "port",
            fields: [
              { id: 1, name: "name", type: "text", primary: true },
              { id: 2, name: "number", type: "integer" },
              { id: 3, name: "active", type: "boolean" },
            ],
            unique_together: [{ fields: ["number"], condition: { active: true } }],
            checks: [{ name: "positive", condition: { number__gt: 0 } }],
          },
        ]);
        const r = await t.json("POST", `${SCHEMA}/apply`, { body });
        expect(r.status).toBe(200);
        await create(t, "port", { name: "p1", number: 1, active: true });
        await create(t, "port", { name: "p2", number: 1, active: false });
        expect(
          (await t.json("POST", `${CO}/port/`, { body: { name: "p3", number: 1, active: true } }))
            .status,
        ).toBe(400);
        expect(
          (await t.json("POST", `${CO}/port/`, { body: { name: "p4", number: -1, active: false } }))
            .status,
        ).toBe(400);
        const graphql = await t.json("POST", "/graphql/", {
          body: { query: "{ custom_objects_port_list { name number } }" },
        });
        expect(graphql.status).toBe(200);
        expect(graphql.body.errors).toBeUndefined();
        expect(graphql.body.data.custom_objects_port_list).toHaveLength(2);
      });

      test("keys and checks over rows that break them, allowed: the same 400 on both backends, nothing changed (0126)", async () => {
        const fields = [
          { id: 1, name: "code", type: "text" },
          { id: 2, name: "size", type: "integer" },
        ];
        const bin = (extra: Record<string, unknown> = {}, more: unknown[] = []) =>
          doc([{ name: "bin", slug: "bin", fields: [...fields, ...more], ...extra }]);
        expect((await t.json("POST", `${SCHEMA}/apply`, { body: bin() })).status).toBe(200);
        for (const size of [1, 1, 2]) await create(t, "bin", { code: "x", size });
        const before = await dump(t);
        const forced = async (body: unknown) => {
          const r = await t.json("POST", `${SCHEMA}/apply`, {
            body: { schema: body, allow_destructive: true },
          });
          expect(r.status, JSON.stringify(r.body)).toBe(400);
          return r.body.schema_errors;
        };
        expect(await forced(bin({ unique_together: [["size", "code"]] }))).toEqual([
          {
            path: "$.types[0].unique_together",
            message: "Existing rows share values of code, size; they must make a unique set.",
          },
        ]);
        const partial = { fields: ["code"], condition: { size: 1 } };
        expect(await forced(bin({ unique_together: [partial] }))).toEqual([
          {
            path: "$.types[0].unique_together",
            message:
              "2 existing row(s) matching the condition share values of code; they must make a unique set.",
          },
        ]);
        const small = { name: "small", condition: { size__lte: 1 } };
        // with a field added in the same document: its 400 still comes from the check
        expect(
          await forced(bin({ checks: [small] }, [{ id: 3, name: "note", type: "text" }])),
        ).toEqual([
          {
            path: "$.types[0].checks",
            message: '1 existing row(s) do not match the check "small".',
          },
        ]);
        expect(
          await forced(
            doc([
              { name: "bin", slug: "bin", fields: [{ ...fields[0], unique: true }, fields[1]] },
            ]),
          ),
        ).toEqual([
          {
            path: "$.types[0].fields[0].unique",
            message: 'Existing values of "code" are not unique.',
          },
        ]);
        expect(await dump(t)).toBe(before);
      });
    });
  });
