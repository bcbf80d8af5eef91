/**
 * Security (decision 0129): a custom object type the caller may not view is, to their schema
 * applies and previews, a type that does not exist. The answers to the same requests while the
 * hidden type exists and after it is gone are byte-identical, on a local file (the transaction)
 * and remote libSQL (the staged batch); a removal refused because other types point at it names
 * no field of a type the caller may not view.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TestApp } from "../helpers/app";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { userWith } from "../helpers/grants";
import { CO } from "../custom-objects/fixtures";

const SCHEMA = `${CO}/schema`;
const TYPE = "custom_objects.customobjecttype";
const code = { id: 1, name: "code", type: "text" };
const link = (id: number, name: string, to: string) => ({
  id,
  name,
  type: "object",
  related_object_type: `custom-objects/${to}`,
});
const typeOf = (slug: string, group: string, fields: unknown[]) => ({
  name: slug,
  slug,
  group_name: group,
  fields,
});
const schema = (types: unknown[], removed: string[] = []) => ({
  schema_version: "1",
  types,
  ...(removed.length ? { removed_types: removed.map((slug) => ({ slug })) } : {}),
});
// the attacker's guess at the hidden type: its slug, in a group they may not add to
const guess = typeOf("vault", "secret", [code]);
const secret = { group_name: "secret" };
/** A type on slug `slug` named `name`, in the group they may not add to. */
const named = (slug: string, name: string) => ({ ...typeOf(slug, "secret", [code]), name });

