/**
 * An attacker's view of the counts a lossy change reports (decision 0181): a caller who may
 * reshape the type "vault" but view only its object "mine" retypes a field whose values that
 * cannot be converted sit in objects they may not view. The field PATCH, the schema preview and
 * the schema apply still refuse or gate the change (it would lose data they cannot see), but say
 * no number; a caller who views every object keeps the counts. Local file and remote database.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { CO, create } from "../custom-objects/fixtures";

const SCHEMA = `${CO}/schema`;
const TYPE = "custom_objects.customobjecttype";
const FIELD = "custom_objects.customobjecttypefield";
const vault = (codeType: string) => ({
  schema: {
    schema_version: "1",
    types: [
      {
        name: "vault",
        slug: "vault",
        fields: [
          { id: 1, name: "name", type: "text", primary: true },
          { id: 2, name: "code", type: codeType },
        ],
      },
    ],
  },
});
/** The hidden objects' lossy values: three, so a "3" anywhere would be their count. */
const HIDDEN = ["x-hidden-a", "x-hidden-b", "x-hidden-c"];

for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let on: BackendApp;
    let peeker: string;
    let viewer: string;
    let codeField: number;
    beforeAll(async () => {
      on = await appOn(backend, `retype-counts-${backend}`);
      const setup = await on.t.json("POST", `${SCHEMA}/apply/`, { body: vault("text") });
      if (setup.status !== 200) throw new Error(JSON.stringify(setup.body));
      await create(on.t, "vault", { name: "mine", code: "12" });
      for (const [i, code] of HIDDEN.entries())
        await create(on.t, "vault", { name: `h${i}`, code });
      const fields = await on.t.json("GET", `${CO}/custom-object-type-fields/?name=code`);
      codeField = fields.body.results[0].id;
      const shaper = (name: string, objects: unknown) =>
        userWith(on.t, `${name}-${backend}`, [
          [["view", "add", "change"], TYPE, null],
          [["view", "add", "change", "delete"], FIELD, null],
          [["view"], "custom_objects.vault", objects],
        ]);
      peeker = (await shaper("peeker", { name: "mine" })).token;
      viewer = (await shaper("viewer", null)).token;
    });
    afterAll(() => on.close());

    const noCount = (body: unknown) => {
      const text = JSON.stringify(body);
      expect(text).not.toMatch(/\b[34] (value|row)/); // the hidden count, or the total
      expect(text).not.toMatch(/"rows":\s*\d/);
      for (const v of HIDDEN) expect(text).not.toContain(v);
    };
    const retype = (token: string) =>
      on.t.json("PATCH", `${CO}/custom-object-type-fields/${codeField}/`, {
        token,
        body: { type: "integer" },
      });

    test("a field retype: refused (hidden values would go), with no number", async () => {
      const r = await retype(peeker);
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      expect(r.body.error).toBe("destructive_changes");
      noCount(r.body);
      // a caller who views every object is told how many
      const full = await retype(viewer);
      expect(full.status).toBe(409);
      expect(full.body.detail).toContain("would lose 3 value(s)");
    });

    test("the schema preview gates the retype and counts nothing", async () => {
      const r = await on.t.json("POST", `${SCHEMA}/preview/`, {
        token: peeker,
        body: vault("integer"),
      });
      expect(r.status).toBe(200);
      expect(r.body.destructive_changes).toHaveLength(1);
      expect(r.body.destructive_changes[0].rows).toBeNull();
      expect(r.body.destructive_changes[0].reason).toBe("lossy_type_change");
      noCount(r.body);
      const full = await on.t.json("POST", `${SCHEMA}/preview/`, {
        token: viewer,
        body: vault("integer"),
      });
      expect(full.body.destructive_changes[0].rows).toBe(3);
    });

    test("the schema apply refuses without allow_destructive, counting nothing", async () => {
      const r = await on.t.json("POST", `${SCHEMA}/apply/`, {
        token: peeker,
        body: vault("integer"),
      });
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      expect(r.body.destructive_slugs).toEqual(["vault"]);
      noCount(r.body);
      const values = (await on.t.json("GET", `${CO}/vault/?limit=10`)).body.results.map(
        (o: { code: unknown }) => o.code,
      );
      expect(values.sort()).toEqual(["12", ...HIDDEN].sort());
    });
  });
