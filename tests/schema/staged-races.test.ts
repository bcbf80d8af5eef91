/**
 * Removals through the schema trash, restores, purges and cascades deeper than one read (decision
 * 0120) and a field's type change (decisions 0121, 0135) raced on a remote database, over HTTP: the app on the project's Hrana server through a proxy that holds the write
 * batch until another write has landed between its read and its batch. The batch's guards catch
 * the race: nothing is lost, nothing half-done.
 */
import { expect, test } from "bun:test";
import { remoteAppForFile } from "../helpers/remote-db";
import { userWith } from "../helpers/grants";
import { waitFor } from "../helpers/wait";
import { addField, CO, create, makeCot, namedCot } from "../custom-objects/fixtures";
import { SCHEMA, doc } from "./helpers";

const on = remoteAppForFile("trash-races");

const apply = (body: unknown) => on.t.json("POST", `${SCHEMA}/apply/`, { body });

/**
 * Runs `write` with its first batch matching `match` held until `meanwhile` has answered (a
 * success), then lets it go; answers `write`'s answer.
 */
async function raced(
  match: RegExp,
  write: () => Promise<{ status: number; body: any }>,
  meanwhile: () => Promise<{ status: number; body: any }>,
) {
  on.proxy.hold((statements) => statements.some((s) => match.test(s)));
  try {
    const writing = write();
    await waitFor(() => on.proxy.held >= 1, { message: () => `${on.proxy.held} batches held` });
    const between = await meanwhile();
    expect(between.status, JSON.stringify(between.body)).toBeLessThan(300);
    on.proxy.release();
    return await writing;
  } finally {
    on.proxy.release();
  }
}

/** The restore of `slug`'s trash entry (as `token`, else the superuser) raced by its purge. */
async function restoreRacedByPurge(slug: string, token?: string) {
  const [entry] = (await on.t.json("GET", `${SCHEMA}/trash/?slug=${slug}`)).body.results;
  return raced(
    /^insert into "custom_object_type_fields"/i,
    () => on.t.json("POST", `${SCHEMA}/trash/${entry.id}/restore/`, { token }),
    () =>
      on.t
        .req("DELETE", `${SCHEMA}/trash/${entry.id}/`)
        .then((r) => ({ status: r.status, body: null })),
  );
}

let serial = 0;
/** A type `slug` with a text field and one object; answers the object's id. */
async function typeWithObject(slug: string) {
  const made = await apply({
    schema: doc([{ name: slug, slug, fields: [{ id: 1, name: "code", type: "text" }] }]),
  });
  expect(made.status, JSON.stringify(made.body)).toBe(200);
  return (await create(on.t, slug, { code: `${slug}-1` })).id as number;
}

const removal = (slug: string) => ({
  schema: { schema_version: "1", types: [], removed_types: [{ slug }] },
  allow_destructive: true,
});

test("a type removed while another type gains a field pointing at it: 409 protected, both stay", async () => {
  const slug = `target_${++serial}`;
  const object = await typeWithObject(slug);
  const other = `pointer_${serial}`;
  await typeWithObject(other);
  const otherId = (await on.t.json("GET", `${CO}/custom-object-types/?slug=${other}`)).body
    .results[0].id;
  const removed = await raced(
    /^insert into "custom_object_trash"/i,
    () => apply(removal(slug)),
    () =>
      on.t.json("POST", `${CO}/custom-object-type-fields/`, {
        body: {
          custom_object_type: otherId,
          name: "target",
          type: "object",
          related_object_type: `custom_objects.${slug}`,
        },
      }),
  );
  // the batch failed (the new field's foreign key), the apply read again and found the pointer
  expect(removed.status, JSON.stringify(removed.body)).toBe(409);
  expect(removed.body.error).toBe("protected");
  expect((await on.t.json("GET", `${CO}/${slug}/${object}/`)).status).toBe(200);
  expect((await on.t.json("GET", `${SCHEMA}/trash/?slug=${slug}`)).body.count).toBe(0);
});

