/**
 * A field whose targets close a cycle through custom object types the caller may not view: the
 * 400 `circular_dependency` still refuses it (the cycle is there), but names none of the hidden
 * types, in its text or its `cycle` list (decision 0064: a type the caller may not view is
 * unknown to them). The hidden types are reached through the fields of other hidden types,
 * which the caller may not view either. Local file (the transaction's check) and remote (the
 * staged write's graph, read ahead: decision 0159).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { addField, CO, makeCot } from "../custom-objects/fixtures";

const TYPE = "custom_objects.customobjecttype";
const FIELD = "custom_objects.customobjecttypefield";

for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let on: BackendApp;
    let token: string;
    let labA: number;
    beforeAll(async () => {
      on = await appOn(backend, `cycle-hidden-${backend}`);
      const t = on.t;
      const lab = { group_name: "lab" };
      const secret = { group_name: "secret" };
      labA = (await makeCot(t, "cyc_lab_a", "cyc_lab_a", lab)).id;
      const labB = (await makeCot(t, "cyc_lab_b", "cyc_lab_b", lab)).id;
      const vaultC = (await makeCot(t, "cyc_vault_c", "cyc_vault_c", secret)).id;
      const vaultD = (await makeCot(t, "cyc_vault_d", "cyc_vault_d", secret)).id;
      // lab_b → vault_c → vault_d → lab_a: a field of lab_a pointing at lab_b closes it
      const to = (slug: string) => ({
        type: "object",
        related_object_type: `custom_objects.${slug}`,
      });
      await addField(t, labB, { name: "to_c", ...to("cyc_vault_c") });
      await addField(t, vaultC, { name: "to_d", ...to("cyc_vault_d") });
      await addField(t, vaultD, { name: "to_a", ...to("cyc_lab_a") });
      // the lab's types and their fields; nothing of "secret"
      token = (
        await userWith(t, `cycler-${backend}`, [
          [["view", "add", "change"], TYPE, lab],
          [
            ["view", "add", "change"],
            FIELD,
            [{ custom_object_type: labA }, { custom_object_type: labB }],
          ],
        ])
      ).token;
    });
    afterAll(() => on.close());

    test("the refusal names no hidden type; a superuser's names them all", async () => {
      const body = {
        custom_object_type: labA,
        name: "to_b",
        type: "object",
        related_object_type: "custom_objects.cyc_lab_b",
      };
      const refused = await on.t.json("POST", `${CO}/custom-object-type-fields/`, { token, body });
      expect(refused.status, JSON.stringify(refused.body)).toBe(400);
      expect(refused.body.error).toBe("circular_dependency");
      const text = JSON.stringify(refused.body);
      expect(text).not.toContain("cyc_vault_c");
      expect(text).not.toContain("cyc_vault_d");
      // the hidden run is one stand-in: neither the slugs nor how many
      expect(refused.body.cycle).toEqual(["cyc_lab_a", "cyc_lab_b", "…", "cyc_lab_a"]);
      // a list's item, too
      const listed = await on.t.json("POST", `${CO}/custom-object-type-fields/`, {
        token,
        body: [body],
      });
      expect(listed.status, JSON.stringify(listed.body)).toBe(400);
      expect(JSON.stringify(listed.body)).not.toContain("cyc_vault");
      // a schema apply giving lab_a the same field
      const applied = await on.t.json("POST", `${CO}/schema/apply/`, {
        token,
        body: {
          schema: {
            schema_version: "1",
            types: [
              {
                name: "cyc_lab_a",
                slug: "cyc_lab_a",
                group_name: "lab",
                fields: [
                  {
                    id: 1,
                    name: "to_b",
                    type: "object",
                    related_object_type: "custom-objects/cyc_lab_b",
                  },
                ],
              },
            ],
          },
        },
      });
      expect(applied.status, JSON.stringify(applied.body)).toBe(400);
      expect(applied.body.error, JSON.stringify(applied.body)).toBe("circular_dependency");
      expect(JSON.stringify(applied.body)).not.toContain("cyc_vault");
      expect(applied.body.cycle).toEqual(["cyc_lab_a", "cyc_lab_b", "…", "cyc_lab_a"]);
      const admin = await on.t.json("POST", `${CO}/custom-object-type-fields/`, { body });
      expect(admin.status, JSON.stringify(admin.body)).toBe(400);
      expect(admin.body.cycle).toEqual([
        "cyc_lab_a",
        "cyc_lab_b",
        "cyc_vault_c",
        "cyc_vault_d",
        "cyc_lab_a",
      ]);
    });
  });
