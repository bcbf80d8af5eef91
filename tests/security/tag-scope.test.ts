/**
 * Tags on every taggable model are held to view permission (decision 0153): a caller who may write
 * sites, tenants or custom objects but view only some tags cannot attach a hidden one, by id, slug
 * or name, through create, PATCH, PUT, bulk writes or `add_tags`; the answer is exactly that of a
 * tag that does not exist (on a local file and a remote database). A tag the object already holds
 * may be sent back unchanged.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { CO, namedCot } from "../custom-objects/fixtures";

type Ref = { id: number; slug: string; name: string };

/** The answer with the reference's own text taken out: equal answers tell nothing apart. */
const masked = (body: unknown, ref: unknown) =>
  JSON.stringify(body).replaceAll(
    JSON.stringify(`Tag not found: ${JSON.stringify(ref)}`).slice(1, -1),
    "Tag not found: REF",
  );
const refsOf = (x: Ref) => [x.id, { id: x.id }, { slug: x.slug }, { name: x.name }, x.slug];
const missing = [
  987654,
  { id: 987654 },
  { slug: "no-such-tag" },
  { name: "T no-such-tag" },
  "nope",
];
const tagIds = (body: any) => (body.tags as Array<{ id: number }>).map((x) => x.id).sort();

for (const backend of ["local", "remote"] as const)
  describe(`${backend}: hidden tags on objects`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let writer: string;
    let open: Ref;
    let hidden: Ref;
    let serial = 0;
    const tag = async (slug: string) => {
      const r = await t().json("POST", "/api/extras/tags/", { body: { name: `T ${slug}`, slug } });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body as Ref;
    };
    /** A path's create body for a fresh object. */
    const models = {
      "/api/dcim/sites/": () => ({ name: `s${++serial}`, slug: `s${serial}` }),
      "/api/tenancy/tenants/": () => ({ name: `n${++serial}`, slug: `n${serial}` }),
      [`${CO}/boxes/`]: () => ({ name: `b${++serial}` }),
    } as Record<string, () => Record<string, unknown>>;
    beforeAll(async () => {
      app = await appOn(backend, `tag-scope-${backend}`);
      open = await tag("open-tag");
      hidden = await tag("hidden-tag");
      await namedCot(t(), "boxes");
      writer = (
        await userWith(t(), "tag-writer", [
          [["view", "add", "change"], "dcim.site", null],
          [["view", "add", "change"], "tenancy.tenant", null],
          [["view", "add", "change"], "custom_objects.boxes", null],
          [["view"], "extras.tag", { slug: "open-tag" }],
        ])
      ).token;
    });
    afterAll(() => app.close());

    /** `send(ref)` for each hidden reference answers as `send(missing)`: a 400 alike. */
    const alike = async (send: (ref: unknown) => Promise<{ status: number; body: any }>) => {
      for (const [i, ref] of refsOf(hidden).entries()) {
        const r = await send(ref);
        const absent = await send(missing[i]);
        expect(r.status, JSON.stringify(r.body)).toBe(400);
        expect(absent.status).toBe(400);
        expect(masked(r.body, ref)).toBe(masked(absent.body, missing[i]));
      }
    };

    for (const path of ["/api/dcim/sites/", "/api/tenancy/tenants/", `${CO}/boxes/`]) {
      test(`${path}: a hidden tag on a create, single or bulk, answers as an unknown one`, async () => {
        await alike((ref) =>
          t().json("POST", path, { token: writer, body: { ...models[path]!(), tags: [ref] } }),
        );
        await alike((ref) =>
          t().json("POST", path, {
            token: writer,
            body: [models[path]!(), { ...models[path]!(), tags: [ref] }],
          }),
        );
        const ok = await t().json("POST", path, {
          token: writer,
          body: { ...models[path]!(), tags: [{ slug: open.slug }] },
        });
        expect(ok.status, JSON.stringify(ok.body)).toBe(201);
        expect(tagIds(ok.body)).toEqual([open.id]);
      });

      test(`${path}: a hidden tag added by PATCH, PUT, bulk or add_tags answers as unknown; a held one stays`, async () => {
        const made = await t().json("POST", path, { body: models[path]!() });
        expect(made.status, JSON.stringify(made.body)).toBe(201);
        const { id } = made.body;
        const full = { ...made.body };
        delete full.tags;
        await alike((ref) =>
          t().json("PATCH", `${path}${id}/`, { token: writer, body: { tags: [ref] } }),
        );
        await alike((ref) =>
          t().json("PUT", `${path}${id}/`, { token: writer, body: { ...full, tags: [ref] } }),
        );
        await alike((ref) =>
          t().json("PATCH", path, { token: writer, body: [{ id, tags: [ref] }] }),
        );
        await alike((ref) =>
          t().json("PATCH", `${path}${id}/`, { token: writer, body: { add_tags: [ref] } }),
        );
        expect((await t().json("GET", `${path}${id}/`)).body.tags).toEqual([]);
        // tagged by one who may view it: the writer's update that sends it back keeps it
        const tagged = await t().json("PATCH", `${path}${id}/`, { body: { tags: [hidden.id] } });
        expect(tagged.status, JSON.stringify(tagged.body)).toBe(200);
        const kept = await t().json("PATCH", `${path}${id}/`, {
          token: writer,
          body: { tags: [{ id: hidden.id }, { slug: open.slug }] },
        });
        expect(kept.status, JSON.stringify(kept.body)).toBe(200);
        expect(tagIds((await t().json("GET", `${path}${id}/`)).body)).toEqual(
          [open.id, hidden.id].sort(),
        );
        const bulk = await t().json("PATCH", path, {
          token: writer,
          body: [{ id, tags: [hidden.id] }],
        });
        expect(bulk.status, JSON.stringify(bulk.body)).toBe(200);
        // held by one object is no licence on another
        const other = await t().json("POST", path, { body: models[path]!() });
        await alike((ref) =>
          t().json("PATCH", path, {
            token: writer,
            body: [
              { id, tags: [hidden.id] },
              { id: other.body.id, tags: [ref] },
            ],
          }),
        );
      });
    }

    for (const path of ["/api/dcim/sites/", `${CO}/boxes/`]) {
      test(`${path}: a deleted object put back by one who may not view its tag: as unknown`, async () => {
        const made = await t().json("POST", path, {
          body: { ...models[path]!(), tags: [hidden.id] },
        });
        expect(made.status, JSON.stringify(made.body)).toBe(201);
        expect((await t().req("DELETE", `${path}${made.body.id}/`)).status).toBe(204);
        const changes = await t().json("GET", "/api/core/object-changes/?ordering=-id&limit=1");
        const change = changes.body.results[0].id as number;
        const revert = (token: string) =>
          t().json("POST", `/api/core/object-changes/${change}/revert/`, { token });
        const grants = (who: string, tagView: Record<string, string> | null) =>
          userWith(t(), who, [
            [["view", "add", "change"], "dcim.site", null],
            [["view", "add", "change"], "custom_objects.boxes", null],
            [["view"], "core.objectchange", null],
            [["view"], "extras.tag", tagView],
          ]);
        const limited = (await grants(`reverter-${++serial}`, { slug: "open-tag" })).token;
        const refused = await revert(limited);
        expect(refused.status, JSON.stringify(refused.body)).toBe(409);
        expect(JSON.stringify(refused.body)).toContain("Tag not found");
        expect((await t().json("GET", `${path}${made.body.id}/`)).status).toBe(404);
        const seeing = (await grants(`reverter-${++serial}`, null)).token;
        const back = await revert(seeing);
        expect(back.status, JSON.stringify(back.body)).toBe(200);
        expect(tagIds((await t().json("GET", `${path}${made.body.id}/`)).body)).toEqual([
          hidden.id,
        ]);
      });
    }
  });