test("a type removed while one of its objects is tagged: the tag goes to the trash and comes back", async () => {
  const slug = `tagged_${++serial}`;
  const object = await typeWithObject(slug);
  const tag = await on.t.json("POST", "/api/extras/tags/", {
    body: { name: `late ${serial}`, slug: `late-${serial}` },
  });
  expect(tag.status).toBe(201);
  const removed = await raced(
    /^insert into "custom_object_trash"/i,
    () => apply(removal(slug)),
    () => on.t.json("PATCH", `${CO}/${slug}/${object}/`, { body: { tags: [tag.body.id] } }),
  );
  // the tag guard failed the first batch; the apply ran again from a fresh read
  expect(removed.status, JSON.stringify(removed.body)).toBe(200);
  expect((await on.t.req("GET", `${CO}/${slug}/`)).status).toBe(404);
  const restored = await on.t.json("POST", `${SCHEMA}/trash/${removed.body.trash[0]}/restore/`);
  expect(restored.status, JSON.stringify(restored.body)).toBe(200);
  const back = await on.t.json("GET", `${CO}/${slug}/${object}/`);
  expect(back.body.tags.map((x: { id: number }) => x.id)).toEqual([tag.body.id]);
});

test("a restore raced by a purge of the same entry: the purge wins, the restore answers 409, nothing half-restored", async () => {
  const slug = `bin_${++serial}`;
  const object = await typeWithObject(slug);
  await on.t.json("PATCH", `${CO}/${slug}/${object}/`, { body: {} });
  const fields = [{ id: 1, name: "code", type: "text" }];
  const withNote = doc([
    { name: slug, slug, fields: [...fields, { id: 2, name: "note", type: "text" }] },
  ]);
  expect((await apply({ schema: withNote })).status).toBe(200);
  await on.t.json("PATCH", `${CO}/${slug}/${object}/`, { body: { note: "kept" } });
  const gone = await apply({
    schema: doc([{ name: slug, slug, fields, removed_fields: [{ id: 2, name: "note" }] }]),
    allow_destructive: true,
  });
  expect(gone.status).toBe(200);
  const restore = await restoreRacedByPurge(slug);
  expect(restore.status, JSON.stringify(restore.body)).toBe(409);
  expect(restore.body.error).toBe("write_conflict");
  const after = await on.t.json("GET", `${CO}/${slug}/${object}/`);
  expect(after.body).not.toHaveProperty("note");
  expect((await on.t.json("GET", `${SCHEMA}/trash/?slug=${slug}`)).body.count).toBe(0);
  const type = await on.t.json("GET", `${CO}/custom-object-types/?slug=${slug}`);
  expect(type.body.results[0].fields.map((f: { name: string }) => f.name)).toEqual(["code"]);
});

test("a field retyped while one of its values is written: 409, the value and the type stay", async () => {
  const cot = await makeCot(on.t, `retype_${++serial}`);
  const field = await addField(on.t, cot.id, { name: "count", type: "text" });
  const object = (await create(on.t, `retype_${serial}`, { count: "12" })).id;
  const retyped = await raced(
    /^alter table "co_\d+" add column "count__retype"/i,
    () =>
      on.t.json("PATCH", `${CO}/custom-object-type-fields/${field.id}/`, {
        body: { type: "integer" },
      }),
    () => on.t.json("PATCH", `${CO}/retype_${serial}/${object}/`, { body: { count: "thirteen" } }),
  );
  expect(retyped.status, JSON.stringify(retyped.body)).toBe(409);
  expect(retyped.body.error).toBe("write_conflict");
  expect((await on.t.json("GET", `${CO}/retype_${serial}/${object}/`)).body.count).toBe("thirteen");
  const kept = await on.t.json("GET", `${CO}/custom-object-type-fields/${field.id}/`);
  expect(kept.body.type).toBe("text");
});

