/**
 * Custom-object writes on Cloudflare D1, which has no interactive transaction (decisions 0090,
 * 0108): the real app in process over miniflare's D1 (migrated by wrangler as a deploy migrates
 * it). Defining the types and fields, and every object write — create, bulk create, update, bulk
 * update, delete with a set-null reference, a unique clash — must answer as on libSQL, through
 * `write` batches only: a transaction is counted and refused as D1 refuses it.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import type { D1Binding } from "../../src/db/d1";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { forgetChange } from "../../src/core/changes/seen";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { d1Orm } from "../../tools/d1-local";
import { BASE, makeTestApp } from "../helpers/app";
import { typeListsScenario } from "./type-lists-scenario";
import { fieldCreatesScenario, typeCreatesScenario } from "./type-creates-scenario";
import {
  listManyRetypesScenario,
  listRetypeAfterEarlierScenario,
  listRetypeScenario,
} from "./list-retype-scenario";
import { bigCascadeScenario } from "./big-cascade-scenario";
import { retargetScenario } from "../schema/apply-retarget";
import { swapScenario } from "../schema/apply-swap";
import { addedKeyScenario } from "../schema/apply-added-key";
import { type D1App, startD1App } from "../helpers/d1-app";
import { holdNextWrite } from "../helpers/hold-write";
import { reverseNameRaces } from "./related-name-race";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(90_000);

const CO = "/api/plugins/custom-objects";
let d1: D1App;
let app: D1App["app"];
let transactions = 0;
/** `Database.read` calls (each one round trip to D1). */
let reads = 0;
/** Each `Database.write` batch: its statements' SQL, in order. */
const writeBatches: string[][] = [];

const json = (method: string, path: string, body?: unknown) => d1.json(method, path, body);
const made = (path: string, body: unknown) => d1.made(path, body);

let siteId: number;
let deviceIds: number[];
let binding: D1Binding;
let kitId: number;

beforeAll(async () => {
  // every transaction counted: D1 has none, so the writes must not ask for one
  d1 = await startD1App("d1-writes", (base) => ({
    ...base,
    transaction: (work) => {
      transactions++;
      return base.transaction(work);
    },
    read: (queries) => {
      reads++;
      return base.read(queries);
    },
    write: (queries) => {
      // a builder's `toSQL`, a raw statement's `getQuery` (both Drizzle's public API)
      const text = (q: any): string => q.toSQL?.().sql ?? q.getQuery?.().sql ?? "";
      writeBatches.push(queries.map(text));
      return base.write(queries);
    },
  }));
  ({ app, binding } = d1);
  siteId = (await made("/api/dcim/sites/", { name: "d1 site", slug: "d1-site" })).id;
  deviceIds = (
    await made("/api/dcim/devices/", [
      { name: "d1-a", site: siteId },
      { name: "d1-b", site: siteId },
    ])
  ).map((d: { id: number }) => d.id);
  const kit = await made(`${CO}/custom-object-types/`, { name: "kit", slug: "kit" });
  kitId = kit.id;
  for (const f of [
    { name: "title", type: "text", primary: true, unique: true },
    { name: "count", type: "integer", validation_maximum: 100 },
    { name: "site", type: "object", related_object_type: "dcim.site" },
    { name: "devices", type: "multiobject", related_object_type: "dcim.device" },
  ])
    await made(`${CO}/custom-object-type-fields/`, { custom_object_type: kit.id, ...f });
  const holder = await made(`${CO}/custom-object-types/`, { name: "holder", slug: "holder" });
  for (const f of [
    { name: "name", type: "text", primary: true },
    {
      name: "kit",
      type: "object",
      related_object_type: "custom_objects.kit",
      on_delete_behavior: "set_null",
    },
  ])
    await made(`${CO}/custom-object-type-fields/`, { custom_object_type: holder.id, ...f });
  await made("/api/extras/tags/", { name: "green", slug: "green" });
  expect(transactions).toBe(0);
});

afterAll(() => d1?.stop());

