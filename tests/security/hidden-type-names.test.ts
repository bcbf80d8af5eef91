/**
 * Records a caller may view never name a custom object type the caller holds no permission on
 * (decision 0187): a tag's or an event rule's `object_types`, an object permission's, the object
 * types list and detail, the change log's snapshots, GraphQL and the OpenAPI document. An ordinary
 * account learned a hidden type's slug from any of them. Writes keep what the caller did not see:
 * a PATCH of `object_types` keeps the hidden entries, and naming a hidden type answers as naming
 * one that does not exist. A superuser and a caller who may view the type see it as before.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { makeCot } from "../custom-objects/fixtures";
import { jobs } from "../../src/db/schema";

const SLUG = "secret_thing";
/** Its verbose name: searched for too. */
const NAME = "Zebra Vault";
const HIDDEN = `custom_objects.${SLUG}`;
const MISSING = "custom_objects.nosuch_thing";

let t: TestApp;
const who = { attacker: "", insider: "", attackerId: 0 };
const ids = { tag: 0, plain: 0, rule: 0, secretType: 0, hook: 0 };

/** Raw answer text, with the status. */
const answer = async (method: string, path: string, token: string, body?: unknown) => {
  const r = await t.req(method, path, { token, body });
  return `${r.status} ${await r.text()}`;
};

/** Fails naming the probe when the text names the hidden type by slug or by name. */
function expectUnnamed(text: string, probe: string) {
  const lower = text.toLowerCase();
  expect(lower.includes(SLUG), `${probe} names the slug: ${text.slice(0, 400)}`).toBe(false);
  expect(lower.includes(NAME.toLowerCase()), `${probe} names the type: ${text.slice(0, 400)}`).toBe(
    false,
  );
}

const gql = (token: string, query: string) =>
  answer("POST", "/graphql/", token, { query }).then((s) => s);

const storedTypes = async (path: string): Promise<string[]> =>
  (await t.json("GET", path)).body.object_types;

