/**
 * Decision 0135: the retypes that still took the interactive transaction (501 on D1) — a retype
 * with a rename in the same write, of a compound key's column or of a field a partial key or
 * check reads, and of more than 50,000 values — as one read phase and one batch. Each scenario
 * runs on a local file, on a remote libSQL server (the Hrana tool, as Turso is reached) and on
 * miniflare's D1, counts the transactions it opens (none), and must give the same answers and
 * leave the same data on all three.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { type Backend, countedBackends } from "../helpers/counted-backends";
import { holdNextWrite } from "../helpers/hold-write";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(120_000);

const CO = "/api/plugins/custom-objects";

const backends = countedBackends("retype");
/** Each scenario's answers and data, by backend: they must agree. */
const seen: Record<string, Record<string, unknown>> = {};

for (const [where, start] of Object.entries(backends))
  describe(where, () => {
    let b: Backend;
    beforeAll(async () => {
      b = await start();
    });
    afterAll(() => b?.stop());

    const made = async (path: string, body: unknown) => {
      const r = await b.json("POST", path, body);
      if (r.status !== 201) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    };
    const typeWith = async (slug: string, fields: Array<Record<string, unknown>>) => {
      const cot = await made(`${CO}/custom-object-types/`, { name: slug, slug });
      const ids: Record<string, number> = {};
      for (const f of fields)
        ids[f.name as string] = (
          await made(`${CO}/custom-object-type-fields/`, { custom_object_type: cot.id, ...f })
        ).id;
      return { cot, ids };
    };
    /** The objects' values, by id order, without stamps. */
    const rows = async (slug: string, names: string[]) =>
      (await b.json("GET", `${CO}/${slug}/?ordering=id&limit=100`)).body.results.map(
        (r: Record<string, unknown>) => names.map((n) => r[n]),
      );
    const record = (name: string, value: unknown) => {
      (seen[name] ??= {})[where] = value;
    };

    test("a retype and a rename of the same field in one PATCH", async () => {
      const before = b.transactions();
      const { ids } = await typeWith("gauge", [
        { name: "size", type: "integer" },
        { name: "note", type: "text" },
      ]);
      for (const size of [1, 22, null]) await made(`${CO}/gauge/`, { size, note: "n" });
      const both = await b.json("PATCH", `${CO}/custom-object-type-fields/${ids.size}/`, {
        name: "height",
        type: "text",
      });
      expect(both.status, JSON.stringify(both.body)).toBe(200);
      expect([both.body.name, both.body.type]).toEqual(["height", "text"]);
      // and back, through the values read: "x" is lost, refused without allow_destructive
      await made(`${CO}/gauge/`, { height: "x" });
      const lossy = await b.json("PATCH", `${CO}/custom-object-type-fields/${ids.size}/`, {
        name: "size",
        type: "integer",
      });
      expect(lossy.status).toBe(409);
      expect(lossy.body.error).toBe("destructive_changes");
      const forced = await b.json(
        "PATCH",
        `${CO}/custom-object-type-fields/${ids.size}/?allow_destructive=true`,
        { name: "size", type: "integer" },
      );
      expect(forced.status, JSON.stringify(forced.body)).toBe(200);
      const data = await rows("gauge", ["size", "height", "note"]);
      expect(data).toEqual([
        [1, undefined, "n"],
        [22, undefined, "n"],
        [null, undefined, "n"],
        [null, undefined, null],
      ]);
      expect((await b.json("GET", `${CO}/gauge/?q=22`)).body.count).toBe(1);
      expect(b.transactions()).toBe(before);
      record("rename", { both: both.body.type, lossy: lossy.body, data });
    });

    test("a retype of a compound key's column: the key built again, its 400 counted, nothing changed", async () => {
      const before = b.transactions();
      const { cot, ids } = await typeWith("slot", [
        { name: "code", type: "text" },
        { name: "rack", type: "text" },
      ]);
      const keyed = await b.json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
        unique_together: [["code", "rack"]],
      });
      expect(keyed.status, JSON.stringify(keyed.body)).toBe(200);
      for (const code of ["1", "01", "2"]) await made(`${CO}/slot/`, { code, rack: "a" });
      // "1" and "01" are both 1: the key breaks, as the transaction counts it
      const broken = await b.json("PATCH", `${CO}/custom-object-type-fields/${ids.code}/`, {
        type: "integer",
      });
      expect(broken.status, JSON.stringify(broken.body)).toBe(400);
      expect(broken.body.unique_together).toEqual([
        "2 existing row(s) share values of code, rack; they must make a unique set.",
      ]);
      expect(await rows("slot", ["code"])).toEqual([["1"], ["01"], ["2"]]);
      const gone = await b.json("GET", `${CO}/slot/?code=01`);
      expect(gone.body.count).toBe(1);
      // with a rename too, once the clash is gone
      const clash = (await b.json("GET", `${CO}/slot/?code=01`)).body.results[0].id;
      expect((await b.json("PATCH", `${CO}/slot/${clash}/`, { rack: "b" })).status).toBe(200);
      const retyped = await b.json("PATCH", `${CO}/custom-object-type-fields/${ids.code}/`, {
        name: "unit",
        type: "integer",
      });
      expect(retyped.status, JSON.stringify(retyped.body)).toBe(200);
      expect(
        (await b.json("GET", `${CO}/custom-object-types/${cot.id}/`)).body.unique_together,
      ).toEqual([["rack", "unit"]]);
      expect(await rows("slot", ["unit", "rack"])).toEqual([
        [1, "a"],
        [1, "b"],
        [2, "a"],
      ]);
      // the key holds on the new column
      const again = await b.json("POST", `${CO}/slot/`, { unit: 2, rack: "a" });
      expect(again.status).toBe(400);
      // converted by SQLite, made unique over the duplicates: the field's 400, nothing changed
      const unique = await b.json("PATCH", `${CO}/custom-object-type-fields/${ids.code}/`, {
        type: "text",
        unique: true,
      });
      expect(unique.status, JSON.stringify(unique.body)).toBe(400);
      expect(unique.body.unique).toEqual(['Existing values of "unit" are not unique.']);
      const text = await b.json("PATCH", `${CO}/custom-object-type-fields/${ids.code}/`, {
        type: "text",
      });
      expect(text.status, JSON.stringify(text.body)).toBe(200);
      expect(await rows("slot", ["unit"])).toEqual([["1"], ["1"], ["2"]]);
      expect((await b.json("POST", `${CO}/slot/`, { unit: "2", rack: "a" })).status).toBe(400);
      expect(b.transactions()).toBe(before);
      record("together", { broken: broken.body, again: again.body, unique: unique.body });
    });

    test("a retype of a field a check and a partial key read: proven over the converted rows", async () => {
      const before = b.transactions();
      const { cot, ids } = await typeWith("bay", [
        { name: "level", type: "text" },
        { name: "state", type: "text" },
      ]);
      const TYPE = `${CO}/custom-object-types/${cot.id}/`;
      const set = await b.json("PATCH", TYPE, {
        unique_together: [{ fields: ["level"], condition: { state: "live" } }],
        checks: [{ name: "levelled", condition: { level__isnull: false } }],
      });
      expect(set.status, JSON.stringify(set.body)).toBe(200);
      await made(`${CO}/bay/`, { level: "5", state: "live" });
      await made(`${CO}/bay/`, { level: "x", state: "old" });
      // "x" is lost (allowed): the check then refuses its row, counted as the transaction does
      const url = `${CO}/custom-object-type-fields/${ids.level}/?allow_destructive=true`;
      const refused = await b.json("PATCH", url, { type: "integer" });
      expect(refused.status, JSON.stringify(refused.body)).toBe(400);
      expect(refused.body.checks).toEqual(['1 existing row(s) do not match the check "levelled".']);
      expect(await rows("bay", ["level"])).toEqual([["5"], ["x"]]);
      // "05" and "5" both live: the partial key breaks
      const x = (await b.json("GET", `${CO}/bay/?level=x`)).body.results[0].id;
      expect(
        (await b.json("PATCH", `${CO}/bay/${x}/`, { level: "05", state: "live" })).status,
      ).toBe(200);
      const clash = await b.json("PATCH", url, { type: "integer" });
      expect(clash.status, JSON.stringify(clash.body)).toBe(400);
      expect(clash.body.unique_together).toEqual([
        "2 existing row(s) matching the condition share values of level; they must make a unique set.",
      ]);
      expect((await b.json("PATCH", `${CO}/bay/${x}/`, { state: "old" })).status).toBe(200);
      const done = await b.json("PATCH", url, { type: "integer", name: "tier" });
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      const type = (await b.json("GET", TYPE)).body;
      expect(type.checks).toEqual([{ name: "levelled", condition: { tier__isnull: false } }]);
      expect(await rows("bay", ["tier", "state"])).toEqual([
        [5, "live"],
        [5, "old"],
      ]);
      // both hold on the new column
      expect((await b.json("POST", `${CO}/bay/`, { state: "old" })).status).toBe(400);
      expect((await b.json("POST", `${CO}/bay/`, { tier: 5, state: "live" })).status).toBe(400);
      expect(b.transactions()).toBe(before);
      record("conditional", {
        refused: refused.body,
        clash: clash.body,
        keys: [type.unique_together, type.checks],
      });
    });

    test("a schema apply retyping and renaming a compound key's field and one a check reads", async () => {
      const before = b.transactions();
      const apply = (fields: unknown[], extra: Record<string, unknown> = {}) =>
        b.json("POST", `${CO}/schema/apply/`, {
          schema: {
            schema_version: "1",
            types: [{ name: "crate", slug: "crate", fields, ...extra }],
          },
          allow_destructive: true,
        });
      const keys = (a: string, c: string) => ({
        unique_together: [[a, "rack"]],
        checks: [{ name: "set", condition: { [`${c}__isnull`]: false } }],
      });
      const first = await apply(
        [
          { id: 1, name: "code", type: "text" },
          { id: 2, name: "rack", type: "text" },
          { id: 3, name: "depth", type: "text" },
        ],
        keys("code", "depth"),
      );
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      for (const [code, depth] of [
        ["1", "3"],
        ["01", "4"],
      ])
        await made(`${CO}/crate/`, { code, rack: "a", depth });
      const fields = (code: [string, string], depth: [string, string]) => [
        { id: 1, name: code[0], type: code[1] },
        { id: 2, name: "rack", type: "text" },
        { id: 3, name: depth[0], type: depth[1] },
      ];
      const x = (await b.json("GET", `${CO}/crate/?code=01`)).body.results[0].id;
      expect((await b.json("PATCH", `${CO}/crate/${x}/`, { depth: "y" })).status).toBe(200);
      // a retype and a rename of a field the check reads: "y" becomes null, the check refuses it
      const retyped = fields(["code", "text"], ["height", "integer"]);
      const check = await apply(retyped, keys("code", "height"));
      expect(check.status, JSON.stringify(check.body)).toBe(400);
      expect(check.body.schema_errors).toEqual([
        { path: "$.types[0].checks", message: '1 existing row(s) do not match the check "set".' },
      ]);
      expect((await b.json("PATCH", `${CO}/crate/${x}/`, { depth: "4" })).status).toBe(200);
      const checked = await apply(retyped, keys("code", "height"));
      expect(checked.status, JSON.stringify(checked.body)).toBe(200);
      // a retype and a rename of a compound key's field: "1" and "01" clash
      const unit = fields(["unit", "integer"], ["height", "integer"]);
      const broken = await apply(unit, keys("unit", "height"));
      expect(broken.status, JSON.stringify(broken.body)).toBe(400);
      expect(broken.body.schema_errors).toEqual([
        {
          path: "$.types[0].unique_together",
          message: "Existing rows share values of rack, unit; they must make a unique set.",
        },
      ]);
      expect((await b.json("PATCH", `${CO}/crate/${x}/`, { rack: "b" })).status).toBe(200);
      const done = await apply(unit, keys("unit", "height"));
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      const data = await rows("crate", ["unit", "rack", "height"]);
      expect(data).toEqual([
        [1, "a", 3],
        [1, "b", 4],
      ]);
      // a local file keeps every apply in its long write (decision 0111): the transaction's
      // answers, which the staged ones must match
      if (where !== "local") expect(b.transactions()).toBe(before);
      record("apply", { broken: broken.body, check: check.body, data });
    });

    test("a retype of more than 50,000 values: one read and one batch; over the bytes a batch carries, D1's 409", async () => {
      const before = b.transactions();
      const { cot, ids } = await typeWith("bulk", [
        { name: "code", type: "text" },
        { name: "count", type: "integer" },
        { name: "blob", type: "longtext" },
      ]);
      const table = `co_${cot.id}`;
      const series = (n: number) =>
        `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${n})`;
      await b.run(
        `INSERT INTO ${table} (created, last_updated, code, count) ${series(50_001)} SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', CASE WHEN i % 1000 = 0 THEN 'x' || i ELSE CAST(i AS TEXT) END, i FROM s`,
      );
      // converted in JavaScript: the values read, 50 of them lost
      const lossy = await b.json("PATCH", `${CO}/custom-object-type-fields/${ids.code}/`, {
        type: "integer",
      });
      expect(lossy.status, JSON.stringify(lossy.body)).toBe(409);
      expect(lossy.body.detail).toContain("would lose 50 value(s)");
      const code = await b.json(
        "PATCH",
        `${CO}/custom-object-type-fields/${ids.code}/?allow_destructive=true`,
        { type: "integer" },
      );
      expect(code.status, JSON.stringify(code.body)).toBe(200);
      // converted by SQLite: nothing read
      const count = await b.json("PATCH", `${CO}/custom-object-type-fields/${ids.count}/`, {
        type: "text",
      });
      expect(count.status, JSON.stringify(count.body)).toBe(200);
      const page = await b.json("GET", `${CO}/bulk/?ordering=-id&limit=2`);
      const data = page.body.results.map((r: any) => [r.code, r.count]);
      expect(data).toEqual([
        [50_001, "50001"],
        [null, "50000"],
      ]);
      expect((await b.json("GET", `${CO}/bulk/1000/`)).body.code).toBeNull();
      expect(b.transactions()).toBe(before);
      // 5,000 values of 2,000 characters to decimals, converted in JavaScript: more than a
      // batch carries (to integer, SQLite converts them: no bound, decision 0198)
      await b.run(`UPDATE ${table} SET blob = hex(zeroblob(1000)) || id WHERE id <= 5000`);
      const big = await b.json(
        "PATCH",
        `${CO}/custom-object-type-fields/${ids.blob}/?allow_destructive=true`,
        { type: "decimal" },
      );
      if (where === "d1") {
        expect(big.status, JSON.stringify(big.body)).toBe(409);
        expect(big.body.error).toBe("retype_too_large");
        expect(
          (await b.json("GET", `${CO}/custom-object-type-fields/${ids.blob}/`)).body.type,
        ).toBe("longtext");
      } else {
        // a transaction takes it where there is one
        expect(big.status, JSON.stringify(big.body)).toBe(200);
        expect(b.transactions()).toBe(before + 1);
      }
      record("bulk", { lossy: lossy.body, data });
    });

    test("no field stored in two columns changes type: the same 400 on every backend, no transaction", async () => {
      const before = b.transactions();
      // the fields that take two columns: url (its link title) and a polymorphic object field
      const { ids } = await typeWith("link", [
        { name: "site", type: "url" },
        {
          name: "owner",
          type: "object",
          is_polymorphic: true,
          related_object_types: ["dcim.site"],
        },
      ]);
      await made(`${CO}/link/`, { site: "https://a.example", site_title: "A" });
      const url = await b.json("PATCH", `${CO}/custom-object-type-fields/${ids.site}/`, {
        type: "text",
      });
      expect(url.status, JSON.stringify(url.body)).toBe(400);
      const owner = await b.json("PATCH", `${CO}/custom-object-type-fields/${ids.owner}/`, {
        type: "integer",
      });
      expect(owner.status, JSON.stringify(owner.body)).toBe(400);
      const schema = (type: string) => ({
        schema: {
          schema_version: "1",
          types: [{ name: "linked", slug: "linked", fields: [{ id: 1, name: "site", type }] }],
        },
        allow_destructive: true,
      });
      expect((await b.json("POST", `${CO}/schema/apply/`, schema("url"))).status).toBe(200);
      const applied = await b.json("POST", `${CO}/schema/apply/`, schema("longtext"));
      expect(applied.status, JSON.stringify(applied.body)).toBe(400);
      expect(await rows("link", ["site", "site_title"])).toEqual([["https://a.example", "A"]]);
      if (where !== "local") expect(b.transactions()).toBe(before);
      record("columns", { url: url.body, owner: owner.body, applied: applied.body });
    });

    test("a schema apply retyping two fields of a type with a compound key and a check: one batch", async () => {
      const before = b.transactions();
      const apply = (fields: unknown[], extra: Record<string, unknown>) =>
        b.json("POST", `${CO}/schema/apply/`, {
          schema: {
            schema_version: "1",
            types: [{ name: "shelf", slug: "shelf", fields, ...extra }],
          },
          allow_destructive: true,
        });
      const keys = (a: string, c: string) => ({
        unique_together: [[a, "rack"]],
        checks: [{ name: "deep", condition: { [`${c}__isnull`]: false } }],
      });
      const first = await apply(
        [
          { id: 1, name: "code", type: "text" },
          { id: 2, name: "rack", type: "text" },
          { id: 3, name: "depth", type: "text" },
          { id: 4, name: "tag", type: "text" },
        ],
        keys("code", "depth"),
      );
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      await made(`${CO}/shelf/`, { code: "1", rack: "a", depth: "3", tag: "t" });
      const x = (await made(`${CO}/shelf/`, { code: "01", rack: "b", depth: "y" })).id;
      // both retyped and renamed; besides them a field renamed and one added
      const retyped = (unique = false) => [
        { id: 1, name: "unit", type: "integer" },
        { id: 2, name: "rack", type: "text" },
        { id: 3, name: "height", type: "integer", unique },
        { id: 4, name: "label", type: "longtext" },
        { id: 5, name: "extra", type: "text", default: "e" },
      ];
      const patch = async (body: Record<string, unknown>) =>
        expect((await b.json("PATCH", `${CO}/shelf/${x}/`, body)).status).toBe(200);
      // "y" becomes null and "1", "01" share a rack: the compound key answers first, as an
      // apply builds it first
      await patch({ rack: "a" });
      const both = await apply(retyped(), keys("unit", "height"));
      expect(both.status, JSON.stringify(both.body)).toBe(400);
      expect(both.body.schema_errors).toEqual([
        {
          path: "$.types[0].unique_together",
          message: "Existing rows share values of rack, unit; they must make a unique set.",
        },
      ]);
      // "y" becomes null: the check refuses its row
      await patch({ rack: "b" });
      const check = await apply(retyped(), keys("unit", "height"));
      expect(check.status, JSON.stringify(check.body)).toBe(400);
      expect(check.body.schema_errors).toEqual([
        { path: "$.types[0].checks", message: '1 existing row(s) do not match the check "deep".' },
      ]);
      // "1" and "01" in one rack: the compound key refuses them
      await patch({ depth: "03", rack: "a" });
      const together = await apply(retyped(), keys("unit", "height"));
      expect(together.status, JSON.stringify(together.body)).toBe(400);
      expect(together.body.schema_errors).toEqual([
        {
          path: "$.types[0].unique_together",
          message: "Existing rows share values of rack, unit; they must make a unique set.",
        },
      ]);
      // 3 and "03" made unique: the field's own 400
      await patch({ rack: "b" });
      const unique = await apply(retyped(true), keys("unit", "height"));
      expect(unique.status, JSON.stringify(unique.body)).toBe(400);
      expect(unique.body.schema_errors).toEqual([
        {
          path: "$.types[0].fields[2].unique",
          message: 'Existing values of "height" are not unique.',
        },
      ]);
      const names = ["unit", "rack", "height", "label", "extra"];
      expect(await rows("shelf", ["code", "rack", "depth", "tag"])).toEqual([
        ["1", "a", "3", "t"],
        ["01", "b", "03", null],
      ]);
      const done = await apply(retyped(), keys("unit", "height"));
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      const data = await rows("shelf", names);
      expect(data).toEqual([
        [1, "a", 3, "t", "e"],
        [1, "b", 3, null, "e"],
      ]);
      // the key and the check hold on the new columns
      expect((await b.json("POST", `${CO}/shelf/`, { unit: 1, rack: "a", height: 1 })).status).toBe(
        400,
      );
      expect((await b.json("POST", `${CO}/shelf/`, { unit: 2, rack: "a" })).status).toBe(400);
      // a local file keeps every apply in its long write (decision 0111)
      if (where !== "local") expect(b.transactions()).toBe(before);
      record("two", {
        both: both.body,
        check: check.body,
        together: together.body,
        unique: unique.body,
        data,
      });
    });

    test("a schema apply retyping more values than a batch carries: D1's 409 retype_too_large, nothing changed", async () => {
      const schema = (type: string) => ({
        schema: {
          schema_version: "1",
          types: [
            {
              name: "heap",
              slug: "heap",
              fields: [
                { id: 1, name: "code", type: "text" },
                { id: 2, name: "blob", type },
              ],
            },
          ],
        },
        allow_destructive: true,
      });
      const first = await b.json("POST", `${CO}/schema/apply/`, schema("longtext"));
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      const before = b.transactions();
      const cot = (await b.json("GET", `${CO}/custom-object-types/?slug=heap`)).body.results[0];
      // 5,000 values of 2,000 characters: more than a batch carries
      await b.run(
        `INSERT INTO co_${cot.id} (created, last_updated, code, blob) WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 5000) SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', CAST(i AS TEXT), hex(zeroblob(1000)) || i FROM s`,
      );
      const big = await b.json("POST", `${CO}/schema/apply/`, schema("decimal"));
      const field = async () =>
        (await b.json("GET", `${CO}/schema/export?slug=heap`)).body.types[0].fields[1].type;
      if (where === "d1") {
        expect(big.status, JSON.stringify(big.body)).toBe(409);
        expect(big.body.error).toBe("retype_too_large");
        expect(await field()).toBe("longtext");
        expect((await b.json("GET", `${CO}/heap/?limit=1`)).body.count).toBe(5000);
        expect(b.transactions()).toBe(before);
      } else {
        // a transaction takes it where there is one
        expect(big.status, JSON.stringify(big.body)).toBe(200);
        expect(await field()).toBe("decimal");
        expect(b.transactions()).toBe(before + 1);
      }
    });

    test("a schema apply retyping two fields each within the bytes a batch carries, together over them: D1's 409", async () => {
      const schema = (type: string) => ({
        schema: {
          schema_version: "1",
          types: [
            {
              name: "pile",
              slug: "pile",
              fields: [
                { id: 1, name: "a", type },
                { id: 2, name: "b", type },
              ],
            },
          ],
        },
        allow_destructive: true,
      });
      const first = await b.json("POST", `${CO}/schema/apply/`, schema("longtext"));
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      const before = b.transactions();
      const cot = (await b.json("GET", `${CO}/custom-object-types/?slug=pile`)).body.results[0];
      // 5,000 values of 1,000 characters each: about 5 MB a column, 10 MB both
      await b.run(
        `INSERT INTO co_${cot.id} (created, last_updated, a, b) WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 5000) SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', hex(zeroblob(500)) || i, hex(zeroblob(500)) || i FROM s`,
      );
      const both = await b.json("POST", `${CO}/schema/apply/`, schema("decimal"));
      const types = async () =>
        (await b.json("GET", `${CO}/schema/export?slug=pile`)).body.types[0].fields.map(
          (f: { type: string }) => f.type,
        );
      if (where === "d1") {
        expect(both.status, JSON.stringify(both.body)).toBe(409);
        expect(both.body.error).toBe("retype_too_large");
        // both fields named (the caller's own), their values neither counted nor weighed (0173)
        expect(both.body.detail).toContain(
          'Changing the type of "a", "b" converts its values outside the database',
        );
        expect(await types()).toEqual(["longtext", "longtext"]);
        expect(b.transactions()).toBe(before);
      } else {
        expect(both.status, JSON.stringify(both.body)).toBe(200);
        expect(await types()).toEqual(["decimal", "decimal"]);
        expect(b.transactions()).toBe(before + 1);
      }
    });

    test("a schema apply retyping 9 MB of text to integer: converted in the database, one batch on every backend (D1's 409 retype_too_large lifted); a failure half-way changes nothing", async () => {
      const schema = (type: string, unique = false) => ({
        schema: {
          schema_version: "1",
          types: [
            {
              name: "ledger",
              slug: "ledger",
              fields: [{ id: 1, name: "code", type, ...(unique ? { unique } : {}) }],
            },
          ],
        },
      });
      const first = await b.json("POST", `${CO}/schema/apply/`, schema("longtext"));
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      const before = b.transactions();
      const cot = (await b.json("GET", `${CO}/custom-object-types/?slug=ledger`)).body.results[0];
      // 3,000 values of ~3,000 characters (9 MB, over the 8 MB a batch carried as values):
      // 3,000 spaces then the row's number, which JavaScript's trim and SQLite's must both find;
      // every thousandth is not a number (lost); row 2,999 says 2998 again (a clash if unique)
      await b.run(
        `INSERT INTO co_${cot.id} (created, last_updated, code) WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 3000) SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', replace(hex(zeroblob(1500)), '0', ' ') || CASE WHEN i % 1000 = 0 THEN 'x' || i WHEN i = 2999 THEN '2998' ELSE char(9) || i || char(160, 10) END FROM s`,
      );
      const type = async () =>
        (await b.json("GET", `${CO}/schema/export?slug=ledger`)).body.types[0].fields[0].type;
      const code = async (id: number) => (await b.json("GET", `${CO}/ledger/${id}/`)).body.code;
      // unique after the change: the index fails after the values were converted — nothing kept
      const clash = await b.json("POST", `${CO}/schema/apply/`, {
        ...schema("integer", true),
        allow_destructive: true,
      });
      expect(clash.status, JSON.stringify(clash.body)).toBe(400);
      expect(await type()).toBe("longtext");
      expect(((await code(5)) as string).trim()).toBe("5");
      expect((await code(5)).length).toBe(3004);
      // three values lost: refused without allow_destructive
      const lossy = await b.json("POST", `${CO}/schema/apply/`, schema("integer"));
      expect(lossy.status, JSON.stringify(lossy.body)).toBe(409);
      expect(lossy.body.error).toBe("destructive_changes");
      // a value made unconvertible between the read (three lost) and the batch fails the batch,
      // and the apply runs again on what is there: four lost, and its answer says four (a
      // local file's apply is a transaction: the change comes first there)
      const apply = () =>
        b.json("POST", `${CO}/schema/apply/`, { ...schema("integer"), allow_destructive: true });
      const seven = () => b.json("PATCH", `${CO}/ledger/7/`, { code: "seven" });
      let done: Awaited<ReturnType<typeof apply>>;
      if (where === "local") {
        expect((await seven()).status).toBe(200);
        done = await apply();
      } else {
        const held = holdNextWrite(b.db, (texts) => texts.some((q) => q.includes("__retype")));
        const racing = apply();
        const first = await Promise.race([
          held.arrived.then(() => "held"),
          racing.then(() => "done"),
        ]);
        if (first !== "held") held.release();
        expect([first, first === "held" ? null : (await racing).body]).toEqual(["held", null]);
        const changed = await seven();
        held.release();
        expect(changed.status).toBe(200);
        done = await racing;
      }
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      const lostRows = done.body.diffs[0].destructive_changes.map((c: { rows: number }) => c.rows);
      expect(lostRows).toEqual([4]);
      expect(await type()).toBe("integer");
      const values = [1, 7, 1000, 2999, 3000].map((id) => code(id));
      expect(await Promise.all(values)).toEqual([1, null, null, 2998, null]);
      expect((await b.json("GET", `${CO}/ledger/?code__gte=0&limit=1`)).body.count).toBe(2996);
      // a local file keeps every apply in its long write (decision 0111)
      if (where !== "local") expect(b.transactions()).toBe(before);
      record("ledger", { clash: clash.body, lossy: lossy.body, done: done.body });
    });
  });

describe("the same answers and data on every backend", () => {
  test("local, remote and D1 agree", () => {
    expect(Object.keys(seen).sort()).toEqual([
      "apply",
      "bulk",
      "columns",
      "conditional",
      "ledger",
      "rename",
      "together",
      "two",
    ]);
    for (const [name, by] of Object.entries(seen)) {
      expect(Object.keys(by).sort(), name).toEqual(["d1", "local", "remote"]);
      expect([name, by.remote]).toEqual([name, by.local]);
      expect([name, by.d1]).toEqual([name, by.local]);
    }
  });
});
