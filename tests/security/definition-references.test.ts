/**
 * Outside probe (decision 0194): references a definition names outside the relation fields'
 * shared check. A custom object field's `choice_set` (REST, by name or id; a schema document, by
 * name) and an event rule's `action_object_id` took any choice set or webhook, where a relation
 * to an object the writer may not view answers as an unknown one (0064). The 201 against a 400
 * told a hidden name or id from a missing one, and the field then showed the hidden set's
 * values (OPTIONS, the export, "not a valid choice"); the rule fired another's webhook. Each
 * probe answers byte for byte as the same probe naming nothing; a reference the object already
 * holds may be sent back; a caller who may view the target names it as before. On a local file
 * and a remote database (their writes are staged differently), and the staged reads on D1.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { d1Orm } from "../../tools/d1-local";
import { type D1App, startD1App } from "../helpers/d1-app";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { CO, namedCot } from "../custom-objects/fixtures";

const FIELDS = `${CO}/custom-object-type-fields`;
const SCHEMA = `${CO}/schema`;
const MISSING_ID = 987654;

/** A missing reference's answer with the missing name or id written as the hidden one. */
const asHidden = (missingAnswer: unknown, missing: string | number, hidden: string | number) =>
  JSON.stringify(missingAnswer).split(String(missing)).join(String(hidden));