// a local file (its one-read paths off, writes staged) and a remote database (one-read GETs)
for (const backend of ["local", "remote"] as const)
  describe(backend, () => {
    let remote: RemoteDb | null = null;
    beforeAll(async () => {
      remote = backend === "remote" ? await startRemoteDb("hidden-type-names") : null;
      // the webhook is never called (no task queue): its address need only be accepted
      t = await makeTestApp({
        WEBHOOK_ALLOWED_NETWORKS: "127.0.0.1/32",
        ...(remote ? { DATABASE_URL: remote.url } : {}),
      });
      ids.secretType = (await makeCot(t, SLUG, SLUG, { verbose_name: NAME })).object_type.id;
      const tag = await t.json("POST", "/api/extras/tags/", {
        body: { name: "Probe", slug: "probe", object_types: ["dcim.site", HIDDEN] },
      });
      expect(tag.status, JSON.stringify(tag.body)).toBe(201);
      ids.tag = tag.body.id;
      ids.plain = (
        await t.json("POST", "/api/extras/tags/", {
          body: { name: "Plain", slug: "plain", object_types: ["dcim.site"] },
        })
      ).body.id;
      const hook = await t.json("POST", "/api/extras/webhooks/", {
        body: { name: "hook", payload_url: "http://127.0.0.1:9/hook" },
      });
      expect(hook.status, JSON.stringify(hook.body)).toBe(201);
      ids.hook = hook.body.id;
      const rule = await t.json("POST", "/api/extras/event-rules/", {
        body: {
          name: "watch",
          object_types: ["dcim.site", HIDDEN],
          event_types: ["object_created"],
          action_object_type: "extras.webhook",
          action_object_id: ids.hook,
        },
      });
      expect(rule.status, JSON.stringify(rule.body)).toBe(201);
      ids.rule = rule.body.id;
      const attacker = await userWith(t, "ht-attacker", [
        [["view", "add", "change", "delete"], "extras.tag", null],
        [["view", "change"], "extras.eventrule", null],
        [["view"], "extras.webhook", null],
        [["view"], "dcim.site", null],
        [["view"], "users.objectpermission", null],
        [["view"], "core.objecttype", null],
        [["view"], "core.objectchange", null],
        [["view"], "core.job", null],
      ]);
      who.attacker = attacker.token;
      who.attackerId = attacker.id;
      // the insider's own grant is an object permission naming the type: the attacker may view it
      who.insider = (
        await userWith(t, "ht-insider", [
          [["view"], HIDDEN, null],
          [["view"], "extras.tag", null],
          [["view"], "core.objecttype", null],
        ])
      ).token;
    });
    afterAll(async () => {
      await t.close();
      await remote?.stop();
    });

    describe("reads name no type the caller holds no permission on", () => {
      test("REST: tags, event rules, permissions, object types, change log, OpenAPI", async () => {
        const probes = [
          "/api/extras/tags/",
          `/api/extras/tags/${ids.tag}/`,
          "/api/extras/tags/?brief=1",
          "/api/extras/event-rules/",
          `/api/extras/event-rules/${ids.rule}/`,
          "/api/users/permissions/",
          "/api/core/object-types/?limit=1000",
          "/api/core/object-types/?app_label=custom_objects",
          "/api/core/object-changes/?limit=1000",
          "/api/core/object-changes/?changed_object_type=extras.tag",
          "/api/schema/?format=json",
        ];
        for (const path of probes) {
          const text = await answer("GET", path, who.attacker);
          expect(text.startsWith("200"), `${path}: ${text.slice(0, 300)}`).toBe(true);
          expectUnnamed(text, path);
        }
        const tag = await t.json("GET", `/api/extras/tags/${ids.tag}/`, { token: who.attacker });
        expect(tag.body.object_types).toEqual(["dcim.site"]);
        const rule = await t.json("GET", `/api/extras/event-rules/${ids.rule}/`, {
          token: who.attacker,
        });
        expect(rule.body.object_types).toEqual(["dcim.site"]);
      });

      test("the object types list counts and the detail answers as without the type", async () => {
        const all = await t.json("GET", "/api/core/object-types/?limit=1000");
        const mine = await t.json("GET", "/api/core/object-types/?limit=1000", {
          token: who.attacker,
        });
        expect(mine.body.count).toBe(all.body.count - 1);
        const filtered = await t.json("GET", `/api/core/object-types/?model=${SLUG}`, {
          token: who.attacker,
        });
        expect(filtered.body.count).toBe(0);
        const hidden = await answer(
          "GET",
          `/api/core/object-types/${ids.secretType}/`,
          who.attacker,
        );
        expect(hidden.startsWith("404"), hidden).toBe(true);
        expect(hidden).toBe(await answer("GET", "/api/core/object-types/999999/", who.attacker));
      });

      test("GraphQL: a tag's object_types and the schema", async () => {
        const listed = await gql(who.attacker, "{ tag_list { name object_types } }");
        expect(listed.startsWith("200"), listed).toBe(true);
        expect(listed).toContain("dcim.site");
        expectUnnamed(listed, "tag_list");
        const one = await gql(who.attacker, `{ tag(id: ${ids.tag}) { object_types } }`);
        expectUnnamed(one, "tag(id:)");
        const schema = await gql(who.attacker, "{ __schema { types { name fields { name } } } }");
        expectUnnamed(schema, "introspection");
      });
    });

    describe("filters naming the type answer as for a type that does not exist", () => {
      test("a job of the caller's (they have since lost the type): its object_type and ?object_type=", async () => {
        // a job the attacker ran while they held the type (a background write of its objects)
        await t.deps.db.orm.insert(jobs).values({
          name: "test.job",
          status: "completed",
          userId: who.attackerId,
          objectTypeId: ids.secretType,
          objectId: 1,
          attempts: 1,
        });
        const listed = await answer("GET", "/api/core/jobs/", who.attacker);
        expect(listed.startsWith("200"), listed).toBe(true);
        expect(listed).toContain("test.job");
        expectUnnamed(listed, "jobs");
        for (const filter of ["object_type", "object_type__n"]) {
          const hidden = await answer("GET", `/api/core/jobs/?${filter}=${HIDDEN}`, who.attacker);
          const missing = await answer("GET", `/api/core/jobs/?${filter}=${MISSING}`, who.attacker);
          expect(hidden.replaceAll(SLUG, "nosuch_thing"), filter).toBe(missing);
        }
      });
    });

    describe("the change log's snapshots are not searched for what the caller may not see", () => {
      test("?prechange_data= / ?postchange_data= answer a hidden type's name as a missing one's", async () => {
        for (const filter of ["postchange_data", "postchange_data__ic", "prechange_data__isw"]) {
          const path = (text: string) => `/api/core/object-changes/?${filter}=${text}&limit=1000`;
          const hidden = await answer("GET", path(SLUG), who.attacker);
          expect(hidden.startsWith("200"), hidden.slice(0, 300)).toBe(true);
          const missing = await answer("GET", path("nosuch_thing"), who.attacker);
          expect(hidden.replaceAll(SLUG, "nosuch_thing"), filter).toBe(missing);
        }
      });
    });

    describe("writes keep what the caller did not see", () => {
      test("a PATCH of object_types keeps the hidden entry and answers without it", async () => {
        const path = `/api/extras/tags/${ids.tag}/`;
        const r = await answer("PATCH", path, who.attacker, {
          object_types: ["dcim.site", "ipam.prefix"],
        });
        expect(r.startsWith("200"), r).toBe(true);
        expectUnnamed(r, "PATCH answer");
        expect(await storedTypes(path)).toEqual([HIDDEN, "dcim.site", "ipam.prefix"]);
        const cleared = await answer("PATCH", path, who.attacker, { object_types: [] });
        expect(cleared.startsWith("200"), cleared).toBe(true);
        expect(await storedTypes(path)).toEqual([HIDDEN]);
        const put = await answer("PUT", path, who.attacker, {
          name: "Probe",
          slug: "probe",
          object_types: ["dcim.site"],
        });
        expect(put.startsWith("200"), put).toBe(true);
        expect(await storedTypes(path)).toEqual([HIDDEN, "dcim.site"]);
      });

      test("naming a hidden type the object holds answers as naming a missing one (no oracle)", async () => {
        const path = `/api/extras/tags/${ids.tag}/`;
        const before = await storedTypes(path);
        expect(before).toContain(HIDDEN);
        for (const spelled of [HIDDEN, { app_label: "custom_objects", model: SLUG }]) {
          const missing = JSON.parse(JSON.stringify(spelled).replaceAll(SLUG, "nosuch_thing"));
          const guessed = await answer("PATCH", path, who.attacker, {
            object_types: [spelled, "dcim.site"],
          });
          expect(guessed.startsWith("400"), guessed).toBe(true);
          const wrong = await answer("PATCH", path, who.attacker, {
            object_types: [missing, "dcim.site"],
          });
          expect(guessed.replaceAll(SLUG, "nosuch_thing")).toBe(wrong);
        }
        expect(await storedTypes(path)).toEqual(before);
      });

      test("naming a hidden type answers as naming one that does not exist", async () => {
        const path = `/api/extras/tags/${ids.plain}/`;
        const writes: Array<[string, string, (label: string) => unknown]> = [
          ["PATCH", path, (l) => ({ object_types: ["dcim.site", l] })],
          ["POST", "/api/extras/tags/", (l) => ({ name: "N", slug: "n", object_types: [l] })],
          ["POST", "/api/extras/tags/", (l) => [{ name: "N", slug: "n", object_types: [l] }]],
        ];
        for (const [method, where, body] of writes) {
          const hidden = await answer(method, where, who.attacker, body(HIDDEN));
          expect(hidden.startsWith("400"), `${method} ${where}: ${hidden}`).toBe(true);
          const missing = await answer(method, where, who.attacker, body(MISSING));
          expect(hidden.replaceAll(SLUG, "nosuch_thing")).toBe(missing);
        }
        expect(await storedTypes(path)).toEqual(["dcim.site"]);
      });

      test("reverts of changes whose snapshots name the type answer without naming it", async () => {
        const made = await t.json("POST", "/api/extras/tags/", {
          body: { name: "Rev", slug: "rev", object_types: [HIDDEN, "dcim.site"] },
        });
        const rev = `/api/extras/tags/${made.body.id}/`;
        await answer("PATCH", rev, who.attacker, { object_types: ["ipam.prefix"] });
        expect(await storedTypes(rev)).toEqual([HIDDEN, "ipam.prefix"]);
        const updates = await t.json(
          "GET",
          `/api/core/object-changes/?changed_object_type=extras.tag&changed_object_id=${made.body.id}&action=update`,
        );
        const reverted = await answer(
          "POST",
          `/api/core/object-changes/${updates.body.results[0].id}/revert/`,
          who.attacker,
        );
        expect(reverted.startsWith("200"), reverted).toBe(true);
        expectUnnamed(reverted, "revert of an update");
        expect(await storedTypes(rev)).toEqual([HIDDEN, "dcim.site"]);
        const doomed = await t.json("POST", "/api/extras/tags/", {
          body: { name: "Doomed", slug: "doomed", object_types: [HIDDEN] },
        });
        const gone = await answer("DELETE", `/api/extras/tags/${doomed.body.id}/`, who.attacker);
        expect(gone.startsWith("204"), gone).toBe(true);
        const deletes = await t.json(
          "GET",
          `/api/core/object-changes/?changed_object_type=extras.tag&changed_object_id=${doomed.body.id}&action=delete`,
        );
        // it cannot be put back with a type the caller may not name: refused, naming none
        for (const query of ["?dry_run=true", ""]) {
          const restored = await answer(
            "POST",
            `/api/core/object-changes/${deletes.body.results[0].id}/revert/${query}`,
            who.attacker,
          );
          expect(restored.startsWith("409"), restored).toBe(true);
          expectUnnamed(restored, `revert of a delete${query}`);
        }
        // a superuser puts it back whole
        const whole = await t.json(
          "POST",
          `/api/core/object-changes/${deletes.body.results[0].id}/revert/`,
        );
        expect(whole.status, JSON.stringify(whole.body)).toBe(200);
        expect(await storedTypes(`/api/extras/tags/${doomed.body.id}/`)).toEqual([HIDDEN]);
      });

      test("an event rule's writer keeps its hidden types, and its answer names none", async () => {
        const path = `/api/extras/event-rules/${ids.rule}/`;
        const r = await answer("PATCH", path, who.attacker, { description: "mine now" });
        expect(r.startsWith("200"), r).toBe(true);
        expectUnnamed(r, "event rule PATCH");
        expect(await storedTypes(path)).toEqual([HIDDEN, "dcim.site"]);
      });
    });

    describe("callers who may see the type see it as before", () => {
      test("a superuser and a caller with a permission on the type", async () => {
        const path = `/api/extras/tags/${ids.tag}/`;
        expect(await storedTypes(path)).toContain(HIDDEN);
        const insider = await t.json("GET", path, { token: who.insider });
        expect(insider.body.object_types).toContain(HIDDEN);
        const types = await t.json("GET", `/api/core/object-types/${ids.secretType}/`, {
          token: who.insider,
        });
        expect(types.body.model).toBe(SLUG);
        const listed = await gql(who.insider, "{ tag_list { name object_types } }");
        expect(listed).toContain(HIDDEN);
      });
    });
  });