test("a retype and rename of a compound key's column while one of its values is written: the key's 400 of the values as written, nothing changed (0135, 0199)", async () => {
  const slug = `keyed_retype_${++serial}`;
  const cot = await makeCot(on.t, slug);
  const code = await addField(on.t, cot.id, { name: "code", type: "text" });
  await addField(on.t, cot.id, { name: "rack", type: "text" });
  const keyed = await on.t.json("PATCH", `${CO}/custom-object-types/${cot.id}/`, {
    body: { unique_together: [["code", "rack"]] },
  });
  expect(keyed.status, JSON.stringify(keyed.body)).toBe(200);
  await create(on.t, slug, { code: "1", rack: "a" });
  const other = (await create(on.t, slug, { code: "2", rack: "a" })).id;
  // "01" written meanwhile clashes with "1" once converted; the database converts the values as
  // they are when the batch runs (0199): the answer is the one a retype sent after that write gets
  const retyped = await raced(
    /^alter table "co_\d+" add column "code__retype"/i,
    () =>
      on.t.json("PATCH", `${CO}/custom-object-type-fields/${code.id}/`, {
        body: { name: "unit", type: "integer" },
      }),
    () => on.t.json("PATCH", `${CO}/${slug}/${other}/`, { body: { code: "01" } }),
  );
  expect(retyped.status, JSON.stringify(retyped.body)).toBe(400);
  expect(retyped.body.unique_together[0]).toContain("rack, unit");
  expect((await on.t.json("GET", `${CO}/${slug}/${other}/`)).body.code).toBe("01");
  const kept = await on.t.json("GET", `${CO}/custom-object-type-fields/${code.id}/`);
  expect([kept.body.name, kept.body.type]).toEqual(["code", "text"]);
  const type = await on.t.json("GET", `${CO}/custom-object-types/${cot.id}/`);
  expect(type.body.unique_together).toEqual([["code", "rack"]]);
  expect(
    (await on.t.json("POST", `${CO}/${slug}/`, { body: { code: "1", rack: "a" } })).status,
  ).toBe(400);
});

test("a schema apply retyping a field while one of its values is written: the apply reruns and carries it, or 409 when it no longer converts (0126)", async () => {
  const slug = `apply_retype_${++serial}`;
  const schema = (type: string) => ({
    schema: doc([{ name: slug, slug, fields: [{ id: 1, name: "count", type }] }]),
  });
  expect((await apply(schema("text"))).status).toBe(200);
  const object = (await create(on.t, slug, { count: "12" })).id;
  const retype = /^alter table "co_\d+" add column "count__retype"/i;
  // a value that converts: the batch's guard fails, the apply reads again and carries 13
  const carried = await raced(
    retype,
    () => apply(schema("integer")),
    () => on.t.json("PATCH", `${CO}/${slug}/${object}/`, { body: { count: "13" } }),
  );
  expect(carried.status, JSON.stringify(carried.body)).toBe(200);
  expect((await on.t.json("GET", `${CO}/${slug}/${object}/`)).body.count).toBe(13);
  // back to text, then a value written meanwhile that does not convert: the rerun's gate answers
  expect((await apply(schema("text"))).status).toBe(200);
  const refused = await raced(
    retype,
    () => apply(schema("integer")),
    () => on.t.json("PATCH", `${CO}/${slug}/${object}/`, { body: { count: "thirteen" } }),
  );
  expect(refused.status, JSON.stringify(refused.body)).toBe(409);
  expect(refused.body.error).toBe("destructive_changes");
  expect((await on.t.json("GET", `${CO}/${slug}/${object}/`)).body.count).toBe("thirteen");
  const exported = await on.t.json("GET", `${SCHEMA}/export?slug=${slug}`);
  expect(exported.body.types[0].fields[0].type).toBe("text");
});

test("an apply renaming a field and keying it raced by a row that breaks the key: reruns, the gate's 409, nothing written (0136)", async () => {
  const slug = `berth_${++serial}`;
  const schema = (name: string, together: string[][]) => ({
    schema: doc([
      {
        name: slug,
        slug,
        fields: [
          { id: 1, name: "dock", type: "integer" },
          { id: 2, name, type: "integer" },
        ],
        unique_together: together,
      },
    ]),
  });
  expect((await apply(schema("slot", []))).status).toBe(200);
  await create(on.t, slug, { dock: 1, slot: 1 });
  // the batch's index over the new name refuses the row written meanwhile; the rerun counts it
  const refused = await raced(
    /^create unique index/i,
    () => apply(schema("bay", [["dock", "bay"]])),
    () => on.t.json("POST", `${CO}/${slug}/`, { body: { dock: 1, slot: 1 } }),
  );
  expect(refused.status, JSON.stringify(refused.body)).toBe(409);
  expect(refused.body.destructive_changes).toEqual([
    expect.objectContaining({ reason: "unique_over_duplicates", rows: 2 }),
  ]);
  const exported = (await on.t.json("GET", `${SCHEMA}/export?slug=${slug}`)).body.types[0];
  expect(exported.fields.map((f: { name: string }) => f.name)).toEqual(["dock", "slot"]);
  expect(exported.unique_together ?? []).toEqual([]);
});

