/**
 * A NUL in a written text (decision 0124): the database driver keeps a text only up to its
 * first NUL, so `"a\u0000b"` answered 201 and read back as `"a"`. Every write path now answers
 * 400 "Null characters are not allowed." keyed by the field (by item in a bulk write, by JSON
 * path in a schema document), on a local file and on a remote database (the project's Hrana
 * server); a value stored as JSON text keeps its escaped NUL and is still accepted.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TestApp } from "../helpers/app";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { CO, addField, makeCot } from "../custom-objects/fixtures";
import { SCHEMA, doc } from "../schema/helpers";

const NUL = "a\u0000b";
const REFUSED = ["Null characters are not allowed."];

for (const kind of ["local", "remote"] as const) {
  describe(`NUL characters in written text (${kind})`, () => {
    let t: TestApp;
    let on: BackendApp;

    beforeAll(async () => {
      on = await appOn(kind, "nul");
      t = on.t;
      const cot = await makeCot(t, "circuit");
      await addField(t, cot.id, { name: "cid", type: "text", primary: true });
      await addField(t, cot.id, { name: "notes", type: "longtext" });
      await addField(t, cot.id, { name: "data", type: "json" });
    });
    afterAll(() => on.close());

    const sitesNamed = async (name: string) =>
      (await t.json("GET", `/api/dcim/sites/?name=${encodeURIComponent(name)}`)).body.count;

    test("a site: create, update and bulk writes answer 400 keyed by field, nothing stored", async () => {
      const one = await t.json("POST", "/api/dcim/sites/", { body: { name: NUL, slug: "nul" } });
      expect(one.status).toBe(400);
      expect(one.body).toEqual({ name: REFUSED });
      expect(await sitesNamed("a")).toBe(0);

      const bulk = await t.json("POST", "/api/dcim/sites/", {
        body: [
          { name: "fine", slug: "fine" },
          { name: "b", slug: "b", description: NUL },
        ],
      });
      expect(bulk.status).toBe(400);
      expect(bulk.body.errors).toEqual([{ index: 1, errors: { description: REFUSED } }]);
      expect(await sitesNamed("fine")).toBe(0);

      const site = await t.json("POST", "/api/dcim/sites/", { body: { name: "s", slug: "s" } });
      expect(site.status).toBe(201);
      const path = `/api/dcim/sites/${site.body.id}/`;
      for (const method of ["PATCH", "PUT"]) {
        const r = await t.json(method, path, { body: { name: "s", slug: "s", description: NUL } });
        expect({ method, status: r.status, body: r.body }).toEqual({
          method,
          status: 400,
          body: { description: REFUSED },
        });
      }
      const list = await t.json("PATCH", "/api/dcim/sites/", {
        body: [{ id: site.body.id, description: NUL }],
      });
      expect(list.status).toBe(400);
      expect(list.body.errors).toEqual([{ id: site.body.id, errors: { description: REFUSED } }]);
      const queued = await t.json("POST", "/api/dcim/sites/?background=true", {
        body: [{ name: NUL, slug: "queued" }],
      });
      expect(queued.status).toBe(400);
      expect((await t.json("GET", path)).body.description).toBe("");
    });

    test("a choice set: its name and its choices", async () => {
      const path = "/api/extras/custom-field-choice-sets/";
      const named = await t.json("POST", path, {
        body: { name: NUL, extra_choices: [["x", "X"]] },
      });
      expect(named.status).toBe(400);
      expect(named.body).toEqual({ name: REFUSED });
      const choice = await t.json("POST", path, {
        body: { name: "cs", extra_choices: [["x", NUL]] },
      });
      expect(choice.status).toBe(400);
      expect(choice.body).toEqual({ extra_choices: REFUSED });
      expect((await t.json("GET", path)).body.count).toBe(0);
    });

    test("a custom object: text refused, a NUL inside a json value kept", async () => {
      const text = await t.json("POST", `${CO}/circuit/`, { body: { cid: "c1", notes: NUL } });
      expect(text.status).toBe(400);
      expect(text.body).toEqual({ notes: REFUSED });
      const json = await t.json("POST", `${CO}/circuit/`, {
        body: { cid: "c2", data: { [NUL]: [NUL] } },
      });
      expect(json.status).toBe(201);
      const read = await t.json("GET", `${CO}/circuit/${json.body.id}/`);
      expect(read.body.data).toEqual({ [NUL]: [NUL] });
      const bulk = await t.json("PATCH", `${CO}/circuit/`, {
        body: [{ id: json.body.id, cid: NUL }],
      });
      expect(bulk.status).toBe(400);
      expect(bulk.body.errors).toEqual([{ id: json.body.id, errors: { cid: REFUSED } }]);
      expect((await t.json("GET", `${CO}/circuit/${json.body.id}/`)).body.cid).toBe("c2");
    });

    test("a custom object type", async () => {
      const cot = await t.json("POST", `${CO}/custom-object-types/`, {
        body: { name: "t2", slug: "t2", description: NUL },
      });
      expect(cot.status).toBe(400);
      expect(cot.body).toEqual({ description: REFUSED });
    });

    test("a schema document: apply and preview answer the JSON path", async () => {
      const schema = {
        ...doc([{ name: "nul", slug: "nul", description: NUL, fields: [] }]),
        choice_sets: [{ name: NUL, extra_choices: [["x", "X"]] }],
      };
      for (const step of ["apply", "preview"]) {
        const r = await t.json("POST", `${SCHEMA}/${step}/`, { body: { schema } });
        expect({ step, status: r.status }).toEqual({ step, status: 400 });
        expect(r.body.schema_errors).toEqual([
          { path: "$.types[0].description", message: REFUSED[0] },
          { path: "$.choice_sets[0].name", message: REFUSED[0] },
        ]);
      }
      expect((await t.json("GET", `${CO}/custom-object-types/?slug=nul`)).body.count).toBe(0);
    });

    test("a text field's default (REST): refused, as the objects taking it would be cut", async () => {
      const cot = (await t.json("GET", `${CO}/custom-object-types/?slug=circuit`)).body.results[0];
      const fields = `${CO}/custom-object-type-fields/`;
      for (const [type, value] of [
        ["text", NUL],
        ["longtext", NUL],
        ["url", `https://x/${NUL}`],
      ] as const) {
        const r = await t.json("POST", fields, {
          body: { custom_object_type: cot.id, name: `d_${type}`, type, default: value },
        });
        expect({ type, status: r.status, body: r.body }).toEqual({
          type,
          status: 400,
          body: { default: REFUSED },
        });
      }
      const [notes] = (await t.json("GET", `${fields}?custom_object_type=${cot.id}&name=notes`))
        .body.results;
      const patch = await t.json("PATCH", `${fields}${notes.id}/`, { body: { default: NUL } });
      expect(patch.status).toBe(400);
      expect(patch.body).toEqual({ default: REFUSED });
      // a json field's default is stored and taken as JSON text: its NUL survives
      const json = await t.json("POST", fields, {
        body: { custom_object_type: cot.id, name: "d_json", type: "json", default: { k: NUL } },
      });
      expect(json.status, JSON.stringify(json.body)).toBe(201);
      const taken = await t.json("POST", `${CO}/circuit/`, { body: { cid: "c3" } });
      expect(taken.status, JSON.stringify(taken.body)).toBe(201);
      expect((await t.json("GET", `${CO}/circuit/${taken.body.id}/`)).body.d_json).toEqual({
        k: NUL,
      });
    });

    test("a type's check: a condition value holding a NUL is refused as any control character", async () => {
      const cot = (await t.json("GET", `${CO}/custom-object-types/?slug=circuit`)).body.results[0];
      const r = await t.json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
        body: { checks: [{ name: "not_nul", condition: { cid__ic: NUL } }] },
      });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual(["checks"]);
      expect((await t.json("GET", `${CO}/custom-object-types/${cot.id}/`)).body.checks).toEqual([]);
    });

    test("a text field's default in a schema document: refused at its JSON path", async () => {
      const schema = doc([
        {
          name: "nul_default",
          slug: "nul_default",
          fields: [
            { id: 1, name: "code", type: "text", default: NUL },
            { id: 2, name: "data", type: "json", default: [NUL] },
          ],
        },
      ]);
      const r = await t.json("POST", `${SCHEMA}/apply/`, { body: { schema } });
      expect(r.status).toBe(400);
      expect(r.body.schema_errors).toEqual([
        { path: "$.types[0].fields[0].default", message: REFUSED[0] },
      ]);
    });

    test("a token's description (a hand-written route)", async () => {
      const r = await t.json("POST", "/api/users/tokens/", { body: { description: NUL } });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ description: REFUSED });
    });
  });
}
