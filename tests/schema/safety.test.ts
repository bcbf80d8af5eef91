/**
 * Issue 16: reviewed plans (plan_id bound to the previewed state, 409 stale_plan) and impact
 * counted against live rows (409 destructive_changes naming slug, field, reason and rows).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { SCHEMA, doc, dump } from "./helpers";

const CO = "/api/plugins/custom-objects";
let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
  for (const [name, choices] of [
    [
      "sizes",
      [
        ["s", "S"],
        ["m", "M"],
        ["l", "L"],
      ],
    ],
    ["sizes_small", [["s", "S"]]],
  ] as const) {
    const r = await t.json("POST", "/api/extras/custom-field-choice-sets/", {
      body: { name, extra_choices: choices },
    });
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
});
afterAll(() => t.close());

const apply = (body: unknown) => t.json("POST", `${SCHEMA}/apply/`, { body });
const preview = (body: unknown) => t.json("POST", `${SCHEMA}/preview/`, { body });
const rows = async (slug: string, items: unknown[]) => {
  const r = await t.json("POST", `${CO}/${slug}/`, { body: items });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  return r.body as Array<{ id: number }>;
};

describe("impact counted against live rows", () => {
  const base = [
    { id: 1, name: "code", type: "text" },
    { id: 2, name: "note", type: "text" },
    { id: 3, name: "qty", type: "text" },
    { id: 4, name: "owner", type: "text" },
    { id: 5, name: "size", type: "select", choice_set: "sizes" },
    { id: 6, name: "site", type: "object", related_object_type: "dcim/site" },
    { id: 7, name: "spare", type: "text" },
  ];
  const typeDoc = (fields: unknown[], removed?: unknown[]) =>
    doc([{ name: "gear", slug: "gear", fields, ...(removed ? { removed_fields: removed } : {}) }]);
  let siteId: number;

  beforeAll(async () => {
    expect((await apply({ schema: typeDoc(base) })).status).toBe(200);
    const site = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Gear site", slug: "gear-site" },
    });
    siteId = site.body.id;
    await rows("gear", [
      { code: "A", note: "n1", qty: "12", owner: "x", size: "s", site: siteId },
      { code: "A", note: "n2", qty: "many", size: "l", site: siteId },
      { code: "B", qty: "lots", size: "m" },
    ]);
  });

  const entries = (fields: unknown[], removed?: unknown[]) => ({
    schema: typeDoc(fields, removed),
  });
  const withField = (id: number, change: Record<string, unknown>) =>
    base.map((f) => (f.id === id ? { ...f, ...change } : f));

  test.each([
    [
      "field removal with values",
      entries(
        base.filter((f) => f.id !== 2),
        [{ id: 2 }],
      ),
      "note",
      "field_removed",
      2,
    ],
    [
      "lossy type change (unconvertible values counted)",
      entries(withField(3, { type: "integer" })),
      "qty",
      "lossy_type_change",
      2,
    ],
    [
      "required over empty rows, no default",
      entries(withField(4, { required: true })),
      "owner",
      "required_over_empty_rows",
      2,
    ],
    [
      "unique over duplicates",
      entries(withField(1, { unique: true })),
      "code",
      "unique_over_duplicates",
      2,
    ],
    [
      "choices removed while in use",
      entries(withField(5, { choice_set: "sizes_small" })),
      "size",
      "choices_in_use",
      2,
    ],
    [
      "link target changed while links exist",
      entries(withField(6, { related_object_type: "dcim/device" })),
      "site",
      "link_target_changed",
      2,
    ],
  ])(
    "%s: counted in preview, 409 in apply with slug, field, reason, rows; nothing changed",
    async (_, body, field, reason, count) => {
      const p = await preview(body);
      expect(p.status).toBe(200);
      const entry = { slug: "gear", field, reason, rows: count };
      expect(p.body.destructive_changes).toEqual([expect.objectContaining(entry)]);
      expect(p.body.diffs[0].destructive_changes).toEqual([expect.objectContaining(entry)]);
      expect(p.body.diffs[0].has_destructive_changes).toBe(true);
      const before = await dump(t);
      const r = await apply(body);
      expect(r.status).toBe(409);
      expect(r.body).toMatchObject({
        error: "destructive_changes",
        destructive_slugs: ["gear"],
        destructive_changes: [expect.objectContaining(entry)],
      });
      expect(await dump(t)).toBe(before);
    },
  );

  test("unique over duplicates: 409 with its count first; with allow_destructive a 400 keyed by the field, never a 500", async () => {
    expect((await apply(entries(withField(1, { unique: true })))).body.destructive_changes).toEqual(
      [expect.objectContaining({ field: "code", reason: "unique_over_duplicates", rows: 2 })],
    );
    const r = await apply({ ...entries(withField(1, { unique: true })), allow_destructive: true });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("invalid_schema");
    expect(r.body.schema_errors[0].path).toBe("$.types[0].fields[0].unique");
  });

  test("a removal of an empty column is still a 409 destructive_changes with rows 0 (seed rule, decision 0075); nothing changed", async () => {
    const removal = entries(
      base.filter((f) => f.id !== 7),
      [{ id: 7 }],
    );
    const p = await preview(removal);
    const entry = { slug: "gear", field: "spare", reason: "field_removed", rows: 0 };
    expect(p.body.destructive_changes).toEqual([expect.objectContaining(entry)]);
    expect(p.body.diffs[0].has_destructive_changes).toBe(true);
    const before = await dump(t);
    const r = await apply(removal);
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({
      error: "destructive_changes",
      destructive_slugs: ["gear"],
      destructive_changes: [expect.objectContaining(entry)],
    });
    expect(await dump(t)).toBe(before);
  });

  test("changes that lose nothing are not gated: rename, widening, required with a default", async () => {
    const lossless = entries(
      base.map((f) =>
        f.id === 2
          ? { ...f, name: "remark" }
          : f.id === 3
            ? { ...f, type: "longtext" }
            : f.id === 4
              ? { ...f, required: true, default: "nobody" }
              : f,
      ),
    );
    const p = await preview(lossless);
    expect(p.body.destructive_changes).toEqual([]);
    expect(p.body.diffs[0].has_destructive_changes).toBe(false);
    const r = await apply(lossless);
    expect(r.status).toBe(200);
    const list = await t.json("GET", `${CO}/gear/?ordering=id`);
    expect(list.body.results.map((x: any) => x.remark)).toEqual(["n1", "n2", null]);
  });

  test("link target change applied with allow_destructive clears the old links", async () => {
    const current = (await t.json("GET", `${SCHEMA}/export/?slug=gear`)).body;
    const fields = current.types[0].fields.map((f: any) =>
      f.name === "site" ? { ...f, related_object_type: "dcim/device" } : f,
    );
    const body = {
      schema: { ...current, types: [{ ...current.types[0], fields }] },
      allow_destructive: true,
    };
    const r = await apply(body);
    expect(r.status).toBe(200);
    const list = await t.json("GET", `${CO}/gear/?ordering=id`);
    expect(list.body.results.map((x: any) => x.site)).toEqual([null, null, null]);
  });
});

describe("reviewed plans", () => {
  const entry = (label: string) =>
    doc([
      { name: "planned", slug: "planned", fields: [{ id: 1, name: "a", type: "text", label }] },
    ]);

  test("preview returns plan_id, from and to state hashes; applying the plan lands on to_state_hash", async () => {
    const p = await preview({ schema: entry("A") });
    const { plan_id, from_state_hash, to_state_hash } = p.body;
    expect(plan_id).toMatch(/^[0-9a-f]{32}\.[0-9a-f]{32}$/);
    expect(from_state_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(to_state_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(to_state_hash).not.toBe(from_state_hash);
    const r = await apply({ schema: entry("A"), plan_id });
    expect(r.status).toBe(200);
    expect(r.body.plan_id).toBe(plan_id);
    const after = await preview({ schema: entry("A") });
    expect(after.body.from_state_hash).toBe(to_state_hash);
    expect(after.body.to_state_hash).toBe(after.body.from_state_hash); // nothing left to change
  });

  test("the database moved since the preview: 409 stale_plan and nothing changed", async () => {
    const p = await preview({ schema: entry("B") });
    // someone else changes the type in between
    expect((await apply({ schema: entry("C") })).status).toBe(200);
    const before = await dump(t);
    const r = await apply({ schema: entry("B"), plan_id: p.body.plan_id });
    expect(r.status).toBe(409);
    expect(r.body.error).toBe("stale_plan");
    expect(await dump(t)).toBe(before);
  });

  test("a plan_id applied with another document: 409 plan_mismatch; a malformed plan_id: 400", async () => {
    const p = await preview({ schema: entry("D") });
    const r = await apply({ schema: entry("E"), plan_id: p.body.plan_id });
    expect(r.status).toBe(409);
    expect(r.body.error).toBe("plan_mismatch");
    const bad = await apply({ schema: entry("D"), plan_id: "nope" });
    expect(bad.status).toBe(400);
    expect(bad.body.schema_errors[0].path).toBe("$.plan_id");
    // without plan_id apply behaves as before
    expect((await apply({ schema: entry("D") })).status).toBe(200);
  });
});