function suite(backend: "local" | "remote") {
  describe(`hidden custom object types in schema documents (${backend})`, () => {
    let t: TestApp;
    let on: BackendApp;
    let token: string;
    beforeAll(async () => {
      on = await appOn(backend, "hidden-types");
      t = on.t;
      const setup = await t.json("POST", `${SCHEMA}/apply/`, {
        body: schema([
          typeOf("lab_target", "lab", [code]),
          typeOf("lab_other", "lab", [code]),
          typeOf("lab_box", "lab", [code, link(2, "box_link", "lab_other")]),
          typeOf("vault", "secret", [code, link(2, "secret_link", "lab_target")]),
        ]),
      });
      if (setup.status !== 200) throw new Error(JSON.stringify(setup.body));
      // views, adds, changes and deletes the lab's types; sees nothing of "secret"
      token = (
        await userWith(t, "prober", [
          [["view", "add", "change", "delete"], TYPE, { group_name: "lab" }],
          [["view", "add", "change", "delete"], "custom_objects.customobjecttypefield", null],
        ])
      ).token;
    });
    afterAll(() => on.close());
    const post = async (path: string, body: unknown) => {
      const r = await t.json("POST", `${SCHEMA}/${path}/`, { token, body });
      return { status: r.status, body: JSON.stringify(r.body) };
    };

    const rest = async (method: string, path: string, body: unknown) => {
      const r = await t.json(method, `${CO}/custom-object-types/${path}`, { token, body });
      return { status: r.status, body: JSON.stringify(r.body) };
    };

    /** The attacker's probes, in order; the plan ones take the preview's answer as they would. */
    const probe = async () => {
      const out: Record<string, { status: number; body: string }> = {};
      out.preview = await post("preview", schema([guess]));
      out.previewRemoval = await post("preview", schema([], ["vault"]));
      const plan = JSON.parse(out.preview.body);
      out.apply = await post("apply", { schema: schema([guess]) });
      out.applyHash = await post("apply", {
        schema: schema([guess]),
        expected_state_hash: plan.from_state_hash,
      });
      out.applyStaleHash = await post("apply", {
        schema: schema([guess]),
        expected_state_hash: "0".repeat(64),
      });
      out.applyPlan = await post("apply", { schema: schema([guess]), plan_id: plan.plan_id });
      out.applyRemoval = await post("apply", {
        schema: schema([], ["vault"]),
        allow_destructive: true,
      });
      // the hidden type's name on a free slug, and the guess beside a slug no type has
      out.applyName = await post("apply", { schema: schema([named("fresh_one", "vault")]) });
      out.previewName = await post("preview", schema([named("fresh_one", "vault")]));
      out.applyMixed = await post("apply", {
        schema: schema([typeOf("fresh_two", "secret", [code]), guess]),
      });
      out.applyBeside = await post("apply", {
        schema: schema([typeOf("lab_fresh", "lab", [code]), guess]),
      });
      // the guessed slug under a name a type the caller may view holds: that clash is answered
      out.applyVisibleName = await post("apply", {
        schema: schema([{ ...guess, name: "lab_target" }]),
      });
      out.restName = await rest("POST", "", { name: "vault", slug: "fresh_three", ...secret });
      out.restSlug = await rest("POST", "", { name: "fresh_four", slug: "vault", ...secret });
      return out;
    };

    test("a removal refused as protected names no field of a type the caller may not view", async () => {
      const hidden = await post("apply", {
        schema: schema([], ["lab_target"]),
        allow_destructive: true,
      });
      expect(hidden.status, hidden.body).toBe(409);
      expect(JSON.parse(hidden.body).error).toBe("protected");
      expect(hidden.body).not.toContain("secret_link");
      expect(hidden.body).not.toContain("vault");
      // a pointer the caller may view is still named, to tell them what to remove
      const shown = await post("apply", {
        schema: schema([], ["lab_other"]),
        allow_destructive: true,
      });
      expect(shown.status, shown.body).toBe(409);
      expect(shown.body).toContain("box_link");
      const exported = await t.json("GET", `${SCHEMA}/export/`);
      expect(exported.body.types.map((x: { slug: string }) => x.slug).sort()).toEqual([
        "lab_box",
        "lab_other",
        "lab_target",
        "vault",
      ]);
    });

    test("the REST delete of a type a hidden type points at names none of it either", async () => {
      const [target] = (
        await t.json("GET", `${CO}/custom-object-types/?slug=lab_target`, { token })
      ).body.results;
      const r = await t.json("DELETE", `${CO}/custom-object-types/${target.id}/`, { token });
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      expect(JSON.stringify(r.body)).not.toMatch(/secret_link|vault|field\(s\)|type id/);
    });

    test("a type renamed onto a hidden type's name is refused as a change, never 'already exists'", async () => {
      const [box] = (await t.json("GET", `${CO}/custom-object-types/?slug=lab_box`, { token })).body
        .results;
      const doc = await post("apply", {
        schema: schema([{ ...typeOf("lab_box", "lab", [code]), name: "vault" }]),
      });
      expect(doc).toEqual({
        status: 403,
        body: JSON.stringify({
          detail:
            "You do not have permission to change the custom object type(s) lab_box as submitted.",
          error: "permission_denied",
        }),
      });
      for (const change of [{ name: "vault" }, { slug: "vault" }]) {
        const r = await rest("PATCH", `${box.id}/`, change);
        expect(r).toEqual({
          status: 403,
          body: JSON.stringify({
            detail:
              "You do not have permission to change this object as submitted: it would fall outside the objects you may change.",
            error: "permission_denied",
          }),
        });
      }
      // a name a type the caller may view holds is still named
      const seen = await rest("PATCH", `${box.id}/`, { name: "lab_other" });
      expect(seen.status).toBe(400);
      expect(JSON.parse(seen.body)).toEqual({
        name: ["custom object type with this name already exists."],
      });
      const after = await t.json("GET", `${CO}/custom-object-types/${box.id}/`, { token });
      expect([after.body.name, after.body.slug]).toEqual(["lab_box", "lab_box"]);
    });

    test("an add refused by the add constraints names every type the document adds, in order", async () => {
      const r = await post("apply", {
        schema: schema([
          typeOf("lab_box", "lab", [code, link(2, "box_link", "lab_other")]),
          typeOf("secret_new", "secret", [code]),
          typeOf("lab_new", "lab", [code]),
        ]),
      });
      expect(r).toEqual({
        status: 403,
        body: JSON.stringify({
          detail:
            "You do not have permission to add the custom object type(s) secret_new, lab_new as submitted.",
          error: "permission_denied",
        }),
      });
      const listed = await t.json("GET", `${CO}/custom-object-types/?slug=lab_new`);
      expect(listed.body.count).toBe(0);
    });

    test("a hidden type's slug answers exactly as a slug that does not exist", async () => {
      const whileHidden = await probe();
      // the hidden type untouched by all of it
      const kept = await t.json("GET", `${SCHEMA}/export/?slug=vault`);
      expect(kept.body.types[0].fields.map((f: { name: string }) => f.name)).toEqual([
        "code",
        "secret_link",
      ]);
      const gone = await t.json("POST", `${SCHEMA}/apply/`, {
        body: { schema: schema([], ["vault"]), allow_destructive: true, purge: true },
      });
      expect(gone.status, JSON.stringify(gone.body)).toBe(200);
      const whileAbsent = await probe();
      expect(whileAbsent.apply?.status).toBe(403);
      expect(whileAbsent.applyRemoval?.status).toBe(200);
      expect(whileAbsent.applyVisibleName?.status).toBe(400);
      expect(whileHidden).toEqual(whileAbsent);
    });
  });
}

suite("local");
suite("remote");