test("create, bulk create, update, bulk update and delete of custom objects on D1, with no transaction", async () => {
  const one = await json("POST", `${CO}/kit/`, {
    title: "Alpha",
    count: 7,
    site: siteId,
    devices: deviceIds,
    tags: [{ slug: "green" }],
  });
  expect(one.status, JSON.stringify(one.body)).toBe(201);
  expect(one.body).toEqual((await json("GET", `${CO}/kit/${one.body.id}/`)).body);
  expect(one.body.devices.map((d: { id: number }) => d.id)).toEqual(deviceIds);
  expect(one.body.tags.map((t: { slug: string }) => t.slug)).toEqual(["green"]);

  const bulk = await json("POST", `${CO}/kit/`, [
    { title: "Beta", site: siteId },
    { title: "Gamma", devices: [deviceIds[1]] },
  ]);
  expect(bulk.status, JSON.stringify(bulk.body)).toBe(201);
  for (const rec of bulk.body)
    expect(rec).toEqual((await json("GET", `${CO}/kit/${rec.id}/`)).body);

  const patched = await json("PATCH", `${CO}/kit/${one.body.id}/`, {
    count: 8,
    devices: [deviceIds[1]],
  });
  expect(patched.status, JSON.stringify(patched.body)).toBe(200);
  expect(patched.body.count).toBe(8);
  expect(patched.body).toEqual((await json("GET", `${CO}/kit/${one.body.id}/`)).body);

  const put = await json("PUT", `${CO}/kit/`, [
    { id: bulk.body[0].id, title: "Beta 2", site: null },
  ]);
  expect(put.status, JSON.stringify(put.body)).toBe(200);
  expect(put.body[0]).toMatchObject({ title: "Beta 2", site: null });

  // NetBox 4.6's add_tags / remove_tags
  const untagged = await json("PATCH", `${CO}/kit/${one.body.id}/`, { remove_tags: ["green"] });
  expect(untagged.status, JSON.stringify(untagged.body)).toBe(200);
  expect(untagged.body.tags).toEqual([]);
  const retagged = await json("PATCH", `${CO}/kit/${one.body.id}/`, { add_tags: ["green"] });
  expect(retagged.body.tags.map((t: { slug: string }) => t.slug)).toEqual(["green"]);

  // a unique clash and a bad value: 400s from the batch and from validation, nothing written
  const clash = await json("POST", `${CO}/kit/`, { title: "Alpha" });
  expect(clash.status).toBe(400);
  expect(clash.body.title[0]).toContain("already exists");
  expect((await json("POST", `${CO}/kit/`, { title: "Delta", count: 1000 })).status).toBe(400);
  // a site taken on both keys names both (decision 0146): D1's message names the first alone
  const twice = await json("POST", "/api/dcim/sites/", { name: "d1 site", slug: "d1-site" });
  expect(twice.status).toBe(400);
  expect(twice.body).toEqual({
    name: ["site with this name already exists."],
    slug: ["site with this slug already exists."],
  });

  // a delete sets the holder's reference to null in the same batch, and is logged
  const held = await made(`${CO}/holder/`, { name: "h", kit: one.body.id });
  expect((await json("DELETE", `${CO}/kit/${one.body.id}/`)).status).toBe(204);
  expect((await json("GET", `${CO}/kit/${one.body.id}/`)).status).toBe(404);
  expect((await json("GET", `${CO}/holder/${held.id}/`)).body.kit).toBeNull();
  const changes = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.kit&changed_object_id=${one.body.id}`,
  );
  expect(
    changes.body.results.map((c: { action: { value: string } }) => c.action.value).sort(),
  ).toEqual(["create", "delete", "update", "update", "update"]);
  expect((await json("GET", `${CO}/kit/`)).body.count).toBe(2);
  expect(transactions).toBe(0);
});

test("cascading deletes on D1: a custom object and a site through two levels, in one read and one batch, no transaction (decision 0109)", async () => {
  // site ← crate (cascade) ← slot (cascade)
  const crate = await made(`${CO}/custom-object-types/`, { name: "crate", slug: "crate" });
  await made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: crate.id,
    name: "name",
    type: "text",
    primary: true,
  });
  await made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: crate.id,
    name: "site",
    type: "object",
    related_object_type: "dcim.site",
    on_delete_behavior: "cascade",
  });
  const slot = await made(`${CO}/custom-object-types/`, { name: "slot", slug: "slot" });
  await made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: slot.id,
    name: "name",
    type: "text",
    primary: true,
  });
  await made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: slot.id,
    name: "crate",
    type: "object",
    related_object_type: "custom_objects.crate",
    on_delete_behavior: "cascade",
  });
  transactions = 0;
  const tree = async (n: number) => {
    const site = (await made("/api/dcim/sites/", { name: `cascade ${n}`, slug: `cascade-${n}` }))
      .id;
    const c = (await made(`${CO}/crate/`, { name: `crate ${n}`, site })).id;
    const s = (await made(`${CO}/slot/`, { name: `slot ${n}`, crate: c, tags: ["green"] })).id;
    return { site, crate: c, slot: s };
  };
  // the first delete learns the fields pointing at the types (a read more), later ones do not
  for (const n of [1, 2]) {
    const { site, crate: c, slot: s } = await tree(n);
    const deleted = await json("DELETE", `/api/dcim/sites/${site}/`);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(204);
    expect((await json("GET", `${CO}/crate/${c}/`)).status).toBe(404);
    expect((await json("GET", `${CO}/slot/${s}/`)).status).toBe(404);
    const logged = await json(
      "GET",
      `/api/core/object-changes/?changed_object_type=custom_objects.slot&changed_object_id=${s}`,
    );
    expect(
      logged.body.results.map((x: { action: { value: string } }) => x.action.value).sort(),
    ).toEqual(["create", "delete"]);
  }
  // a custom object to its child
  const { crate: c, slot: s } = await tree(3);
  expect((await json("DELETE", `${CO}/crate/${c}/`)).status).toBe(204);
  expect((await json("GET", `${CO}/slot/${s}/`)).status).toBe(404);
  const tags = await binding
    .prepare("SELECT count(*) AS n FROM tagged_items WHERE object_id = ? AND object_type_id = ?")
    .bind(s, slot.object_type.id)
    .all<{ n: number }>();
  expect(tags.results[0]!.n).toBe(0);
  expect(transactions).toBe(0);
});

test("the search index's deferred flush on D1 (the Worker's cron runs it): read + write batches, no transaction, q= exact", async () => {
  const count = async (sql: string) =>
    Number((await binding.prepare(sql).bind().all<{ n: number }>()).results[0]!.n);
  const made = await json("POST", `${CO}/kit/`, [
    { title: "Falcon one" },
    { title: "falcon two" },
    { title: "Osprey" },
  ]);
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  expect(
    await count(`SELECT count(*) AS n FROM co_search_pending WHERE type_id = ${kitId}`),
  ).toBeGreaterThan(0);
  await flushSearchIndexesNow(servicesOf(app));
  expect(transactions).toBe(0);
  expect(await count(`SELECT count(*) AS n FROM co_search_pending WHERE type_id = ${kitId}`)).toBe(
    0,
  );
  const live = await count(`SELECT count(*) AS n FROM "co_${kitId}"`);
  expect(
    await count(
      `SELECT count(*) AS n FROM co_search_docsize WHERE id BETWEEN ${kitId} * 1099511627776 AND ${kitId} * 1099511627776 + 1099511627775`,
    ),
  ).toBe(live);
  // answered from the index now, exactly as a scan would
  const titles = async (q: string) =>
    ((await json("GET", `${CO}/kit/?q=${q}`)).body.results as Array<{ title: string }>)
      .map((r) => r.title)
      .sort();
  expect(await titles("falcon")).toEqual(["Falcon one", "falcon two"]);
  expect(await titles("con%20tw")).toEqual(["falcon two"]);
  expect(await titles("spre")).toEqual(["Osprey"]);
});

test("types and fields on D1: records as GET answers them, updates (a rename, a unique change), deletes, change records, no transaction", async () => {
  const made1 = await json("POST", `${CO}/custom-object-types/`, {
    name: "rack_kind",
    slug: "rack_kind",
    verbose_name: "Rack kind",
    tags: [{ slug: "green" }],
  });
  expect(made1.status, JSON.stringify(made1.body)).toBe(201);
  const id = made1.body.id;
  expect(made1.body).toEqual((await json("GET", `${CO}/custom-object-types/${id}/`)).body);
  const field = await json("POST", `${CO}/custom-object-type-fields/`, {
    custom_object_type: id,
    name: "height",
    type: "integer",
    default: 42,
  });
  expect(field.status, JSON.stringify(field.body)).toBe(201);
  expect(field.body).toEqual(
    (await json("GET", `${CO}/custom-object-type-fields/${field.body.id}/`)).body,
  );
  const note = await made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: id,
    name: "note",
    type: "text",
  });
  const obj = await made(`${CO}/rack_kind/`, { note: "tall one" });
  expect(obj.height).toBe(42);
  expect((await json("GET", `${CO}/rack_kind/?q=tall`)).body.count).toBe(1);

  const relabelled = await json("PATCH", `${CO}/custom-object-type-fields/${field.body.id}/`, {
    label: "Height (U)",
  });
  expect(relabelled.status, JSON.stringify(relabelled.body)).toBe(200);
  expect(relabelled.body.label).toBe("Height (U)");
  expect(made1.body.tags.map((t: { slug: string }) => t.slug)).toEqual(["green"]);
  const renamed = await json("PATCH", `${CO}/custom-object-types/${id}/`, {
    description: "Kinds of rack",
    tags: [],
  });
  expect(renamed.body.tags).toEqual([]);
  expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
  expect(renamed.body).toEqual((await json("GET", `${CO}/custom-object-types/${id}/`)).body);
  expect(renamed.body.fields.map((f: { name: string }) => f.name).sort()).toEqual([
    "height",
    "note",
  ]);

  // a rename and a unique change: the columns and indexes follow in the same batch
  const moved = await json("PATCH", `${CO}/custom-object-type-fields/${field.body.id}/`, {
    name: "units",
    unique: true,
  });
  expect(moved.status, JSON.stringify(moved.body)).toBe(200);
  expect((await json("GET", `${CO}/rack_kind/${obj.id}/`)).body).toMatchObject({ units: 42 });
  const twin = await json("POST", `${CO}/rack_kind/`, { units: 42 });
  expect(twin.status).toBe(400);
  expect(twin.body.units[0]).toContain("already exists");
  const renote = await json("PATCH", `${CO}/custom-object-type-fields/${note.id}/`, {
    name: "remark",
  });
  expect(renote.status, JSON.stringify(renote.body)).toBe(200);
  expect((await json("GET", `${CO}/rack_kind/?q=tall`)).body.results[0].remark).toBe("tall one");
  expect((await json("DELETE", `${CO}/custom-object-type-fields/${note.id}/`)).status).toBe(204);
  expect((await json("GET", `${CO}/rack_kind/${obj.id}/`)).body).not.toHaveProperty("remark");
  expect((await json("DELETE", `${CO}/custom-object-types/${id}/`)).status).toBe(204);
  expect((await json("GET", `${CO}/custom-object-types/${id}/`)).status).toBe(404);
  expect((await json("GET", `${CO}/rack_kind/`)).status).toBe(404);
  const changes = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.customobjecttype&changed_object_id=${id}`,
  );
  expect(
    changes.body.results.map((c: { action: { value: string } }) => c.action.value).sort(),
  ).toEqual(["create", "delete", "update"]);
  const fieldChanges = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.customobjecttypefield&changed_object_id=${note.id}`,
  );
  expect(
    fieldChanges.body.results.map((c: { action: { value: string } }) => c.action.value).sort(),
  ).toEqual(["create", "delete", "update"]);
  expect(transactions).toBe(0);
});

test("schema apply on D1: adding types and fields, attributes and renames in one batch, no transaction (decision 0111)", async () => {
  const SCHEMA = `${CO}/schema`;
  const code = { id: 1, name: "code", type: "text", primary: true, required: true };
  const size = { id: 2, name: "size", type: "integer" };
  const site = { id: 3, name: "site", type: "object", related_object_type: "dcim/site" };
  const v1 = {
    schema_version: "1",
    types: [{ name: "bay", slug: "bay", fields: [code, size, site] }],
  };
  const first = await json("POST", `${SCHEMA}/apply/`, { schema: v1 });
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  const row = await made(`${CO}/bay/`, { code: "B1", size: 4, site: siteId });
  const v2 = {
    schema_version: "1",
    types: [
      {
        name: "bay",
        slug: "bay",
        description: "Bays",
        fields: [
          { ...code, label: "Code" },
          { ...size, name: "slots", unique: true },
          site,
          { id: 4, name: "notes", type: "longtext" },
          { id: 5, name: "active", type: "boolean", default: true },
        ],
      },
      { name: "slot", slug: "slot", fields: [{ id: 1, name: "label", type: "text" }] },
    ],
  };
  const plan = (await json("POST", `${SCHEMA}/preview/`, { schema: v2 })).body.plan_id;
  const second = await json("POST", `${SCHEMA}/apply/`, { schema: v2, plan_id: plan });
  expect(second.status, JSON.stringify(second.body)).toBe(200);
  expect(second.body.plan_id).toBe(plan);
  const read = await json("GET", `${CO}/bay/${row.id}/`);
  expect(read.body).toMatchObject({ code: "B1", slots: 4, active: true, site: { id: siteId } });
  expect(read.body).not.toHaveProperty("size");
  expect((await json("POST", `${CO}/bay/`, { code: "B2", slots: 4 })).status).toBe(400);
  await json("PATCH", `${CO}/bay/${row.id}/`, { notes: "north wall" });
  await flushSearchIndexesNow(servicesOf(app));
  expect((await json("GET", `${CO}/bay/?q=north`)).body.count).toBe(1);
  expect((await made(`${CO}/slot/`, { label: "s1" })).label).toBe("s1");
  const exported = (await json("GET", `${SCHEMA}/export?slug=bay`)).body;
  expect(exported.types[0].fields.map((f: { name: string }) => f.name)).toEqual([
    "code",
    "slots",
    "site",
    "notes",
    "active",
  ]);
  const again = await json("POST", `${SCHEMA}/apply/`, { schema: v2 });
  expect(again.body.diffs.every((d: { has_changes: boolean }) => !d.has_changes)).toBe(true);
  // the same plan again is stale: the database moved since its preview
  const stale = await json("POST", `${SCHEMA}/apply/`, { schema: v2, plan_id: plan });
  expect(stale.status).toBe(409);
  expect(stale.body.error).toBe("stale_plan");
  expect(transactions).toBe(0);
  // a removal goes through the trash, in the batch too (decision 0120); restore brings it back
  const removal = await json("POST", `${SCHEMA}/apply/`, {
    schema: {
      ...v2,
      types: [
        {
          ...v2.types[0],
          fields: v2.types[0]!.fields.slice(0, 4),
          removed_fields: [{ id: 5, name: "active" }],
        },
      ],
    },
    allow_destructive: true,
  });
  expect(removal.status, JSON.stringify(removal.body)).toBe(200);
  expect((await json("GET", `${CO}/bay/${row.id}/`)).body).not.toHaveProperty("active");
  const [entry] = (await json("GET", `${SCHEMA}/trash/?slug=bay`)).body.results;
  expect(entry).toMatchObject({ kind: "field", name: "active", rows: 1 });
  expect((await json("POST", `${SCHEMA}/trash/${entry.id}/restore/`)).status).toBe(200);
  expect((await json("GET", `${CO}/bay/${row.id}/`)).body.active).toBe(true);
  expect(transactions).toBe(0);
});

test("keys, checks and choice sets on D1 (decision 0119): REST and schema apply in one batch, the 400s counting, no transaction", async () => {
  const SCHEMA = `${CO}/schema`;
  const refusedBefore = transactions; // the removal above was counted (and refused)
  const levels = (extra: string[][] = []) => ({
    name: "levels",
    extra_choices: [["lo", "Low"], ["hi", "High"], ...extra],
  });
  const fields = [
    { id: 1, name: "code", type: "text" },
    { id: 2, name: "level", type: "select", choice_set: "levels", default: "lo" },
    { id: 3, name: "rank", type: "integer" },
  ];
  const v1 = {
    schema_version: "1",
    choice_sets: [levels()],
    types: [
      {
        name: "tier",
        slug: "tier",
        fields,
        unique_together: [["code", "level"], { fields: ["rank"], condition: { level: "hi" } }],
        checks: [{ name: "rank_range", condition: { rank__gte: 0 } }],
      },
    ],
  };
  const first = await json("POST", `${SCHEMA}/apply/`, { schema: v1 });
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  expect((await made(`${CO}/tier/`, { code: "A", rank: 1 })).level).toBe("lo");
  expect((await json("POST", `${CO}/tier/`, { code: "A", rank: 2 })).status).toBe(400);
  const negative = await json("POST", `${CO}/tier/`, { code: "B", rank: -1 });
  expect(negative.status).toBe(400);
  expect(JSON.stringify(negative.body)).toContain("rank_range");
  await made(`${CO}/tier/`, { code: "B", rank: 5 });

  // the set grows, the keys and the check change, a field is added: one batch
  const v2 = {
    ...v1,
    choice_sets: [levels([["mid", "Middle"]])],
    types: [
      {
        ...v1.types[0]!,
        fields: [...fields, { id: 4, name: "note", type: "text" }],
        unique_together: [["code", "rank"]],
        checks: [{ name: "rank_cap", condition: { rank__lte: 10 } }],
      },
    ],
  };
  const second = await json("POST", `${SCHEMA}/apply/`, { schema: v2 });
  expect(second.status, JSON.stringify(second.body)).toBe(200);
  expect((await made(`${CO}/tier/`, { code: "C", level: "mid", rank: 3 })).level).toBe("mid");
  expect((await json("POST", `${CO}/tier/`, { code: "D", rank: 11 })).status).toBe(400);
  const again = await json("POST", `${SCHEMA}/apply/`, {
    schema: (await json("GET", `${SCHEMA}/export?slug=tier`)).body,
  });
  expect(again.body.diffs.every((d: { has_changes: boolean }) => !d.has_changes)).toBe(true);

  // REST: keys and checks the rows break are 400s that count them, and nothing changes
  const tierId = (await json("GET", `${CO}/custom-object-types/?slug=tier`)).body.results[0].id;
  const url = `${CO}/custom-object-types/${tierId}/`;
  await made(`${CO}/tier/`, { code: "F", rank: 5 });
  const before = (await json("GET", url)).body;
  const dup = await json("PATCH", url, { unique_together: [["level", "rank"]] });
  expect(dup.body).toEqual({
    unique_together: [
      "2 existing row(s) share values of level, rank; they must make a unique set.",
    ],
  });
  const bad = await json("PATCH", url, { checks: [{ name: "small", condition: { rank__lt: 4 } }] });
  expect(bad.body).toEqual({ checks: ['2 existing row(s) do not match the check "small".'] });
  expect((await json("GET", url)).body).toEqual(before);
  const ok = await json("PATCH", url, { unique_together: [["code", "level"]], checks: [] });
  expect(ok.status, JSON.stringify(ok.body)).toBe(200);
  expect((await made(`${CO}/tier/`, { code: "G", rank: 50 })).rank).toBe(50);
  expect(transactions).toBe(refusedBefore);
});

test("revert from the change log on D1 (decision 0113): a delete of a custom object and of a site put back under their ids, an update, dry runs — no transaction", async () => {
  const lastChange = async (type: string, id: number) =>
    (
      await json(
        "GET",
        `/api/core/object-changes/?changed_object_type=${type}&changed_object_id=${id}&ordering=-id&limit=1`,
      )
    ).body.results[0] as { id: number };
  const revert = (change: number, query = "") =>
    json("POST", `/api/core/object-changes/${change}/revert/${query}`);
  const count = async () => (await json("GET", "/api/core/object-changes/?limit=1")).body.count;

  const kit = await made(`${CO}/kit/`, {
    title: "Revived",
    count: 3,
    site: siteId,
    devices: deviceIds,
    tags: [{ slug: "green" }],
  });
  expect((await json("DELETE", `${CO}/kit/${kit.id}/`)).status).toBe(204);
  const kitDeleted = await lastChange("custom_objects.kit", kit.id);
  const before = await count();
  const dry = await revert(kitDeleted.id, "?dry_run=true");
  expect(dry.status, JSON.stringify(dry.body)).toBe(200);
  expect(dry.body).toMatchObject({ dry_run: true, action: "create", change: null });
  expect(await count()).toBe(before);
  expect((await json("GET", `${CO}/kit/${kit.id}/`)).status).toBe(404);
  const back = await revert(kitDeleted.id);
  expect(back.status, JSON.stringify(back.body)).toBe(200);
  const got = await json("GET", `${CO}/kit/${kit.id}/`);
  expect(got.status).toBe(200);
  expect(back.body.object).toEqual(got.body);
  expect(back.body.change).toBe((await lastChange("custom_objects.kit", kit.id)).id);
  expect(got.body.devices.map((d: { id: number }) => d.id)).toEqual(deviceIds);
  expect(got.body.tags.map((t: { slug: string }) => t.slug)).toEqual(["green"]);
  // again: the object exists
  expect((await revert(kitDeleted.id)).status).toBe(409);

  const site = await made("/api/dcim/sites/", { name: "d1 back", slug: "d1-back" });
  await json("PATCH", `/api/dcim/sites/${site.id}/`, { description: "changed" });
  const siteChanged = await lastChange("dcim.site", site.id);
  expect((await json("DELETE", `/api/dcim/sites/${site.id}/`)).status).toBe(204);
  const siteDeleted = await lastChange("dcim.site", site.id);
  const restored = await revert(siteDeleted.id);
  expect(restored.status, JSON.stringify(restored.body)).toBe(200);
  expect((await json("GET", `/api/dcim/sites/${site.id}/`)).body.description).toBe("changed");
  const undone = await revert(siteChanged.id);
  expect(undone.status, JSON.stringify(undone.body)).toBe(200);
  expect((await json("GET", `/api/dcim/sites/${site.id}/`)).body.description).toBe("");
  expect(transactions).toBe(0);
});

test("reverts of an update and a delete this app never saw, on D1 (decision 0139): one read, then the batch", async () => {
  const services = servicesOf(app);
  const lastChange = async () =>
    (await json("GET", "/api/core/object-changes/?ordering=-id&limit=1")).body.results[0]
      .id as number;
  const revert = async (change: number, query = "") => {
    forgetChange(services, change); // as another isolate: never served nor written here
    await flushSearchIndexesNow(services);
    reads = 0;
    const r = await json("POST", `/api/core/object-changes/${change}/revert/${query}`);
    return { ...r, reads };
  };
  const site = await made("/api/dcim/sites/", { name: "d1 free", slug: "d1-free" });
  await json("PATCH", `/api/dcim/sites/${site.id}/`, { description: "changed" });
  const back = await revert(await lastChange());
  expect(back.status, JSON.stringify(back.body)).toBe(200);
  expect(back.reads).toBe(1);
  const got = await json("GET", `/api/dcim/sites/${site.id}/`);
  expect(got.body.description).toBe("");
  expect(back.body.object).toEqual(got.body);
  const kit = await made(`${CO}/kit/`, {
    title: "Free",
    count: 3,
    site: siteId,
    tags: [{ slug: "green" }],
  });
  await json("PATCH", `${CO}/kit/${kit.id}/`, { title: "Freed", count: 4 });
  const changed = await lastChange();
  // its dry run: answered from the record's one read, its proof in it (decision 0154)
  const dry = await revert(changed, "?dry_run=true");
  expect(dry.status, JSON.stringify(dry.body)).toBe(200);
  expect(dry.reads).toBe(1);
  expect(dry.body.object).toMatchObject({ title: "Free", count: 3 });
  expect((await json("GET", `${CO}/kit/${kit.id}/`)).body.title).toBe("Freed");
  const undone = await revert(changed);
  expect(undone.status, JSON.stringify(undone.body)).toBe(200);
  expect(undone.reads).toBe(1);
  const now = await json("GET", `${CO}/kit/${kit.id}/`);
  expect(now.body).toMatchObject({ title: "Free", count: 3 });
  expect(undone.body.object).toEqual(now.body);
  const written = await json("GET", `/api/core/object-changes/${undone.body.change}/`);
  expect(written.body.postchange_data).toEqual(now.body);
  // again: the object changed since (the revert's own record), the ordinary 409
  const again = await revert(changed);
  expect(again.status, JSON.stringify(again.body)).toBe(409);
  // a site's delete put back under its id, its tags nested as recorded
  const gone = await made("/api/dcim/sites/", {
    name: "d1 gone",
    slug: "d1-gone",
    tags: [{ slug: "green" }],
  });
  expect((await json("DELETE", `/api/dcim/sites/${gone.id}/`)).status).toBe(204);
  const restored = await revert(await lastChange());
  expect(restored.status, JSON.stringify(restored.body)).toBe(200);
  expect(restored.reads).toBe(1);
  const putBack = await json("GET", `/api/dcim/sites/${gone.id}/`);
  expect(putBack.body.tags.map((t: { slug: string }) => t.slug)).toEqual(["green"]);
  expect(restored.body.object).toEqual(putBack.body);
  expect(transactions).toBe(0);
});

test("a field's type change on D1 (decision 0121): values converted, a lossy change gated, no transaction", async () => {
  const before = transactions;
  const lab = await made(`${CO}/custom-object-types/`, { name: "retyped", slug: "retyped" });
  const code = await made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: lab.id,
    name: "code",
    type: "text",
  });
  const size = await made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: lab.id,
    name: "size",
    type: "integer",
  });
  await made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: lab.id,
    name: "rack",
    type: "text",
  });
  const a = await made(`${CO}/retyped/`, { code: "12", size: 1, rack: "r1" });
  const b = await made(`${CO}/retyped/`, { code: "twelve", size: 2, rack: "r1" });
  // text → integer loses "twelve": refused, nothing changes
  const lossy = await json("PATCH", `${CO}/custom-object-type-fields/${code.id}/`, {
    type: "integer",
  });
  expect(lossy.status).toBe(409);
  expect(lossy.body.error).toBe("destructive_changes");
  expect((await json("GET", `${CO}/retyped/${b.id}/`)).body.code).toBe("twelve");
  const forced = await json(
    "PATCH",
    `${CO}/custom-object-type-fields/${code.id}/?allow_destructive=true`,
    { type: "integer" },
  );
  expect(forced.status, JSON.stringify(forced.body)).toBe(200);
  expect(forced.body.type).toBe("integer");
  expect((await json("GET", `${CO}/retyped/${a.id}/`)).body.code).toBe(12);
  expect((await json("GET", `${CO}/retyped/${b.id}/`)).body.code).toBeNull();
  // and back to text, with a rename in a later write
  const back = await json("PATCH", `${CO}/custom-object-type-fields/${size.id}/`, { type: "text" });
  expect(back.status, JSON.stringify(back.body)).toBe(200);
  expect((await json("GET", `${CO}/retyped/${a.id}/`)).body.size).toBe("1");
  const renamed = await json("PATCH", `${CO}/custom-object-type-fields/${size.id}/`, {
    name: "height",
  });
  expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
  expect((await json("GET", `${CO}/retyped/${a.id}/`)).body.height).toBe("1");
  expect(transactions).toBe(before);
});

test("a cascade deeper than one read on D1 (decision 0120): another read, one batch, no transaction; over the bound a 409, nothing deleted", async () => {
  const before = transactions;
  const tables: Record<string, string> = {};
  const type = async (slug: string, up?: string) => {
    const cot = await made(`${CO}/custom-object-types/`, { name: slug, slug });
    tables[slug] = `co_${cot.id}`;
    await made(`${CO}/custom-object-type-fields/`, {
      custom_object_type: cot.id,
      name: "name",
      type: "text",
      primary: true,
    });
    if (up)
      await made(`${CO}/custom-object-type-fields/`, {
        custom_object_type: cot.id,
        name: "up",
        type: "object",
        related_object_type: `custom_objects.${up}`,
        on_delete_behavior: "cascade",
      });
  };
  await type("rung0");
  for (let i = 1; i <= 6; i++) await type(`rung${i}`, `rung${i - 1}`);
  const ids = [(await made(`${CO}/rung0/`, { name: "root" })).id as number];
  for (let i = 1; i <= 6; i++)
    ids.push((await made(`${CO}/rung${i}/`, { name: `r${i}`, up: ids[i - 1] })).id);
  expect((await json("DELETE", `${CO}/rung0/${ids[0]}/`)).status).toBe(204);
  for (let i = 1; i <= 6; i++)
    expect((await json("GET", `${CO}/rung${i}/${ids[i]}/`)).status).toBe(404);
  // 10,000 dependants and the target: more than one batch takes (decision 0198; 2,000 before,
  // 200 before that), a 409 stating the bound rather than a 501; made in the database at once
  const crowd = (await made(`${CO}/rung0/`, { name: "crowded" })).id as number;
  await binding
    .prepare(
      `INSERT INTO ${tables.rung1} (created, last_updated, name, up_id) WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 10000) SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'c' || i, ? FROM s`,
    )
    .bind(crowd)
    .all();
  const refused = await json("DELETE", `${CO}/rung0/${crowd}/`);
  expect(refused).toEqual({
    status: 409,
    body: {
      detail:
        "This delete would cascade to more objects than one write takes on this database (at most 10,000 in all); delete the dependants first, in parts of at most that many.",
      error: "cascade_too_large",
    },
  });
  expect((await json("GET", `${CO}/rung0/${crowd}/`)).status).toBe(200);
  expect((await json("GET", `${CO}/rung1/?up_id=${crowd}&limit=1`)).body.count).toBe(10_000);
  expect(transactions).toBe(before);
});

test("a schema apply that retypes fields on D1 (decision 0126): values converted, a lossy one gated, no transaction", async () => {
  const before = transactions;
  const apply = (types: unknown[], allow = false) =>
    json("POST", `${CO}/schema/apply/`, {
      schema: { schema_version: "1", types },
      ...(allow ? { allow_destructive: true } : {}),
    });
  const gauge = (code: string, size: string, extra: unknown[] = []) => [
    {
      name: "gauge",
      slug: "gauge",
      fields: [
        { id: 1, name: "code", type: code, primary: true },
        { id: 2, name: "size", type: size, unique: true },
        ...extra,
      ],
    },
  ];
  expect((await apply(gauge("text", "integer"))).status).toBe(200);
  const a = await made(`${CO}/gauge/`, { code: "12", size: 1 });
  const b = await made(`${CO}/gauge/`, { code: "twelve", size: 2 });
  // integer → text, with a field added in the same apply: one batch
  const grown = await apply(gauge("text", "text", [{ id: 3, name: "note", type: "text" }]));
  expect(grown.status, JSON.stringify(grown.body)).toBe(200);
  expect((await json("GET", `${CO}/gauge/${a.id}/`)).body.size).toBe("1");
  // the unique index came back over the new column
  expect((await json("POST", `${CO}/gauge/`, { code: "x", size: "1" })).status).toBe(400);
  expect((await json("GET", `${CO}/gauge/?q=twelve`)).body.count).toBe(1);
  // text → integer loses "twelve": the gate counts it, nothing changes until allowed
  const lossy = await apply(gauge("integer", "text", [{ id: 3, name: "note", type: "text" }]));
  expect(lossy.status).toBe(409);
  expect(lossy.body.error).toBe("destructive_changes");
  expect(lossy.body.destructive_changes).toEqual([
    expect.objectContaining({ field: "code", reason: "lossy_type_change", rows: 1 }),
  ]);
  expect((await json("GET", `${CO}/gauge/${b.id}/`)).body.code).toBe("twelve");
  const forced = await apply(
    gauge("integer", "text", [{ id: 3, name: "note", type: "text" }]),
    true,
  );
  expect(forced.status, JSON.stringify(forced.body)).toBe(200);
  expect((await json("GET", `${CO}/gauge/${a.id}/`)).body.code).toBe(12);
  expect((await json("GET", `${CO}/gauge/${b.id}/`)).body.code).toBeNull();
  expect(transactions).toBe(before);
});

test("keys and checks over rows that break them, allowed, on D1 (decision 0126): the transaction's 400s, nothing changed, no transaction", async () => {
  const before = transactions;
  const fields = [
    { id: 1, name: "code", type: "text" },
    { id: 2, name: "size", type: "integer" },
  ];
  const apply = (extra: Record<string, unknown> = {}, allow = true) =>
    json("POST", `${CO}/schema/apply/`, {
      schema: { schema_version: "1", types: [{ name: "tote", slug: "tote", fields, ...extra }] },
      ...(allow ? { allow_destructive: true } : {}),
    });
  const first = await apply({}, false);
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  for (const size of [1, 1, 2]) await made(`${CO}/tote/`, { code: "x", size });
  const together = await apply({ unique_together: [["code", "size"]] });
  expect(together.status, JSON.stringify(together.body)).toBe(400);
  expect(together.body.schema_errors[0].path).toBe("$.types[0].unique_together");
  const check = await apply({ checks: [{ name: "small", condition: { size__lte: 1 } }] });
  expect(check.status, JSON.stringify(check.body)).toBe(400);
  expect(check.body.schema_errors[0].message).toBe(
    '1 existing row(s) do not match the check "small".',
  );
  const exported = await json("GET", `${CO}/schema/export?slug=tote`);
  expect(exported.body.types[0].unique_together ?? []).toEqual([]);
  expect(exported.body.types[0].checks ?? []).toEqual([]);
  expect(transactions).toBe(before);
});

test("REST on D1 (decision 0126): a rename a check follows, a removal of a compound key's field, a removal a check reads refused — no transaction", async () => {
  const before = transactions;
  const cot = await made(`${CO}/custom-object-types/`, { name: "slotted", slug: "slotted" });
  const field = (name: string) =>
    made(`${CO}/custom-object-type-fields/`, { custom_object_type: cot.id, name, type: "integer" });
  await field("rack");
  const unit = await field("unit");
  const spare = await field("spare");
  const url = `${CO}/custom-object-types/${cot.id}/`;
  const keyed = await json("PATCH", url, {
    unique_together: [["rack", "spare"]],
    checks: [{ name: "unit_cap", condition: { unit__lte: 40 } }],
  });
  expect(keyed.status, JSON.stringify(keyed.body)).toBe(200);
  await made(`${CO}/slotted/`, { rack: 1, unit: 5, spare: 1 });
  const renamed = await json("PATCH", `${CO}/custom-object-type-fields/${unit.id}/`, {
    name: "height",
  });
  expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
  expect((await json("GET", url)).body.checks).toEqual([
    { name: "unit_cap", condition: { height__lte: 40 } },
  ]);
  expect((await json("POST", `${CO}/slotted/`, { rack: 2, height: 41 })).status).toBe(400);
  // the check reads "height": its removal is refused as the transaction refuses it
  const refused = await json("DELETE", `${CO}/custom-object-type-fields/${unit.id}/`);
  expect(refused.status).toBe(400);
  expect(refused.body.name[0]).toContain("is read by a conditional unique key or check");
  const dropped = await json("DELETE", `${CO}/custom-object-type-fields/${spare.id}/`);
  expect(dropped.status, JSON.stringify(dropped.body)).toBe(204);
  expect((await json("GET", url)).body.unique_together).toEqual([]);
  expect((await made(`${CO}/slotted/`, { rack: 1, height: 6 })).rack).toBe(1);
  expect(transactions).toBe(before);
});

test("a constrained caller's schema apply and trash restore on D1 (decision 0128): staged, the transaction's 403s, no transaction", async () => {
  const SCHEMA = `${CO}/schema`;
  const orm = d1Orm(binding);
  const user = await createUser(orm, { username: "d1-shaper" });
  const grant = await json("POST", "/api/users/permissions/", {
    name: "d1-shaper-types",
    actions: ["view", "add", "change", "delete"],
    object_types: ["custom_objects.customobjecttype"],
    users: [user.id],
    constraints: { slug__startswith: "ok" },
  });
  expect(grant.status, JSON.stringify(grant.body)).toBe(201);
  const shaper = (await issueToken(orm, { username: "d1-shaper" })).key;
  const as = async (path: string, body?: unknown) => {
    const res = await app.request(BASE + path, {
      method: "POST",
      headers: { authorization: `Token ${shaper}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const code = { id: 1, name: "code", type: "text" };
  const note = { id: 2, name: "note", type: "text" };
  const apply = (types: unknown[]) =>
    as(`${SCHEMA}/apply/`, { schema: { schema_version: "1", types }, allow_destructive: true });
  const before = transactions;
  const made1 = await apply([{ name: "ok_d1", slug: "ok_d1", fields: [code, note] }]);
  expect(made1.status, JSON.stringify(made1.body)).toBe(200);
  const trimmed = await apply([
    { name: "ok_d1", slug: "ok_d1", fields: [code], removed_fields: [note] },
  ]);
  expect(trimmed.status, JSON.stringify(trimmed.body)).toBe(200);
  const entries = (await json("GET", `${SCHEMA}/trash/?slug=ok_d1`)).body.results;
  expect(entries).toHaveLength(1);
  const back = await as(`${SCHEMA}/trash/${entries[0].id}/restore/`);
  expect(back.status, JSON.stringify(back.body)).toBe(200);
  // outside the constraints: the transaction's 403, nothing made
  const outside = await apply([{ name: "bad_d1", slug: "bad_d1", fields: [code] }]);
  expect(outside.status, JSON.stringify(outside.body)).toBe(403);
  expect(outside.body.detail).toContain("add the custom object type(s) bad_d1");
  const kit = await apply([{ name: "kit", slug: "kit", fields: [code] }]);
  // a type they may not view answers as a missing slug does: an add refused (decision 0129)
  expect(kit.status).toBe(403);
  expect(kit.body.detail).toContain("add the custom object type(s) kit");
  const slugs = (await json("GET", `${SCHEMA}/export/`)).body.types.map((t: any) => t.slug);
  expect(slugs).toContain("ok_d1");
  expect(slugs).not.toContain("bad_d1");
  const fields = (await json("GET", `${SCHEMA}/export/?slug=ok_d1`)).body.types[0].fields;
  expect(fields.map((f: { name: string }) => f.name)).toEqual(["code", "note"]);
  expect(transactions).toBe(before);
});

