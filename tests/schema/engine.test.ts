import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { parseDocument } from "../../src/plugins/custom-objects/schema/document";
import { diffDocument } from "../../src/plugins/custom-objects/schema/diff";
import { ObjectTypeRegistry } from "../../src/core/object-types";
import { SCHEMA, doc, exampleChoiceSets, exampleDoc } from "./helpers";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
  await exampleChoiceSets(t);
});
afterAll(() => t.close());

const diff = async (d: unknown) => {
  const parsed = parseDocument(d);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  return diffDocument(t.deps.db.orm, new ObjectTypeRegistry(t.deps.db), parsed.document);
};
const apply = (d: unknown, extra: Record<string, unknown> = {}) =>
  t.json("POST", `${SCHEMA}/apply/`, { body: { schema: d, ...extra } });

describe("document validation", () => {
  test("the example document is valid", () => {
    expect(parseDocument(exampleDoc()).ok).toBe(true);
  });
  test("errors carry JSON paths; unknown keys and other versions are refused", () => {
    const r = parseDocument({
      schema_version: "2",
      types: [
        {
          name: "Bad",
          slug: "x y",
          fields: [{ id: 0, name: "id", type: "colour", extra: 1 }],
          bogus: true,
        },
      ],
    });
    expect(r.ok).toBe(false);
    const paths = (r as any).errors.map((e: any) => e.path);
    for (const p of [
      "$.schema_version",
      "$.types[0].name",
      "$.types[0].slug",
      "$.types[0].fields[0].id",
      "$.types[0].fields[0].name",
      "$.types[0].fields[0].type",
      "$.types[0].fields[0].extra",
      "$.types[0].bogus",
    ])
      expect(paths).toContain(p);
  });
  test("type-specific attributes", () => {
    const r = parseDocument(
      doc([
        {
          name: "a",
          slug: "a",
          fields: [
            { id: 1, name: "t", type: "text", validation_minimum: 1 },
            { id: 2, name: "i", type: "integer", validation_regex: "x" },
            { id: 3, name: "s", type: "select" },
            { id: 4, name: "o", type: "object" },
            {
              id: 5,
              name: "p",
              type: "object",
              is_polymorphic: true,
              related_object_type: "dcim/site",
            },
            { id: 6, name: "x", type: "text", choice_set: "c" },
            { id: 6, name: "x", type: "text" },
          ],
        },
      ]),
    );
    const errs = (r as any).errors.map((e: any) => `${e.path}`);
    expect(errs).toEqual(
      expect.arrayContaining([
        "$.types[0].fields[0].validation_minimum",
        "$.types[0].fields[1].validation_regex",
        "$.types[0].fields[2].choice_set",
        "$.types[0].fields[3].related_object_type",
        "$.types[0].fields[4].related_object_types",
        "$.types[0].fields[5].choice_set",
        "$.types[0].fields[6].id",
      ]),
    );
  });
  test("at most 20 errors", () => {
    const fields = Array.from({ length: 40 }, (_, i) => ({
      id: i + 1,
      name: `f${i}`,
      type: "nope",
    }));
    const r = parseDocument(doc([{ name: "a", slug: "a", fields }]));
    expect((r as any).errors.length).toBe(20);
  });
});

