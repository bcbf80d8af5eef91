/**
 * Security (decision 0129): a custom object type the caller may not view is, to their schema
 * applies and previews, a type that does not exist. The answers to the same requests while the
 * hidden type exists and after it is gone are byte-identical, on a local file (the transaction)
 * and remote libSQL (the staged batch); a removal refused because other types point at it names
 * no field of a type the caller may not view.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHranaServer, type HranaServer } from "../../tools/hrana-server";
import { makeTestApp, type TestApp } from "../helpers/app";
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

function suite(backend: "local" | "remote") {
  describe(`hidden custom object types in schema documents (${backend})`, () => {
    let t: TestApp;
    let dir = "";
    let hrana: HranaServer | null = null;
    let token: string;
    beforeAll(async () => {
      if (backend === "remote") {
        dir = mkdtempSync(join(tmpdir(), "host-hidden-types-"));
        hrana = await startHranaServer({ path: join(dir, "remote.db"), port: 0 });
      }
      t = await makeTestApp(hrana ? { DATABASE_URL: hrana.url } : {});
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
    afterAll(async () => {
      await t.close();
      if (!hrana) return;
      await hrana.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    const post = async (path: string, body: unknown) => {
      const r = await t.json("POST", `${SCHEMA}/${path}/`, { token, body });
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
      for (const key of Object.keys(whileAbsent))
        expect({ key, ...whileHidden[key]! }).toEqual({ key, ...whileAbsent[key]! });
    });
  });
}

suite("local");
suite("remote");
