/**
 * Probe with ordinary accounts (decision 0213): a caller whose view of custom object types and
 * fields is constrained listed the id of a type or field outside it in a bulk PATCH, PUT or
 * DELETE. The staged writers answered a bare 404 "Not found." where an id nobody has answers
 * NetBox's 400 "… could not be found." (0200), and one object's path "Not found." where a
 * missing id reads "No custom object type with id N.": the hidden ids were confirmed. Each now
 * answers byte for byte as a missing id. Host models and custom objects answered alike already
 * (checked here too). On a local file and a remote database.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { addField, CO, create, makeCot, namedCot } from "../custom-objects/fixtures";

const MISSING = 987654;

for (const backend of ["local", "remote"] as const)
  describe(`${backend}: bulk writes naming hidden ids`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let caller = "";
    const hidden: Record<string, number> = {};
    const shown: Record<string, number> = {};
    beforeAll(async () => {
      app = await appOn(backend, `bulk-hidden-${backend}`);
      const open = await makeCot(t(), "opencrates");
      shown.types = open.id;
      shown.fields = (await addField(t(), open.id, { name: "label", type: "text" })).id;
      const secret = await makeCot(t(), "secretcrates");
      hidden.types = secret.id;
      hidden.fields = (await addField(t(), secret.id, { name: "code", type: "text" })).id;
      await namedCot(t(), "parcels");
      shown.objects = (await create(t(), "parcels", { name: "mine" })).id;
      hidden.objects = (await create(t(), "parcels", { name: "theirs" })).id;
      const all = ["view", "add", "change", "delete"];
      caller = (
        await userWith(t(), "bulk-prober", [
          [all, "custom_objects.customobjecttype", { slug: "opencrates" }],
          [all, "custom_objects.customobjecttypefield", { name: "label" }],
          [all, "custom_objects.parcels", { name: "mine" }],
        ])
      ).token;
    });
    afterAll(() => app.close());

    const paths: Record<string, string> = {
      types: `${CO}/custom-object-types/`,
      fields: `${CO}/custom-object-type-fields/`,
      objects: `${CO}/parcels/`,
    };
    /** Writes naming object `id` (beside one the caller may act on, where a list is sent). */
    const writes = (kind: string, id: number) => {
      const own = shown[kind]!;
      return [
        ["PATCH", paths[kind], [{ id, description: "x" }]],
        ["PATCH", paths[kind], [{ id: own }, { id, description: "x" }]],
        ["PUT", paths[kind], [{ id, name: "renamed", slug: "renamed", type: "text" }]],
        ["DELETE", paths[kind], [{ id }]],
        ["DELETE", paths[kind], [{ id: own }, { id }]],
        ["PATCH", `${paths[kind]}${id}/`, { description: "x" }],
        ["DELETE", `${paths[kind]}${id}/`, undefined],
      ] as Array<[string, string, unknown]>;
    };
    const answer = async (method: string, path: string, body: unknown, id: number) => {
      const r = await t().req(method, path, { token: caller, body });
      // the id where the answer names it (`"id":N`, "ID N", "id N."), not counts
      const named = new RegExp(`(ID |"id":|id )${id}\\b`, "g");
      return { status: r.status, body: (await r.text()).replace(named, "$1N") };
    };

    for (const kind of ["types", "fields", "objects"])
      test(`${kind}: a hidden id answers as a missing one`, async () => {
        const sent = writes(kind, hidden[kind]!);
        const missing = writes(kind, MISSING);
        for (const [i, [method, path, body]] of sent.entries()) {
          const [, missingPath, missingBody] = missing[i]!;
          const h = await answer(method, path, body, hidden[kind]!);
          const m = await answer(method, missingPath, missingBody, MISSING);
          expect(m.status, `${method} ${missingPath}`).toBeGreaterThanOrEqual(400);
          expect(h, `${method} ${path} ${JSON.stringify(body)}`).toEqual(m);
        }
        // nothing was written to the hidden row
        const still = await t().json("GET", `${paths[kind]}${hidden[kind]}/`);
        expect(still.status).toBe(200);
      });
  });
