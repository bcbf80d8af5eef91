/**
 * Filters reach only what the caller may view (decision 0178). An attacker who may view every
 * site and box but only some tags and tenants filters by what they may not view: a hidden tag's
 * slug (`?tag=`, `?tag__n=`, GraphQL `tag`) and a hidden tenant's name through a GraphQL related
 * filter (`tenant: {name: {i_contains: …}}`), guessing it a character at a time. Each answers
 * byte for byte as the same filter naming nothing; what the caller may view still filters, and a
 * superuser's filters reach everything. On a local file and a remote database (their list reads
 * differ).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import { appOn, type BackendApp } from "../helpers/remote-db";
import { CO, create, namedCot } from "../custom-objects/fixtures";

for (const backend of ["local", "remote"] as const)
  describe(`${backend}: filters naming what the caller may not view`, () => {
    let app: BackendApp;
    const t = () => app.t;
    let attacker = "";
    const made = async (path: string, body: unknown) => {
      const r = await t().json("POST", path, { body });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body.id as number;
    };
    beforeAll(async () => {
      app = await appOn(backend, `filter-scope-${backend}`);
      const open = await made("/api/extras/tags/", { name: "open tag", slug: "open-tag" });
      const hidden = await made("/api/extras/tags/", { name: "hidden tag", slug: "hidden-tag" });
      const blue = await made("/api/tenancy/tenants/", { name: "Blue", slug: "blue" });
      const red = await made("/api/tenancy/tenants/", { name: "RedSecret", slug: "red" });
      const blueSite = await made("/api/dcim/sites/", {
        name: "fs blue",
        slug: "fs-blue",
        tenant: blue,
        tags: [open],
      });
      const redSite = await made("/api/dcim/sites/", {
        name: "fs red",
        slug: "fs-red",
        tenant: red,
        tags: [hidden],
      });
      const group = await made("/api/users/owner-groups/", { name: "secret group" });
      const hiddenOwner = await made("/api/users/owners/", { name: "secret owner", group });
      const openOwner = await made("/api/users/owners/", { name: "open owner" });
      await namedCot(t(), "fsboxes", { site: { to: "dcim.site" } });
      await create(t(), "fsboxes", {
        name: "box red",
        site: redSite,
        tags: [hidden],
        owner: hiddenOwner,
      });
      await create(t(), "fsboxes", {
        name: "box blue",
        site: blueSite,
        tags: [open],
        owner: openOwner,
      });
      attacker = (
        await userWith(t(), "filter-scope-attacker", [
          [["view"], "dcim.site", null],
          [["view"], "custom_objects.fsboxes", null],
          [["view"], "extras.tag", { slug: "open-tag" }],
          [["view"], "tenancy.tenant", { slug: "blue" }],
          [["view"], "users.owner", { name: "open owner" }],
        ])
      ).token;
    });
    afterAll(() => app.close());

    const get = async (path: string, token: string | undefined = attacker) => {
      const r = await t().req("GET", path, { token });
      const text = await r.text();
      expect(r.status, text).toBe(200);
      return text;
    };
    const graphql = async (query: string, token: string | undefined = attacker) => {
      const r = await t().req("POST", "/graphql/", { token, body: { query } });
      const text = await r.text();
      expect(r.status, text).toBe(200);
      expect(JSON.parse(text).errors, text).toBeUndefined();
      return text;
    };
    const count = (text: string) => JSON.parse(text).count as number;
    /** The status and body of a request, for one that may answer 400. */
    const answer = async (path: string) => {
      const r = await t().req("GET", path, { token: attacker });
      return `${r.status} ${await r.text()}`;
    };
    /** A tag filter naming a tag that is not there: NetBox's 400, naming the value given. */
    const asMissing = async (path: string, hidden: string, missing: string) => {
      const got = await answer(path.replaceAll(hidden, missing));
      expect(got).toStartWith("400 ");
      return got.replaceAll(missing, hidden);
    };

    test("?tag= and ?tag__n= of a hidden tag answer as a tag that does not exist", async () => {
      for (const list of ["/api/dcim/sites/", `${CO}/fsboxes/`]) {
        for (const lookup of ["tag", "tag__n"]) {
          const one = `${list}?${lookup}=hidden-tag&brief=1`;
          expect(await answer(one), `${list} ${lookup}`).toBe(
            await asMissing(one, "hidden-tag", "no-such-tag"),
          );
          // with another value beside it, too
          const two = `${list}?${lookup}=hidden-tag&${lookup}=open-tag&brief=1`;
          expect(await answer(two)).toBe(await asMissing(two, "hidden-tag", "no-such-tag"));
        }
        expect(count(await get(`${list}?tag=open-tag`)), list).toBe(1);
        expect(count(await get(`${list}?tag__n=open-tag`)), list).toBe(1);
        // the superuser's filter reaches every tag
        expect(count(await get(`${list}?tag=hidden-tag`, t().admin)), list).toBe(1);
        expect(count(await get(`${list}?tag__n=hidden-tag`, t().admin)), list).toBe(1);
      }
    });

    test("?tag_id= and ?tag_id__n= of a hidden tag answer as a tag id that does not exist", async () => {
      const admin = t().admin;
      const ids = JSON.parse(await get("/api/extras/tags/?slug=hidden-tag&slug=open-tag", admin));
      const idOf = (slug: string) => ids.results.find((x: any) => x.slug === slug).id as number;
      const [hidden, open] = [idOf("hidden-tag"), idOf("open-tag")];
      for (const list of ["/api/dcim/sites/", `${CO}/fsboxes/`]) {
        for (const lookup of ["tag_id", "tag_id__n"]) {
          const one = `${list}?${lookup}=${hidden}&brief=1`;
          expect(await answer(one), `${list} ${lookup}`).toBe(
            await asMissing(one, String(hidden), "999999"),
          );
          const two = `${list}?${lookup}=${hidden}&${lookup}=${open}&brief=1`;
          expect(await answer(two)).toBe(await asMissing(two, String(hidden), "999999"));
        }
        expect(count(await get(`${list}?tag_id=${open}`)), list).toBe(1);
        expect(count(await get(`${list}?tag_id=${hidden}`, admin)), list).toBe(1);
      }
    });

    test("?owner= and ?owner_group= of a hidden owner or group answer as one that does not exist", async () => {
      const list = `${CO}/fsboxes/`;
      for (const [param, hidden] of [
        ["owner", "secret owner"],
        ["owner__n", "secret owner"],
        ["owner_group", "secret group"],
        ["owner_group__n", "secret group"],
      ] as const) {
        const q = (v: string) => `${list}?${param}=${encodeURIComponent(v)}&brief=1`;
        expect(await get(q(hidden)), param).toBe(await get(q("no such name")));
        expect(await get(q(hidden), t().admin), param).not.toBe(
          await get(q("no such name"), t().admin),
        );
      }
      expect(count(await get(`${list}?owner=open%20owner`))).toBe(1);
    });

    test("GraphQL: a tag filter naming a hidden tag matches nothing, as a missing one", async () => {
      for (const list of ["site_list", "custom_objects_fsboxes_list"]) {
        const query = (slug: string) => `{ ${list}(filters: {tag: {exact: "${slug}"}}) { id } }`;
        expect(await graphql(query("hidden-tag")), list).toBe(await graphql(query("no-such-tag")));
        expect(JSON.parse(await graphql(query("open-tag"))).data[list]).toHaveLength(1);
        expect(JSON.parse(await graphql(query("hidden-tag"), t().admin)).data[list]).toHaveLength(
          1,
        );
      }
    });

    test("GraphQL: a related filter reaches only related objects the caller may view", async () => {
      const probes = [
        (name: string) =>
          `{ site_list(filters: {tenant: {name: {i_contains: "${name}"}}}) { id } }`,
        (name: string) =>
          `{ site_list(filters: {NOT: {tenant: {name: {i_contains: "${name}"}}}}) { id } }`,
        (name: string) =>
          `{ custom_objects_fsboxes_list(filters: {site: {tenant: {name: {i_contains: "${name}"}}}}) { id } }`,
      ];
      for (const probe of probes) {
        // a guess at the hidden tenant's name answers as a guess at nothing
        expect(await graphql(probe("Secret")), probe("Secret")).toBe(
          await graphql(probe("zz-nothing")),
        );
        // the visible tenant still filters, and the superuser's filter reaches the hidden one
        expect(await graphql(probe("Blue"))).not.toBe(await graphql(probe("zz-nothing")));
        expect(await graphql(probe("Secret"), t().admin)).not.toBe(
          await graphql(probe("zz-nothing"), t().admin),
        );
      }
      const blue = JSON.parse(
        await graphql(`{ site_list(filters: {tenant: {slug: {exact: "blue"}}}) { name } }`),
      );
      expect(blue.data.site_list).toEqual([{ name: "fs blue" }]);
    });
  });
