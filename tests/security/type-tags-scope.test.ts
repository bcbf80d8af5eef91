/**
 * Tags on custom object type definitions are held to view permission (decision 0064): a caller
 * who may define types but view only some tags cannot attach, name or learn of the others
 * through a type's create or update; a hidden tag answers exactly as a tag that does not exist,
 * by id, slug or name, on a local file and a remote database. A tag the type already holds may
 * be sent back unchanged.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { CO, makeCot } from "../custom-objects/fixtures";

const TYPES = `${CO}/custom-object-types`;

for (const backend of ["local", "remote"] as const)
  describe(`${backend}: tags on type definitions`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let designer: string;
    let open: { id: number; slug: string; name: string };
    let hidden: { id: number; slug: string; name: string };
    let serial = 0;
    const tag = async (slug: string) => {
      const r = await t().json("POST", "/api/extras/tags/", { body: { name: `T ${slug}`, slug } });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body as { id: number; slug: string; name: string };
    };
    beforeAll(async () => {
      app = await appOn(backend, `type-tags-scope-${backend}`);
      open = await tag("open-tag");
      hidden = await tag("hidden-tag");
      designer = (
        await userWith(t(), "designer", [
          [["view", "add", "change"], "custom_objects.customobjecttype", null],
          [["view"], "extras.tag", { slug: "open-tag" }],
        ])
      ).token;
    });
    afterAll(() => app.close());

    /** The answer with the reference's own text taken out: equal answers tell nothing apart. */
    const masked = (body: unknown, ref: unknown) =>
      JSON.stringify(body).replaceAll(JSON.stringify(JSON.stringify(ref)).slice(1, -1), "REF");
    const refsOf = (x: { id: number; slug: string; name: string }) => [
      x.id,
      { id: x.id },
      { slug: x.slug },
      { name: x.name },
    ];
    const missing = [987654, { id: 987654 }, { slug: "no-such-tag" }, { name: "T no-such-tag" }];

    test("a hidden tag on a new type answers as an unknown one, by id, slug or name", async () => {
      for (const [i, ref] of refsOf(hidden).entries()) {
        const n = ++serial;
        const body = { name: `t${n}`, slug: `t${n}`, tags: [ref] };
        const r = await t().json("POST", `${TYPES}/`, { token: designer, body });
        const absent = await t().json("POST", `${TYPES}/`, {
          token: designer,
          body: { ...body, tags: [missing[i]] },
        });
        expect(r.status, JSON.stringify(r.body)).toBe(400);
        expect(absent.status).toBe(400);
        expect(masked(r.body, ref)).toBe(masked(absent.body, missing[i]));
        expect((await t().json("GET", `${TYPES}/?slug=t${n}`)).body.count).toBe(0);
      }
      // a tag the caller may view is attached as before
      const r = await t().json("POST", `${TYPES}/`, {
        token: designer,
        body: { name: "withopen", slug: "withopen", tags: [{ slug: open.slug }] },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      expect(r.body.tags.map((x: { id: number }) => x.id)).toEqual([open.id]);
    });

    test("a hidden tag added to a type answers as an unknown one; one it holds may stay", async () => {
      const cot = await makeCot(t(), `held${++serial}`);
      for (const [i, ref] of refsOf(hidden).entries()) {
        for (const method of ["PATCH", "PUT"] as const) {
          const body = { name: `held${serial}`, slug: `held${serial}`, tags: [ref] };
          const r = await t().json(method, `${TYPES}/${cot.id}/`, { token: designer, body });
          const absent = await t().json(method, `${TYPES}/${cot.id}/`, {
            token: designer,
            body: { ...body, tags: [missing[i]] },
          });
          expect(r.status, JSON.stringify(r.body)).toBe(400);
          expect(masked(r.body, ref)).toBe(masked(absent.body, missing[i]));
        }
      }
      const now = await t().json("GET", `${TYPES}/${cot.id}/`);
      expect(now.body.tags).toEqual([]);
      // tagged by one who may: the designer's update that sends it back keeps it
      const tagged = await t().json("PATCH", `${TYPES}/${cot.id}/`, {
        body: { tags: [hidden.id] },
      });
      expect(tagged.status).toBe(200);
      const kept = await t().json("PATCH", `${TYPES}/${cot.id}/`, {
        token: designer,
        body: { tags: [{ id: hidden.id }, { id: open.id }], description: "both" },
      });
      expect(kept.status, JSON.stringify(kept.body)).toBe(200);
      const ids = (await t().json("GET", `${TYPES}/${cot.id}/`)).body.tags.map(
        (x: { id: number }) => x.id,
      );
      expect(ids.sort()).toEqual([open.id, hidden.id].sort());
    });

    test("one with no view of tags names none", async () => {
      const blind = (
        await userWith(t(), "blind-designer", [
          [["view", "add", "change"], "custom_objects.customobjecttype", null],
        ])
      ).token;
      const r = await t().json("POST", `${TYPES}/`, {
        token: blind,
        body: { name: "blindtype", slug: "blindtype", tags: [open.slug] },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.tags[0]).toBe(`Tag not found: "${open.slug}"`);
    });
  });
