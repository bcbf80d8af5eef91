import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
const siteIds: number[] = [];
beforeAll(async () => {
  t = await makeTestApp({ MAX_BODY_BYTES: "4096" });
  const tenant = await t.json("POST", "/api/tenancy/tenants/", {
    body: { name: "Acme", slug: "acme" },
  });
  const body = Array.from({ length: 23 }, (_, i) => ({
    name: `Site ${String(i).padStart(2, "0")}`,
    slug: `site-${i}`,
    status: i % 3 === 0 ? "planned" : "active",
    description: i % 5 === 0 ? "" : `Desc ${i % 4 === 0 ? "Core" : "edge"} ${i}`,
    facility: i < 10 ? "DC-North" : "dc-south",
    tenant: i % 2 === 0 ? tenant.body.id : null,
  }));
  const r = await t.json("POST", "/api/dcim/sites/", { body });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  siteIds.push(...r.body.map((s: any) => s.id));
});
afterAll(() => t.close());

const names = (r: any) => r.body.results.map((s: any) => s.name);

describe("pagination", () => {
  test("default page of 50, count, no links when everything fits", async () => {
    const r = await t.json("GET", "/api/dcim/sites/");
    expect(r.body.count).toBe(23);
    expect(r.body.results.length).toBe(23);
    expect(r.body.next).toBeNull();
    expect(r.body.previous).toBeNull();
  });

  test("limit/offset arithmetic and absolute next/previous URLs keeping filters", async () => {
    const r = await t.json("GET", "/api/dcim/sites/?status=active&limit=5&offset=5");
    expect(r.body.count).toBe(15);
    expect(r.body.results.length).toBe(5);
    expect(r.body.next).toBe(`${BASE}/api/dcim/sites/?status=active&limit=5&offset=10`);
    expect(r.body.previous).toBe(`${BASE}/api/dcim/sites/?status=active&limit=5`);
    const last = await t.json("GET", "/api/dcim/sites/?status=active&limit=5&offset=10");
    expect(last.body.results.length).toBe(5);
    expect(last.body.next).toBeNull();
    const beyond = await t.json("GET", "/api/dcim/sites/?limit=5&offset=100");
    expect(beyond.body.results).toEqual([]);
    expect(beyond.body.count).toBe(23);
    expect(beyond.body.previous).toBe(`${BASE}/api/dcim/sites/?limit=5&offset=95`);
  });

  test("walking pages visits every row exactly once", async () => {
    const seen: number[] = [];
    let url: string | null = "/api/dcim/sites/?limit=4";
    while (url) {
      const r: any = await t.json("GET", url.replace(BASE, ""));
      seen.push(...r.body.results.map((s: any) => s.id));
      url = r.body.next;
    }
    expect(seen.sort((a, b) => a - b)).toEqual([...siteIds].sort((a, b) => a - b));
  });

  test("limit above 1000 is capped; limit=0 means the maximum page", async () => {
    const r = await t.json("GET", "/api/dcim/sites/?limit=5000");
    expect(r.body.results.length).toBe(23);
    expect((await t.json("GET", "/api/dcim/sites/?limit=0")).body.results.length).toBe(23);
  });

  test("invalid limit/offset → 400 keyed by parameter", async () => {
    expect((await t.json("GET", "/api/dcim/sites/?limit=abc")).body.limit).toBeDefined();
    const r = await t.json("GET", "/api/dcim/sites/?offset=-1");
    expect(r.status).toBe(400);
    expect(r.body.offset).toBeDefined();
  });
});

