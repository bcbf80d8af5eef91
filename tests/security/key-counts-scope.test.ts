/**
 * An attacker's view of the refusals that count existing rows (decision 0183): a caller who may
 * reshape the types "ledger" and "bin" but view only their object "mine" adds keys and checks,
 * or retypes a field a key reads, over rows that break them in objects they may not view. Each
 * is refused all the same (the rows are there), without a number; a caller who views every
 * object keeps the count. The trash shows `rows` only to a caller who may view every object of
 * the entry's type. Local file and remote database.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { CO, create } from "../custom-objects/fixtures";

const SCHEMA = `${CO}/schema`;
const TYPE = "custom_objects.customobjecttype";
const FIELD = "custom_objects.customobjecttypefield";
const text = (id: number, name: string) => ({ id, name, type: "text" });
const ledger = (extra: Record<string, unknown> = {}) => ({
  name: "ledger",
  slug: "ledger",
  fields: [
    { id: 1, name: "name", type: "text", primary: true },
    text(2, "code"),
    text(3, "lane"),
    text(4, "state"),
    text(5, "note"),
  ],
  ...extra,
});
const bin = (codeType: string) => ({
  name: "bin",
  slug: "bin",
  fields: [
    { id: 1, name: "name", type: "text", primary: true },
    { id: 2, name: "code", type: codeType },
    text(3, "state"),
  ],
  unique_together: [{ fields: ["code"], condition: { state: "live" } }],
});
const doc = (types: unknown[]) => ({ schema: { schema_version: "1", types } });
/** Values only hidden objects hold: seeing one in an answer is a leak too. */
const HIDDEN = ["x-hidden", "01"];

