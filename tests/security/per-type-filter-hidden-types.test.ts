/**
 * Probe with ordinary accounts (decision 0213): a polymorphic field's per-type filter
 * (`<field>_custom_objects_<id>`, `<field>_netbox_custom_objects_<id>`) named by the id of a
 * member type the caller holds no permission on answered 200 and filtered by it, where the same
 * filter of a type id nobody has answers 400 (0206). The caller learnt that the hidden type
 * exists and that the field takes it, and which visible objects point at it (a record reads such
 * a value as `{id}`, its type withheld: 0187). The OpenAPI document named the filter too. Each
 * spelling now answers byte for byte as a type that does not exist; a caller who may see the
 * type is answered as before. On a local file and a remote database.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { addField, CO, create, namedCot } from "../custom-objects/fixtures";

const MISSING = 987654;

for (const backend of ["local", "remote"] as const)
  describe(`${backend}: per-type filters of hidden member types`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let reader = "";
    let seer = "";
    let vaultType = 0;
    let vault = 0;
    let crateType = 0;
    beforeAll(async () => {
      app = await appOn(backend, `per-type-hidden-${backend}`);
      vaultType = (await namedCot(t(), "vaultrooms")).object_type.id;
      vault = (await create(t(), "vaultrooms", { name: "room one" })).id;
      crateType = (await namedCot(t(), "opencrates")).object_type.id;
      const boxes = await namedCot(t(), "polyboxes");
      for (const [name, type] of [
        ["holder", "object"],
        ["holders", "multiobject"],
      ])
        await addField(t(), boxes.id, {
          name,
          type,
          is_polymorphic: true,
          related_object_types: [
            "dcim.site",
            "custom_objects.vaultrooms",
            "custom_objects.opencrates",
          ],
        });
      const ref = { object_type: "custom_objects.vaultrooms", id: vault };
      await create(t(), "polyboxes", { name: "in the vault", holder: ref, holders: [ref] });
      await create(t(), "polyboxes", { name: "elsewhere" });
      const grants: Array<[string[], string, unknown]> = [
        [["view", "change"], "custom_objects.polyboxes", null],
        [["view"], "dcim.site", null],
        [["view"], "custom_objects.opencrates", null],
      ];
      reader = (await userWith(t(), "per-type-reader", grants)).token;
      seer = (
        await userWith(t(), "per-type-seer", [
          ...grants,
          [["view"], "custom_objects.vaultrooms", null],
        ])
      ).token;
    });
    afterAll(() => app.close());

    /** Each per-type filter of the type `typeId`, as a query string. */
    const queries = (typeId: number) =>
      ["holder", "holders"].flatMap((field) =>
        [`${field}_custom_objects_${typeId}`, `${field}_netbox_custom_objects_${typeId}`].flatMap(
          (name) => [
            `${name}=${vault}`,
            `${name}__n=${vault}`,
            `${name}=${vault}&start=0&limit=1`,
            `${name}=${vault}&export=csv`,
          ],
        ),
      );
    const ask = async (token: string, query: string, typeId: number) => {
      const r = await t().req("GET", `${CO}/polyboxes/?${query}`, { token });
      return { status: r.status, body: (await r.text()).replaceAll(String(typeId), "TYPE") };
    };

    test("a hidden member type's filter answers as a type that does not exist", async () => {
      const hidden = queries(vaultType);
      const missing = queries(MISSING);
      for (const [i, query] of hidden.entries()) {
        const h = await ask(reader, query, vaultType);
        const m = await ask(reader, missing[i]!, MISSING);
        expect(m.status, missing[i]).toBe(400);
        expect(h, query).toEqual(m);
      }
    });

    test("a member type the caller may see keeps its filter", async () => {
      for (const query of queries(crateType)) {
        const r = await t().req("GET", `${CO}/polyboxes/?${query}`, { token: reader });
        expect(r.status, query).toBe(200);
      }
      const doc = await (await t().req("GET", "/api/schema/", { token: reader })).text();
      expect(doc).toContain(`"holder_custom_objects_${crateType}"`);
      expect(doc).toContain(`"holders_custom_objects_${crateType}__n"`);
    });

    test("a caller who may see the type still filters by it", async () => {
      for (const query of queries(vaultType).filter((q) => !q.includes("__n"))) {
        const r = await t().json("GET", `${CO}/polyboxes/?${query.replace("&export=csv", "")}`, {
          token: seer,
        });
        expect(r.status, query).toBe(200);
        expect(
          r.body.results.map((x: { display: string }) => x.display),
          query,
        ).toEqual(["in the vault"]);
      }
    });

    test("the OpenAPI document names the filter only to a caller who may see the type", async () => {
      const named = new RegExp(`"?holders?_custom_objects_${vaultType}(?:__n)?"?`);
      for (const format of ["json", "yaml"]) {
        const own = await t().req("GET", `/api/schema/?format=${format}`, { token: reader });
        const seen = await t().req("GET", `/api/schema/?format=${format}`, { token: seer });
        expect(own.status).toBe(200);
        expect(named.test(await own.text()), format).toBe(false);
        expect(named.test(await seen.text()), format).toBe(true);
      }
    });
  });
