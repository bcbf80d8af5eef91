/**
 * Issue 29, point 6: URL fields with an optional link title, as custom objects 0.7 has them
 * (netboxlabs/netbox-custom-objects #496): a url field `website` keeps its title in a second
 * column `website_title`, read and written flat as `website_title` (an empty string when unset),
 * at most 200 characters; renames, removals (the trash) and restores carry it; a field cannot
 * take the title's name, and a url field never changes type. Decision 0100.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { parse } from "yaml";
import { runMigrations } from "../../src/migrations";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, create, makeCot } from "./fixtures";

const SCHEMA = `${CO}/schema`;
let t: TestApp;
let cotId: number;

beforeAll(async () => {
  t = await makeTestApp();
  cotId = (await makeCot(t, "link_box")).id;
  await addField(t, cotId, { name: "name", type: "text", primary: true, required: true });
  await addField(t, cotId, { name: "website", type: "url" });
});
afterAll(() => t.close());

const columns = async (table: string) =>
  (await t.deps.db.client.execute(`SELECT name FROM pragma_table_info('${table}')`)).rows.map((r) =>
    String(r.name),
  );
const apply = (body: Record<string, unknown>) => t.json("POST", `${SCHEMA}/apply/`, { body });

describe("REST: the link title beside the URL", () => {
  test("pynetbox writes a URL with its link title, and reads both flat", async () => {
    // nb.plugins.custom_objects.link_box.create(name=..., website=..., website_title=...)
    const made = await t.json("POST", `${CO}/link_box/`, {
      body: { name: "Box", website: "https://example.com/", website_title: "Example Site" },
    });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      website: "https://example.com/",
      website_title: "Example Site",
    });
    const got = await t.json("GET", `${CO}/link_box/${made.body.id}/`);
    expect(got.body.website).toBe("https://example.com/");
    expect(got.body.website_title).toBe("Example Site");
    const listed = await t.json("GET", `${CO}/link_box/?id=${made.body.id}`);
    expect(listed.body.results[0].website_title).toBe("Example Site");
  });

  test("a URL without a title reads an empty title, as upstream's column default", async () => {
    const made = await create(t, "link_box", { name: "Bare", website: "https://bare.example/" });
    expect(made.website_title).toBe("");
    // a title is allowed without a URL (upstream: the two are independent)
    const titleOnly = await create(t, "link_box", { name: "Orphan", website_title: "Just text" });
    expect(titleOnly).toMatchObject({ website: null, website_title: "Just text" });
  });

  test("pynetbox's save() sends only the changed title; the URL keeps its value", async () => {
    const made = await create(t, "link_box", { name: "Edit", website: "https://edit.example/" });
    const patched = await t.json("PATCH", `${CO}/link_box/${made.id}/`, {
      body: { website_title: "Edited" },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      website: "https://edit.example/",
      website_title: "Edited",
    });
    // a PUT that leaves the title out keeps it, like any field it leaves out
    const put = await t.json("PUT", `${CO}/link_box/${made.id}/`, {
      body: { name: "Edit", website: "https://edit2.example/" },
    });
    expect(put.body).toMatchObject({ website: "https://edit2.example/", website_title: "Edited" });
    // null and "" clear it; surrounding blanks are trimmed (DRF's CharField)
    for (const [sent, read] of [
      [null, ""],
      ["  Spaced  ", "Spaced"],
      ["", ""],
    ] as const) {
      const r = await t.json("PATCH", `${CO}/link_box/${made.id}/`, {
        body: { website_title: sent },
      });
      expect(r.status).toBe(200);
      expect(r.body.website_title).toBe(read);
    }
  });

  test("bulk create and bulk update carry titles per item", async () => {
    const made = await t.json("POST", `${CO}/link_box/`, {
      body: [
        { name: "B1", website: "https://b1.example/", website_title: "One" },
        { name: "B2", website: "https://b2.example/" },
      ],
    });
    expect(made.status).toBe(201);
    expect(made.body.map((r: any) => r.website_title)).toEqual(["One", ""]);
    const updated = await t.json("PATCH", `${CO}/link_box/`, {
      body: made.body.map((r: any) => ({ id: r.id, website_title: `${r.name} title` })),
    });
    expect(updated.status).toBe(200);
    expect(updated.body.map((r: any) => r.website_title)).toEqual(["B1 title", "B2 title"]);
  });

  test("errors are keyed by the half that is wrong: website for the URL, website_title for the title", async () => {
    const before = (await t.json("GET", `${CO}/link_box/`)).body.count;
    const both = await t.json("POST", `${CO}/link_box/`, {
      body: { name: "Bad", website: "not a url", website_title: "x".repeat(201) },
    });
    expect(both.status).toBe(400);
    expect(both.body.website).toEqual(["Enter a valid URL."]);
    expect(both.body.website_title).toEqual(["Ensure this field has no more than 200 characters."]);
    const titleOnly = await t.json("POST", `${CO}/link_box/`, {
      body: { name: "Bad", website: "https://ok.example/", website_title: 42 },
    });
    expect(titleOnly.status).toBe(400);
    expect(Object.keys(titleOnly.body)).toEqual(["website_title"]);
    expect((await t.json("GET", `${CO}/link_box/`)).body.count).toBe(before);
    // only url fields have a title
    const unknown = await t.json("POST", `${CO}/link_box/`, {
      body: { name: "Bad", name_title: "nope" },
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.name_title).toEqual(["Unknown field."]);
  });
});

describe("a hostile link title", () => {
  test("markup is kept as text and answered JSON-escaped; never rendered or altered", async () => {
    const hostile = `<script>alert(1)</script><a href="javascript:alert(2)">"'&`;
    const made = await create(t, "link_box", {
      name: "Hostile",
      website: "https://safe.example/",
      website_title: hostile,
    });
    const res = await t.req("GET", `${CO}/link_box/${made.id}/`);
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(((await res.json()) as any).website_title).toBe(hostile);
  });

  test("a very long title is a 400 on website_title, nothing written; control and bidi characters too", async () => {
    const before = (await t.json("GET", `${CO}/link_box/`)).body.count;
    for (const title of [
      "x".repeat(1_000_000),
      "nul\u0000byte",
      "line\nbreak",
      "esc\u001b[31m",
      "spoof\u202Egnp.exe",
    ]) {
      const r = await t.json("POST", `${CO}/link_box/`, {
        body: { name: "Long", website: "https://long.example/", website_title: title },
      });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual(["website_title"]);
      expect(r.body.website_title[0]).not.toBe("Unknown field.");
      expect(JSON.stringify(r.body).length).toBeLessThan(300); // the value is not echoed
    }
    expect((await t.json("GET", `${CO}/link_box/`)).body.count).toBe(before);
    // the longest title allowed, of any script, passes
    const longest = await t.json("POST", `${CO}/link_box/`, {
      body: { name: "Longest", website: "https://long.example/", website_title: "é".repeat(200) },
    });
    expect(longest.status).toBe(201);
  });
});

describe("the title column follows its field", () => {
  test("a URL field's title lives in <name>_title; another field cannot take that name", async () => {
    expect(await columns(`co_${cotId}`)).toEqual(
      expect.arrayContaining(["website", "website_title"]),
    );
    const clash = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: cotId, name: "website_title", type: "text" },
    });
    expect(clash.status).toBe(400);
    expect(clash.body.name[0]).toContain("website_title");
    // and the other way round: a url field whose title column a field already holds
    await addField(t, cotId, { name: "docs_title", type: "text" });
    const reverse = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: cotId, name: "docs", type: "url" },
    });
    expect(reverse.status).toBe(400);
    expect(reverse.body.name[0]).toContain("docs_title");
  });

  test("a URL field never changes type, nor another field into a URL (upstream 0.7)", async () => {
    const lab = await makeCot(t, "retype_lab");
    const link = await addField(t, lab.id, { name: "link", type: "url" });
    const note = await addField(t, lab.id, { name: "note", type: "text" });
    for (const [id, type] of [
      [link.id, "text"],
      [note.id, "url"],
    ] as const) {
      const r = await t.json("PATCH", `${CO}/custom-object-type-fields/${id}/`, {
        body: { type },
      });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual(["type"]);
    }
    // a schema document may not either: preview and apply answer 400 at the field's type
    const doc = (type: string) => ({
      schema_version: "1",
      types: [{ name: "retype_doc", slug: "retype_doc", fields: [{ id: 1, name: "site", type }] }],
    });
    expect((await apply({ schema: doc("url") })).status).toBe(200);
    for (const step of ["preview", "apply"]) {
      const r = await t.json("POST", `${SCHEMA}/${step}/`, { body: { schema: doc("text") } });
      expect(r.status).toBe(400);
      expect(r.body.schema_errors).toEqual([
        {
          path: "$.types[0].fields[0].type",
          message: "Cannot change a url field into a text field.",
        },
      ]);
    }
  });

  test("renaming a URL field (REST) renames its title column with the titles", async () => {
    const lab = await makeCot(t, "rename_lab");
    const f = await addField(t, lab.id, { name: "home", type: "url" });
    const made = await create(t, "rename_lab", {
      home: "https://home.example/",
      home_title: "Home",
    });
    const r = await t.json("PATCH", `${CO}/custom-object-type-fields/${f.id}/`, {
      body: { name: "homepage" },
    });
    expect(r.status).toBe(200);
    expect(await columns(`co_${lab.id}`)).toEqual(
      expect.arrayContaining(["homepage", "homepage_title"]),
    );
    expect(await columns(`co_${lab.id}`)).not.toContain("home_title");
    const got = (await t.json("GET", `${CO}/rename_lab/${made.id}/`)).body;
    expect(got).toMatchObject({ homepage: "https://home.example/", homepage_title: "Home" });
    expect(got).not.toHaveProperty("home_title");
    // deleting the field drops both columns
    expect((await t.req("DELETE", `${CO}/custom-object-type-fields/${f.id}/`)).status).toBe(204);
    const left = await columns(`co_${lab.id}`);
    expect(left.some((c) => c.startsWith("homepage"))).toBe(false);
  });
});

describe("schema documents", () => {
  const shelf = (fields: unknown[], removed?: unknown[]) => ({
    schema_version: "1",
    types: [
      {
        name: "shelf",
        slug: "shelf",
        fields: [{ id: 1, name: "code", type: "text", primary: true }, ...fields],
        ...(removed ? { removed_fields: removed } : {}),
      },
    ],
  });
  const link = (name: string) => ({ id: 2, name, type: "url" });

  test("export shows a URL field as a url, with no title attribute; JSON and YAML round-trip", async () => {
    expect((await apply({ schema: shelf([link("manual")]) })).status).toBe(200);
    const exported = (await t.json("GET", `${SCHEMA}/export/?slug=shelf`)).body;
    const field = exported.types[0].fields.find((f: any) => f.name === "manual");
    expect(field.type).toBe("url");
    expect(JSON.stringify(exported)).not.toContain("_title");
    const yaml = await (
      await t.req("GET", `${SCHEMA}/export/?slug=shelf`, {
        headers: { accept: "application/yaml" },
      })
    ).text();
    expect(parse(yaml).types[0].fields[1]).toMatchObject({ name: "manual", type: "url" });
    const again = await t.req("POST", `${SCHEMA}/apply/`, {
      raw: yaml,
      headers: { "content-type": "application/yaml" },
    });
    expect(((await again.json()) as any).diffs[0].has_changes).toBe(false);
  });

  test("a document that renames a URL field carries its titles", async () => {
    const made = await create(t, "shelf", {
      code: "S1",
      manual: "https://manual.example/",
      manual_title: "The manual",
    });
    const renamed = await apply({ schema: shelf([link("handbook")]) });
    expect(renamed.status).toBe(200);
    const got = (await t.json("GET", `${CO}/shelf/${made.id}/`)).body;
    expect(got).toMatchObject({
      handbook: "https://manual.example/",
      handbook_title: "The manual",
    });
    expect(got).not.toHaveProperty("manual_title");
  });

  test("removal then restore of a URL field brings its titles back", async () => {
    const titled = await create(t, "shelf", { code: "S2", handbook_title: "Title only" });
    const refused = await apply({ schema: shelf([], [link("handbook")]) });
    expect(refused.status).toBe(409);
    // a row with only a title holds a value of the field too
    expect(refused.body.destructive_changes).toEqual([
      expect.objectContaining({ field: "handbook", reason: "field_removed", rows: 2 }),
    ]);
    const removed = await apply({ schema: shelf([], [link("handbook")]), allow_destructive: true });
    expect(removed.status).toBe(200);
    const shelfId = (await t.json("GET", `${CO}/custom-object-types/?slug=shelf`)).body.results[0]
      .id;
    expect((await columns(`co_${shelfId}`)).some((c) => c.startsWith("handbook"))).toBe(false);
    const gone = (await t.json("GET", `${CO}/shelf/${titled.id}/`)).body;
    expect(gone).not.toHaveProperty("handbook_title");
    const [entry] = (await t.json("GET", `${SCHEMA}/trash/?slug=shelf`)).body.results;
    expect(entry).toMatchObject({ name: "handbook", rows: 2 });
    expect((await t.json("POST", `${SCHEMA}/trash/${entry.id}/restore/`)).status).toBe(200);
    const back = (await t.json("GET", `${CO}/shelf/?ordering=id`)).body.results;
    expect(back.map((r: any) => [r.code, r.handbook, r.handbook_title])).toEqual([
      ["S1", "https://manual.example/", "The manual"],
      ["S2", null, "Title only"],
    ]);
  });

  test("a document with a field named after a URL field's title is refused by preview and apply (400)", async () => {
    const clash = (fields: unknown[]) => ({
      schema_version: "1",
      types: [{ name: "clash", slug: "clash", fields }],
    });
    const site = { id: 1, name: "site", type: "url" };
    const title = { id: 2, name: "site_title", type: "text" };
    for (const fields of [
      [site, title],
      [title, site],
    ]) {
      for (const step of ["preview", "apply"]) {
        const r = await t.json("POST", `${SCHEMA}/${step}/`, { body: { schema: clash(fields) } });
        expect(r.status).toBe(400);
        expect(r.body.schema_errors).toEqual([
          {
            path: "$.types[0].fields[1].name",
            message: `"${(fields[1] as any).name}" collides with the column "site_title" of another field.`,
          },
        ]);
      }
    }
    expect((await t.json("GET", `${CO}/custom-object-types/?slug=clash`)).body.count).toBe(0);
  });
});

describe("a removed type", () => {
  test("a type with a URL field comes back from the trash with its titles, even one trashed before titles", async () => {
    const crate = {
      name: "crate",
      slug: "crate",
      fields: [
        { id: 1, name: "code", type: "text" },
        { id: 2, name: "spec", type: "url" },
      ],
    };
    expect((await apply({ schema: { schema_version: "1", types: [crate] } })).status).toBe(200);
    const made = await create(t, "crate", {
      code: "C1",
      spec: "https://spec.example/",
      spec_title: "Spec",
    });
    const removal = { schema_version: "1", types: [], removed_types: [{ slug: "crate" }] };
    const removed = await apply({ schema: removal, allow_destructive: true });
    expect(removed.status).toBe(200);
    const restore = (entry: number) => t.json("POST", `${SCHEMA}/trash/${entry}/restore/`);
    expect((await restore(removed.body.trash[0])).status).toBe(200);
    expect((await t.json("GET", `${CO}/crate/${made.id}/`)).body).toMatchObject({
      spec: "https://spec.example/",
      spec_title: "Spec",
    });
    // trashed again, its table then made as an earlier release left it (no title column)
    const again = await apply({ schema: removal, allow_destructive: true });
    const trashed = `trash__${again.body.trash[0]}_co`;
    await t.deps.db.client.execute(`ALTER TABLE "${trashed}" DROP COLUMN "spec_title"`);
    expect((await restore(again.body.trash[0])).status).toBe(200);
    expect((await t.json("GET", `${CO}/crate/${made.id}/`)).body).toMatchObject({
      spec: "https://spec.example/",
      spec_title: "",
    });
  });
});

describe("OpenAPI and GraphQL", () => {
  test("the OpenAPI document describes <name>_title in records and requests", async () => {
    const schemas = (await t.json("GET", "/api/schema/")).body.components.schemas;
    const record = schemas["CustomObject.link_box"];
    expect(record.properties.website_title).toMatchObject({ type: "string" });
    expect(record.properties.website).toBeDefined();
    const request = schemas["CustomObject.link_box.Request"];
    expect(request.properties.website_title).toMatchObject({ maxLength: 200 });
    expect(schemas["CustomObject.link_box.PatchedRequest"].properties.website_title).toBeDefined();
  });

  test("GraphQL reads the title", async () => {
    const r = await t.json("POST", "/graphql/", {
      body: {
        query:
          '{ custom_objects_link_box_list(filters: {name: {exact: "Box"}}) { website website_title } }',
      },
    });
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.custom_objects_link_box_list[0]).toEqual({
      website: "https://example.com/",
      website_title: "Example Site",
    });
  });
});

describe("tables made before link titles", () => {
  test("a URL field made before link titles gains its title column on migrate and keeps working", async () => {
    const lab = await makeCot(t, "old_lab");
    await addField(t, lab.id, { name: "site", type: "url" });
    const made = await create(t, "old_lab", { site: "https://old.example/" });
    // the table as an earlier release left it: no title column
    if ((await columns(`co_${lab.id}`)).includes("site_title"))
      await t.deps.db.client.execute(`ALTER TABLE "co_${lab.id}" DROP COLUMN "site_title"`);
    await runMigrations(t.deps.db);
    expect(await columns(`co_${lab.id}`)).toContain("site_title");
    const got = await t.json("GET", `${CO}/old_lab/${made.id}/`);
    expect(got.body).toMatchObject({ site: "https://old.example/", site_title: "" });
    const patched = await t.json("PATCH", `${CO}/old_lab/${made.id}/`, {
      body: { site_title: "Old site" },
    });
    expect(patched.body.site_title).toBe("Old site");
    // a second migration finds nothing to do
    await runMigrations(t.deps.db);
    expect((await columns(`co_${lab.id}`)).filter((c) => c === "site_title")).toHaveLength(1);
  });

  test("a URL field trashed before link titles is restored with an empty title", async () => {
    const doc = (fields: unknown[], removed?: unknown[]) => ({
      schema_version: "1",
      types: [
        {
          name: "attic",
          slug: "attic",
          fields: [{ id: 1, name: "code", type: "text" }, ...fields],
          ...(removed ? { removed_fields: removed } : {}),
        },
      ],
    });
    const old = { id: 2, name: "ref", type: "url" };
    expect((await apply({ schema: doc([old]) })).status).toBe(200);
    const made = await create(t, "attic", { code: "A1", ref: "https://attic.example/" });
    expect((await apply({ schema: doc([], [old]), allow_destructive: true })).status).toBe(200);
    const [entry] = (await t.json("GET", `${SCHEMA}/trash/?slug=attic`)).body.results;
    // the entry as an earlier release wrote it: one trashed column, none for a title
    const client = t.deps.db.client;
    const stored = JSON.parse(
      String(
        (await client.execute(`SELECT storage FROM custom_object_trash WHERE id = ${entry.id}`))
          .rows[0]!.storage,
      ),
    ) as { columns: [string, string][]; tables: unknown[] };
    const atticId = (await t.json("GET", `${CO}/custom-object-types/?slug=attic`)).body.results[0]
      .id;
    for (const [orig, trashed] of stored.columns.filter(([orig]) => orig !== "ref")) {
      expect(orig).toBe("ref_title");
      await client.execute(`ALTER TABLE "co_${atticId}" DROP COLUMN "${trashed}"`);
    }
    stored.columns = stored.columns.filter(([orig]) => orig === "ref");
    await client.execute({
      sql: "UPDATE custom_object_trash SET storage = ? WHERE id = ?",
      args: [JSON.stringify(stored), entry.id],
    });
    expect((await t.json("POST", `${SCHEMA}/trash/${entry.id}/restore/`)).status).toBe(200);
    expect(await columns(`co_${atticId}`)).toEqual(expect.arrayContaining(["ref", "ref_title"]));
    const got = (await t.json("GET", `${CO}/attic/${made.id}/`)).body;
    expect(got).toMatchObject({ ref: "https://attic.example/", ref_title: "" });
  });
});
