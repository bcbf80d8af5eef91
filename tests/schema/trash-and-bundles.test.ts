/**
 * Issue 16: the schema trash (removed fields and types keep their data, restore, purge) and
 * whole documents (removed_types, unique_together, choice_sets, export round-trips). The trash
 * runs on a local file (transactions) and on a remote database (one read phase and one batch a
 * removal, restore or purge, decision 0120), whose round trips are counted.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { CountingProxy } from "../helpers/counting-proxy";
import { makeTestApp, type TestApp } from "../helpers/app";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { SCHEMA, doc } from "./helpers";
import { purgeExpiredTrash } from "../../src/plugins/custom-objects/schema/trash";
import { schemaApplyHandler } from "../../src/plugins/custom-objects/schema/jobs";
import { servicesOf } from "../../src/app";
import { jobs, users } from "../../src/db/schema";
import { eq } from "drizzle-orm";
import { JOB_RECORDED, JOB_SUPERSEDED } from "../../src/services/tasks/queue";
import { settleBeforeCounting } from "../helpers/settle";

const CO = "/api/plugins/custom-objects";
let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

/** The trash suite on a local file, or (`remote`) on a Hrana server behind a counting proxy. */
function trashSuite(backend: "local" | "remote") {
  describe(`trash (${backend})`, () => {
    let on: BackendApp;
    let t: TestApp;
    let proxy: CountingProxy | null = null;
    beforeAll(async () => {
      on = await appOn(backend, "trash-remote");
      ({ t, proxy } = on);
    });
    afterAll(() => on.close());
    /** Remote: `work` takes at most `most` round trips (warm caches). */
    const counted = async <T>(most: number, work: () => Promise<T>): Promise<T> => {
      // the deferred search-index flush of earlier writes (decision 0056) and the token's use
      // run off their requests: they are not the work's
      await settleBeforeCounting(t.app, () => t.json("GET", "/api/status/"), "admin");
      proxy?.reset();
      const out = await work();
      if (proxy) expect(proxy.count).toBeLessThanOrEqual(most);
      return out;
    };
    const names = async (query: string) =>
      (await t.deps.db.readRows(query, [])).rows.map((r) => String(r[0]));
    const apply = (body: unknown) => t.json("POST", `${SCHEMA}/apply/`, { body });
    const exportAll = async () => (await t.json("GET", `${SCHEMA}/export/`)).body;
    const tables = () =>
      names(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'trash__%' ORDER BY name",
      );
    const trash = async (query = "") => (await t.json("GET", `${SCHEMA}/trash/${query}`)).body;

    const box = (fields: unknown[], removed?: unknown[]) =>
      doc([{ name: "box", slug: "box", fields, ...(removed ? { removed_fields: removed } : {}) }]);
    const code = { id: 1, name: "code", type: "text" };
    const note = { id: 2, name: "note", type: "text" };
    const parts = { id: 3, name: "parts", type: "multiobject", related_object_type: "dcim/site" };

    test("a removed field goes to the trash with its data; restore brings it back intact", async () => {
      expect((await apply({ schema: box([code, note, parts]) })).status).toBe(200);
      const site = (
        await t.json("POST", "/api/dcim/sites/", { body: { name: "Box site", slug: "box-site" } })
      ).body;
      const made = await t.json("POST", `${CO}/box/`, {
        body: [
          { code: "B1", note: "keep me", parts: [site.id] },
          { code: "B2", note: "me too" },
          { code: "B3" },
        ],
      });
      expect(made.status).toBe(201);
      const refused = await apply({ schema: box([code], [note, parts]) });
      expect(refused.status).toBe(409);
      expect(refused.body.destructive_changes).toEqual([
        expect.objectContaining({ slug: "box", field: "note", reason: "field_removed", rows: 2 }),
        expect.objectContaining({ slug: "box", field: "parts", reason: "field_removed", rows: 1 }),
      ]);
      // remote: the token, the state, the counts with ids and rules, one batch (were 40 and more)
      const removed = await counted(4, () =>
        apply({ schema: box([code], [note, parts]), allow_destructive: true }),
      );
      expect(removed.status).toBe(200);
      expect(removed.body.trash).toEqual([]);
      const one = await t.json("GET", `${CO}/box/${made.body[0].id}/`);
      expect(one.body).not.toHaveProperty("note");
      expect(one.body).not.toHaveProperty("parts");

      expect((await t.json("GET", `${CO}/box/?q=keep%20me`)).body.count).toBe(0);
      const listed = await trash("?slug=box");
      expect(listed.count).toBe(2);
      const byName = Object.fromEntries(listed.results.map((r: any) => [r.name, r]));
      expect(byName.note).toMatchObject({
        kind: "field",
        custom_object_type: { slug: "box" },
        field: { name: "note", type: "text", schema_id: 2 },
        rows: 2,
      });
      expect(Date.parse(byName.note.expires) - Date.parse(byName.note.removed)).toBe(
        7 * 86_400_000,
      );

      for (const entry of listed.results)
        expect(
          (
            await counted(4, () =>
              t.json("POST", `${SCHEMA}/trash/${entry.id}/restore/`, {
                headers: { "X-Request-Id": `restore-${entry.id}` },
              }),
            )
          ).status,
        ).toBe(200);
      // the restores are in the change log: the fields come back as creates, the type as an update
      const logged = await t.json(
        "GET",
        `/api/core/object-changes/?request_id=restore-${byName.note.id}&ordering=id`,
      );
      expect(
        logged.body.results.map((r: any) => [r.changed_object_type, r.action.value, r.object_repr]),
      ).toEqual([
        ["custom_objects.customobjecttype", "update", expect.any(String)],
        ["custom_objects.customobjecttypefield", "create", "note"],
      ]);
      const back = await t.json("GET", `${CO}/box/?ordering=id`);
      expect(
        back.body.results.map((r: any) => [r.code, r.note, r.parts.map((p: any) => p.id)]),
      ).toEqual([
        ["B1", "keep me", [site.id]],
        ["B2", "me too", []],
        ["B3", null, []],
      ]);
      expect((await trash()).count).toBe(0);
      // search finds the restored values again (the full-text index follows the fields)
      expect(
        (await t.json("GET", `${CO}/box/?q=keep%20me`)).body.results.map((r: any) => r.code),
      ).toEqual(["B1"]);
      // the restored ids are live again: the export lists them as fields, not tombstones, and round-trips
      const exported = await exportAll();
      const entry = exported.types.find((x: any) => x.slug === "box");
      expect(entry.fields.map((f: any) => f.id)).toEqual([1, 2, 3]);
      expect(entry.removed_fields).toBeUndefined();
      const again = await apply({ schema: exported });
      expect(again.body.diffs.every((d: any) => !d.has_changes)).toBe(true);
    });

    test("purge: true drops at once; expired entries are purged by the scheduled job", async () => {
      expect(
        (await apply({ schema: box([code, parts], [note]), allow_destructive: true, purge: true }))
          .status,
      ).toBe(200);
      expect((await trash()).count).toBe(0);
      const cols = await names(
        "SELECT name FROM pragma_table_info((SELECT 'co_' || id FROM custom_object_types WHERE slug = 'box'))",
      );
      expect(cols.some((c) => c.startsWith("trash__") || c === "note")).toBe(false);

      expect(
        (await apply({ schema: box([code], [note, parts]), allow_destructive: true })).status,
      ).toBe(200);
      expect((await trash()).count).toBe(1);
      expect(await tables()).toHaveLength(1);
      expect(await purgeExpiredTrash(t.deps.db, { now: Date.now() + 6 * 86_400_000 })).toBe(0);
      expect(await purgeExpiredTrash(t.deps.db, { now: Date.now() + 8 * 86_400_000 })).toBe(1);
      expect((await trash()).count).toBe(0);
      expect(await tables()).toEqual([]);
    });

    test("removed_types: gated with its row count, then to the trash; restore brings the type and rows back", async () => {
      expect(
        (
          await apply({
            schema: doc([
              {
                name: "crate",
                slug: "crate",
                fields: [code, { id: 2, name: "tags_ok", type: "integer" }],
              },
            ]),
          })
        ).status,
      ).toBe(200);
      await t.json("POST", `${CO}/crate/`, {
        body: [
          { code: "C1", tags_ok: 1 },
          { code: "C2", tags_ok: 2 },
        ],
      });
      const body = { schema_version: "1", types: [], removed_types: [{ slug: "crate" }] };
      const p = await t.json("POST", `${SCHEMA}/preview/`, { body });
      expect(p.body.diffs).toEqual([expect.objectContaining({ slug: "crate", removed: true })]);
      expect(p.body.destructive_changes).toEqual([
        expect.objectContaining({ slug: "crate", field: null, reason: "type_removed", rows: 2 }),
      ]);
      expect((await apply(body)).status).toBe(409);
      expect((await t.req("GET", `${CO}/crate/`)).status).toBe(200);
      const removed = await counted(4, () =>
        apply({ schema: body, allow_destructive: true, plan_id: p.body.plan_id }),
      );
      expect(removed.status).toBe(200);
      expect(removed.body.trash).toHaveLength(1);
      expect((await t.req("GET", `${CO}/crate/`)).status).toBe(404);
      // the export keeps the removal, and re-applying it changes nothing
      const exported = await exportAll();
      expect(exported.removed_types).toEqual([{ slug: "crate" }]);
      expect((await apply({ schema: exported })).body.diffs.every((d: any) => !d.has_changes)).toBe(
        true,
      );

      const restored = await counted(4, () =>
        t.json("POST", `${SCHEMA}/trash/${removed.body.trash[0]}/restore/`),
      );
      expect(restored.status).toBe(200);
      const rows = await t.json("GET", `${CO}/crate/?ordering=id`);
      expect(rows.body.results.map((r: any) => [r.code, r.tags_ok])).toEqual([
        ["C1", 1],
        ["C2", 2],
      ]);
      // an empty type is gated too (seed rule, decision 0075): 409 with rows 0, then allowed
      expect(
        (await apply({ schema: doc([{ name: "empty_one", slug: "empty_one", fields: [] }]) }))
          .status,
      ).toBe(200);
      const emptyRemoval = {
        schema_version: "1",
        types: [],
        removed_types: [{ slug: "empty_one" }],
      };
      const gated = await apply(emptyRemoval);
      expect(gated.status).toBe(409);
      expect(gated.body.destructive_slugs).toEqual(["empty_one"]);
      expect(gated.body.destructive_changes).toEqual([
        expect.objectContaining({ slug: "empty_one", reason: "type_removed", rows: 0 }),
      ]);
      expect((await t.json("GET", `${CO}/custom-object-types/?slug=empty_one`)).body.count).toBe(1);
      expect((await apply({ schema: emptyRemoval, allow_destructive: true })).status).toBe(200);
    });

    test("a restore that would clash answers 409; unknown ids 404; listing needs permission", async () => {
      const spare = { id: 4, name: "spare", type: "text" };
      expect((await apply({ schema: box([code, spare], [note, parts]) })).status).toBe(200);
      await t.json("POST", `${CO}/box/`, { body: { code: "S1", spare: "x" } });
      expect(
        (await apply({ schema: box([code], [note, parts, spare]), allow_destructive: true }))
          .status,
      ).toBe(200);
      const [entry] = (await trash("?slug=box")).results.filter((r: any) => r.name === "spare");
      expect(
        (
          await apply({
            schema: box([code, { id: 5, name: "spare", type: "integer" }], [note, parts, spare]),
          })
        ).status,
      ).toBe(200);
      const clash = await t.json("POST", `${SCHEMA}/trash/${entry.id}/restore/`);
      expect(clash.status).toBe(409);
      expect(clash.body.error).toBe("restore_conflict");
      expect((await t.json("POST", `${SCHEMA}/trash/987654/restore/`)).status).toBe(404);
      expect(
        (await t.json("GET", `${SCHEMA}/trash/`, { token: await t.user("nobody") })).status,
      ).toBe(403);
    });
  });
}
trashSuite("local");
trashSuite("remote");