test("a schema apply renaming a field and keying it on D1 (decision 0136): rows counted under the old name, the gate and the 400 as on libSQL, no transaction", async () => {
  const before = transactions;
  const apply = (name: string, together: string[][], allow = false) =>
    json("POST", `${CO}/schema/apply/`, {
      schema: {
        schema_version: "1",
        types: [
          {
            name: "berth",
            slug: "berth",
            fields: [
              { id: 1, name: "dock", type: "integer" },
              { id: 2, name, type: "integer" },
            ],
            unique_together: together,
          },
        ],
      },
      ...(allow ? { allow_destructive: true } : {}),
    });
  expect((await apply("slot", [])).status).toBe(200);
  const rows = [];
  for (const slot of [1, 1, 2]) rows.push(await made(`${CO}/berth/`, { dock: 1, slot }));
  // two rows share (dock, slot): refused by the gate, then by the index's 400, nothing changed
  const gated = await apply("bay", [["dock", "bay"]]);
  expect(gated.status, JSON.stringify(gated.body)).toBe(409);
  expect(gated.body.destructive_changes).toEqual([
    expect.objectContaining({ field: "bay,dock", reason: "unique_over_duplicates", rows: 2 }),
  ]);
  const broken = await apply("bay", [["dock", "bay"]], true);
  expect(broken.status, JSON.stringify(broken.body)).toBe(400);
  expect(broken.body.schema_errors[0].path).toBe("$.types[0].unique_together");
  expect((await json("GET", `${CO}/berth/${rows[0].id}/`)).body.slot).toBe(1);
  // the clash gone: renamed and keyed in one batch, the key holds under the new name
  expect((await json("DELETE", `${CO}/berth/${rows[1].id}/`)).status).toBe(204);
  const keyed = await apply("bay", [["dock", "bay"]]);
  expect(keyed.status, JSON.stringify(keyed.body)).toBe(200);
  expect((await json("GET", `${CO}/berth/${rows[2].id}/`)).body.bay).toBe(2);
  expect((await json("POST", `${CO}/berth/`, { dock: 1, bay: 2 })).status).toBe(400);
  // a key over a field the apply adds, whose default every row takes: counted as well
  const added = json("POST", `${CO}/schema/apply/`, {
    schema: {
      schema_version: "1",
      types: [
        {
          name: "berth",
          slug: "berth",
          fields: [
            { id: 1, name: "dock", type: "integer" },
            { id: 2, name: "bay", type: "integer" },
            { id: 3, name: "zone", type: "text", default: "z" },
          ],
          unique_together: [
            ["dock", "bay"],
            ["dock", "zone"],
          ],
        },
      ],
    },
  });
  const zoned = await added;
  expect(zoned.status, JSON.stringify(zoned.body)).toBe(409);
  expect(zoned.body.destructive_changes).toEqual([
    expect.objectContaining({ field: "dock,zone", reason: "unique_over_duplicates", rows: 2 }),
  ]);
  expect(transactions).toBe(before);
});