describe("filters", () => {
  const count = async (qs: string) => {
    const r = await t.json("GET", `/api/dcim/sites/?${qs}`);
    if (r.status !== 200) throw new Error(`${qs}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.count as number;
  };
  test("exact (case-sensitive) and repeated values OR", async () => {
    expect(await count("name=Site%2001")).toBe(1);
    expect(await count("name=site%2001")).toBe(0);
    expect(await count("name=Site%2001&name=Site%2002")).toBe(2);
  });
  test("__n excludes every value", async () => {
    expect(await count("name__n=Site%2001&name__n=Site%2002")).toBe(21);
  });
  test("__ic / __nic", async () => {
    expect(await count("description__ic=core")).toBe(4); // 4, 8, 12, 16 (0 and 20 are empty)
    expect(await count("description__nic=core")).toBe(19);
  });
  test("__isw / __nisw / __iew / __niew", async () => {
    expect(await count("facility__isw=dc-")).toBe(23);
    expect(await count("facility__nisw=dc-n")).toBe(13);
    expect(await count("name__iew=1")).toBe(3); // 01, 11, 21
    expect(await count("name__niew=1")).toBe(20);
  });
  test("__ie / __nie are case-insensitive equality", async () => {
    expect(await count("facility__ie=dc-north")).toBe(10);
    expect(await count("facility__nie=DC-NORTH")).toBe(13);
  });
  test("__empty", async () => {
    expect(await count("description__empty=true")).toBe(5);
    expect(await count("description__empty=false")).toBe(18);
    expect((await t.json("GET", "/api/dcim/sites/?description__empty=maybe")).status).toBe(400);
  });
  test("numeric lookups on id and foreign keys", async () => {
    const [a, b] = [siteIds[3]!, siteIds[7]!];
    expect(await count(`id__gte=${a}&id__lte=${b}`)).toBe(5);
    expect(await count(`id__gt=${a}&id__lt=${b}`)).toBe(3);
    expect(await count(`id=${a}&id=${b}`)).toBe(2);
    expect(await count(`id__n=${a}`)).toBe(22);
    expect(await count("tenant_id__empty=true")).toBe(11);
    const tenants = await t.json("GET", "/api/tenancy/tenants/");
    expect(await count(`tenant_id=${tenants.body.results[0].id}`)).toBe(12);
    expect((await t.json("GET", "/api/dcim/sites/?id=abc")).status).toBe(400);
  });
  test("date lookups on created", async () => {
    expect(await count("created__gte=2000-01-01")).toBe(23);
    expect(await count("created__lt=2000-01-01")).toBe(0);
    expect((await t.json("GET", "/api/dcim/sites/?created__gte=yesterday")).status).toBe(400);
  });
  test("q searches name, slug, description and facility", async () => {
    expect(await count("q=south")).toBe(13);
    expect(await count("q=Site%2002")).toBe(1);
    expect(await count("q=100%25")).toBe(0); // % is literal, not a wildcard
  });
  test("unsupported lookup → 400; unknown parameter is ignored", async () => {
    const r = await t.json("GET", "/api/dcim/sites/?name__gt=a");
    expect(r.status).toBe(400);
    expect(r.body.name__gt).toBeDefined();
    expect(await count("colour=blue")).toBe(23);
  });
  test("choice filter", async () => {
    expect(await count("status=planned")).toBe(8);
    expect(await count("status__n=planned")).toBe(15);
  });
});

describe("ordering and projection", () => {
  test("ordering by a field, descending, and multiple keys", async () => {
    expect(names(await t.json("GET", "/api/dcim/sites/?ordering=-name&limit=2"))).toEqual([
      "Site 22",
      "Site 21",
    ]);
    const r = await t.json("GET", "/api/dcim/sites/?ordering=status,-name&limit=2");
    expect(names(r)).toEqual(["Site 22", "Site 20"]);
  });
  test("ordering by an unknown field → 400", async () => {
    const r = await t.json("GET", "/api/dcim/sites/?ordering=nope");
    expect(r.status).toBe(400);
    expect(r.body.ordering).toBeDefined();
  });
  test("brief, fields and omit", async () => {
    const brief = await t.json("GET", "/api/dcim/sites/?brief=1&limit=1");
    expect(Object.keys(brief.body.results[0]).sort()).toEqual([
      "description",
      "display",
      "id",
      "name",
      "slug",
      "url",
    ]);
    const fields = await t.json("GET", `/api/dcim/sites/${siteIds[0]}/?fields=id,name`);
    expect(fields.body).toEqual({ id: siteIds[0], name: "Site 00" });
    const omit = await t.json("GET", `/api/dcim/sites/${siteIds[0]}/?omit=comments,tags`);
    expect(omit.body.comments).toBeUndefined();
    expect(omit.body.tags).toBeUndefined();
    expect(omit.body.name).toBe("Site 00");
  });
  test("records carry id, absolute url, display, created and last_updated", async () => {
    const r = await t.json("GET", `/api/dcim/sites/${siteIds[1]}/`);
    expect(r.body.url).toBe(`${BASE}/api/dcim/sites/${siteIds[1]}/`);
    expect(r.body.display).toBe("Site 01");
    expect(r.body.status).toEqual({ value: "active", label: "Active" });
    expect(new Date(r.body.created).toISOString()).toBe(r.body.created);
    expect(new Date(r.body.last_updated).toISOString()).toBe(r.body.last_updated);
  });
  test("paths without the trailing slash are accepted", async () => {
    expect((await t.req("GET", "/api/dcim/sites")).status).toBe(200);
    expect((await t.req("GET", `/api/dcim/sites/${siteIds[0]}`)).status).toBe(200);
  });
});

describe("writes", () => {
  test("create, nested foreign key, update (PATCH and PUT), delete", async () => {
    const site = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Write", slug: "write" },
    });
    expect(site.status).toBe(201);
    const dev = await t.json("POST", "/api/dcim/devices/", {
      body: { name: "sw1", site: site.body.id, serial: "X1" },
    });
    expect(dev.status).toBe(201);
    expect(dev.body.site).toMatchObject({
      id: site.body.id,
      name: "Write",
      slug: "write",
      url: `${BASE}/api/dcim/sites/${site.body.id}/`,
    });
    const patched = await t.json("PATCH", `/api/dcim/devices/${dev.body.id}/`, {
      body: { serial: "X2" },
    });
    expect(patched.body.serial).toBe("X2");
    expect(patched.body.name).toBe("sw1");
    const putMissing = await t.json("PUT", `/api/dcim/devices/${dev.body.id}/`, {
      body: { name: "sw1b" },
    });
    expect(putMissing.status).toBe(200); // site is already set, so PUT without it keeps it
    const put = await t.json("PUT", `/api/sites-nope/`, { body: {} });
    expect(put.status).toBe(404);
    expect((await t.req("DELETE", `/api/dcim/devices/${dev.body.id}/`)).status).toBe(204);
    expect((await t.req("GET", `/api/dcim/devices/${dev.body.id}/`)).status).toBe(404);
  });

  test("validation errors are keyed by field", async () => {
    const r = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "", slug: "bad slug!", status: "melting", tenant: 99999 },
    });
    expect(r.status).toBe(400);
    expect(Object.keys(r.body).sort()).toEqual(["name", "slug", "status", "tenant"]);
    const missing = await t.json("POST", "/api/dcim/devices/", { body: { name: "orphan" } });
    expect(missing.body.site).toEqual(["This field is required."]);
  });

  test("unknown fields → 400; echoing read-only fields is fine", async () => {
    const r = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "U", slug: "u", colour: "red" },
    });
    expect(r.status).toBe(400);
    expect(r.body.colour).toEqual(["Unknown field."]);
    const echo = await t.json("GET", `/api/dcim/sites/${siteIds[2]}/`);
    const { tags: _t, tenant, status, ...rest } = echo.body;
    const back = await t.json("PUT", `/api/dcim/sites/${siteIds[2]}/`, {
      body: { ...rest, status: status.value, tenant: tenant?.id ?? null },
    });
    expect(back.status).toBe(200);
  });

  test("unique violations → 400 on the field", async () => {
    const r = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Site 00", slug: "another" },
    });
    expect(r.status).toBe(400);
    expect(r.body.name[0]).toContain("already exists");
  });

  test("bulk create is all-or-nothing and reports errors per item", async () => {
    const before = (await t.json("GET", "/api/tenancy/tenants/")).body.count;
    const r = await t.json("POST", "/api/tenancy/tenants/", {
      body: [
        { name: "T1", slug: "t1" },
        { name: "T2", slug: "bad slug" },
        { name: "T3", slug: "t3" },
      ],
    });
    expect(r.status).toBe(400);
    expect(r.body.detail).toBe("1 of 3 objects failed validation.");
    expect(r.body.errors.map((e: any) => e.index)).toEqual([1]);
    expect(r.body.errors[0].errors.slug).toBeDefined();
    expect((await t.json("GET", "/api/tenancy/tenants/")).body.count).toBe(before);
    // a duplicate inside the same list fails at the database and still writes nothing
    const dup = await t.json("POST", "/api/tenancy/tenants/", {
      body: [
        { name: "D", slug: "d" },
        { name: "D", slug: "d2" },
      ],
    });
    expect(dup.status).toBe(400);
    expect((await t.json("GET", "/api/tenancy/tenants/")).body.count).toBe(before);
  });

  test("bulk update and bulk delete are all-or-nothing", async () => {
    const made = await t.json("POST", "/api/tenancy/tenants/", {
      body: [
        { name: "B1", slug: "b1" },
        { name: "B2", slug: "b2" },
      ],
    });
    const [a, b] = made.body.map((x: any) => x.id);
    const bad = await t.json("PATCH", "/api/tenancy/tenants/", {
      body: [
        { id: a, description: "ok" },
        { id: b, slug: "not ok!" },
      ],
    });
    expect(bad.status).toBe(400);
    expect((await t.json("GET", `/api/tenancy/tenants/${a}/`)).body.description).toBe("");
    const good = await t.json("PATCH", "/api/tenancy/tenants/", {
      body: [
        { id: a, description: "one" },
        { id: b, description: "two" },
      ],
    });
    expect(good.status).toBe(200);
    expect(good.body.map((x: any) => x.description)).toEqual(["one", "two"]);
    const missing = await t.json("DELETE", "/api/tenancy/tenants/", {
      body: [{ id: a }, { id: 987654 }],
    });
    // NetBox 4.7: a list naming an object that is not there is a 400 naming it (decision 0200)
    expect(missing.status).toBe(400);
    expect(missing.body.errors).toEqual([
      { id: 987654, errors: { id: ["Object with ID 987654 does not exist"] } },
    ]);
    expect((await t.req("GET", `/api/tenancy/tenants/${a}/`)).status).toBe(200);
    expect(
      (await t.req("DELETE", "/api/tenancy/tenants/", { body: [{ id: a }, { id: b }] })).status,
    ).toBe(204);
    expect((await t.req("GET", `/api/tenancy/tenants/${b}/`)).status).toBe(404);
  });

  test("deleting a site that devices need → 409, nothing deleted", async () => {
    const site = await t.json("POST", "/api/dcim/sites/", { body: { name: "Busy", slug: "busy" } });
    await t.json("POST", "/api/dcim/devices/", { body: { name: "d1", site: site.body.id } });
    const r = await t.json("DELETE", `/api/dcim/sites/${site.body.id}/`);
    expect(r.status).toBe(409);
    expect((await t.req("GET", `/api/dcim/sites/${site.body.id}/`)).status).toBe(200);
  });

  test("tags: applied by id or slug, scoped by object type, filtered with ?tag=", async () => {
    const tag = await t.json("POST", "/api/extras/tags/", {
      body: { name: "Core", slug: "core", color: "ff0000" },
    });
    const scoped = await t.json("POST", "/api/extras/tags/", {
      body: { name: "Only tenants", slug: "only-tenants", object_types: ["tenancy.tenant"] },
    });
    expect(scoped.body.object_types).toEqual(["tenancy.tenant"]);
    const site = await t.json("PATCH", `/api/dcim/sites/${siteIds[5]}/`, {
      body: { tags: [tag.body.id] },
    });
    expect(site.body.tags.map((x: any) => x.slug)).toEqual(["core"]);
    const refused = await t.json("PATCH", `/api/dcim/sites/${siteIds[5]}/`, {
      body: { tags: [{ slug: "only-tenants" }] },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.tags).toBeDefined();
    expect((await t.json("GET", "/api/dcim/sites/?tag=core")).body.count).toBe(1);
    expect((await t.json("GET", "/api/dcim/sites/?tag__n=core")).body.count).toBeGreaterThan(1);
  });
});

describe("error shapes", () => {
  test("malformed JSON → 400 with detail", async () => {
    const r = await t.json("POST", "/api/dcim/sites/", { raw: "{nope", body: undefined } as any);
    expect(r.status).toBe(400);
    expect(r.body.detail).toContain("JSON parse error");
  });
  test("oversized body → 413", async () => {
    const r = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "x".repeat(5000), slug: "big" },
    });
    expect(r.status).toBe(413);
    expect(r.body.detail).toContain("4096");
  });
  test("non-JSON content type → 415", async () => {
    const r = await t.json("POST", "/api/dcim/sites/", {
      raw: "name=x",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    } as any);
    expect(r.status).toBe(415);
  });
  test("a JSON body that is not an object → 400", async () => {
    for (const raw of ["42", '"text"', "null"]) {
      const r = await t.json("POST", "/api/dcim/sites/", { raw } as any);
      expect(r.status).toBe(400);
    }
  });
  test("unknown path → 404 JSON; wrong method → 405", async () => {
    const r = await t.json("GET", "/api/dcim/nothing-here/");
    expect(r.status).toBe(404);
    expect(r.body.detail).toBe("Not found.");
    expect((await t.req("GET", "/nowhere")).status).toBe(404);
    const m = await t.json("POST", `/api/dcim/sites/${siteIds[0]}/`, { body: {} });
    expect(m.status).toBe(405);
    expect(m.res.headers.get("allow")).toContain("PATCH");
    expect((await t.req("POST", "/api/core/object-types/", { body: {} })).status).toBe(405);
  });
  test("non-numeric and huge ids → 404, never 500", async () => {
    for (const id of ["abc", "1e5", "99999999999999999999", "-1"]) {
      expect((await t.req("GET", `/api/dcim/sites/${id}/`)).status).toBe(404);
    }
  });
  test("wrong value types never produce a 500", async () => {
    const bodies = [
      { name: 5, slug: [] },
      { name: {}, slug: null },
      { tenant: "x", name: "n", slug: "n" },
      { tags: "core", name: "n2", slug: "n2" },
    ];
    for (const body of bodies) {
      const r = await t.json("POST", "/api/dcim/sites/", { body });
      expect(r.status).toBe(400);
    }
  });
});

describe("core endpoints", () => {
  test("/api/ root and app indexes", async () => {
    const r = await t.json("GET", "/api/");
    expect(r.body.dcim).toBe(`${BASE}/api/dcim/`);
    const dcim = await t.json("GET", "/api/dcim/");
    expect(dcim.body.sites).toBe(`${BASE}/api/dcim/sites/`);
  });
  test("/api/status/ reports versions and plugins", async () => {
    const r = await t.json("GET", "/api/status/");
    expect(r.body.plugins).toEqual({ custom_objects: "0.1.0", host_healthcheck_plugin: "0.1.0" });
    expect(r.body.runtime).toStartWith("bun");
  });
  test("/api/core/object-types/ lists every model", async () => {
    const r = await t.json("GET", "/api/core/object-types/?limit=1000");
    const labels = r.body.results.map((o: any) => `${o.app_label}.${o.model}`);
    for (const l of [
      "dcim.site",
      "dcim.device",
      "ipam.prefix",
      "ipam.ipaddress",
      "tenancy.tenant",
      "extras.tag",
      "extras.customfieldchoiceset",
      "custom_objects.customobjecttype",
      "custom_objects.customobjecttypefield",
    ]) {
      expect(labels).toContain(l);
    }
    expect(Object.keys(r.body.results[0]).sort()).toEqual([
      "app_label",
      "display",
      "id",
      "model",
      "url",
    ]);
    expect((await t.json("GET", "/api/core/object-types/?app_label=dcim")).body.count).toBe(2);
  });
  test("choice sets validate their choices", async () => {
    const ok = await t.json("POST", "/api/extras/custom-field-choice-sets/", {
      body: {
        name: "colours",
        extra_choices: [
          ["red", "Red"],
          ["blue", "Blue"],
        ],
      },
    });
    expect(ok.status).toBe(201);
    const bad = await t.json("POST", "/api/extras/custom-field-choice-sets/", {
      body: { name: "bad", extra_choices: [["x"]] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.extra_choices).toBeDefined();
  });
  test("prefixes and IP addresses validate CIDR notation", async () => {
    expect(
      (await t.json("POST", "/api/ipam/prefixes/", { body: { prefix: "10.0.0.0/8" } })).status,
    ).toBe(201);
    expect((await t.json("POST", "/api/ipam/prefixes/", { body: { prefix: "ten" } })).status).toBe(
      400,
    );
    expect(
      (
        await t.json("POST", "/api/ipam/ip-addresses/", {
          body: { address: "10.0.0.1/24", dns_name: "gw" },
        })
      ).status,
    ).toBe(201);
  });
});
