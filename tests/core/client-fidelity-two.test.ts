/**
 * What a NetBox 4.7 client (pynetbox, Terraform) sees, on a local file and a remote database:
 * a prefix written with host bits set is stored as its network (NetBox's `Prefix.save()` keeps
 * `prefix.cidr`), in NetBox's text; a tag filter naming a tag that does not exist answers 400
 * (NetBox's `TagFilter` is a model choice filter); a site's latitude and longitude are numbers
 * (NetBox's `DecimalField`s, rendered as JSON numbers), validated on write and filtered as numbers.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userWith } from "../helpers/grants";
import type { TestApp } from "../helpers/app";
import { appOn, type BackendApp } from "../helpers/remote-db";

for (const backend of ["local", "remote"] as const)
  describe(`NetBox client fidelity (${backend})`, () => {
    let b: BackendApp;
    let t: TestApp;
    beforeAll(async () => {
      b = await appOn(backend, `fidelity-two-${backend}`);
      t = b.t;
    });
    afterAll(() => b.close());

    test("a prefix with host bits set is stored as its network, on every write", async () => {
      const made = await t.json("POST", "/api/ipam/prefixes/", { body: { prefix: "10.9.0.1/8" } });
      expect(made.status).toBe(201);
      expect(made.body.prefix).toBe("10.0.0.0/8");
      const id = made.body.id as number;
      const put = await t.json("PUT", `/api/ipam/prefixes/${id}/`, {
        body: { prefix: "172.16.5.4/12" },
      });
      expect(put.body.prefix).toBe("172.16.0.0/12");
      const patch = await t.json("PATCH", `/api/ipam/prefixes/${id}/`, {
        body: { prefix: "2001:DB8:0:0:1::5/64" },
      });
      expect(patch.body.prefix).toBe("2001:db8::/64");
      const got = await t.json("GET", `/api/ipam/prefixes/${id}/`);
      expect(got.body.prefix).toBe("2001:db8::/64");
      const bulk = await t.json("POST", "/api/ipam/prefixes/", {
        body: [{ prefix: "192.0.2.77/24" }, { prefix: "010.1.2.3/16" }],
      });
      expect(bulk.status).toBe(201);
      expect(bulk.body.map((p: { prefix: string }) => p.prefix)).toEqual([
        "192.0.2.0/24",
        "10.1.0.0/16",
      ]);
      const bulkPatch = await t.json("PATCH", "/api/ipam/prefixes/", {
        body: [{ id: bulk.body[0].id, prefix: "198.51.100.9/24" }],
      });
      expect(bulkPatch.body[0].prefix).toBe("198.51.100.0/24");
      // the stored numbers follow the stored network: exact and within filters find it
      const exact = await t.json("GET", "/api/ipam/prefixes/?prefix=198.51.100.0/24");
      expect(exact.body.results.map((p: { id: number }) => p.id)).toEqual([bulk.body[0].id]);
      const within = await t.json("GET", "/api/ipam/prefixes/?within_include=10.0.0.0/8");
      expect(within.body.results.map((p: { prefix: string }) => p.prefix).sort()).toEqual([
        "10.1.0.0/16",
      ]);
    });

    test("an IPv6 network with an IPv4 tail reads as NetBox answers it, and is written back as read", async () => {
      // PostgreSQL and netaddr spell IPv4-mapped (::ffff:0:0/96) and IPv4-compatible (::/96, past
      // ::ffff) networks with a dotted tail; what Host answers, a client's PUT sends back
      const cases: Array<[string, string]> = [
        ["::ffff:a00:5/120", "::ffff:10.0.0.0/120"],
        ["::a00:1/104", "::10.0.0.0/104"],
        ["::1:0/112", "::0.1.0.0/112"],
        ["::10.0.0.0/104", "::10.0.0.0/104"],
        ["::ffff/128", "::ffff/128"],
        ["::/96", "::/96"],
      ];
      for (const [given, answered] of cases) {
        const made = await t.json("POST", "/api/ipam/prefixes/", { body: { prefix: given } });
        expect([given, made.status, made.body.prefix]).toEqual([given, 201, answered]);
        const back = await t.json("PUT", `/api/ipam/prefixes/${made.body.id}/`, {
          body: { prefix: made.body.prefix },
        });
        expect([given, back.status, back.body.prefix]).toEqual([given, 200, answered]);
        const found = await t.json("GET", `/api/ipam/prefixes/?prefix=${answered}`);
        expect(found.body.results.map((p: { id: number }) => p.id)).toContain(made.body.id);
      }
    });

    test("an IP address with an IPv4 tail is taken as NetBox's inet field takes it", async () => {
      const made = await t.json("POST", "/api/ipam/ip-addresses/", {
        body: { address: "::ffff:10.0.0.1/64" },
      });
      expect([made.status, made.body.address]).toEqual([201, "::ffff:10.0.0.1/64"]);
      for (const host of ["::ffff:10.0.0.1", "::ffff:a00:1"]) {
        const found = await t.json("GET", `/api/ipam/ip-addresses/?address=${host}`);
        expect(found.body.results.map((a: { id: number }) => a.id)).toEqual([made.body.id]);
      }
      const bad = await t.json("POST", "/api/ipam/ip-addresses/", {
        body: { address: "::ffff:300.0.0.1/64" },
      });
      expect(bad.status).toBe(400);
    });

    test("an IP address is answered in PostgreSQL's spelling of an inet, its host kept", async () => {
      const cases: Array<[string, string]> = [
        ["2001:DB8:0:0:0:0:0:1/64", "2001:db8::1/64"],
        ["::FFFF:10.0.0.1/96", "::ffff:10.0.0.1/96"],
        ["10.1.2.3/8", "10.1.2.3/8"],
        ["FE80:0:0:0:1:0:0:0/10", "fe80::1:0:0:0/10"],
      ];
      for (const [given, answered] of cases) {
        const made = await t.json("POST", "/api/ipam/ip-addresses/", { body: { address: given } });
        expect([given, made.status, made.body.address]).toEqual([given, 201, answered]);
        const patched = await t.json("PATCH", `/api/ipam/ip-addresses/${made.body.id}/`, {
          body: { address: given },
        });
        expect([given, patched.body.address]).toEqual([given, answered]);
      }
    });

    test("a /0 prefix is refused as NetBox's clean() refuses it, on create and update", async () => {
      const mask0 = ["Cannot create prefix with /0 mask."];
      for (const prefix of ["0.0.0.0/0", "::/0", "10.1.2.3/0"]) {
        const r = await t.json("POST", "/api/ipam/prefixes/", { body: { prefix } });
        expect([r.status, r.body]).toEqual([400, { prefix: mask0 }]);
      }
      const made = await t.json("POST", "/api/ipam/prefixes/", { body: { prefix: "10.8.0.0/16" } });
      const patch = await t.json("PATCH", `/api/ipam/prefixes/${made.body.id}/`, {
        body: { prefix: "::/0" },
      });
      expect([patch.status, patch.body]).toEqual([400, { prefix: mask0 }]);
      const bulk = await t.json("POST", "/api/ipam/prefixes/", {
        body: [{ prefix: "10.9.0.0/16" }, { prefix: "0.0.0.0/0" }],
      });
      expect(bulk.status).toBe(400);
      expect(JSON.stringify(bulk.body)).toContain(JSON.stringify({ prefix: mask0 }));
    });

    test("a number filter's value that is no number answers Django's message", async () => {
      for (const [query, key] of [
        ["latitude__gte=abc", "latitude__gte"],
        ["longitude=0x10", "longitude"],
        ["id__gt=twelve", "id__gt"],
      ]) {
        const r = await t.json("GET", `/api/dcim/sites/?${query}`);
        expect([r.status, r.body]).toEqual([400, { [key!]: ["Enter a number."] }]);
      }
      // Django's DecimalField reads these numerals too
      const made = await t.json("POST", "/api/dcim/sites/", {
        body: { name: "numeral site", slug: "numeral-site", latitude: 0.5, longitude: 40 },
      });
      expect(made.status).toBe(201);
      for (const query of [
        "latitude=.5",
        "latitude=+0.5",
        "longitude=4e1",
        "longitude=40.",
        "latitude=5E-1",
      ]) {
        const r = await t.json("GET", `/api/dcim/sites/?${query}`);
        expect([query, r.status, r.body.results?.map((x: { id: number }) => x.id)]).toEqual([
          query,
          200,
          [made.body.id],
        ]);
      }
      // a numeral past what a filter compares exactly says its bounds
      const big = await t.json("GET", "/api/dcim/sites/?id=99999999999999999999");
      expect(big.status).toBe(400);
      expect(big.body.id[0]).toContain("±9007199254740991");
    });

    test("?tag= / ?tag_id= naming no tag answers 400, a hidden tag as a missing one", async () => {
      const open = await t.json("POST", "/api/extras/tags/", {
        body: { name: "ft open", slug: "ft-open" },
      });
      const hidden = await t.json("POST", "/api/extras/tags/", {
        body: { name: "ft hidden", slug: "ft-hidden" },
      });
      expect(hidden.status).toBe(201);
      const site = await t.json("POST", "/api/dcim/sites/", {
        body: { name: "ft site", slug: "ft-site", tags: [{ slug: "ft-open" }] },
      });
      expect(site.status).toBe(201);
      const choice = (v: string) =>
        `Select a valid choice. ${v} is not one of the available choices.`;
      for (const [query, key, value] of [
        ["tag=nope", "tag", "nope"],
        ["tag=ft-open&tag=nope", "tag", "nope"],
        ["tag__n=nope", "tag__n", "nope"],
        ["tag_id=999999", "tag_id", "999999"],
        [`tag_id=${open.body.id}&tag_id=999999`, "tag_id", "999999"],
        ["tag_id__n=999999", "tag_id__n", "999999"],
        // a cursor page (NetBox 4.6's ?start=) and another projection and order alike
        ["start=1&tag=nope", "tag", "nope"],
        ["tag=nope&brief=1&ordering=-name", "tag", "nope"],
      ] as const) {
        const r = await t.json("GET", `/api/dcim/sites/?${query}`);
        expect({ query, status: r.status, body: r.body }).toEqual({
          query,
          status: 400,
          body: { [key]: [choice(value)] },
        });
      }
      const ok = await t.json("GET", `/api/dcim/sites/?tag=ft-open&tag_id=${open.body.id}`);
      expect(ok.status).toBe(200);
      expect(ok.body.count).toBe(1);
      // a tag the caller may not view is a tag that does not exist: the same 400, byte for byte
      const viewer = (
        await userWith(t, `ft-viewer-${backend}`, [
          [["view"], "dcim.site", null],
          [["view"], "extras.tag", { slug: "ft-open" }],
        ])
      ).token;
      const answer = async (q: string) => {
        const r = await t.req("GET", `/api/dcim/sites/?${q}`, { token: viewer });
        return `${r.status} ${await r.text()}`;
      };
      expect(await answer("tag=ft-hidden")).toBe(
        (await answer("tag=ft-nope")).replace("ft-nope", "ft-hidden"),
      );
      expect(await answer(`tag_id=${hidden.body.id}`)).toBe(
        (await answer("tag_id=999999")).replace("999999", String(hidden.body.id)),
      );
      expect(await answer("tag=ft-hidden")).toStartWith("400 ");
      expect(JSON.parse((await answer("tag=ft-open")).slice(4)).count).toBe(1);
    });

    test("GraphQL: a tag that does not exist matches nothing, as NetBox's strawberry filters (0215)", async () => {
      // NetBox 4.7's GraphQL tag filter is a related lookup (`tags: TagFilter`), no model choice:
      // a slug no tag has is a condition no object meets, never an error
      for (const filter of ['tag: {exact: "ft-nope"}', 'tag_id: {exact: "999999"}']) {
        const query = `{ site_list(filters: {${filter}}) { name } }`;
        const r = await t.json("POST", "/graphql/", { body: { query } });
        expect({ filter, body: r.body }).toEqual({ filter, body: { data: { site_list: [] } } });
      }
      const known = `{ site_list(filters: {tag: {exact: "ft-open"}}) { name } }`;
      const r = await t.json("POST", "/graphql/", { body: { query: known } });
      expect(r.body.data.site_list).toHaveLength(1);
    });

    test("a site's latitude and longitude are numbers: read, written, validated, filtered", async () => {
      const made = await t.json("POST", "/api/dcim/sites/", {
        body: [
          { name: "geo a", slug: "geo-a", latitude: 41.5, longitude: -75.25 },
          { name: "geo b", slug: "geo-b", latitude: "-33.868800", longitude: "151.209300" },
          { name: "geo c", slug: "geo-c" },
        ],
      });
      expect(made.status).toBe(201);
      expect(made.body.map((s: any) => [s.latitude, s.longitude])).toEqual([
        [41.5, -75.25],
        [-33.8688, 151.2093],
        [null, null],
      ]);
      const got = await t.json("GET", `/api/dcim/sites/${made.body[1].id}/`);
      expect([got.body.latitude, got.body.longitude]).toEqual([-33.8688, 151.2093]);
      for (const [body, key, message] of [
        [{ latitude: 91 }, "latitude", "Ensure this value is less than or equal to 90.0."],
        [
          { longitude: -180.5 },
          "longitude",
          "Ensure this value is greater than or equal to -180.0.",
        ],
        [
          { latitude: 1.1234567 },
          "latitude",
          "Ensure that there are no more than 6 decimal places.",
        ],
        [{ latitude: "north" }, "latitude", "A valid number is required."],
        [{ longitude: true }, "longitude", "A valid number is required."],
      ] as const) {
        const r = await t.json("PATCH", `/api/dcim/sites/${made.body[0].id}/`, { body });
        expect({ body, status: r.status, errors: r.body }).toEqual({
          body,
          status: 400,
          errors: { [key]: [message] },
        });
      }
      const names = async (q: string) => {
        const r = await t.json("GET", `/api/dcim/sites/?slug__isw=geo-&${q}`);
        expect({ q, status: r.status }).toEqual({ q, status: 200 });
        return r.body.results.map((s: { name: string }) => s.name).sort();
      };
      expect(await names("latitude__gte=0")).toEqual(["geo a"]);
      expect(await names("latitude__lt=41.5")).toEqual(["geo b"]);
      expect(await names("latitude__lte=41.5")).toEqual(["geo a", "geo b"]);
      expect(await names("longitude__gt=100")).toEqual(["geo b"]);
      expect(await names("latitude=41.500000")).toEqual(["geo a"]);
      expect(await names("longitude=-75.25")).toEqual(["geo a"]);
      // a number compares as a number, not as text ("9" > "41.5" as text)
      const nine = await t.json("POST", "/api/dcim/sites/", {
        body: { name: "geo d", slug: "geo-d", latitude: 9 },
      });
      expect(nine.body.latitude).toBe(9);
      expect(await names("latitude__gt=10")).toEqual(["geo a"]);
      expect((await t.json("GET", "/api/dcim/sites/?latitude__gte=north")).status).toBe(400);
      // the OpenAPI document (Terraform's and openapi clients' types): numbers, as NetBox's
      const doc = (await t.json("GET", "/api/schema/", { headers: { accept: "application/json" } }))
        .body;
      const { Site, SiteRequest } = doc.components.schemas;
      for (const schema of [Site, SiteRequest]) {
        const { latitude, longitude } = schema.properties;
        expect([latitude, longitude].map((p: any) => p.type)).toEqual([
          ["number", "null"],
          ["number", "null"],
        ]);
      }
      const params = doc.paths["/api/dcim/sites/"].get.parameters.map((p: any) => p.name);
      expect(params).toEqual(expect.arrayContaining(["latitude__gte", "longitude__lt"]));
      // GraphQL: NetBox's Decimal scalar (a string), filtered as a number
      const query = `{ site_list(filters: {latitude: {gt: 10}}) { name latitude longitude } }`;
      const gql = await t.json("POST", "/graphql/", { body: { query } });
      expect(gql.body).toEqual({
        data: { site_list: [{ name: "geo a", latitude: "41.5", longitude: "-75.25" }] },
      });
    });
  });