test("a cascade 24 levels deep on D1 (decision 0136): read as deep as it goes, one batch, no transaction — was 409 cascade_too_large past 16", async () => {
  const before = transactions;
  const node = await made(`${CO}/custom-object-types/`, { name: "limb", slug: "limb" });
  await made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: node.id,
    name: "name",
    type: "text",
    primary: true,
  });
  await made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: node.id,
    name: "parent",
    type: "object",
    related_object_type: "custom_objects.limb",
    on_delete_behavior: "cascade",
  });
  const ids: number[] = [];
  for (let k = 0; k <= 24; k++)
    ids.push((await made(`${CO}/limb/`, { name: `l${k}`, parent: ids[k - 1] ?? null })).id);
  const deleted = await json("DELETE", `${CO}/limb/${ids[0]}/`);
  expect(deleted.status, JSON.stringify(deleted.body)).toBe(204);
  expect((await json("GET", `${CO}/limb/`)).body.count).toBe(0);
  const logged = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.limb&action=delete&limit=50&ordering=id`,
  );
  expect(
    logged.body.results.map((c: { changed_object_id: number }) => c.changed_object_id),
  ).toEqual([...ids].reverse());
  expect(transactions).toBe(before);
});

test("a field made required over rows without a value, allowed, on D1 (decision 0136): gated, then staged — was 501", async () => {
  const before = transactions;
  const apply = (required: boolean, allow = false) =>
    json("POST", `${CO}/schema/apply/`, {
      schema: {
        schema_version: "1",
        types: [
          {
            name: "quay",
            slug: "quay",
            fields: [
              { id: 1, name: "code", type: "text" },
              { id: 2, name: "note", type: "text", required },
            ],
          },
        ],
      },
      ...(allow ? { allow_destructive: true } : {}),
    });
  expect((await apply(false)).status).toBe(200);
  const row = await made(`${CO}/quay/`, { code: "q1" });
  const gated = await apply(true);
  expect(gated.status).toBe(409);
  expect(gated.body.destructive_changes).toEqual([
    expect.objectContaining({ field: "note", reason: "required_over_empty_rows", rows: 1 }),
  ]);
  const allowed = await apply(true, true);
  expect(allowed.status, JSON.stringify(allowed.body)).toBe(200);
  expect((await json("GET", `${CO}/quay/${row.id}/`)).body.note).toBeNull();
  expect((await json("POST", `${CO}/quay/`, { code: "q2" })).status).toBe(400);
  expect((await json("POST", `${CO}/quay/`, { code: "q2", note: "n" })).status).toBe(201);
  expect(transactions).toBe(before);
});

test("a schema apply creating types that point at each other on D1 (decision 0136): one batch, the records naming them, no transaction — was 501", async () => {
  const before = transactions;
  const name = { id: 1, name: "name", type: "text", primary: true };
  const r = await json("POST", `${CO}/schema/apply/`, {
    schema: {
      schema_version: "1",
      types: [
        {
          name: "fleet",
          slug: "fleet",
          fields: [
            name,
            {
              id: 2,
              name: "flagship",
              type: "object",
              related_object_type: "custom-objects/vessel",
            },
          ],
        },
        {
          name: "vessel",
          slug: "vessel",
          fields: [
            name,
            { id: 2, name: "escort", type: "object", related_object_type: "custom-objects/vessel" },
          ],
        },
      ],
    },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const vessel = await made(`${CO}/vessel/`, { name: "v1" });
  expect((await made(`${CO}/vessel/`, { name: "v2", escort: vessel.id })).escort.id).toBe(
    vessel.id,
  );
  const fleet = await made(`${CO}/fleet/`, { name: "f1", flagship: vessel.id });
  expect(fleet.flagship.id).toBe(vessel.id);
  // the field's change record names the type as a GET of the field does
  const field = (await json("GET", `${CO}/custom-object-type-fields/?name=flagship`)).body
    .results[0];
  const logged = await json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.customobjecttypefield&changed_object_id=${field.id}`,
  );
  expect(logged.body.results[0].postchange_data.related_object_type).toEqual(
    field.related_object_type,
  );
  expect(field.related_object_type).toMatchObject({ app_label: "custom_objects", model: "vessel" });
  expect(transactions).toBe(before);
});

