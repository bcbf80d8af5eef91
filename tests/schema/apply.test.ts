import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { SCHEMA, doc, dump, exampleChoiceSets, exampleDoc } from "./helpers";

const CO = "/api/plugins/custom-objects";
let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const apply = (body: unknown, opts: { token?: string | null; query?: string } = {}) =>
  t.json("POST", `${SCHEMA}/apply/${opts.query ?? ""}`, { body, token: opts.token });
const preview = (body: unknown, token?: string | null) =>
  t.json("POST", `${SCHEMA}/preview/`, { body, token });

describe("order of checks", () => {
  test("authentication, then both permissions (403 with either missing), then validation", async () => {
    expect((await apply({ schema: { nonsense: true } }, { token: null })).status).toBe(403);
    const addOnly = await t.user("add-only", [[["add"], "custom_objects.customobjecttype"]]);
    const changeOnly = await t.user("change-only", [
      [["change"], "custom_objects.customobjecttype"],
    ]);
    const both = await t.user("both", [[["add", "change"], "custom_objects.customobjecttype"]]);
    expect((await apply({ schema: { nonsense: true } }, { token: addOnly })).status).toBe(403);
    expect((await apply({ schema: { nonsense: true } }, { token: changeOnly })).status).toBe(403);
    const r = await apply({ schema: { nonsense: true } }, { token: both });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("invalid_schema");
    expect(r.body.schema_errors.map((e: any) => e.path)).toEqual(
      expect.arrayContaining(["$.schema_version", "$.types", "$.nonsense"]),
    );
    // preview needs view on custom object types (issue 27)
    expect((await preview(exampleDoc(), null)).status).toBe(403);
    expect((await preview(exampleDoc(), await t.user("anyone"))).status).toBe(403);
    const viewer = await t.user("viewer", [[["view"], "custom_objects.customobjecttype"]]);
    expect((await preview(exampleDoc(), viewer)).status).toBe(200);
  });

  test("allow_destructive must be a JSON boolean", async () => {
    const r = await apply({ schema: exampleDoc(), allow_destructive: "yes" });
    expect(r.status).toBe(400);
    expect(r.body.schema_errors[0].path).toBe("$.allow_destructive");
  });

  test("unresolvable choice sets → 400 unresolvable_reference, nothing written", async () => {
    const before = await dump(t);
    const r = await apply({ schema: exampleDoc() });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("unresolvable_reference");
    expect(r.body.detail).toContain("support-hours");
    expect(await dump(t)).toBe(before);
  });

  test("unresolvable related types → 400", async () => {
    const r = await apply({
      schema: doc([
        {
          name: "ghost",
          slug: "ghost",
          fields: [
            { id: 1, name: "x", type: "object", related_object_type: "custom-objects/nowhere" },
          ],
        },
      ]),
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("unresolvable_reference");
    const host = await apply({
      schema: doc([
        {
          name: "ghost",
          slug: "ghost",
          fields: [{ id: 1, name: "x", type: "object", related_object_type: "dcim/nothing" }],
        },
      ]),
    });
    expect(host.body.error).toBe("unresolvable_reference");
  });

  test("cycles of length ≥ 2 → 400 circular_dependency; a self-reference is fine", async () => {
    const cyc = doc([
      {
        name: "ca",
        slug: "ca",
        fields: [{ id: 1, name: "b", type: "object", related_object_type: "custom-objects/cb" }],
      },
      {
        name: "cb",
        slug: "cb",
        fields: [
          { id: 1, name: "a", type: "multiobject", related_object_type: "custom-objects/ca" },
        ],
      },
    ]);
    const r = await apply({ schema: cyc });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("circular_dependency");
    const self = await apply({
      schema: doc([
        {
          name: "tree",
          slug: "tree",
          fields: [
            { id: 1, name: "parent", type: "object", related_object_type: "custom-objects/tree" },
          ],
        },
      ]),
    });
    expect(self.status).toBe(200);
  });
});

describe("applying the example document", () => {
  test("creates the types in dependency order; the second apply has no changes", async () => {
    await exampleChoiceSets(t);
    const first = await apply({ schema: exampleDoc() });
    expect(first.status).toBe(200);
    expect(first.body.applied).toBe(true);
    const second = await apply(exampleDoc(), { query: "?allow_destructive=false" }); // bare document form
    expect(second.status).toBe(200);
    expect(second.body.diffs.every((d: any) => d.has_changes === false)).toBe(true);
    const cot = await t.json("GET", `${CO}/custom-object-types/?slug=circuit`);
    expect(cot.body.results[0].fields.length).toBe(12);
    expect(cot.body.results[0].schema_document.slug).toBe("circuit");
    const provider = await t.json("POST", `${CO}/circuit_provider/`, {
      body: { name: "Carrier", account_number: "ACCT-1", support_hours: "24x7" },
    });
    expect(provider.status).toBe(201);
    const circuit = await t.json("POST", `${CO}/circuit/`, {
      body: { cid: "C1", provider: provider.body.id, labels: ["primary"], bandwidth_mbps: 100 },
    });
    expect(circuit.status).toBe(201);
    expect(circuit.body.active).toBe(true);
    expect((await t.json("DELETE", `${CO}/circuit_provider/${provider.body.id}/`)).status).toBe(
      409,
    ); // protect
  });

  test("preview and apply share one engine: apply's diffs equal the preview's", async () => {
    const d = exampleDoc();
    d.types[0].description = "Carriers (edited)";
    d.types[0].fields.push({ id: 5, name: "escalation_email", type: "text" });
    const p = await preview({ schema: d });
    const a = await apply({ schema: d });
    expect(a.status).toBe(200);
    expect(a.body.diffs).toEqual(p.body.diffs);
    expect(p.body.diffs[0].cot_changes.description).toEqual([
      "Carriers we buy WAN circuits from",
      "Carriers (edited)",
    ]);
  });

  test("export returns documents that re-apply with no changes", async () => {
    const exported = await t.json("GET", `${SCHEMA}/export/`);
    expect(exported.status).toBe(200);
    expect(exported.body.schema_version).toBe("1");
    const again = await apply({ schema: exported.body });
    expect(again.status).toBe(200);
    expect(again.body.diffs.every((d: any) => !d.has_changes)).toBe(true);
    const one = await t.json("GET", `${SCHEMA}/export/?slug=circuit`);
    expect(one.body.types.map((x: any) => x.slug)).toEqual(["circuit"]);
    expect((await t.json("GET", `${SCHEMA}/export/?slug=nope`)).status).toBe(404);
  });
});

describe("data through changes", () => {
  const labDoc = (fields: unknown[], removed?: unknown[]) =>
    doc([{ name: "lab", slug: "lab", fields, ...(removed ? { removed_fields: removed } : {}) }]);

  test("a renamed field keeps its data; text → integer converts numeric strings", async () => {
    expect(
      (
        await apply({
          schema: labDoc([
            { id: 1, name: "code", type: "text" },
            { id: 2, name: "label", type: "text" },
          ]),
        })
      ).status,
    ).toBe(200);
    const a = await t.json("POST", `${CO}/lab/`, { body: { code: "42", label: "first" } });
    const renamed = await apply({
      schema: labDoc([
        { id: 1, name: "number", type: "integer" },
        { id: 2, name: "title", type: "text" },
      ]),
    });
    expect(renamed.status).toBe(200);
    const after = await t.json("GET", `${CO}/lab/${a.body.id}/`);
    expect(after.body.number).toBe(42);
    expect(after.body.title).toBe("first");
  });

  test("a swap of two field names keeps each value with its field", async () => {
    const b = await t.json("POST", `${CO}/lab/`, { body: { number: 7, title: "swap" } });
    const d = labDoc([
      { id: 1, name: "title", type: "text" },
      { id: 2, name: "number", type: "text" },
    ]);
    const r = await apply({ schema: d });
    expect(r.status).toBe(200);
    const after = await t.json("GET", `${CO}/lab/${b.body.id}/`);
    expect(after.body.title).toBe("7");
    expect(after.body.number).toBe("swap");
  });

  test("lossy type change and removals: 409 without allow_destructive (database untouched), applied with it", async () => {
    const c = await t.json("POST", `${CO}/lab/`, { body: { title: "not-a-number", number: "n" } });
    const lossy = labDoc(
      [{ id: 1, name: "title", type: "integer" }],
      [{ id: 2, name: "number", type: "text" }],
    );
    const before = await dump(t);
    const refused = await apply({ schema: lossy });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      error: "destructive_changes",
      destructive_slugs: ["lab"],
    });
    expect(typeof refused.body.detail).toBe("string");
    expect(await dump(t)).toBe(before);
    const forced = await apply({ schema: lossy, allow_destructive: true });
    expect(forced.status).toBe(200);
    const after = await t.json("GET", `${CO}/lab/${c.body.id}/`);
    expect(after.body.title).toBeNull();
    expect(after.body.number).toBeUndefined();
    const cot = await t.json("GET", `${CO}/custom-object-types/?slug=lab`);
    expect(cot.body.results[0].schema_document.removed_fields.map((r: any) => r.id)).toEqual([2]);
    // tombstones accumulate and block reuse of the id
    const reuse = await apply({
      schema: labDoc([
        { id: 1, name: "title", type: "integer" },
        { id: 2, name: "again", type: "text" },
      ]),
    });
    expect(reuse.status).toBe(400);
    expect(reuse.body.schema_errors[0].path).toBe("$.types[0].fields[1].id");
  });

  test("a failure in the middle of an apply leaves the database exactly as it was", async () => {
    await apply({
      schema: doc([
        { name: "dupes", slug: "dupes", fields: [{ id: 1, name: "serial", type: "text" }] },
      ]),
    });
    await t.json("POST", `${CO}/dupes/`, { body: [{ serial: "X" }, { serial: "X" }] });
    const before = await dump(t);
    const r = await apply({
      schema: doc([
        { name: "early", slug: "early", fields: [{ id: 1, name: "x", type: "text" }] },
        {
          name: "dupes",
          slug: "dupes",
          description: "changed first",
          fields: [
            { id: 1, name: "serial", type: "text" },
            { id: 2, name: "code", type: "text", unique: true },
          ],
        },
        {
          name: "dupes_b",
          slug: "dupes_b",
          fields: [{ id: 1, name: "serial", type: "text", unique: true }],
        },
      ]),
    });
    expect(r.status).toBe(200); // unique on a new empty column is fine
    const failing = await apply({
      schema: doc([
        { name: "late", slug: "late", fields: [{ id: 1, name: "x", type: "text" }] },
        {
          name: "dupes",
          slug: "dupes",
          description: "changed again",
          fields: [
            { id: 1, name: "serial", type: "text", unique: true },
            { id: 2, name: "code", type: "text", unique: true },
          ],
        },
      ]),
      // unique over duplicates is gated (409, see impact tests); allowed, the index still cannot be built
      allow_destructive: true,
    });
    expect(failing.status).toBe(400);
    expect(failing.body.error).toBe("invalid_schema");
    expect(JSON.stringify(failing.body.schema_errors)).toContain("not unique");
    const afterOk = await dump(t);
    expect(afterOk).not.toBe(before); // the first, good apply did land
    expect((await t.req("GET", `${CO}/late/`)).status).toBe(404);
    const again = await apply({
      schema: doc([
        { name: "late", slug: "late", fields: [] },
        {
          name: "dupes",
          slug: "dupes",
          fields: [{ id: 1, name: "serial", type: "text", unique: true }],
        },
      ]),
      allow_destructive: true,
    });
    expect(again.status).toBe(400);
    expect(await dump(t)).toBe(afterOk);
  });
});

