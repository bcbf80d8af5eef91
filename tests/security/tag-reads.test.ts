/**
 * Tags a caller may not view are not shown to them (decision 0153): an object's `tags` drop the
 * tags outside the caller's `extras.view_tag` constraints (all of them without a tag view) in one
 * object, a list, a search's kept page (never another caller's kept bytes), GraphQL, the change
 * log's snapshots and a refused revert's text; a superuser and a caller whose tag view is
 * unconstrained see every tag, byte for byte the same answer (on a local file and a remote database).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { CO, namedCot } from "../custom-objects/fixtures";
import { settleBeforeCounting } from "../helpers/settle";

type Ref = { id: number; slug: string; name: string };
const tagIds = (body: any) => (body.tags as Array<{ id: number }>).map((x) => x.id).sort();

for (const backend of ["local", "remote"] as const)
  describe(`${backend}: hidden tags in answers`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let open: Ref;
    let hidden: Ref;
    let site: number;
    let box: number;
    /** Views open-tag only; views no tag at all; views every tag (unconstrained). */
    const who = { limited: "", tagless: "", seeing: "" };
    const tag = async (slug: string) => {
      const r = await t().json("POST", "/api/extras/tags/", { body: { name: `T ${slug}`, slug } });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body as Ref;
    };
    const reader = async (name: string, tagView: unknown | undefined) =>
      (
        await userWith(t(), name, [
          [["view", "add", "change", "delete"], "dcim.site", null],
          [["view"], "custom_objects.boxes", null],
          [["view"], "core.objectchange", null],
          ...(tagView === undefined
            ? []
            : [[["view"], "extras.tag", tagView] as [string[], string, unknown]]),
        ])
      ).token;
    beforeAll(async () => {
      app = await appOn(backend, `tag-reads-${backend}`);
      open = await tag("open-tag");
      hidden = await tag("hidden-tag");
      await namedCot(t(), "boxes");
      const s = await t().json("POST", "/api/dcim/sites/", {
        body: { name: "tagread one", slug: "tagread-one", tags: [open.id, hidden.id] },
      });
      expect(s.status, JSON.stringify(s.body)).toBe(201);
      site = s.body.id;
      await t().json("POST", "/api/dcim/sites/", {
        body: { name: "tagread two", slug: "tagread-two", tags: [hidden.id] },
      });
      const b = await t().json("POST", `${CO}/boxes/`, {
        body: { name: "tagread box", tags: [open.id, hidden.id] },
      });
      expect(b.status, JSON.stringify(b.body)).toBe(201);
      box = b.body.id;
      // the search index's deferred flush (decision 0056) done now: `?q=` finds the box
      await flushSearchIndexesNow(servicesOf(t().app));
      who.limited = await reader("tag-reads-limited", { slug: "open-tag" });
      who.tagless = await reader("tag-reads-tagless", undefined);
      who.seeing = await reader("tag-reads-seeing", null);
    });
    afterAll(() => app.close());

    /** The expected tag ids per caller (null: the superuser). */
    const expected = () => ({
      limited: [open.id],
      tagless: [] as number[],
      seeing: [open.id, hidden.id].sort(),
    });

    test("one object: a site and a custom object show only the tags the caller may view", async () => {
      for (const path of [`/api/dcim/sites/${site}/`, `${CO}/boxes/${box}/`]) {
        const admin = await t().req("GET", path);
        const adminText = await admin.text();
        expect(tagIds(JSON.parse(adminText))).toEqual([open.id, hidden.id].sort());
        for (const [name, ids] of Object.entries(expected())) {
          const r = await t().req("GET", path, { token: who[name as keyof typeof who] });
          const text = await r.text();
          expect(r.status, text).toBe(200);
          expect(tagIds(JSON.parse(text)), name).toEqual(ids);
          expect(text.includes("hidden-tag"), name).toBe(name === "seeing");
          // an unconstrained tag view answers byte for byte as today
          if (name === "seeing") expect(text).toBe(adminText);
        }
      }
    });

    test("a list and a search's kept page, two callers alternating: each gets its own tags", async () => {
      for (const path of [
        "/api/dcim/sites/?slug=tagread-one",
        "/api/dcim/sites/?q=tagread",
        `${CO}/boxes/?q=tagread`,
      ]) {
        const admin = await (await t().req("GET", path)).text();
        for (let round = 0; round < 3; round++) {
          for (const [name, ids] of Object.entries(expected())) {
            const text = await (
              await t().req("GET", path, { token: who[name as keyof typeof who] })
            ).text();
            const want = path.startsWith(CO) ? box : site;
            const one = JSON.parse(text).results.find((x: { id: number }) => x.id === want);
            expect(tagIds(one), `${path} ${name}`).toEqual(ids);
            expect(text.includes("hidden-tag"), `${path} ${name}`).toBe(name === "seeing");
            if (name === "seeing") expect(text).toBe(admin);
            // the superuser between two constrained answers still sees every tag, the same bytes
            expect(await (await t().req("GET", path)).text()).toBe(admin);
          }
        }
      }
    });

    if (backend === "remote")
      test("remote: a constrained tag view rides in the GET's and the list's one read", async () => {
        for (const path of [
          `/api/dcim/sites/${site}/`,
          "/api/dcim/sites/?slug=tagread-one",
          `${CO}/boxes/${box}/`,
          `${CO}/boxes/`,
        ]) {
          for (const [token, username] of [
            [who.limited, "tag-reads-limited"],
            [who.seeing, "tag-reads-seeing"],
          ] as const) {
            expect((await t().req("GET", path, { token })).status).toBe(200); // caches warm
            // the token's use is recorded off the request, once a minute: not in this count
            await settleBeforeCounting(
              t().app,
              () => t().json("GET", "/api/status/", { token }),
              username,
            );
            app.proxy!.reset();
            const r = await t().req("GET", path, { token });
            const text = await r.text();
            expect(r.status, text).toBe(200);
            expect(text.includes("hidden-tag")).toBe(token === who.seeing);
            expect(app.proxy!.count, path).toBe(1);
          }
        }
      });

    test("GraphQL: a site's tags are only those the caller may view", async () => {
      const query = `{ site(id: ${site}) { tags { id slug } } }`;
      for (const [name, ids] of Object.entries(expected())) {
        const r = await t().json("POST", "/graphql/", {
          token: who[name as keyof typeof who],
          body: { query },
          headers: { accept: "application/json" },
        });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        // without any tag view the schema has no `tags` field at all
        if (name === "tagless") {
          expect(JSON.stringify(r.body.errors)).toContain('Cannot query field \\"tags\\"');
          continue;
        }
        expect(r.body.errors, JSON.stringify(r.body)).toBeUndefined();
        expect(tagIds(r.body.data.site).map(Number), name).toEqual(ids);
      }
    });

    test("the change log's snapshots show only the tags the caller may view", async () => {
      const path = `/api/core/object-changes/?changed_object_id=${site}&changed_object_type=dcim.site`;
      const admin = await t().json("GET", path);
      expect(admin.body.results.length).toBeGreaterThan(0);
      expect(tagIds(admin.body.results[0].postchange_data)).toEqual([open.id, hidden.id].sort());
      for (const [name, ids] of Object.entries(expected())) {
        const r = await t().req("GET", path, { token: who[name as keyof typeof who] });
        const text = await r.text();
        const body = JSON.parse(text);
        expect(body.results.length, text).toBe(admin.body.results.length);
        expect(tagIds(body.results[0].postchange_data), name).toEqual(ids);
        expect(text.includes("hidden-tag"), name).toBe(name === "seeing");
        const one = await t().req("GET", `/api/core/object-changes/${body.results[0].id}/`, {
          token: who[name as keyof typeof who],
        });
        expect((await one.text()).includes("hidden-tag"), name).toBe(name === "seeing");
      }
    });

    test("a refused revert's 409 does not repeat a hidden tag", async () => {
      const made = await t().json("POST", "/api/dcim/sites/", {
        body: { name: "tagread gone", slug: "tagread-gone", tags: [hidden.id] },
      });
      expect((await t().req("DELETE", `/api/dcim/sites/${made.body.id}/`)).status).toBe(204);
      const changes = await t().json("GET", "/api/core/object-changes/?ordering=-id&limit=1");
      const change = changes.body.results[0].id as number;
      const r = await t().req("POST", `/api/core/object-changes/${change}/revert/`, {
        token: who.limited,
      });
      const text = await r.text();
      expect(r.status, text).toBe(409);
      expect(text).toContain("Tag not found");
      expect(text.includes("hidden-tag"), text).toBe(false);
    });
  });