for (const backend of ["local", "remote"] as const)
  describe(`${backend}: references a definition names`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let attacker = "";
    let viewer = "";
    let carrier = "";
    let typeId = 0;
    let hiddenSet = 0;
    let openSet = 0;
    let hiddenHook = 0;
    let openHook = 0;
    const made = async (path: string, body: unknown) => {
      const r = await t().json("POST", path, { body });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body.id as number;
    };
    beforeAll(async () => {
      app = await appOn(backend, `definition-refs-${backend}`);
      hiddenSet = await made("/api/extras/custom-field-choice-sets/", {
        name: "SecretGrades",
        extra_choices: [
          ["alpha-secret", "Alpha"],
          ["beta-secret", "Beta"],
        ],
      });
      openSet = await made("/api/extras/custom-field-choice-sets/", {
        name: "OpenGrades",
        extra_choices: [["open", "Open"]],
      });
      hiddenHook = await made("/api/extras/webhooks/", {
        name: "PayrollHook",
        payload_url: "http://payroll.example/in",
      });
      openHook = await made("/api/extras/webhooks/", {
        name: "OpenHook",
        payload_url: "http://open.example/in",
      });
      typeId = (await namedCot(t(), "probeboxes")).id;
      const schemaGrants: Array<[string[], string, unknown]> = [
        [["view", "add", "change"], "custom_objects.customobjecttype", null],
        [["view", "add", "change"], "custom_objects.customobjecttypefield", null],
        [["view", "add"], "custom_objects.probeboxes", null],
        [["view", "add", "change"], "extras.eventrule", null],
        [["view"], "dcim.site", null],
      ];
      attacker = (
        await userWith(t(), "definition-attacker", [
          ...schemaGrants,
          [["view"], "extras.customfieldchoiceset", { name: "OpenGrades" }],
          [["view"], "extras.webhook", { name: "OpenHook" }],
        ])
      ).token;
      viewer = (
        await userWith(t(), "definition-viewer", [
          ...schemaGrants,
          [["view", "add", "change"], "extras.customfieldchoiceset", null],
          [["view"], "extras.webhook", null],
        ])
      ).token;
      carrier = (
        await userWith(t(), "definition-carrier", [
          ...schemaGrants,
          [["view", "add", "change"], "extras.customfieldchoiceset", { name: "OpenGrades" }],
        ])
      ).token;
    });
    afterAll(() => app.close());

    const field = (name: string, choiceSet: unknown) => ({
      custom_object_type: typeId,
      name,
      type: "select",
      choice_set: choiceSet,
    });

    test("a field naming a hidden choice set, by name or id, answers as a missing one", async () => {
      for (const [hidden, missing] of [
        ["SecretGrades", "NoSuchGrades"],
        [hiddenSet, MISSING_ID],
        [{ id: hiddenSet }, { id: MISSING_ID }],
      ] as const) {
        const h = await t().json("POST", `${FIELDS}/`, {
          token: attacker,
          body: field("grade", hidden),
        });
        const m = await t().json("POST", `${FIELDS}/`, {
          token: attacker,
          body: field("grade", missing),
        });
        expect(m.status, JSON.stringify(m.body)).toBe(400);
        expect(h.status, JSON.stringify(h.body)).toBe(400);
        const [hiddenName, missingName] =
          typeof hidden === "object"
            ? [hidden.id, (missing as { id: number }).id]
            : [hidden, missing];
        expect(JSON.stringify(h.body)).toBe(asHidden(m.body, missingName, hiddenName));
        expect(JSON.stringify(h.body)).not.toContain("alpha-secret");
      }
      // nothing was made: the type's objects take no such field
      const options = await t().req("OPTIONS", `${CO}/probeboxes/`, { token: attacker });
      expect(await options.text()).not.toContain("alpha-secret");
    });

    test("a PATCH re-pointing a field to a hidden choice set answers as a missing one", async () => {
      const open = await t().json("POST", `${FIELDS}/`, {
        token: attacker,
        body: field("shade", "OpenGrades"),
      });
      expect(open.status, JSON.stringify(open.body)).toBe(201);
      const path = `${FIELDS}/${open.body.id}/`;
      const h = await t().json("PATCH", path, { token: attacker, body: { choice_set: hiddenSet } });
      const m = await t().json("PATCH", path, {
        token: attacker,
        body: { choice_set: MISSING_ID },
      });
      expect(m.status).toBe(400);
      expect(h.status, JSON.stringify(h.body)).toBe(400);
      expect(JSON.stringify(h.body)).toBe(asHidden(m.body, MISSING_ID, hiddenSet));
      expect((await t().json("GET", path)).body.choice_set.id).toBe(openSet);
    });

    test("a field that holds a hidden choice set may be sent back as it reads", async () => {
      const held = await t().json("POST", `${FIELDS}/`, { body: field("tier", "SecretGrades") });
      expect(held.status).toBe(201);
      const path = `${FIELDS}/${held.body.id}/`;
      const read = await t().json("GET", path, { token: attacker });
      expect(read.body.choice_set).toEqual({ id: hiddenSet });
      const { id: _id, url: _url, display: _d, created: _c, last_updated: _l, ...body } = read.body;
      const put = await t().json("PUT", path, { token: attacker, body });
      expect(put.status, JSON.stringify(put.body)).toBe(200);
      const patched = await t().json("PATCH", path, {
        token: attacker,
        body: { description: "kept", choice_set: hiddenSet },
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      // who may view the set names it as before
      const seen = await t().json("POST", `${FIELDS}/`, {
        token: viewer,
        body: field("rank", "SecretGrades"),
      });
      expect(seen.status, JSON.stringify(seen.body)).toBe(201);
    });

    test("a type's record shows its fields' hidden choice sets as the fields' own records do", async () => {
      const held = await t().json("POST", `${FIELDS}/`, { body: field("band", "SecretGrades") });
      expect(held.status).toBe(201);
      const own = await t().json("GET", `${FIELDS}/${held.body.id}/`, { token: attacker });
      expect(own.body.choice_set).toEqual({ id: hiddenSet });
      const embedded = (record: { fields: Array<{ id: number; choice_set: unknown }> }) =>
        record.fields.find((f) => f.id === held.body.id)!.choice_set;
      const one = await t().json("GET", `${CO}/custom-object-types/${typeId}/`, {
        token: attacker,
      });
      expect(embedded(one.body)).toEqual({ id: hiddenSet });
      const list = await t().json("GET", `${CO}/custom-object-types/?slug=probeboxes`, {
        token: attacker,
      });
      expect(embedded(list.body.results[0])).toEqual({ id: hiddenSet });
      // a write's answer too
      const patched = await t().json("PATCH", `${CO}/custom-object-types/${typeId}/`, {
        token: attacker,
        body: { description: "probed" },
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      expect(embedded(patched.body)).toEqual({ id: hiddenSet });
      for (const body of [one.body, list.body, patched.body])
        expect(JSON.stringify(body)).not.toContain("SecretGrades");
      // who may view the set reads it
      const seen = await t().json("GET", `${CO}/custom-object-types/${typeId}/`, { token: viewer });
      expect(embedded(seen.body)).toMatchObject({ id: hiddenSet, name: "SecretGrades" });
    });

    test("a schema document naming a hidden choice set answers as a missing one", async () => {
      const doc = (slug: string, choiceSet: string) => ({
        schema: {
          schema_version: "1",
          types: [
            {
              name: slug,
              slug,
              fields: [{ id: 1, name: "grade", type: "select", choice_set: choiceSet }],
            },
          ],
        },
      });
      const h = await t().json("POST", `${SCHEMA}/apply/`, {
        token: attacker,
        body: doc("probe_graded", "SecretGrades"),
      });
      const m = await t().json("POST", `${SCHEMA}/apply/`, {
        token: attacker,
        body: doc("probe_graded", "NoSuchGrades"),
      });
      expect(m.status, JSON.stringify(m.body)).toBe(400);
      expect(h.status, JSON.stringify(h.body)).toBe(400);
      expect(JSON.stringify(h.body)).toBe(asHidden(m.body, "NoSuchGrades", "SecretGrades"));
      const exported = await t().json("GET", `${SCHEMA}/export?slug=probe_graded`, {
        token: attacker,
      });
      expect(JSON.stringify(exported.body)).not.toContain("alpha-secret");
      // who may view the set applies it, and an export applied again by the attacker holds
      const seen = await t().json("POST", `${SCHEMA}/apply/`, {
        token: viewer,
        body: doc("probe_graded", "SecretGrades"),
      });
      expect(seen.status, JSON.stringify(seen.body)).toBe(200);
      const again = await t().json("POST", `${SCHEMA}/apply/`, {
        token: attacker,
        body: doc("probe_graded", "SecretGrades"),
      });
      expect(again.status, JSON.stringify(again.body)).toBe(200);
    });

    test("a schema document carries choice sets only for a caller whose choice set rights are whole", async () => {
      const carrying = (slug: string, set: string) => ({
        schema: {
          schema_version: "1",
          choice_sets: [{ name: set, extra_choices: [["pwned", "Pwned"]] }],
          types: [
            {
              name: slug,
              slug,
              fields: [{ id: 1, name: "grade", type: "select", choice_set: set }],
            },
          ],
        },
      });
      const before = await t().json("GET", `/api/extras/custom-field-choice-sets/${hiddenSet}/`);
      // a hidden set, a visible one inside the constraints, a new one: the same refusal
      for (const set of ["SecretGrades", "OpenGrades", "CarriedGrades"]) {
        const r = await t().json("POST", `${SCHEMA}/apply/`, {
          token: carrier,
          body: carrying("probe_carried", set),
        });
        const action = set === "CarriedGrades" ? "add" : "change";
        expect(r.status, JSON.stringify(r.body)).toBe(403);
        expect(r.body.detail).toBe(
          `You do not have permission to ${action} the choice set "${set}" the document carries.`,
        );
      }
      const after = await t().json("GET", `/api/extras/custom-field-choice-sets/${hiddenSet}/`);
      expect(after.body).toEqual(before.body);
      const sets = await t().json(
        "GET",
        "/api/extras/custom-field-choice-sets/?name=CarriedGrades",
      );
      expect(sets.body.count).toBe(0);
      // a caller who may view, add and change every choice set carries them
      const whole = await t().json("POST", `${SCHEMA}/apply/`, {
        token: viewer,
        body: carrying("probe_carried", "CarriedGrades"),
      });
      expect(whole.status, JSON.stringify(whole.body)).toBe(200);
    });

    test("a preview or apply re-pointing a field to a hidden choice set tells nothing of its values", async () => {
      // the attacker's own type, its select field on a set they may view
      const mine = (set: string) => ({
        schema: {
          schema_version: "1",
          types: [
            {
              name: "probe_graded_own",
              slug: "probe_graded_own",
              fields: [{ id: 1, name: "grade", type: "select", choice_set: set }],
            },
          ],
        },
      });
      await made("/api/extras/custom-field-choice-sets/", {
        name: "BothGrades",
        extra_choices: [
          ["alpha-secret", "Alpha"],
          ["guess", "Guess"],
        ],
      });
      const seen = await t().json("POST", `${SCHEMA}/apply/`, { body: mine("BothGrades") });
      expect(seen.status, JSON.stringify(seen.body)).toBe(200);
      const own = await userWith(t(), "definition-guesser", [
        [["view", "add", "change"], "custom_objects.customobjecttype", null],
        [["view", "add", "change"], "custom_objects.customobjecttypefield", null],
        [["view", "add", "change", "delete"], "custom_objects.probe_graded_own", null],
        [["view"], "extras.customfieldchoiceset", { name: "BothGrades" }],
      ]);
      const answers = async (value: string, set: string) => {
        const rows = await t().json("GET", `${CO}/probe_graded_own/`);
        for (const r of rows.body.results)
          await t().json("DELETE", `${CO}/probe_graded_own/${r.id}/`);
        const row = await t().json("POST", `${CO}/probe_graded_own/`, {
          token: own.token,
          body: { grade: value },
        });
        expect(row.status, JSON.stringify(row.body)).toBe(201);
        const preview = await t().json("POST", `${SCHEMA}/preview/`, {
          token: own.token,
          body: mine(set),
        });
        const apply = await t().json("POST", `${SCHEMA}/apply/`, {
          token: own.token,
          body: mine(set),
        });
        return asHidden(
          { preview: { status: preview.status, diffs: preview.body.diffs }, apply },
          set,
          "<set>",
        ).replace(/"plan_id":"[^"]*"|"[a-z_]*state_hash":"[^"]*"/g, "");
      };
      // "guess" is not in the hidden set, "alpha-secret" is: both answer as a missing set
      const missing = await answers("guess", "NoSuchGrades");
      expect(missing).toContain("unresolvable_reference");
      expect(await answers("guess", "SecretGrades")).toBe(missing);
      expect(await answers("alpha-secret", "SecretGrades")).toBe(
        await answers("alpha-secret", "NoSuchGrades"),
      );
    });

    const rule = (name: string, hook: number) => ({
      name,
      object_types: ["dcim.site"],
      event_types: ["object_created"],
      action_object_type: "extras.webhook",
      action_object_id: hook,
    });

    test("an event rule naming a hidden webhook answers as a missing one", async () => {
      const h = await t().json("POST", "/api/extras/event-rules/", {
        token: attacker,
        body: rule("fire", hiddenHook),
      });
      const m = await t().json("POST", "/api/extras/event-rules/", {
        token: attacker,
        body: rule("fire", MISSING_ID),
      });
      expect(m.status, JSON.stringify(m.body)).toBe(400);
      expect(h.status, JSON.stringify(h.body)).toBe(400);
      expect(JSON.stringify(h.body)).toBe(asHidden(m.body, MISSING_ID, hiddenHook));
      // in a bulk create, with a rule the caller may make: all or nothing, the same answer
      const bulk = (hook: number) =>
        t().json("POST", "/api/extras/event-rules/", {
          token: attacker,
          body: [rule("fine", openHook), rule("fire", hook)],
        });
      const hb = await bulk(hiddenHook);
      const mb = await bulk(MISSING_ID);
      expect(mb.status).toBe(400);
      expect(JSON.stringify(hb.body)).toBe(asHidden(mb.body, MISSING_ID, hiddenHook));
      const rules = await t().json("GET", "/api/extras/event-rules/");
      expect(rules.body.count).toBe(0);
    });

    test("a rule re-pointed to a hidden webhook answers as a missing one; a held one is kept", async () => {
      const mine = await t().json("POST", "/api/extras/event-rules/", {
        token: attacker,
        body: rule("mine", openHook),
      });
      expect(mine.status, JSON.stringify(mine.body)).toBe(201);
      const path = `/api/extras/event-rules/${mine.body.id}/`;
      const h = await t().json("PATCH", path, {
        token: attacker,
        body: { action_object_id: hiddenHook },
      });
      const m = await t().json("PATCH", path, {
        token: attacker,
        body: { action_object_id: MISSING_ID },
      });
      expect(m.status).toBe(400);
      expect(h.status, JSON.stringify(h.body)).toBe(400);
      expect(JSON.stringify(h.body)).toBe(asHidden(m.body, MISSING_ID, hiddenHook));

      const theirs = await t().json("POST", "/api/extras/event-rules/", {
        body: rule("theirs", hiddenHook),
      });
      expect(theirs.status).toBe(201);
      const held = await t().json("PATCH", `/api/extras/event-rules/${theirs.body.id}/`, {
        token: attacker,
        body: { description: "kept", action_object_id: hiddenHook },
      });
      expect(held.status, JSON.stringify(held.body)).toBe(200);
      expect(held.body.action_object).toEqual({ id: hiddenHook });
      const seen = await t().json("POST", "/api/extras/event-rules/", {
        token: viewer,
        body: rule("seen", hiddenHook),
      });
      expect(seen.status, JSON.stringify(seen.body)).toBe(201);
    });
  });

describe("d1: references a definition names", () => {
  let d1: D1App;
  let attacker = "";
  let hiddenHook = 0;
  let openHook = 0;
  let typeId = 0;
  beforeAll(async () => {
    d1 = await startD1App("definition-refs");
    hiddenHook = (
      await d1.made("/api/extras/webhooks/", {
        name: "PayrollHook",
        payload_url: "http://payroll.example/in",
      })
    ).id;
    openHook = (
      await d1.made("/api/extras/webhooks/", {
        name: "OpenHook",
        payload_url: "http://open.example/in",
      })
    ).id;
    await d1.made("/api/extras/custom-field-choice-sets/", {
      name: "SecretGrades",
      extra_choices: [["a", "A"]],
    });
    await d1.made("/api/extras/custom-field-choice-sets/", {
      name: "OpenGrades",
      extra_choices: [["o", "O"]],
    });
    typeId = (await d1.made(`${CO}/custom-object-types/`, { name: "d1boxes", slug: "d1boxes" })).id;
    const orm = d1Orm(d1.binding);
    const user = await createUser(orm, { username: "d1-definition-attacker" });
    for (const [i, [actions, label, constraints]] of [
      [["view", "add", "change"], "extras.eventrule", null],
      [["view"], "dcim.site", null],
      [["view"], "extras.webhook", { name: "OpenHook" }],
      [["view", "add", "change"], "custom_objects.customobjecttype", null],
      [["view", "add", "change"], "custom_objects.customobjecttypefield", null],
      [["view"], "extras.customfieldchoiceset", { name: "OpenGrades" }],
    ].entries()) {
      const r = await d1.json("POST", "/api/users/permissions/", {
        name: `d1-definition-${i}`,
        actions,
        object_types: [label],
        users: [user.id],
        constraints,
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
    }
    attacker = (await issueToken(orm, { username: "d1-definition-attacker" })).key;
  }, 120_000);
  afterAll(() => d1?.stop());

  test("a hidden webhook or choice set answers as a missing one; a seen one is named", async () => {
    const rule = (name: string, hook: number) => ({
      name,
      object_types: ["dcim.site"],
      event_types: ["object_created"],
      action_object_type: "extras.webhook",
      action_object_id: hook,
    });
    const rules = "/api/extras/event-rules/";
    const h = await d1.json("POST", rules, rule("fire", hiddenHook), attacker);
    const m = await d1.json("POST", rules, rule("fire", MISSING_ID), attacker);
    expect(m.status).toBe(400);
    expect(JSON.stringify(h.body)).toBe(asHidden(m.body, MISSING_ID, hiddenHook));
    expect((await d1.json("POST", rules, rule("seen", openHook), attacker)).status).toBe(201);
    expect((await d1.json("POST", rules, rule("admin's", hiddenHook))).status).toBe(201);

    const field = (name: string, set: string) => ({
      custom_object_type: typeId,
      name,
      type: "select",
      choice_set: set,
    });
    const fields = `${CO}/custom-object-type-fields/`;
    const hf = await d1.json("POST", fields, field("grade", "SecretGrades"), attacker);
    const mf = await d1.json("POST", fields, field("grade", "NoSuchGrades"), attacker);
    expect(mf.status).toBe(400);
    expect(JSON.stringify(hf.body)).toBe(asHidden(mf.body, "NoSuchGrades", "SecretGrades"));
    expect((await d1.json("POST", fields, field("shade", "OpenGrades"), attacker)).status).toBe(
      201,
    );
    expect((await d1.json("POST", fields, field("tier", "SecretGrades"))).status).toBe(201);
  }, 120_000);
});