test("a schema apply retyping two fields under a compound key and a check while one value is written: reruns and carries it, or 409 (0135)", async () => {
  const slug = `apply_retypes_${++serial}`;
  const schema = (type: string) => ({
    schema: doc([
      {
        name: slug,
        slug,
        fields: [
          { id: 1, name: "code", type },
          { id: 2, name: "rack", type: "text" },
          { id: 3, name: "depth", type },
        ],
        unique_together: [["code", "rack"]],
        checks: [{ name: "deep", condition: { depth__isnull: false } }],
      },
    ]),
  });
  expect((await apply(schema("text"))).status).toBe(200);
  await create(on.t, slug, { code: "1", rack: "a", depth: "3" });
  const object = (await create(on.t, slug, { code: "2", rack: "a", depth: "4" })).id;
  // held on the second column's statements: both are in the one batch
  const retype = /^alter table "co_\d+" add column "depth__retype"/i;
  const carried = await raced(
    retype,
    () => apply(schema("integer")),
    () => on.t.json("PATCH", `${CO}/${slug}/${object}/`, { body: { depth: "7" } }),
  );
  expect(carried.status, JSON.stringify(carried.body)).toBe(200);
  const row = (await on.t.json("GET", `${CO}/${slug}/${object}/`)).body;
  expect([row.code, row.depth]).toEqual([2, 7]);
  expect((await apply(schema("text"))).status).toBe(200);
  // a value that no longer converts: the rerun's gate answers, nothing changed
  const refused = await raced(
    retype,
    () => apply(schema("integer")),
    () => on.t.json("PATCH", `${CO}/${slug}/${object}/`, { body: { depth: "seven" } }),
  );
  expect(refused.status, JSON.stringify(refused.body)).toBe(409);
  expect(refused.body.error).toBe("destructive_changes");
  const kept = (await on.t.json("GET", `${CO}/${slug}/${object}/`)).body;
  expect([kept.code, kept.depth]).toEqual(["2", "seven"]);
  const exported = await on.t.json("GET", `${SCHEMA}/export?slug=${slug}`);
  expect(exported.body.types[0].fields.map((f: any) => f.type)).toEqual(["text", "text", "text"]);
});

test("a cascade six levels deep raced by a new dependant at the bottom: 409, nothing deleted", async () => {
  const cascade = (to: string) => ({ to, onDelete: "cascade" as const });
  const top = await namedCot(on.t, "chain0");
  for (let i = 1; i <= 6; i++)
    await namedCot(on.t, `chain${i}`, { up: cascade(`custom_objects.chain${i - 1}`) });
  const ids = [(await create(on.t, "chain0", { name: "root" })).id as number];
  for (let i = 1; i <= 6; i++)
    ids.push((await create(on.t, `chain${i}`, { name: `n${i}`, up: ids[i - 1] })).id);
  // a first delete of another chain learns the fields pointing at each type
  const warm = [(await create(on.t, "chain0", { name: "warm" })).id as number];
  for (let i = 1; i <= 6; i++)
    warm.push((await create(on.t, `chain${i}`, { name: `w${i}`, up: warm[i - 1] })).id);
  expect((await on.t.req("DELETE", `${CO}/chain0/${warm[0]}/`)).status).toBe(204);
  let late = 0;
  const deleted = await raced(
    new RegExp(`^delete from "co_${top.id}"`, "i"),
    () => on.t.json("DELETE", `${CO}/chain0/${ids[0]}/`),
    async () => {
      const r = await on.t.json("POST", `${CO}/chain6/`, { body: { name: "late", up: ids[5] } });
      late = r.body.id;
      return r;
    },
  );
  expect(deleted.status, JSON.stringify(deleted.body)).toBe(409);
  expect(deleted.body.error).toBe("write_conflict");
  for (let i = 0; i <= 6; i++)
    expect((await on.t.req("GET", `${CO}/chain${i}/${ids[i]}/`)).status).toBe(200);
  // and then it goes through, the late one with it
  expect((await on.t.req("DELETE", `${CO}/chain0/${ids[0]}/`)).status).toBe(204);
  expect((await on.t.req("GET", `${CO}/chain6/${late}/`)).status).toBe(404);
});

