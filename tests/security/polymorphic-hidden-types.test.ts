/**
 * Outside probe (decision 0195): a polymorphic field of a visible type may point at a custom
 * object type the caller holds no permission on, which reads and filters never name (0187). A
 * write naming that type's slug answered "Related object not found" where any other slug answers
 * "… is not allowed for this field": the caller confirmed the hidden type's slug, and that the
 * field takes it. Each spelling now answers byte for byte as a type that does not exist; a
 * caller who may see the type is answered as before. On a local file and a remote database.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { addField, CO, create, namedCot } from "../custom-objects/fixtures";

for (const backend of ["local", "remote"] as const)
  describe(`${backend}: a polymorphic field's hidden member types`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let writer = "";
    let seer = "";
    let box = 0;
    let vaultTypeId = 0;
    beforeAll(async () => {
      app = await appOn(backend, `poly-hidden-${backend}`);
      const vault = await namedCot(t(), "vaultrooms");
      vaultTypeId = vault.object_type.id;
      await create(t(), "vaultrooms", { name: "room one" });
      const boxes = await namedCot(t(), "polyboxes");
      for (const [name, type] of [
        ["holder", "object"],
        ["holders", "multiobject"],
      ])
        await addField(t(), boxes.id, {
          name,
          type,
          is_polymorphic: true,
          related_object_types: ["dcim.site", "custom_objects.vaultrooms"],
        });
      box = (await create(t(), "polyboxes", { name: "b" })).id;
      const grants: Array<[string[], string, unknown]> = [
        [["view", "add", "change"], "custom_objects.polyboxes", null],
        [["view"], "dcim.site", null],
      ];
      writer = (await userWith(t(), "poly-writer", grants)).token;
      seer = (
        await userWith(t(), "poly-seer", [...grants, [["view"], "custom_objects.vaultrooms", null]])
      ).token;
    });
    afterAll(() => app.close());

    const write = async (token: string, field: string, ref: Record<string, unknown>) => {
      const value = field === "holder" ? ref : [ref];
      const r = await t().json("PATCH", `${CO}/polyboxes/${box}/`, {
        token,
        body: { [field]: value },
      });
      return { status: r.status, body: JSON.stringify(r.body) };
    };

    test("each spelling of a hidden member type answers as a type that does not exist", async () => {
      const spellings: Array<[Record<string, unknown>, Record<string, unknown>]> = [
        [
          { object_type: "custom_objects.vaultrooms", id: 1 },
          { object_type: "custom_objects.nosuchrooms", id: 1 },
        ],
        [
          { app_label: "custom_objects", model: "vaultrooms", object_id: 1 },
          { app_label: "custom_objects", model: "nosuchrooms", object_id: 1 },
        ],
        [
          { content_type_id: vaultTypeId, object_id: 1 },
          { content_type_id: 987654, object_id: 1 },
        ],
      ];
      for (const field of ["holder", "holders"])
        for (const [hidden, missing] of spellings) {
          const h = await write(writer, field, hidden);
          const m = await write(writer, field, missing);
          expect(m.status).toBe(400);
          expect(m.body).toContain("is not allowed for this field");
          const named = (ref: Record<string, unknown>) =>
            String(ref.object_type ?? ref.model ?? ref.content_type_id);
          expect(h.status).toBe(400);
          expect(h.body).toBe(m.body.split(named(missing)).join(named(hidden)));
          expect(h.body).not.toContain("not found");
        }
    });

    test("a caller who may see the type is told what is missing, and may link it", async () => {
      const ref = { object_type: "custom_objects.vaultrooms", id: 999 };
      expect((await write(seer, "holder", ref)).body).toContain("Related object not found");
      const linked = await write(seer, "holder", { ...ref, id: 1 });
      expect(linked.status, linked.body).toBe(200);
    });
  });
