/**
 * A schema apply on a remote database runs as reads and one atomic batch for documents that add
 * types and fields, change attributes and rename (decision 0111); a local file keeps the long
 * write. The same documents applied through both must leave the same schema, change records,
 * objects and search index: the batch is checked against the transaction path it stands for.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import type { CountingProxy } from "../helpers/counting-proxy";
import { SCHEMA, doc } from "./helpers";

const CO = "/api/plugins/custom-objects";
let db: RemoteDb;
let proxy: CountingProxy;
let local: TestApp;
let remote: TestApp;

beforeAll(async () => {
  db = await startRemoteDb("apply-batched");
  proxy = db.proxy;
  local = await makeTestApp();
  remote = await makeTestApp({ DATABASE_URL: db.url });
  for (const t of [local, remote])
    expect(
      (await t.json("POST", "/api/dcim/sites/", { body: { name: "s1", slug: "s1" } })).status,
    ).toBe(201);
});
afterAll(async () => {
  await local.close();
  await remote.close();
  await db.stop();
});

const code = { id: 1, name: "code", type: "text", primary: true, required: true };
const size = { id: 2, name: "size", type: "integer", validation_minimum: 0 };
const site = { id: 3, name: "site", type: "object", related_object_type: "dcim/site" };
const devices = { id: 4, name: "devices", type: "multiobject", related_object_type: "dcim/device" };
const notes = { id: 5, name: "notes", type: "longtext", search_weight: 500 };

const v1 = doc([{ name: "rack", slug: "rack", fields: [code, size, site, devices] }]);
// added fields (one with a default filled into existing rows), changed attributes, a rename,
// the type's own attributes, and a second new type
const v2 = doc([
  {
    name: "rack",
    slug: "rack",
    description: "Racks",
    verbose_name: "Rack unit",
    fields: [
      { ...code, label: "Code", description: "asset code" },
      { ...size, name: "height", validation_maximum: 60 },
      site,
      devices,
      notes,
      { id: 6, name: "rated", type: "boolean", default: true },
    ],
  },
  { name: "shelf", slug: "shelf", fields: [{ id: 1, name: "label", type: "text" }] },
]);

/** The change records an apply wrote, without what differs by time or request. */
async function changes(t: TestApp, since: number) {
  const r = await t.json("GET", `/api/core/object-changes/?limit=1000&ordering=id`);
  expect(r.status).toBe(200);
  const strip = (rec: Record<string, unknown> | null) => {
    if (!rec) return rec;
    const { created: _c, last_updated: _l, ...rest } = rec;
    if (Array.isArray(rest.fields))
      rest.fields = rest.fields.map((f: Record<string, unknown>) => {
        const { created: _fc, last_updated: _fl, ...fr } = f;
        return fr;
      });
    return rest;
  };
  return (r.body.results as Array<Record<string, any>>)
    .filter((c) => c.id > since && String(c.changed_object_type).startsWith("custom_objects."))
    .map((c) => [
      c.action?.value ?? c.action,
      c.changed_object_type,
      c.changed_object_id,
      strip(c.prechange_data),
      strip(c.postchange_data),
    ])
    .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
}

const lastChange = async (t: TestApp) =>
  ((await t.json("GET", "/api/core/object-changes/?limit=1&ordering=-id")).body.results[0]?.id ??
    0) as number;

/** Applies to both apps; `warm`: the remote's caches hold what it names (its round trips count). */
async function applyBoth(body: unknown, warm = true) {
  const out = [];
  for (const t of [local, remote]) {
    const since = await lastChange(t);
    // the deferred search-index flush (decision 0056) would otherwise land inside the count
    await flushSearchIndexesNow(servicesOf(t.app));
    proxy.reset();
    const r = await t.json("POST", `${SCHEMA}/apply/`, { body });
    // remote: the caller's token, one read of the state, one of ids and rules, one batch
    if (t === remote && warm) expect(proxy.count).toBeLessThanOrEqual(4);
    out.push({ r, changes: await changes(t, since) });
  }
  return out;
}

const exported = async (t: TestApp) => (await t.json("GET", `${SCHEMA}/export`)).body;