test("a constrained caller's apply raced by a change moving the type out of their constraints: reruns, 403, nothing written (0128)", async () => {
  const slug = `ok_race_${++serial}`;
  const code = { id: 1, name: "code", type: "text" };
  const typed = (fields: unknown[]) => doc([{ name: slug, slug, group_name: "lab", fields }]);
  expect((await apply({ schema: typed([code]) })).status).toBe(200);
  const token = (
    await userWith(on.t, `racer_${serial}`, [
      [["view"], "custom_objects.customobjecttype", null],
      [["add"], "custom_objects.customobjecttype", { slug__startswith: "ok" }],
      [["view", "add", "change"], "custom_objects.customobjecttypefield", null],
      [
        ["change"],
        "custom_objects.customobjecttype",
        { slug__startswith: "ok", group_name: "lab" },
      ],
    ])
  ).token;
  const id = (await on.t.json("GET", `${CO}/custom-object-types/?slug=${slug}`)).body.results[0].id;
  const grown = await raced(
    /ADD COLUMN "extra"/i,
    () =>
      on.t.json("POST", `${SCHEMA}/apply/`, {
        token,
        body: { schema: typed([code, { id: 2, name: "extra", type: "text" }]) },
      }),
    () => on.t.json("PATCH", `${CO}/custom-object-types/${id}/`, { body: { group_name: "prod" } }),
  );
  expect(grown.status, JSON.stringify(grown.body)).toBe(403);
  expect(grown.body.detail).toContain(`change the custom object type(s) ${slug}`);
  const type = (await on.t.json("GET", `${CO}/custom-object-types/${id}/`)).body;
  expect(type.group_name).toBe("prod");
  expect(type.fields.map((f: { name: string }) => f.name)).toEqual(["code"]);
});

test("a constrained caller's restore raced by a purge: the race's 409, not a refusal (0128)", async () => {
  const slug = `ok_bin_${++serial}`;
  const fields = [{ id: 1, name: "code", type: "text" }];
  const note = { id: 2, name: "note", type: "text" };
  expect(
    (await apply({ schema: doc([{ name: slug, slug, fields: [...fields, note] }]) })).status,
  ).toBe(200);
  const gone = await apply({
    schema: doc([{ name: slug, slug, fields, removed_fields: [note] }]),
    allow_destructive: true,
  });
  expect(gone.status).toBe(200);
  const token = (
    await userWith(on.t, `binner_${serial}`, [
      [["view", "add"], "custom_objects.customobjecttype", null],
      [["change"], "custom_objects.customobjecttype", { slug__startswith: "ok" }],
    ])
  ).token;
  const restore = await restoreRacedByPurge(slug, token);
  expect(restore.status, JSON.stringify(restore.body)).toBe(409);
  expect(restore.body.error).toBe("write_conflict");
  const type = await on.t.json("GET", `${CO}/custom-object-types/?slug=${slug}`);
  expect(type.body.results[0].fields.map((f: { name: string }) => f.name)).toEqual(["code"]);
});

test("an apply adding a field and a partial key reading it raced by a row that breaks the key: reruns, the gate's 409, nothing written (0142)", async () => {
  const slug = `flagged_${++serial}`;
  const code = { id: 1, name: "code", type: "text" };
  const schema = (extra: Record<string, unknown>) => ({
    schema: doc([{ name: slug, slug, fields: [code], ...extra }]),
  });
  expect((await apply(schema({}))).status).toBe(200);
  for (const c of ["a", "b"]) await create(on.t, slug, { code: c });
  // every row reads the new field's default (true): the count ahead finds no clash, the batch's
  // index refuses the "a" written meanwhile, and the rerun counts it
  const keyed = schema({
    fields: [code, { id: 2, name: "active", type: "boolean", default: true }],
    unique_together: [{ fields: ["code"], condition: { active: true } }],
  });
  const refused = await raced(
    /^create unique index/i,
    () => apply(keyed),
    () => on.t.json("POST", `${CO}/${slug}/`, { body: { code: "a" } }),
  );
  expect(refused.status, JSON.stringify(refused.body)).toBe(409);
  expect(refused.body.destructive_changes).toEqual([
    expect.objectContaining({ reason: "unique_over_duplicates", rows: 2 }),
  ]);
  const exported = (await on.t.json("GET", `${SCHEMA}/export?slug=${slug}`)).body.types[0];
  expect(exported.fields.map((f: { name: string }) => f.name)).toEqual(["code"]);
  expect(exported.unique_together ?? []).toEqual([]);
});