test("lists of type and field updates and deletes on D1 (decision 0142): one read, one batch, the answers and rows of a local file, no transaction — were 501", async () => {
  const before = transactions;
  const onD1 = await typeListsScenario(json, "d1l");
  expect(transactions - before).toBe(0);
  const local = await makeTestApp();
  try {
    const onLocal = await typeListsScenario(
      (method, path, body) => local.json(method, path, { body }),
      "d1l",
    );
    expect(onD1).toEqual(onLocal);
  } finally {
    await local.close();
  }
});

test("a schema apply retargeting relations on D1 (decision 0142): gated, then links cleared in one batch, the answers of a local file, no transaction — was 501", async () => {
  const before = transactions;
  const onD1 = await retargetScenario(json, "d1rt");
  expect(transactions - before).toBe(0);
  const local = await makeTestApp();
  try {
    const onLocal = await retargetScenario(
      (method, path, body) => local.json(method, path, { body }),
      "d1rt",
    );
    expect(onD1).toEqual(onLocal);
  } finally {
    await local.close();
  }
  // two fields of one document taking one reverse name on one target: the 400 here too
  const clash = await json("POST", `${CO}/schema/apply/`, {
    schema: {
      schema_version: "1",
      types: ["d1rn_a", "d1rn_b"].map((slug) => ({
        name: slug,
        slug,
        fields: [
          {
            id: 1,
            name: "home",
            type: "object",
            related_object_type: "dcim/site",
            related_name: "d1rn",
          },
        ],
      })),
    },
  });
  expect(clash.status, JSON.stringify(clash.body)).toBe(400);
  expect(JSON.stringify(clash.body)).toContain("related_name");
});