test("the batch leaves what the transaction leaves: schema, change records, objects, search", async () => {
  const [a1, b1] = await applyBoth({ schema: v1 }, false);
  expect(a1!.r.status, JSON.stringify(a1!.r.body)).toBe(200);
  expect(b1!.r.status, JSON.stringify(b1!.r.body)).toBe(200);
  expect(b1!.r.body).toEqual(a1!.r.body);
  expect(b1!.changes).toEqual(a1!.changes);
  expect(b1!.changes.length).toBe(5); // the type and its four fields
  expect(await exported(remote)).toEqual(await exported(local));

  for (const t of [local, remote]) {
    const made = await t.json("POST", `${CO}/rack/`, { body: { code: "R1", size: 42, site: 1 } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
  }
  const [a2, b2] = await applyBoth({ schema: v2 });
  expect(a2!.r.status, JSON.stringify(a2!.r.body)).toBe(200);
  expect(b2!.r.status, JSON.stringify(b2!.r.body)).toBe(200);
  expect(b2!.r.body).toEqual(a2!.r.body);
  expect(b2!.changes).toEqual(a2!.changes);
  expect(await exported(remote)).toEqual(await exported(local));

  for (const t of [local, remote]) {
    const rows = await t.json("GET", `${CO}/rack/`);
    expect(rows.body.results[0]).toMatchObject({ code: "R1", height: 42, rated: true });
    const noted = await t.json("PATCH", `${CO}/rack/${rows.body.results[0].id}/`, {
      body: { notes: "aisle seven" },
    });
    expect(noted.status).toBe(200);
    await flushSearchIndexesNow(servicesOf(t.app));
    const found = await t.json("GET", `${CO}/rack/?q=seven`);
    expect(found.body.count).toBe(1);
    expect((await t.json("GET", `${CO}/shelf/`)).status).toBe(200);
  }

  // unchanged: nothing is written, the answer says so
  const [a3, b3] = await applyBoth({ schema: v2 });
  expect(b3!.r.body).toEqual(a3!.r.body);
  expect(b3!.r.body.diffs.every((d: { has_changes: boolean }) => !d.has_changes)).toBe(true);
  expect(b3!.changes).toEqual([]);
  expect(a3!.changes).toEqual([]);
});

test("stale plans and the destructive gate answer as before; a removal keeps the transaction", async () => {
  const v3 = doc([
    {
      ...v2.types[0]!,
      fields: (v2.types[0] as { fields: unknown[] }).fields.slice(0, 5),
      removed_fields: [{ id: 6, name: "rated" }],
    },
    v2.types[1],
  ]);
  for (const t of [local, remote]) {
    const plan = (await t.json("POST", `${SCHEMA}/preview/`, { body: { schema: v3 } })).body;
    const stale = await t.json("POST", `${SCHEMA}/apply/`, {
      body: { schema: v3, plan_id: `${plan.plan_id.slice(0, 33)}${"0".repeat(32)}` },
    });
    expect(stale.status).toBe(409);
    expect(stale.body.error).toBe("stale_plan");
    const refused = await t.json("POST", `${SCHEMA}/apply/`, { body: { schema: v3 } });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe("destructive_changes");
    const allowed = await t.json("POST", `${SCHEMA}/apply/`, {
      body: { schema: v3, allow_destructive: true, plan_id: plan.plan_id },
    });
    expect(allowed.status, JSON.stringify(allowed.body)).toBe(200);
    expect(allowed.body.diffs[0].field_changes).toMatchObject([{ op: "remove", db_name: "rated" }]);
  }
  expect(await exported(remote)).toEqual(await exported(local));
});

test("a new unique field whose default existing rows would share: the same answer on both", async () => {
  const shelf = (extra: unknown[]) =>
    doc([
      { name: "shelf", slug: "shelf", fields: [{ id: 1, name: "label", type: "text" }, ...extra] },
    ]);
  const answers = [];
  for (const t of [local, remote]) {
    for (const label of ["a", "b"])
      expect((await t.json("POST", `${CO}/shelf/`, { body: { label } })).status).toBe(201);
    const r = await t.json("POST", `${SCHEMA}/apply/`, {
      body: { schema: shelf([{ id: 2, name: "tag", type: "text", unique: true, default: "x" }]) },
    });
    answers.push({ status: r.status, body: r.body });
    expect((await t.json("GET", `${CO}/shelf/`)).body.results[0]).not.toHaveProperty("tag");
  }
  expect(answers[0]!.status).toBeGreaterThanOrEqual(400);
  expect(answers[0]!.status).toBeLessThan(500);
  expect(answers[1]).toEqual(answers[0]!);
});

test("three applies changing one type at once: the batches that lost its type's stamp rerun, all land", async () => {
  // Each document is the whole type with one field's description changed: any order of landing
  // is a valid history, and the type ends as exactly one of them, never a mix (new field ids would
  // not do: an id below one a sibling already added is refused as used before).
  const base = (await exported(remote)).types.find((t: { slug: string }) => t.slug === "rack");
  const names: string[] = base.fields.slice(0, 3).map((f: { name: string }) => f.name);
  const describing = (name: string) =>
    doc([
      {
        ...base,
        fields: base.fields.map((f: { name: string }) =>
          f.name === name ? { ...f, description: `about ${name}` } : f,
        ),
      },
    ]);
  const answers = await Promise.all(
    names.map((n) => remote.json("POST", `${SCHEMA}/apply/`, { body: { schema: describing(n) } })),
  );
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
  const after = (await exported(remote)).types.find((t: { slug: string }) => t.slug === "rack");
  const described = names.filter(
    (name) =>
      after.fields.find((f: { name: string }) => f.name === name).description === `about ${name}`,
  );
  expect(described).toHaveLength(1);
  const rows = await remote.json("GET", `${CO}/rack/`);
  expect(rows.status).toBe(200);
});

/** One type's export (the race above left the remote's rack apart from the local one). */
const graded = async (t: TestApp) => (await t.json("GET", `${SCHEMA}/export?slug=graded`)).body;

test("choice sets, compound keys, partial keys and checks: the batch leaves what the transaction leaves (0119)", async () => {
  const grades = (extra: string[][] = []) => ({
    name: "grades",
    extra_choices: [["a", "A"], ["b", "B"], ...extra],
  });
  const code = { id: 1, name: "code", type: "text" };
  const grade = { id: 2, name: "grade", type: "select", choice_set: "grades", default: "a" };
  const rank = { id: 3, name: "rank", type: "integer" };
  const keyed = (extra: Record<string, unknown>, fields: unknown[] = [code, grade, rank]) => ({
    ...doc([{ name: "graded", slug: "graded", fields, ...extra }]),
    choice_sets: [grades()],
  });
  const v1 = keyed({
    unique_together: [["code", "grade"], { fields: ["rank"], condition: { grade: "a" } }],
    checks: [{ name: "rank_range", condition: { rank__gte: 0 } }],
  });
  const [a1, b1] = await applyBoth({ schema: v1 }, false);
  expect(a1!.r.status, JSON.stringify(a1!.r.body)).toBe(200);
  expect(b1!.r.body).toEqual(a1!.r.body);
  expect(b1!.changes).toEqual(a1!.changes);
  expect(await graded(remote)).toEqual(await graded(local));

  for (const t of [local, remote]) {
    const made = await t.json("POST", `${CO}/graded/`, { body: { code: "X", rank: 1 } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(made.body.grade).toBe("a");
    const dup = await t.json("POST", `${CO}/graded/`, { body: { code: "X", rank: 2 } });
    expect(dup.status).toBe(400);
    const negative = await t.json("POST", `${CO}/graded/`, { body: { code: "Y", rank: -1 } });
    expect(negative.status).toBe(400);
  }

  // the set grows, a field is added, the keys change and the check is replaced
  const v2 = {
    ...keyed(
      {
        unique_together: [["code", "rank"]],
        checks: [{ name: "rank_range", condition: { rank__lte: 100 } }],
      },
      [code, grade, rank, { id: 4, name: "size", type: "integer" }],
    ),
    choice_sets: [grades([["c", "C"]])],
  };
  const [a2, b2] = await applyBoth({ schema: v2 }, false);
  expect(a2!.r.status, JSON.stringify(a2!.r.body)).toBe(200);
  expect(b2!.r.body).toEqual(a2!.r.body);
  expect(b2!.changes).toEqual(a2!.changes);
  expect(await graded(remote)).toEqual(await graded(local));
  for (const t of [local, remote]) {
    const big = await t.json("POST", `${CO}/graded/`, { body: { code: "Z", rank: 101 } });
    expect(big.status).toBe(400);
    const c = await t.json("POST", `${CO}/graded/`, { body: { code: "Z", grade: "c", rank: 1 } });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
  }

  // the export applied again: nothing changes, within the round trips of any apply
  const [a3, b3] = await applyBoth({ schema: await graded(remote) });
  expect(b3!.r.body).toEqual(a3!.r.body);
  expect(b3!.changes).toEqual([]);
});

test("racing applies that create one choice set and key one type: each lands or reruns, none half-done (0119)", async () => {
  const racing = (n: number) => ({
    schema_version: "1",
    choice_sets: [{ name: "shared", extra_choices: [["x", `X${n}`]] }],
    types: [
      {
        name: `racer_${n}`,
        slug: `racer_${n}`,
        fields: [
          { id: 1, name: "a", type: "text" },
          { id: 2, name: "b", type: "select", choice_set: "shared" },
        ],
        unique_together: [["a", "b"]],
      },
    ],
  });
  const answers = await Promise.all(
    [1, 2, 3].map((n) => remote.json("POST", `${SCHEMA}/apply/`, { body: { schema: racing(n) } })),
  );
  // the set is made once; the others rerun from their read and change it (its stamp guards it)
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
  const sets = await remote.json("GET", "/api/extras/custom-field-choice-sets/?name=shared");
  expect(sets.body.count).toBe(1);
  for (const n of [1, 2, 3]) {
    const exported = (await remote.json("GET", `${SCHEMA}/export?slug=racer_${n}`)).body;
    expect(exported.types[0].unique_together).toEqual([["a", "b"]]);
    expect(exported.choice_sets[0].name).toBe("shared");
    const made = await remote.json("POST", `${CO}/racer_${n}/`, { body: { a: "1", b: "x" } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(
      (await remote.json("POST", `${CO}/racer_${n}/`, { body: { a: "1", b: "x" } })).status,
    ).toBe(400);
  }
});

test("a choice set the caller may not add, or may not change: 403 on the long write and the batch alike, nothing written", async () => {
  const setsNamed = async (t: TestApp, name: string) =>
    (await t.json("GET", `/api/extras/custom-field-choice-sets/?name=${name}`)).body.results.map(
      (s: { extra_choices: unknown }) => s.extra_choices,
    );
  const shaping = [
    [["view", "add", "change"], "custom_objects.customobjecttype", null],
    [["view", "add", "change"], "custom_objects.customobjecttypefield", null],
  ] as Array<[string[], string, unknown]>;
  const setDoc = (name: string, value: string) => ({
    schema: {
      schema_version: "1",
      choice_sets: [{ name, extra_choices: [[value, value.toUpperCase()]] }],
      types: [],
    },
  });
  for (const [n, t] of [local, remote].entries()) {
    const adder = await userWith(t, `set-adder-${n}`, [
      ...shaping,
      [["view", "add"], "extras.customfieldchoiceset", null],
    ]);
    const viewer = await userWith(t, `set-viewer-${n}`, [
      ...shaping,
      [["view"], "extras.customfieldchoiceset", null],
    ]);
    const refusedAdd = await t.json("POST", `${SCHEMA}/apply/`, {
      token: viewer.token,
      body: setDoc("fresh", "x"),
    });
    expect(refusedAdd.status, JSON.stringify(refusedAdd.body)).toBe(403);
    expect(refusedAdd.body.detail).toContain('add the choice set "fresh"');
    expect(await setsNamed(t, "fresh")).toEqual([]);

    const made = await t.json("POST", `${SCHEMA}/apply/`, { body: setDoc("kept", "a") });
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    const refusedChange = await t.json("POST", `${SCHEMA}/apply/`, {
      token: adder.token,
      body: setDoc("kept", "b"),
    });
    expect(refusedChange.status, JSON.stringify(refusedChange.body)).toBe(403);
    expect(refusedChange.body.detail).toContain('change the choice set "kept"');
    expect(await setsNamed(t, "kept")).toEqual([[["a", "A"]]]);
  }
});

test("a compound key over a field the apply renames, or adds with a default: the same gate, 400 and schema on both (0136)", async () => {
  const fields = (name: string, extra: unknown[] = []) => [
    { id: 1, name: "dock", type: "integer" },
    { id: 2, name, type: "integer" },
    ...extra,
  ];
  const berth = (f: unknown[], together: string[][] = []) =>
    doc([{ name: "berth", slug: "berth", fields: f, unique_together: together }]);
  const [a0, b0] = await applyBoth({ schema: berth(fields("slot")) }, false);
  expect(b0!.r.body).toEqual(a0!.r.body);
  for (const t of [local, remote])
    for (const slot of [1, 1])
      expect((await t.json("POST", `${CO}/berth/`, { body: { dock: 1, slot } })).status).toBe(201);
  const renamed = berth(fields("bay"), [["dock", "bay"]]);
  const zone = { id: 3, name: "zone", type: "text", default: "z" };
  const added = berth(fields("slot", [zone]), [["dock", "zone"]]);
  for (const body of [
    { schema: renamed },
    { schema: renamed, allow_destructive: true },
    { schema: added },
    { schema: added, allow_destructive: true },
  ]) {
    const [a, b] = await applyBoth(body);
    expect(a!.r.status, JSON.stringify(a!.r.body)).toBeGreaterThanOrEqual(400);
    expect(b!.r).toEqual(a!.r);
    expect(b!.changes).toEqual([]);
  }
  for (const t of [local, remote]) {
    const listed = (await t.json("GET", `${CO}/berth/?ordering=id`)).body.results;
    expect((await t.json("DELETE", `${CO}/berth/${listed[1].id}/`)).status).toBe(204);
  }
  const [a1, b1] = await applyBoth({ schema: renamed });
  expect(a1!.r.status, JSON.stringify(a1!.r.body)).toBe(200);
  expect(b1!.r.body).toEqual(a1!.r.body);
  // the ids differ (the race above made types on the remote only): the records' kinds do not
  const kinds = (c: unknown[][]) => c.map((x) => [x[0], x[1]]);
  expect(kinds(b1!.changes)).toEqual(kinds(a1!.changes));
  expect(await berthOf(remote)).toEqual(await berthOf(local));
});

const berthOf = async (t: TestApp) =>
  (await t.json("GET", `${SCHEMA}/export?slug=berth`)).body.types[0];

test("a field made required over rows that have no value, allowed: the batch leaves what the transaction leaves (0136)", async () => {
  const dock = (required: boolean) =>
    doc([
      {
        name: "quay",
        slug: "quay",
        fields: [
          { id: 1, name: "code", type: "text" },
          { id: 2, name: "note", type: "text", required },
        ],
      },
    ]);
  const [a0, b0] = await applyBoth({ schema: dock(false) }, false);
  expect(b0!.r.body).toEqual(a0!.r.body);
  for (const t of [local, remote])
    expect((await t.json("POST", `${CO}/quay/`, { body: { code: "q1" } })).status).toBe(201);
  const [a1, b1] = await applyBoth({ schema: dock(true) });
  expect(a1!.r.status).toBe(409);
  expect(b1!.r).toEqual(a1!.r);
  const [a2, b2] = await applyBoth({ schema: dock(true), allow_destructive: true });
  expect(a2!.r.status, JSON.stringify(a2!.r.body)).toBe(200);
  expect(b2!.r.body).toEqual(a2!.r.body);
  const kinds = (c: unknown[][]) => c.map((x) => [x[0], x[1]]);
  expect(kinds(b2!.changes)).toEqual(kinds(a2!.changes));
  const quayOf = async (t: TestApp) =>
    (await t.json("GET", `${SCHEMA}/export?slug=quay`)).body.types[0];
  expect(await quayOf(remote)).toEqual(await quayOf(local));
  for (const t of [local, remote]) {
    const missing = await t.json("POST", `${CO}/quay/`, { body: { code: "q2" } });
    expect(missing.status).toBe(400);
  }
});

test("relations to types the same document creates: one batch, the records and schema the transaction leaves (0136)", async () => {
  const name = { id: 1, name: "name", type: "text", primary: true };
  const bundle = doc([
    {
      name: "harbour",
      slug: "harbour",
      fields: [
        name,
        { id: 2, name: "quays", type: "multiobject", related_object_type: "custom-objects/pier" },
      ],
    },
    {
      name: "pier",
      slug: "pier",
      fields: [
        name,
        { id: 2, name: "site", type: "object", related_object_type: "dcim/site" },
        { id: 3, name: "up", type: "object", related_object_type: "custom-objects/pier" },
        {
          id: 4,
          name: "moored",
          type: "object",
          is_polymorphic: true,
          related_object_types: ["custom-objects/boat", "dcim/site"],
        },
      ],
    },
    { name: "boat", slug: "boat", fields: [name] },
  ]);
  const [a, b] = await applyBoth({ schema: bundle }, false);
  expect(a!.r.status, JSON.stringify(a!.r.body)).toBe(200);
  expect(b!.r.body).toEqual(a!.r.body);
  // the ids differ between the two databases; the records' references name the same types
  const refs = (c: unknown[][]) =>
    c
      .map((x) => {
        const post = x[4] as Record<string, any> | null;
        const ref = (r: { app_label?: string; model?: string } | null) =>
          r ? `${r.app_label}.${r.model}` : null;
        return [
          x[0],
          x[1],
          post?.name,
          ref(post?.related_object_type ?? null),
          (post?.related_object_types ?? []).map(ref),
        ];
      })
      .sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));
  expect(refs(b!.changes)).toEqual(refs(a!.changes));
  expect(refs(b!.changes)).toContainEqual([
    "create",
    "custom_objects.customobjecttypefield",
    "up",
    "custom_objects.pier",
    [],
  ]);
  for (const t of [local, remote]) {
    const boat = await t.json("POST", `${CO}/boat/`, { body: { name: "b1" } });
    const pier = await t.json("POST", `${CO}/pier/`, {
      body: { name: "p1", moored: { object_type: "custom_objects.boat", id: boat.body.id } },
    });
    expect(pier.status, JSON.stringify(pier.body)).toBe(201);
    const child = await t.json("POST", `${CO}/pier/`, { body: { name: "p2", up: pier.body.id } });
    expect(child.status, JSON.stringify(child.body)).toBe(201);
    const harbour = await t.json("POST", `${CO}/harbour/`, {
      body: { name: "h1", quays: [pier.body.id, child.body.id] },
    });
    expect(harbour.status, JSON.stringify(harbour.body)).toBe(201);
    expect(harbour.body.quays.map((q: { id: number }) => q.id)).toEqual([
      pier.body.id,
      child.body.id,
    ]);
  }
  const exported = async (t: TestApp) =>
    (await t.json("GET", `${SCHEMA}/export?slug=harbour&slug=pier&slug=boat`)).body;
  expect(await exported(remote)).toEqual(await exported(local));
  // another type pointing at one more new type, warm: within an apply's round trips (≤ 4)
  const more = doc([
    {
      name: "dinghy",
      slug: "dinghy",
      fields: [
        name,
        { id: 2, name: "ship", type: "object", related_object_type: "custom-objects/ship" },
      ],
    },
    { name: "ship", slug: "ship", fields: [name] },
  ]);
  const [c, d] = await applyBoth({ schema: more });
  expect(c!.r.status, JSON.stringify(c!.r.body)).toBe(200);
  expect(d!.r.body).toEqual(c!.r.body);
  expect(refs(d!.changes)).toEqual(refs(c!.changes));
});