describe("diff engine", () => {
  test("a new type: every field is an add", async () => {
    const { diffs } = await diff(exampleDoc());
    expect(diffs.map((d) => d.slug)).toEqual(["circuit_provider", "circuit", "dhcp_scope"]);
    expect(diffs.every((d) => d.is_new && d.has_changes && !d.has_destructive_changes)).toBe(true);
    expect(diffs[1]!.field_changes.map((c) => c.op)).toEqual(Array(12).fill("add"));
    expect(diffs[1]!.field_changes[1]).toMatchObject({
      op: "add",
      schema_id: 2,
      db_name: "provider",
    });
  });

  test("alters with changed_attrs, renames, type changes, removals and warnings", async () => {
    const base = doc([
      {
        name: "eng",
        slug: "eng",
        fields: [
          { id: 1, name: "a", type: "text" },
          { id: 2, name: "b", type: "text" },
          { id: 3, name: "c", type: "integer" },
          { id: 4, name: "d", type: "text" },
        ],
      },
    ]);
    expect((await apply(base)).status).toBe(200);
    await t.json("POST", "/api/plugins/custom-objects/eng/", { body: { b: "12", d: "x" } });
    await t.json("POST", "/api/plugins/custom-objects/eng/", { body: { b: "not a number" } });
    const next = doc([
      {
        name: "eng",
        slug: "eng",
        description: "now described",
        fields: [
          { id: 1, name: "a_renamed", type: "text" },
          { id: 2, name: "b", type: "integer" },
          { id: 3, name: "c", type: "integer", required: true },
          { id: 5, name: "e", type: "boolean" },
        ],
        removed_fields: [{ id: 4, name: "d" }],
      },
    ]);
    const { diffs, errors } = await diff(next);
    expect(errors).toEqual([]);
    const d = diffs[0]!;
    expect(d.is_new).toBe(false);
    expect(d.cot_changes).toEqual({ description: ["", "now described"] });
    const byId = Object.fromEntries(d.field_changes.map((c) => [c.schema_id, c]));
    expect(byId[1]).toMatchObject({
      op: "alter",
      db_name: "a",
      changed_attrs: { name: ["a", "a_renamed"] },
      destructive: false,
    });
    expect(byId[2]).toMatchObject({
      op: "alter",
      changed_attrs: { type: ["text", "integer"] },
      destructive: true,
    });
    expect(byId[3]).toMatchObject({ op: "alter", changed_attrs: { required: [false, true] } });
    expect(byId[4]).toMatchObject({ op: "remove", db_name: "d", destructive: true });
    expect(byId[5]).toMatchObject({ op: "add", db_name: "e" });
    expect(d.has_destructive_changes).toBe(true);
    expect(d.warnings.join(" ")).toContain("loses 1 value");
  });

  test("a field missing from both lists is a warning, never a removal", async () => {
    const { diffs } = await diff(
      doc([{ name: "eng", slug: "eng", fields: [{ id: 1, name: "a", type: "text" }] }]),
    );
    expect(diffs[0]!.field_changes.filter((c) => c.op === "remove")).toEqual([]);
    expect(diffs[0]!.warnings.length).toBe(3);
  });

  test("unchanged document: has_changes false; a lossless type change is not destructive", async () => {
    const same = doc([
      {
        name: "eng",
        slug: "eng",
        fields: [
          { id: 1, name: "a", type: "text" },
          { id: 2, name: "b", type: "text" },
          { id: 3, name: "c", type: "integer" },
          { id: 4, name: "d", type: "text" },
        ],
      },
    ]);
    const { diffs } = await diff(same);
    expect(diffs[0]!.has_changes).toBe(false);
    const widened = await diff(
      doc([
        {
          name: "eng",
          slug: "eng",
          fields: [
            { id: 1, name: "a", type: "text" },
            { id: 2, name: "b", type: "text" },
            { id: 3, name: "c", type: "text" },
            { id: 4, name: "d", type: "longtext" },
          ],
        },
      ]),
    );
    expect(widened.diffs[0]!.has_changes).toBe(true);
    expect(widened.diffs[0]!.has_destructive_changes).toBe(false);
  });

  test("reusing a field id or taking a kept field's name is an error", async () => {
    expect(
      (
        await apply(
          doc([
            {
              name: "eng",
              slug: "eng",
              fields: [{ id: 1, name: "a", type: "text" }],
              removed_fields: [{ id: 4 }],
            },
          ]),
          { allow_destructive: true },
        )
      ).status,
    ).toBe(200);
    const reuse = await diff(
      doc([{ name: "eng", slug: "eng", fields: [{ id: 4, name: "dd", type: "text" }] }]),
    );
    expect(reuse.errors.map((e) => e.path)).toContain("$.types[0].fields[0].id");
    const taken = await diff(
      doc([{ name: "eng", slug: "eng", fields: [{ id: 9, name: "b", type: "text" }] }]),
    );
    expect(taken.errors.map((e) => e.path)).toContain("$.types[0].fields[0].name");
  });
});