test("a schema apply swapping two fields' names on D1 (decision 0142): through free names in one batch, the answers of a local file, no transaction — was 501", async () => {
  const before = transactions;
  const onD1 = await swapScenario(json, "d1sw");
  expect(transactions - before).toBe(0);
  const local = await makeTestApp();
  try {
    const onLocal = await swapScenario(
      (method, path, body) => local.json(method, path, { body }),
      "d1sw",
    );
    expect(onD1).toEqual(onLocal);
  } finally {
    await local.close();
  }
});

test("a partial key and a check reading a field the apply adds, over rows that break them, on D1 (decision 0142): rows read its default, the gate and the 400s of a local file, no transaction — was 501", async () => {
  const before = transactions;
  const onD1 = await addedKeyScenario(json, "d1ak");
  expect(onD1.checked[0], JSON.stringify(onD1.checked)).toBe(400);
  expect(transactions - before).toBe(0);
  const local = await makeTestApp();
  try {
    const onLocal = await addedKeyScenario(
      (method, path, body) => local.json(method, path, { body }),
      "d1ak",
    );
    expect(onD1).toEqual(onLocal);
  } finally {
    await local.close();
  }
});

test("lists of type creates on D1 (decision 0142): one read, one batch, the answers and rows of a local file, no transaction — were 501", async () => {
  const before = transactions;
  const onD1 = await typeCreatesScenario(json, "d1c");
  expect(onD1.made.length, JSON.stringify(onD1.made)).toBe(2);
  expect(transactions - before).toBe(0);
  const local = await makeTestApp();
  try {
    const onLocal = await typeCreatesScenario(
      (method, path, body) => local.json(method, path, { body }),
      "d1c",
    );
    expect(onD1).toEqual(onLocal);
  } finally {
    await local.close();
  }
});

