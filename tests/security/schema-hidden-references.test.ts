/**
 * A field pointing at a custom object type the caller may not view (decision 0064's references,
 * for types): to a constrained schema caller such a type does not exist. A schema apply or a REST
 * field write naming it answers exactly as one naming an absent type (it confirmed the hidden
 * type, and a cycle through it named it), and a target a field already holds may be sent back.
 * Local file (the transaction) and remote (the batch).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { CO } from "../custom-objects/fixtures";

const SCHEMA = `${CO}/schema`;
const TYPE = "custom_objects.customobjecttype";
const code = { id: 1, name: "code", type: "text" };
const box = (fields: unknown[]) => ({ name: "ok_box", slug: "ok_box", group_name: "lab", fields });
const doc = (types: unknown[]) => ({
  schema: { schema_version: "1", types },
  allow_destructive: true,
});

for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let on: BackendApp;
    let token: string;
    let boxId: number;
    beforeAll(async () => {
      on = await appOn(backend, `hidden-refs-${backend}`);
      const setup = await on.t.json("POST", `${SCHEMA}/apply/`, {
        body: doc([
          box([code]),
          { name: "keep", slug: "keep", fields: [code] },
          {
            name: "secret",
            slug: "secret",
            // it points at the caller's type: a cycle through it would name it
            fields: [
              code,
              { id: 2, name: "back", type: "object", related_object_type: "custom-objects/ok_box" },
            ],
          },
        ]),
      });
      if (setup.status !== 200) throw new Error(JSON.stringify(setup.body));
      const listed = await on.t.json("GET", `${CO}/custom-object-types/?slug=ok_box`);
      boxId = listed.body.results[0].id;
      token = (
        await userWith(on.t, `shaper-${backend}`, [
          [["view", "add", "change", "delete"], TYPE, { group_name: "lab" }],
          [["view", "add", "change", "delete"], "custom_objects.customobjecttypefield", null],
        ])
      ).token;
    });
    afterAll(() => on.close());

    const as = (r: { status: number; body: unknown }, slug: string) => ({
      status: r.status,
      body: JSON.parse(JSON.stringify(r.body).replaceAll(slug, "<slug>")),
    });
    const apply = (body: unknown) => on.t.json("POST", `${SCHEMA}/apply/`, { token, body });

    test("an apply pointing a field at a hidden type answers as at an absent one", async () => {
      const answers = [];
      for (const slug of ["secret", "nosuch"]) {
        const pointing = { id: 2, name: "ptr", type: "object" };
        const single = await apply(
          doc([box([code, { ...pointing, related_object_type: `custom-objects/${slug}` }])]),
        );
        const poly = await apply(
          doc([
            box([
              code,
              {
                ...pointing,
                is_polymorphic: true,
                related_object_types: [`custom-objects/${slug}`, "dcim/site"],
              },
            ]),
          ]),
        );
        answers.push([as(single, slug), as(poly, slug)]);
      }
      expect(answers[0]![0]!.status).toBe(400);
      expect(answers[0]).toEqual(answers[1]!);
      expect(JSON.stringify(answers)).not.toContain("secret");
      const exported = await on.t.json("GET", `${SCHEMA}/export/`, { token });
      expect(JSON.stringify(exported.body)).not.toContain("ptr");
    });

    test("a REST field pointing at a hidden type answers as at an absent one", async () => {
      const answers = [];
      for (const slug of ["secret", "nosuch"]) {
        const single = await on.t.json("POST", `${CO}/custom-object-type-fields/`, {
          token,
          body: {
            custom_object_type: boxId,
            name: "rest_ptr",
            type: "object",
            related_object_type: `custom_objects.${slug}`,
          },
        });
        const poly = await on.t.json("POST", `${CO}/custom-object-type-fields/`, {
          token,
          body: {
            custom_object_type: boxId,
            name: "rest_poly",
            type: "object",
            is_polymorphic: true,
            related_object_types: [`custom_objects.${slug}`],
          },
        });
        answers.push([as(single, slug), as(poly, slug)]);
      }
      expect(answers[0]![0]!.status).toBe(400);
      expect(answers[0]).toEqual(answers[1]!);
    });

    test("a target the type already holds may be sent back", async () => {
      const held = await on.t.json("POST", `${CO}/custom-object-type-fields/`, {
        body: {
          custom_object_type: boxId,
          name: "held",
          type: "object",
          related_object_type: "custom_objects.keep",
        },
      });
      expect(held.status, JSON.stringify(held.body)).toBe(201);
      const exported = await on.t.json("GET", `${SCHEMA}/export/`, { token });
      const again = await apply({ schema: exported.body, allow_destructive: false });
      expect(again.status, JSON.stringify(again.body)).toBe(200);
      const patched = await on.t.json("PATCH", `${CO}/custom-object-type-fields/${held.body.id}/`, {
        token,
        body: { related_object_type: "custom_objects.keep", label: "Held" },
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      expect(
        (await on.t.json("DELETE", `${CO}/custom-object-type-fields/${held.body.id}/`)).status,
      ).toBe(204);
    });
  });