describe("plans and concurrency", () => {
  test("preview returns state_hash; apply with a stale expected_state_hash → 409 stale_plan", async () => {
    const entry = {
      name: "planned",
      slug: "planned",
      fields: [{ id: 1, name: "a", type: "text" }],
    };
    const d = doc([entry]);
    const p = await preview({ schema: d });
    expect(p.body.state_hash).toMatch(/^[0-9a-f]{64}$/);
    expect((await preview({ schema: d })).body.state_hash).toBe(p.body.state_hash);
    const ok = await apply({ schema: d, expected_state_hash: p.body.state_hash });
    expect(ok.status).toBe(200);
    const stale = await apply({
      schema: doc([{ ...entry, description: "x" }]),
      expected_state_hash: p.body.state_hash,
    });
    expect(stale.status).toBe(409);
    expect(stale.body.error).toBe("stale_plan");
  });

  test("two applies at once are serialised: both land, in some order, fully", async () => {
    const a = doc([
      {
        name: "race",
        slug: "race",
        fields: [
          { id: 1, name: "a", type: "text" },
          { id: 2, name: "b", type: "integer" },
        ],
      },
    ]);
    const b = doc([
      {
        name: "race",
        slug: "race",
        fields: [
          { id: 1, name: "a", type: "text" },
          { id: 2, name: "b", type: "integer" },
          { id: 3, name: "c", type: "boolean" },
        ],
      },
    ]);
    const [ra, rb] = await Promise.all([apply({ schema: a }), apply({ schema: b })]);
    expect([ra.status, rb.status]).toEqual([200, 200]);
    const fields = (
      await t.json("GET", `${CO}/custom-object-types/?slug=race`)
    ).body.results[0].fields
      .map((f: any) => f.name)
      .sort();
    expect(fields).toEqual(["a", "b", "c"]);
  });

  test("instance writes racing an apply are neither lost nor half-applied", async () => {
    await apply({
      schema: doc([
        { name: "busy", slug: "busy", fields: [{ id: 1, name: "n", type: "integer" }] },
      ]),
    });
    const writes = Array.from({ length: 40 }, (_, i) =>
      t.json("POST", `${CO}/busy/`, { body: { n: i } }),
    );
    const applies = [
      apply({
        schema: doc([
          {
            name: "busy",
            slug: "busy",
            fields: [
              { id: 1, name: "n", type: "integer" },
              { id: 2, name: "extra", type: "text", default: "d" },
            ],
          },
        ]),
      }),
      apply({
        schema: doc([
          {
            name: "busy",
            slug: "busy",
            fields: [
              { id: 1, name: "num", type: "integer" },
              { id: 2, name: "extra", type: "text", default: "d" },
            ],
          },
        ]),
      }),
    ];
    const results = await Promise.all(writes);
    for (const r of await Promise.all(applies)) expect(r.status).toBe(200);
    const created = results.filter((r) => r.status === 201);
    // a write that ran after the rename names a field that no longer exists: a clear 400, never a
    // 500; one whose type changed shape under it twice (two applies) lost a race: 409, retryable
    for (const r of results) {
      expect([201, 400, 409]).toContain(r.status);
      if (r.status === 409) expect(r.body.error).toBe("schema_changed");
    }
    const list = await t.json("GET", `${CO}/busy/?limit=1000`);
    expect(list.body.count).toBe(created.length);
    const values = list.body.results.map((o: any) => o.num).sort((x: number, y: number) => x - y);
    expect(values).toEqual(
      created.map((r) => r.body.n ?? r.body.num).sort((x: number, y: number) => x - y),
    );
    expect(list.body.results.every((o: any) => o.extra === "d" || o.extra === null)).toBe(true);
  });
});