test("lists of field creates on D1 (decision 0142): one read, one batch, the answers and rows of a local file, no transaction — were 501", async () => {
  const before = transactions;
  const onD1 = await fieldCreatesScenario(json, "d1f");
  expect(onD1.made.length, JSON.stringify(onD1.made)).toBe(3);
  expect(transactions - before).toBe(0);
  const local = await makeTestApp();
  try {
    const onLocal = await fieldCreatesScenario(
      (method, path, body) => local.json(method, path, { body }),
      "d1f",
    );
    expect(onD1).toEqual(onLocal);
  } finally {
    await local.close();
  }
});

test("lists of field updates that change types on D1 (decision 0142): one read, one read of values, one batch, the answers and rows of a local file, no transaction — were 501", async () => {
  const before = transactions;
  const onD1 = await listRetypeScenario(json, "d1r");
  expect(onD1.changed[0], JSON.stringify(onD1.changed)).toBe(200);
  expect(transactions - before).toBe(0);
  const local = await makeTestApp();
  try {
    const onLocal = await listRetypeScenario(
      (method, path, body) => local.json(method, path, { body }),
      "d1r",
    );
    expect(onD1).toEqual(onLocal);
  } finally {
    await local.close();
  }
});

test("two writes racing for one reverse name on D1 (decision 0156): the unique index refuses the later batch, which answers the read check's 400; one holder, no transaction", async () => {
  const before = transactions;
  const races = await reverseNameRaces(
    json,
    json,
    (match) => holdNextWrite(servicesOf(app).db, match),
    "d1rn",
  );
  for (const [kind, race] of Object.entries(races)) {
    const said = `${kind}: ${JSON.stringify(race)}`;
    expect(race?.holders, said).toEqual(["d1rn_b.base"]);
    expect(race?.status, said).toBe(400);
    expect(race?.body, said).toEqual(race?.again.body);
    expect(JSON.stringify(race?.body), said).toContain("related_name");
  }
  expect(transactions - before).toBe(0);
});