const apply = (body: unknown) => t.json("POST", `${SCHEMA}/apply/`, { body });

describe("whole documents", () => {
  const bundle = () => ({
    schema_version: "1",
    choice_sets: [
      {
        name: "rack-roles",
        extra_choices: [
          ["edge", "Edge"],
          ["core", "Core"],
        ],
      },
    ],
    types: [
      {
        name: "rack_slot",
        slug: "rack_slot",
        unique_together: [["rack", "position"]],
        fields: [
          { id: 1, name: "rack", type: "text" },
          { id: 2, name: "position", type: "integer" },
          { id: 3, name: "role", type: "select", choice_set: "rack-roles" },
        ],
      },
    ],
  });

  test("choice sets are created with the document; unique_together is a unique index with a 400; export round-trips", async () => {
    const r = await apply({ schema: bundle() });
    expect(r.status).toBe(200);
    const sets = await t.json("GET", "/api/extras/custom-field-choice-sets/?name=rack-roles");
    expect(sets.body.results[0].extra_choices).toEqual([
      ["edge", "Edge"],
      ["core", "Core"],
    ]);
    expect(
      (
        await t.json("POST", `${CO}/rack_slot/`, {
          body: { rack: "R1", position: 1, role: "edge" },
        })
      ).status,
    ).toBe(201);
    expect(
      (await t.json("POST", `${CO}/rack_slot/`, { body: { rack: "R1", position: 2 } })).status,
    ).toBe(201);
    const dup = await t.json("POST", `${CO}/rack_slot/`, { body: { rack: "R1", position: 1 } });
    expect(dup.status).toBe(400);
    expect(dup.body).toEqual({
      position: ["The fields position, rack must make a unique set."],
      rack: ["The fields position, rack must make a unique set."],
    });

    const exported = (await t.json("GET", `${SCHEMA}/export/?slug=rack_slot`)).body;
    expect(exported.types[0].unique_together).toEqual([["position", "rack"]]);
    expect(exported.choice_sets).toEqual([
      {
        name: "rack-roles",
        extra_choices: [
          ["edge", "Edge"],
          ["core", "Core"],
        ],
      },
    ]);
    const again = await apply({ schema: exported });
    expect(again.status).toBe(200);
    expect(again.body.diffs.every((d: any) => !d.has_changes)).toBe(true);
  });

  test("a choice set dropping a value in use is gated; unique_together over duplicates is gated, then a 400", async () => {
    const narrowed = {
      ...bundle(),
      choice_sets: [{ name: "rack-roles", extra_choices: [["core", "Core"]] }],
    };
    const r = await apply({ schema: narrowed });
    expect(r.status).toBe(409);
    expect(r.body.destructive_changes).toEqual([
      expect.objectContaining({
        slug: "rack_slot",
        field: "role",
        reason: "choices_in_use",
        rows: 1,
      }),
    ]);

    const loose = { ...bundle(), types: [{ ...bundle().types[0], unique_together: [] }] };
    expect((await apply({ schema: loose })).status).toBe(200);
    expect(
      (await t.json("POST", `${CO}/rack_slot/`, { body: { rack: "R1", position: 1 } })).status,
    ).toBe(201);
    const tight = await apply({ schema: bundle() });
    expect(tight.status).toBe(409);
    expect(tight.body.destructive_changes).toEqual([
      expect.objectContaining({
        slug: "rack_slot",
        field: "position,rack",
        reason: "unique_over_duplicates",
        rows: 2,
      }),
    ]);
    const forced = await apply({ schema: bundle(), allow_destructive: true });
    expect(forced.status).toBe(400);
    expect(forced.body.schema_errors[0].path).toContain("$.types[0].unique_together");
  });

  test("unique_together over REST: set, 400 on unknown fields or duplicates, follows renames and removals", async () => {
    const cot = (await t.json("GET", `${CO}/custom-object-types/?slug=rack_slot`)).body.results[0];
    const url = `${CO}/custom-object-types/${cot.id}/`;
    expect(
      (await t.json("PATCH", url, { body: { unique_together: [["rack", "nope"]] } })).body,
    ).toEqual({ unique_together: ['"nope" is not a field of this type.'] });
    // rows R1/1 repeat (previous test): the key cannot be built
    const dup = await t.json("PATCH", url, { body: { unique_together: [["rack", "position"]] } });
    expect(dup.status).toBe(400);
    expect(dup.body.unique_together[0]).toContain("share values of position, rack");
    const ok = await t.json("PATCH", url, { body: { unique_together: [["role", "rack"]] } });
    expect(ok.status).toBe(200);
    expect(ok.body.unique_together).toEqual([["rack", "role"]]);
    expect(
      (await t.json("POST", `${CO}/rack_slot/`, { body: { rack: "R9", role: "core" } })).status,
    ).toBe(201);
    expect(
      (await t.json("POST", `${CO}/rack_slot/`, { body: { rack: "R9", role: "core" } })).body,
    ).toHaveProperty("role");
    const role = cot.fields.find((f: any) => f.name === "role");
    expect(
      (
        await t.json("PATCH", `${CO}/custom-object-type-fields/${role.id}/`, {
          body: { name: "duty" },
        })
      ).status,
    ).toBe(200);
    expect((await t.json("GET", url)).body.unique_together).toEqual([["duty", "rack"]]);
    expect((await t.req("DELETE", `${CO}/custom-object-type-fields/${role.id}/`)).status).toBe(204);
    expect((await t.json("GET", url)).body.unique_together).toEqual([]);
  });

  test("a column of a compound key can be retyped (document and REST) and the key still holds", async () => {
    const d = (type: string) =>
      doc([
        {
          name: "pairing",
          slug: "pairing",
          unique_together: [["a", "b"]],
          fields: [
            { id: 1, name: "a", type: "text" },
            { id: 2, name: "b", type },
          ],
        },
      ]);
    expect((await apply({ schema: d("integer") })).status).toBe(200);
    expect((await t.json("POST", `${CO}/pairing/`, { body: { a: "x", b: 1 } })).status).toBe(201);
    const retyped = await apply({ schema: d("text") });
    expect(retyped.status).toBe(200);
    expect((await t.json("POST", `${CO}/pairing/`, { body: { a: "x", b: "1" } })).status).toBe(400);
    const cot = (await t.json("GET", `${CO}/custom-object-types/?slug=pairing`)).body.results[0];
    const b = cot.fields.find((f: any) => f.name === "b");
    expect(
      (
        await t.json("PATCH", `${CO}/custom-object-type-fields/${b.id}/`, {
          body: { type: "integer" },
        })
      ).status,
    ).toBe(200);
    expect((await t.json("POST", `${CO}/pairing/`, { body: { a: "x", b: 1 } })).status).toBe(400);
    expect((await t.json("POST", `${CO}/pairing/`, { body: { a: "x", b: 2 } })).status).toBe(201);
  });

  test("a blank choice set name is refused as the REST API refuses it", async () => {
    const sets = "/api/extras/custom-field-choice-sets/";
    const rest = await t.json("POST", sets, { body: { name: " ", extra_choices: [["a", "A"]] } });
    expect(rest.status).toBe(400);
    expect(rest.body).toEqual({ name: ["This field may not be blank."] });
    const before = (await t.json("GET", sets)).body.count;
    for (const name of [" ", ""]) {
      const blank = {
        schema_version: "1",
        choice_sets: [{ name, extra_choices: [["a", "A"]] }],
        types: [],
      };
      const r = await apply({ schema: blank });
      expect({ name, status: r.status }).toEqual({ name, status: 400 });
      expect(r.body.schema_errors).toEqual([
        { path: "$.choice_sets[0].name", message: "This field may not be blank." },
      ]);
    }
    expect((await t.json("GET", sets)).body.count).toBe(before);
  });

  test("a choice set's name is trimmed by documents as by the REST API, so both store one name", async () => {
    const sets = "/api/extras/custom-field-choice-sets/";
    const typeId = async (slug: string) =>
      (await t.json("GET", `${CO}/custom-object-types/?slug=${slug}`)).body.results[0].id;
    const named = async (name: string) =>
      (await t.json("GET", `${sets}?name=${encodeURIComponent(name)}`)).body.results;
    const long = "l".repeat(100);
    for (const name of ["  padded rest ", ` ${long} `]) {
      const r = await t.json("POST", sets, { body: { name, extra_choices: [["a", "A"]] } });
      expect({ name, status: r.status }).toEqual({ name, status: 201 });
      expect(r.body.name).toBe(name.trim());
    }
    // the same spellings through a document; a field names its set as spelt in the document
    const padded = {
      schema_version: "1",
      choice_sets: [
        { name: "  padded doc ", extra_choices: [["a", "A"]] },
        { name: `\t${long.replace(/l/g, "m")}\n`, extra_choices: [["b", "B"]] },
      ],
      types: [
        {
          name: "padded_user",
          slug: "padded_user",
          fields: [{ id: 1, name: "pick", type: "select", choice_set: "  padded doc " }],
        },
      ],
    };
    const r = await apply({ schema: padded });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect((await named("padded doc")).map((c: { name: string }) => c.name)).toEqual([
      "padded doc",
    ]);
    expect(await named(long.replace(/l/g, "m"))).toHaveLength(1);
    const exported = await t.json("GET", `${SCHEMA}/export/?slug=padded_user`);
    expect(exported.body.types[0].fields[0].choice_set).toBe("padded doc");
    // REST's by-name spelling of a field's set is trimmed too
    const field = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: {
        custom_object_type: await typeId("padded_user"),
        name: "pick_rest",
        type: "select",
        choice_set: " padded rest  ",
      },
    });
    expect(field.status, JSON.stringify(field.body)).toBe(201);
    expect(field.body.choice_set.name).toBe("padded rest");
    // the trimmed spelling is the one set: a document naming it either way changes nothing
    const again = await apply({ schema: { ...padded, choice_sets: [padded.choice_sets[0]!] } });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(await named("  padded doc ")).toHaveLength(0);
    // two spellings of one name in a document are one name said twice
    const twice = await apply({
      schema: {
        schema_version: "1",
        types: [],
        choice_sets: [
          { name: "dup", extra_choices: [["a", "A"]] },
          { name: " dup", extra_choices: [["a", "A"]] },
        ],
      },
    });
    expect(twice.status).toBe(400);
    expect(twice.body.schema_errors).toEqual([
      { path: "$.choice_sets[1].name", message: 'duplicate choice set "dup"' },
    ]);
  });

  test("a refused document creates no choice set", async () => {
    const failing = {
      schema_version: "1",
      choice_sets: [{ name: "never-made", extra_choices: [["a", "A"]] }],
      types: [
        {
          name: "ghost",
          slug: "ghost",
          fields: [
            { id: 1, name: "x", type: "object", related_object_type: "custom-objects/nowhere" },
          ],
        },
      ],
    };
    expect((await apply({ schema: failing })).status).toBe(400);
    expect(
      (await t.json("GET", "/api/extras/custom-field-choice-sets/?name=never-made")).body.count,
    ).toBe(0);
  });
});

