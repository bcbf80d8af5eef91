/**
 * Issue 29, points 4 and 5 (synchronous parts): NetBox 4.6's ETag / If-Match, cursor pagination
 * (`?start=`, as pynetbox 7.8's `pagination="cursor"` follows it: core/query.py `Request.get`)
 * and `add_tags` / `remove_tags`; NetBox 4.7's errors per bulk item. Host models and custom
 * objects alike, over HTTP.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
  for (const slug of ["prod", "staging", "edge"]) {
    const r = await t.json("POST", "/api/extras/tags/", { body: { name: slug, slug } });
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
});
afterAll(() => t.close());

const site = async (slug: string, extra: Record<string, unknown> = {}) => {
  const r = await t.json("POST", "/api/dcim/sites/", { body: { name: slug, slug, ...extra } });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  return r;
};

describe("ETag and If-Match (NetBox 4.6 concurrent update protection)", () => {
  test("GET, POST and PATCH answer a weak ETag from last_updated", async () => {
    const made = await site("etag-a");
    expect(made.res.headers.get("etag")).toBe(`W/"${made.body.last_updated}"`);
    const read = await t.json("GET", `/api/dcim/sites/${made.body.id}/`);
    expect(read.res.headers.get("etag")).toBe(`W/"${read.body.last_updated}"`);
    const patched = await t.json("PATCH", `/api/dcim/sites/${made.body.id}/`, {
      body: { description: "x" },
    });
    expect(patched.res.headers.get("etag")).toBe(`W/"${patched.body.last_updated}"`);
    expect(patched.res.headers.get("etag")).not.toBe(read.res.headers.get("etag"));
  });

  test("If-Match with the current ETag writes; a stale one is 412 with the current ETag, nothing changed", async () => {
    const made = await site("etag-b");
    const first = made.res.headers.get("etag")!;
    const ok = await t.json("PATCH", `/api/dcim/sites/${made.body.id}/`, {
      body: { description: "one" },
      headers: { "if-match": first },
    });
    expect(ok.status).toBe(200);
    const stale = await t.json("PATCH", `/api/dcim/sites/${made.body.id}/`, {
      body: { description: "two" },
      headers: { "if-match": first },
    });
    expect(stale.status).toBe(412);
    expect(stale.body.error).toBe("precondition_failed");
    expect(stale.res.headers.get("etag")).toBe(ok.res.headers.get("etag"));
    const now = await t.json("GET", `/api/dcim/sites/${made.body.id}/`);
    expect(now.body.description).toBe("one");
    // `*` asserts only that the object exists; a list matches when any of its tags does
    const star = await t.json("PUT", `/api/dcim/sites/${made.body.id}/`, {
      body: { name: "etag-b", slug: "etag-b" },
      headers: { "if-match": "*" },
    });
    expect(star.status).toBe(200);
    const listed = await t.json("PATCH", `/api/dcim/sites/${made.body.id}/`, {
      body: { description: "three" },
      headers: { "if-match": `W/"nope", ${star.res.headers.get("etag")}` },
    });
    expect(listed.status).toBe(200);
  });

  test("DELETE with a stale If-Match is 412 and the object stays; with the current one it goes", async () => {
    const made = await site("etag-c");
    const etag = made.res.headers.get("etag")!;
    await t.json("PATCH", `/api/dcim/sites/${made.body.id}/`, { body: { description: "moved" } });
    const refused = await t.req("DELETE", `/api/dcim/sites/${made.body.id}/`, {
      headers: { "if-match": etag },
    });
    expect(refused.status).toBe(412);
    const current = (await t.json("GET", `/api/dcim/sites/${made.body.id}/`)).res.headers.get(
      "etag",
    )!;
    const gone = await t.req("DELETE", `/api/dcim/sites/${made.body.id}/`, {
      headers: { "if-match": current },
    });
    expect(gone.status).toBe(204);
  });

  test("custom objects carry ETags too, and two quick edits never share one", async () => {
    const cot = await makeCot(t, "etag_box");
    await addField(t, cot.id, { name: "label", type: "text" });
    const made = await create(t, "etag_box", { label: "a" });
    const first = await t.json("GET", `${CO}/etag_box/${made.id}/`);
    const a = await t.json("PATCH", `${CO}/etag_box/${made.id}/`, {
      body: { label: "b" },
      headers: { "if-match": first.res.headers.get("etag")! },
    });
    const b = await t.json("PATCH", `${CO}/etag_box/${made.id}/`, { body: { label: "c" } });
    expect(a.status).toBe(200);
    expect(a.res.headers.get("etag")).not.toBe(b.res.headers.get("etag"));
    const stale = await t.json("PATCH", `${CO}/etag_box/${made.id}/`, {
      body: { label: "d" },
      headers: { "if-match": a.res.headers.get("etag")! },
    });
    expect(stale.status).toBe(412);
  });
});

describe("cursor pagination (pynetbox 7.8 pagination='cursor': start=0, then next links)", () => {
  test("start + limit: count null, previous null, next carries start=<last id + 1>; following next reads every row once", async () => {
    for (let i = 0; i < 5; i++) await site(`cur-${i}`);
    const all = (await t.json("GET", "/api/dcim/sites/?limit=1000")).body.results.map(
      (r: any) => r.id,
    );
    const seen: number[] = [];
    let r = await t.json("GET", "/api/dcim/sites/?limit=2&start=0");
    expect(r.body.count).toBeNull();
    expect(r.body.previous).toBeNull();
    for (;;) {
      seen.push(...r.body.results.map((x: any) => x.id));
      if (!r.body.next) break;
      const next = new URL(r.body.next);
      expect(Number(next.searchParams.get("start"))).toBe(seen[seen.length - 1]! + 1);
      r = await t.json("GET", next.pathname + next.search);
    }
    expect(seen).toEqual([...all].sort((x, y) => x - y));
  });

  test("filters apply; start with offset or ordering is a 400; a bad start is a 400", async () => {
    const r = await t.json("GET", "/api/dcim/sites/?start=0&slug=cur-1");
    expect(r.body.results.map((x: any) => x.slug)).toEqual(["cur-1"]);
    expect((await t.json("GET", "/api/dcim/sites/?start=0&offset=5")).status).toBe(400);
    expect((await t.json("GET", "/api/dcim/sites/?start=0&ordering=name")).status).toBe(400);
    expect((await t.json("GET", "/api/dcim/sites/?start=-1")).body).toHaveProperty("start");
  });
});

describe("add_tags / remove_tags (NetBox 4.6)", () => {
  test("PATCH adds and removes only the given tags; the rest stay", async () => {
    const made = await site("tags-a", { tags: [{ slug: "prod" }, { slug: "edge" }] });
    const r = await t.json("PATCH", `/api/dcim/sites/${made.body.id}/`, {
      body: { add_tags: [{ name: "staging" }], remove_tags: [{ slug: "prod" }] },
    });
    expect(r.status).toBe(200);
    expect(r.body.tags.map((x: any) => x.slug).sort()).toEqual(["edge", "staging"]);
  });

  test("tags with add_tags, remove_tags on create, one tag in both: 400 keyed by the field", async () => {
    const made = await site("tags-b");
    const both = await t.json("PATCH", `/api/dcim/sites/${made.body.id}/`, {
      body: { tags: [], add_tags: ["prod"] },
    });
    expect(Object.keys(both.body)).toEqual(["tags"]);
    const create = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "tags-c", slug: "tags-c", remove_tags: ["prod"] },
    });
    expect(Object.keys(create.body)).toEqual(["remove_tags"]);
    const overlap = await t.json("PATCH", `/api/dcim/sites/${made.body.id}/`, {
      body: { add_tags: ["prod"], remove_tags: ["prod"] },
    });
    expect(overlap.status).toBe(400);
    const ok = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "tags-d", slug: "tags-d", add_tags: ["edge"] },
    });
    expect(ok.body.tags.map((x: any) => x.slug)).toEqual(["edge"]);
  });

  test("custom objects and bulk updates take them too", async () => {
    await makeCot(t, "tagged_box");
    const made = await create(t, "tagged_box", { tags: [{ slug: "prod" }] });
    const bulk = await t.json("PATCH", `${CO}/tagged_box/`, {
      body: [{ id: made.id, add_tags: ["edge"] }],
    });
    expect(bulk.status).toBe(200);
    expect(bulk.body[0].tags.map((x: any) => x.slug).sort()).toEqual(["edge", "prod"]);
  });
});

describe("errors per bulk item (NetBox 4.7)", () => {
  test("a failed bulk create names each failing item by index; nothing is written", async () => {
    const r = await t.json("POST", "/api/dcim/sites/", {
      body: [
        { name: "bulk-ok", slug: "bulk-ok" },
        { name: "bulk-bad", slug: "" },
        { name: "bulk-ok2", slug: "bulk-ok2" },
        { name: "bulk-bad2" },
      ],
    });
    expect(r.status).toBe(400);
    expect(r.body.detail).toBe("2 of 4 objects failed validation.");
    expect(r.body.errors.map((e: any) => e.index)).toEqual([1, 3]);
    expect(r.body.errors[0].errors.slug).toBeDefined();
    expect(r.body.errors[1].errors.slug).toBeDefined();
    const left = await t.json("GET", "/api/dcim/sites/?slug=bulk-ok");
    expect(left.body.count).toBe(0);
  });
});