test("a list retyping a keyed and checked field after earlier items changed its type, on D1 (decision 0142): the 400s in its place and the rows of a local file, no transaction — was 501", async () => {
  const before = transactions;
  const onD1 = await listRetypeAfterEarlierScenario(json, "d1e");
  expect(onD1.check[0], JSON.stringify(onD1.check)).toBe(400);
  expect(onD1.clash[0], JSON.stringify(onD1.clash)).toBe(400);
  expect(onD1.done[0], JSON.stringify(onD1.done)).toBe(200);
  expect(transactions - before).toBe(0);
  const local = await makeTestApp();
  try {
    const onLocal = await listRetypeAfterEarlierScenario(
      (method, path, body) => local.json(method, path, { body }),
      "d1e",
    );
    expect(onD1).toEqual(onLocal);
  } finally {
    await local.close();
  }
});

test("a cascade of 500 objects on D1 (decision 0155): one batch whose statements grow only with the change records, the answers and rows of a local file — was 409 cascade_too_large", async () => {
  const before = transactions;
  const tagRows = async (objectTypeId: number) =>
    Number(
      (
        await binding
          .prepare("SELECT count(*) AS n FROM tagged_items WHERE object_type_id = ?")
          .bind(objectTypeId)
          .all<{ n: number }>()
      ).results[0]!.n,
    );
  writeBatches.length = 0;
  const onD1 = await bigCascadeScenario(json, "d1big", tagRows);
  expect(onD1.gone[0], JSON.stringify(onD1.gone)).toBe(204);
  expect(transactions - before).toBe(0);
  // 501 objects in one batch: their change records (a few a statement) and a handful of
  // statements a level, where each object took three (its row, its guard, its tags)
  const deleted = writeBatches.filter((b) => b.some((q) => q.includes("AS now ON now.id")));
  expect(deleted.length).toBe(1);
  expect(deleted[0]!.length).toBeLessThan(120);
  const local = await makeTestApp();
  try {
    const orm = servicesOf(local.app).db.orm;
    const onLocal = await bigCascadeScenario(
      (method, path, body) => local.json(method, path, { body }),
      "d1big",
      async (ot) => {
        const [row] = (await orm.all(
          sql`SELECT count(*) AS n FROM tagged_items WHERE object_type_id = ${ot}`,
        )) as Array<{ n: number }>;
        return Number(row!.n);
      },
    );
    expect(onD1).toEqual(onLocal);
  } finally {
    await local.close();
  }
  expect(onD1.left).toEqual([0, 0, 0]);
  expect(onD1.deletes).toEqual([1, 100, 400]);
  expect(onD1.holder).toBeNull();
  expect(onD1.tags).toEqual([400, 0]);
  expect(onD1.first.tags).toEqual(["d1big-big"]);
  expect(onD1.first.peers).toBe(1);
});

test("a list of eight retypes read and converted, then a compound key's field, on D1 (decision 0142): the 400 of a local file from one flat statement — was a 500", async () => {
  const before = transactions;
  const onD1 = await listManyRetypesScenario(json, "d1m", 8);
  expect(onD1.list[0], JSON.stringify(onD1.list)).toBe(400);
  expect(transactions - before).toBe(0);
  const local = await makeTestApp();
  try {
    const onLocal = await listManyRetypesScenario(
      (method, path, body) => local.json(method, path, { body }),
      "d1m",
      8,
    );
    expect(onD1).toEqual(onLocal);
  } finally {
    await local.close();
  }
});

test("relation fields on D1 (decision 0159): the related type, its reverse name's holder and the cycle's graph read in the write's read phase answer as on libSQL (the holder named), a cycle refused, no transaction", async () => {
  const before = transactions;
  const d1Ring = await made(`${CO}/custom-object-types/`, { name: "d1_ring", slug: "d1_ring" });
  const counted = async (method: string, path: string, body: unknown) => {
    await flushSearchIndexesNow(servicesOf(app));
    reads = 0;
    const r = await json(method, path, body);
    return { status: r.status, body: r.body, reads };
  };
  const fields = `${CO}/custom-object-type-fields/`;
  const toKit = await counted("POST", fields, {
    custom_object_type: d1Ring.id,
    name: "kit",
    type: "object",
    related_object_type: "custom_objects.kit",
    related_name: "rings",
  });
  expect(toKit.status, JSON.stringify(toKit.body)).toBe(201);
  expect(toKit.body.related_object_type).toMatchObject({ model: "kit" });
  const either = await counted("POST", fields, {
    custom_object_type: d1Ring.id,
    name: "either",
    type: "multiobject",
    is_polymorphic: true,
    related_object_types: ["dcim.site", "custom_objects.kit"],
  });
  expect(either.status, JSON.stringify(either.body)).toBe(201);
  const renamed = await counted("PATCH", `${fields}${toKit.body.id}/`, { related_name: "loops" });
  expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
  const taken = await counted("POST", fields, {
    custom_object_type: d1Ring.id,
    name: "again",
    type: "object",
    related_object_type: "custom_objects.kit",
    related_name: "loops",
  });
  expect({ status: taken.status, body: taken.body }).toEqual({
    status: 400,
    body: {
      related_name: ['Reverse relation name "loops" is already used by field "kit" on "d1_ring".'],
    },
  });
  // one read phase each (`Database.read`; the checks' own reads went past it, uncounted here)
  expect([toKit.reads, either.reads, renamed.reads, taken.reads]).toEqual([1, 1, 1, 1]);
  const closing = await counted("POST", fields, [
    {
      custom_object_type: kitId,
      name: "ring",
      type: "object",
      related_object_type: "custom_objects.d1_ring",
    },
  ]);
  expect(closing.status, JSON.stringify(closing.body)).toBe(400);
  expect(JSON.stringify(closing.body)).toContain("circular_dependency");
  expect(transactions - before).toBe(0);
});