describe("background progress and outcome (decision 0189)", () => {
  /** A job row as the queue's claim leaves it at `attempts`, and a document of one new type. */
  async function claimed(attempts: number, slug: string) {
    const [admin] = await t.deps.db.orm.select().from(users).where(eq(users.username, "admin"));
    const [job] = await t.deps.db.orm
      .insert(jobs)
      .values({ name: "schema.apply", status: "running", userId: admin!.id, attempts })
      .returning();
    const body = {
      schema: doc([
        {
          name: slug,
          slug,
          fields: [
            { id: 1, name: "a", type: "text" },
            { id: 2, name: "b", type: "text" },
          ],
        },
      ]),
    };
    const payload = { body, query: "", base_url: "http://host.test", request_id: `job-${slug}` };
    const run = (attempt: number) =>
      schemaApplyHandler(servicesOf(t.app))(payload, {
        id: job!.id,
        name: "schema.apply",
        attempt,
        maxAttempts: 2,
        userId: admin!.id,
        idempotencyKey: "k",
      });
    const row = async () =>
      (await t.deps.db.orm.select().from(jobs).where(eq(jobs.id, job!.id)))[0]!;
    const made = async () =>
      (await t.json("GET", `${CO}/custom-object-types/?slug=${slug}`)).body.count as number;
    return { payload, run, row, made };
  }

  test("the claim's data says what the job applies: the handler's claimData", async () => {
    const { payload } = await claimed(1, "progressed");
    expect(schemaApplyHandler(servicesOf(t.app)).claimData!(payload)).toEqual({
      progress: {
        phase: "applying",
        types: 1,
        removed_types: 0,
        fields: 2,
        started: expect.any(String),
      },
    });
  });

  test("the apply records the job completed in its own write: the worker writes nothing more", async () => {
    const job = await claimed(1, "recorded");
    expect(await job.run(1)).toBe(JOB_RECORDED);
    const row = await job.row();
    expect({ status: row.status, data: row.data }).toEqual({
      status: "completed",
      data: { status_code: 200, applied: true, diffs: expect.any(Array), trash: [] },
    });
    expect(await job.made()).toBe(1);
  });

  test("a copy whose attempt moved on (re-queued by the reaper) applies nothing and records nothing", async () => {
    const job = await claimed(2, "superseded");
    expect(await job.run(1)).toBe(JOB_SUPERSEDED);
    expect(await job.made()).toBe(0);
    const row = await job.row();
    expect({ status: row.status, attempts: row.attempts, data: row.data }).toEqual({
      status: "running",
      attempts: 2,
      data: null,
    });
  });
});