for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let on: BackendApp;
    let peeker: string;
    let viewer: string;
    let typeId: number;
    let codeField: number;
    beforeAll(async () => {
      on = await appOn(backend, `key-counts-${backend}`);
      const setup = await on.t.json("POST", `${SCHEMA}/apply/`, {
        body: doc([ledger(), bin("text")]),
      });
      if (setup.status !== 200) throw new Error(JSON.stringify(setup.body));
      await create(on.t, "ledger", { name: "mine", code: "1", lane: "a", state: "live" });
      // two hidden rows share (lane, state) and do not start with "1"
      for (const [i, code] of ["x-hidden", "01"].entries())
        await create(on.t, "ledger", { name: `h${i}`, code, lane: "b", state: "live", note: "n" });
      await create(on.t, "bin", { name: "mine", code: "1", state: "live" });
      await create(on.t, "bin", { name: "h", code: "01", state: "live" }); // 1 once an integer
      const idOf = async (slug: string) =>
        (await on.t.json("GET", `${CO}/custom-object-types/?slug=${slug}`)).body.results[0].id;
      typeId = await idOf("ledger");
      const binId = await idOf("bin");
      const fields = await on.t.json("GET", `${CO}/custom-object-type-fields/?name=code`);
      codeField = fields.body.results.find(
        (f: { custom_object_type: number }) => f.custom_object_type === binId,
      ).id;
      const shaper = (name: string, objects: unknown) =>
        userWith(on.t, `${name}-${backend}`, [
          [["view", "add", "change"], TYPE, null],
          [["view", "add", "change", "delete"], FIELD, null],
          [["view"], "custom_objects.ledger", objects],
          [["view"], "custom_objects.bin", objects],
        ]);
      peeker = (await shaper("peeker", { name: "mine" })).token;
      viewer = (await shaper("viewer", null)).token;
    });
    afterAll(() => on.close());

    const noCount = (body: unknown) => {
      const words = JSON.stringify(body);
      expect(words).not.toMatch(/\d+ existing row/);
      for (const v of HIDDEN) expect(words).not.toContain(v);
    };
    const patchType = (token: string, body: unknown) =>
      on.t.json("PATCH", `${CO}/custom-object-types/${typeId}/`, { token, body });

    test("a compound key over hidden duplicates: refused, no number", async () => {
      const body = { unique_together: [["lane", "state"]] };
      const r = await patchType(peeker, body);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.unique_together).toEqual([
        "Existing rows share values of lane, state; they must make a unique set.",
      ]);
      noCount(r.body);
      const full = await patchType(viewer, body);
      expect(full.body.unique_together).toEqual([
        "2 existing row(s) share values of lane, state; they must make a unique set.",
      ]);
    });

    test("a partial key over hidden duplicates: refused, no number", async () => {
      const body = { unique_together: [{ fields: ["lane"], condition: { state: "live" } }] };
      const r = await patchType(peeker, body);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.unique_together).toEqual([
        "Existing rows matching the condition share values of lane; they must make a unique set.",
      ]);
      noCount(r.body);
      const full = await patchType(viewer, body);
      expect(full.body.unique_together[0]).toStartWith("2 existing row(s) matching");
    });

    test("a check hidden rows break: refused, no number", async () => {
      const body = { checks: [{ name: "ones", condition: { code__isw: "1" } }] };
      const r = await patchType(peeker, body);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.checks).toEqual(['Existing rows do not match the check "ones".']);
      noCount(r.body);
      const full = await patchType(viewer, body);
      expect(full.body.checks).toEqual(['2 existing row(s) do not match the check "ones".']);
    });

    test("a schema apply adding the check, destructive allowed: refused, no number", async () => {
      const body = {
        ...doc([
          ledger({ checks: [{ name: "ones", condition: { code__isw: "1" } }] }),
          bin("text"),
        ]),
        allow_destructive: true,
      };
      const r = await on.t.json("POST", `${SCHEMA}/apply/`, { token: peeker, body });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.schema_errors).toEqual([
        { path: "$.types[0].checks", message: 'Existing rows do not match the check "ones".' },
      ]);
      noCount(r.body);
      const full = await on.t.json("POST", `${SCHEMA}/apply/`, { token: viewer, body });
      expect(full.body.schema_errors[0].message).toStartWith("2 existing row(s)");
    });

    test("a retype a partial key then refuses (field PATCH and apply): no number", async () => {
      const url = `${CO}/custom-object-type-fields/${codeField}/?allow_destructive=true`;
      const r = await on.t.json("PATCH", url, { token: peeker, body: { type: "integer" } });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.unique_together).toEqual([
        "Existing rows matching the condition share values of code; they must make a unique set.",
      ]);
      noCount(r.body);
      const full = await on.t.json("PATCH", url, { token: viewer, body: { type: "integer" } });
      expect(full.body.unique_together[0]).toStartWith("2 existing row(s) matching");
      const body = { ...doc([ledger(), bin("integer")]), allow_destructive: true };
      const applied = await on.t.json("POST", `${SCHEMA}/apply/`, { token: peeker, body });
      expect(applied.status, JSON.stringify(applied.body)).toBe(400);
      noCount(applied.body);
      const fullApply = await on.t.json("POST", `${SCHEMA}/apply/`, { token: viewer, body });
      expect(fullApply.body.schema_errors[0].message).toStartWith("2 existing row(s) matching");
    });

    test("trash entries: rows only for a caller who views every object of the type", async () => {
      const kept = ledger().fields.filter((f) => f.name !== "note");
      const removed = {
        schema: {
          ...doc([ledger({ fields: kept, removed_fields: [text(5, "note")] })]).schema,
          removed_types: [{ slug: "bin" }],
        },
        allow_destructive: true,
      };
      const r = await on.t.json("POST", `${SCHEMA}/apply/`, { body: removed });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      const entryOf = async (token?: string, name = "note") => {
        const list = await on.t.json("GET", `${SCHEMA}/trash/`, { token });
        expect(list.status).toBe(200);
        return list.body.results.find((e: { name: string }) => e.name === name);
      };
      expect((await entryOf()).rows).toBe(2); // the superuser
      expect((await entryOf(viewer)).rows).toBe(2);
      const seen = await entryOf(peeker);
      expect(seen.rows).toBeNull();
      // a removed type's objects went with its grants: only the superuser is told
      expect((await entryOf(undefined, "bin")).rows).toBe(2);
      expect((await entryOf(peeker, "bin")).rows).toBeNull();
      expect((await entryOf(viewer, "bin")).rows).toBeNull();
      // restoring it answers the entry too
      const back = await on.t.json("POST", `${SCHEMA}/trash/${seen.id}/restore/`, {
        token: peeker,
      });
      expect(back.status, JSON.stringify(back.body)).toBe(200);
      expect(back.body.restored.rows).toBeNull();
    });
  });
