/**
 * What real NetBox clients send and read, found by driving pynetbox 7.8 and reading the Terraform
 * provider's request bodies (go-netbox `Writable*` models): each test sends the request the client
 * sends and checks what that client reads back. NetBox 4.7 is the reference where the seed is
 * silent (netbox/api/viewsets/mixins.py, netbox/api/serializers/features.py).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { notFound } from "../../src/core/errors";
import { BUILTIN_PLUGINS } from "../../src/plugins/registry";
import { makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
  const tag = await t.json("POST", "/api/extras/tags/", { body: { name: "red", slug: "red" } });
  if (tag.status !== 201) throw new Error(JSON.stringify(tag.body));
});
afterAll(() => t.close());

describe("custom_fields on host models (Terraform sends it on every create and update)", () => {
  test("a netbox_site create body as the provider sends it is accepted; the record carries custom_fields {}", async () => {
    // resource_netbox_site.go: data.CustomFields = d.Get("custom_fields") (an empty map, sent).
    const made = await t.json("POST", "/api/dcim/sites/", {
      body: {
        custom_fields: {},
        description: "",
        name: "HQ",
        slug: "hq",
        status: "active",
        tags: [],
      },
    });
    expect(made.status).toBe(201);
    expect(made.body.custom_fields).toEqual({});
    // The provider reads the object back after create: res.GetPayload().CustomFields.
    const read = await t.json("GET", `/api/dcim/sites/${made.body.id}/`);
    expect(read.body.custom_fields).toEqual({});
    // NetBox puts it after tags, before the time stamps.
    const keys = Object.keys(read.body);
    expect(keys.indexOf("custom_fields")).toBe(keys.indexOf("tags") + 1);
    const patched = await t.json("PATCH", `/api/dcim/sites/${made.body.id}/`, {
      body: { custom_fields: {}, description: "x" },
    });
    expect(patched.status).toBe(200);
    const tenant = await t.json("POST", "/api/tenancy/tenants/", {
      body: { custom_fields: {}, name: "T", slug: "t", tags: [] },
    });
    expect(tenant.status).toBe(201);
    expect(tenant.body.custom_fields).toEqual({});
  });

  test("a field Host does not define, or a value that is not an object, is a 400 keyed custom_fields", async () => {
    const unknown = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "u", slug: "u", custom_fields: { rack_count: 3 } },
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.custom_fields[0]).toContain("rack_count");
    const bad = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "u", slug: "u", custom_fields: "nope" },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.custom_fields).toEqual([expect.stringContaining("dictionary")]);
    const bulk = await t.json("PATCH", "/api/dcim/sites/", {
      body: [{ id: 1, custom_fields: [] }],
    });
    expect(bulk.status).toBe(400);
    expect(bulk.body.errors[0].errors.custom_fields).toBeDefined();
  });

  test("brief and ?fields= leave it out as NetBox does; ?omit= drops it", async () => {
    const brief = await t.json("GET", "/api/dcim/sites/?brief=1");
    expect(brief.body.results[0].custom_fields).toBeUndefined();
    const omitted = await t.json("GET", "/api/dcim/sites/?omit=custom_fields");
    expect(omitted.body.results[0].custom_fields).toBeUndefined();
    const listed = await t.json("GET", "/api/dcim/sites/");
    expect(listed.body.results[0].custom_fields).toEqual({});
  });
});

describe("the OpenAPI document as pynetbox's strict_filters reads it", () => {
  test("every parameter of a list operation carries its name inline (no $ref), as drf-spectacular writes them", async () => {
    // Endpoint._validate_openapi_parameters: [p["name"] for p in paths[path]["get"]["parameters"]]
    const doc = (await t.json("GET", "/api/schema/", { headers: { accept: "application/json" } }))
      .body;
    for (const path of ["/api/dcim/sites/", "/api/plugins/custom-objects/linked-objects/"]) {
      const names = doc.paths[path].get.parameters.map((p: any) => p.name);
      expect(names.every((n: unknown) => typeof n === "string")).toBe(true);
    }
    const siteNames = doc.paths["/api/dcim/sites/"].get.parameters.map((p: any) => p.name);
    expect(siteNames).toEqual(expect.arrayContaining(["limit", "offset", "q", "name__ic", "tag"]));
    const detail = doc.paths["/api/dcim/sites/{id}/"];
    for (const method of ["get", "patch", "delete"])
      for (const p of detail[method].parameters) expect(typeof p.name).toBe("string");
  });
});

describe("status values NetBox 4.7 defines (the Terraform provider validates against them)", () => {
  test("a site takes staging; a device failed and inventory; an IP address slaac", async () => {
    const site = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "st", slug: "st", status: "staging" },
    });
    expect(site.status).toBe(201);
    expect(site.body.status).toEqual({ value: "staging", label: "Staging" });
    for (const status of ["failed", "inventory"]) {
      const device = await t.json("POST", "/api/dcim/devices/", {
        body: { name: `d-${status}`, site: site.body.id, status },
      });
      expect(device.status).toBe(201);
    }
    const ip = await t.json("POST", "/api/ipam/ip-addresses/", {
      body: { address: "2001:db8::1/64", status: "slaac" },
    });
    expect(ip.status).toBe(201);
    expect(ip.body.status).toEqual({ value: "slaac", label: "SLAAC" });
  });
});

describe("Endpoint.choices() reads display_name as the choice's label", () => {
  const choicesOf = async (path: string) => {
    const r = await t.req("OPTIONS", path, { headers: { accept: "application/json" } });
    expect(r.status).toBe(200);
    return ((await r.json()) as any).actions.POST;
  };

  test("host model status: NetBox's values and labels, in its order", async () => {
    const post = await choicesOf("/api/dcim/sites/");
    expect(post.status.choices).toEqual([
      { value: "planned", display_name: "Planned" },
      { value: "staging", display_name: "Staging" },
      { value: "active", display_name: "Active" },
      { value: "decommissioning", display_name: "Decommissioning" },
      { value: "retired", display_name: "Retired" },
    ]);
  });

  test("a custom object select and multiselect field: its choice set's labels", async () => {
    const set = await t.json("POST", "/api/extras/custom-field-choice-sets/", {
      body: {
        name: "colours",
        extra_choices: [
          ["r", "Red"],
          ["g", "Green"],
        ],
      },
    });
    expect(set.status).toBe(201);
    const doc = {
      schema_version: "1",
      types: [
        {
          name: "paint",
          slug: "paint",
          fields: [
            { id: 1, name: "name", type: "text", primary: true },
            { id: 2, name: "colour", type: "select", choice_set: "colours" },
            { id: 3, name: "mix", type: "multiselect", choice_set: "colours" },
          ],
        },
      ],
    };
    const applied = await t.json("POST", "/api/plugins/custom-objects/schema/apply/", {
      body: { schema: doc },
    });
    expect(applied.status).toBe(200);
    const post = await choicesOf("/api/plugins/custom-objects/paint/");
    const want = [
      { value: "r", display_name: "Red" },
      { value: "g", display_name: "Green" },
    ];
    expect(post.colour.choices).toEqual(want);
    expect(post.mix.choices).toEqual(want);
  });
});

describe("upstream's app label netbox_custom_objects (pynetbox's CustomObjectsExtension maps it)", () => {
  test("a tag scoped with upstream's labels is scoped to the same types; it reads back as custom_objects", async () => {
    const cot = await t.json("POST", "/api/plugins/custom-objects/custom-object-types/", {
      body: { name: "crate", slug: "crate" },
    });
    expect(cot.status).toBe(201);
    const tag = await t.json("POST", "/api/extras/tags/", {
      body: {
        name: "cot-scoped",
        slug: "cot-scoped",
        object_types: [
          "netbox_custom_objects.customobjecttype",
          "netbox_custom_objects.customobjecttypefield",
          "netbox_custom_objects.crate",
        ],
      },
    });
    expect(tag.status).toBe(201);
    expect(tag.body.object_types).toEqual([
      "custom_objects.crate",
      "custom_objects.customobjecttype",
      "custom_objects.customobjecttypefield",
    ]);
  });
});

describe("netbox_custom_objects wherever an object type is named (scripts written for upstream)", () => {
  const UP = "netbox_custom_objects";

  test("permissions' and event rules' object_types take it; they read back as custom_objects", async () => {
    const perm = await t.json("POST", "/api/users/permissions/", {
      body: { name: "up-crates", actions: ["view"], object_types: [`${UP}.crate`] },
    });
    expect(perm.status, JSON.stringify(perm.body)).toBe(201);
    expect(perm.body.object_types).toEqual(["custom_objects.crate"]);
    const hook = await t.json("POST", "/api/extras/webhooks/", {
      body: { name: "up-hook", payload_url: "https://hooks.example.net/up" },
    });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    const rule = await t.json("POST", "/api/extras/event-rules/", {
      body: {
        name: "up-rule",
        object_types: [`${UP}.crate`, `${UP}.customobjecttype`],
        event_types: ["object_created"],
        action_type: "webhook",
        action_object_type: "extras.webhook",
        action_object_id: hook.body.id,
      },
    });
    expect(rule.status, JSON.stringify(rule.body)).toBe(201);
    expect([...rule.body.object_types].sort()).toEqual([
      "custom_objects.crate",
      "custom_objects.customobjecttype",
    ]);
  });

  test("object type filters and the object types list take it", async () => {
    const made = await t.json("POST", "/api/plugins/custom-objects/crate/", { body: {} });
    expect(made.status).toBe(201);
    const ours = await t.json(
      "GET",
      `/api/core/object-changes/?changed_object_type=custom_objects.crate&changed_object_id=${made.body.id}`,
    );
    const theirs = await t.json(
      "GET",
      `/api/core/object-changes/?changed_object_type=${UP}.crate&changed_object_id=${made.body.id}`,
    );
    expect(ours.body.count).toBe(1);
    expect(theirs.body.results).toEqual(ours.body.results);
    // pynetbox's extension and upstream scripts look the type up by upstream's app label
    const byLabel = await t.json("GET", `/api/core/object-types/?app_label=${UP}&model=crate`);
    expect(byLabel.status).toBe(200);
    expect(byLabel.body.results.map((r: { app_label: string }) => r.app_label)).toEqual([
      "custom_objects",
    ]);
    const notUp = await t.json("GET", `/api/core/object-types/?app_label__n=${UP}&model=crate`);
    expect(notUp.body.count).toBe(0);
  });

  test("a polymorphic field's types and its values take it", async () => {
    const holder = await t.json("POST", "/api/plugins/custom-objects/custom-object-types/", {
      body: { name: "holder", slug: "holder" },
    });
    expect(holder.status).toBe(201);
    const field = await t.json("POST", "/api/plugins/custom-objects/custom-object-type-fields/", {
      body: {
        custom_object_type: holder.body.id,
        name: "held",
        type: "object",
        is_polymorphic: true,
        related_object_types: [`${UP}.crate`, "dcim.site"],
      },
    });
    expect(field.status, JSON.stringify(field.body)).toBe(201);
    const crate = await t.json("POST", "/api/plugins/custom-objects/crate/", { body: {} });
    const held = await t.json("POST", "/api/plugins/custom-objects/holder/", {
      body: { held: { object_type: `${UP}.crate`, id: crate.body.id } },
    });
    expect(held.status, JSON.stringify(held.body)).toBe(201);
    expect(held.body.held.id).toBe(crate.body.id);
  });
});

describe("bulk update and delete naming objects that are not there (NetBox 4.7: 400 per id)", () => {
  const sites = async (prefix: string, n: number) => {
    const r = await t.json("POST", "/api/dcim/sites/", {
      body: Array.from({ length: n }, (_, i) => ({ name: `${prefix}${i}`, slug: `${prefix}${i}` })),
    });
    expect(r.status).toBe(201);
    return (r.body as { id: number }[]).map((s) => s.id);
  };

  test("a missing id: 400 naming every missing id under errors[].id; nothing written", async () => {
    const [a, b] = await sites("bm", 2);
    const patch = await t.json("PATCH", "/api/dcim/sites/", {
      body: [
        { id: a, description: "x" },
        { id: 99998, description: "y" },
        { id: 99999, description: "z" },
      ],
    });
    expect(patch.status).toBe(400);
    expect(patch.body).toEqual({
      detail: "2 of 3 objects could not be found.",
      errors: [
        { id: 99998, errors: { id: ["Object with ID 99998 does not exist"] } },
        { id: 99999, errors: { id: ["Object with ID 99999 does not exist"] } },
      ],
    });
    expect((await t.json("GET", `/api/dcim/sites/${a}/`)).body.description).toBe("");
    const del = await t.json("DELETE", "/api/dcim/sites/", { body: [{ id: b }, { id: 99999 }] });
    expect(del.status).toBe(400);
    expect(del.body.errors).toEqual([
      { id: 99999, errors: { id: ["Object with ID 99999 does not exist"] } },
    ]);
    expect((await t.json("GET", `/api/dcim/sites/${b}/`)).status).toBe(200);
  });

  test("an object the caller may not view reads as missing, as NetBox's restricted queryset does", async () => {
    const [seen, hidden] = await sites("bv", 2);
    const token = await t.user("bulk-viewer", [[["view", "change", "delete"], "dcim.site"]]);
    const perm = await t.json("GET", "/api/users/permissions/?name__isw=bulk-viewer");
    await t.json("PATCH", `/api/users/permissions/${perm.body.results[0].id}/`, {
      body: { constraints: { id: seen } },
    });
    const r = await t.json("DELETE", "/api/dcim/sites/", {
      token,
      body: [{ id: seen }, { id: hidden }],
    });
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual([
      { id: hidden, errors: { id: [`Object with ID ${hidden} does not exist`] } },
    ]);
  });

  test("an id listed twice: 400 naming it; custom objects answer alike", async () => {
    const [a] = await sites("bd", 1);
    const twice = await t.json("DELETE", "/api/dcim/sites/", { body: [{ id: a }, { id: a }] });
    expect(twice.status).toBe(400);
    expect(twice.body.errors).toEqual([
      {
        id: a,
        errors: { id: [`Each object may be specified only once; ID ${a} is listed 2 times`] },
      },
    ]);
    const made = await t.json("POST", "/api/plugins/custom-objects/crate/", { body: {} });
    expect(made.status).toBe(201);
    const co = await t.json("PATCH", "/api/plugins/custom-objects/crate/", {
      body: [{ id: made.body.id }, { id: 424242 }],
    });
    expect(co.status).toBe(400);
    expect(co.body.errors).toEqual([
      { id: 424242, errors: { id: ["Object with ID 424242 does not exist"] } },
    ]);
  });

  test("a bulk update's failing items are keyed by id, a bulk create's by index (NetBox 4.7)", async () => {
    // BulkUpdateModelMixin.perform_bulk_update: errors.append({'id': obj.pk, 'errors': ...});
    // SequentialBulkCreatesMixin.create: errors.append({'index': i, 'errors': ...}).
    const [a, b] = await sites("bk", 2);
    const patch = await t.json("PATCH", "/api/dcim/sites/", {
      body: [
        { id: a, description: "fine" },
        { id: b, status: "nonsense" },
      ],
    });
    expect(patch.status).toBe(400);
    expect(patch.body).toEqual({
      detail: "1 of 2 objects failed validation.",
      errors: [{ id: b, errors: { status: [expect.any(String)] } }],
    });
    expect((await t.json("GET", `/api/dcim/sites/${a}/`)).body.description).toBe("");
    const put = await t.json("PUT", "/api/dcim/sites/", {
      body: [{ id: a, name: "bk-a", slug: "bk a!" }],
    });
    expect(put.status).toBe(400);
    expect(put.body.errors).toEqual([{ id: a, errors: { slug: [expect.any(String)] } }]);
    const create = await t.json("POST", "/api/dcim/sites/", {
      body: [
        { name: "bk-new", slug: "bk-new" },
        { name: "bk-bad", slug: "bk bad!" },
      ],
    });
    expect(create.status).toBe(400);
    expect(create.body.errors).toEqual([{ index: 1, errors: { slug: [expect.any(String)] } }]);
  });

  test("custom objects and their types key a bulk update's failing items by id too", async () => {
    const made = await t.json("POST", "/api/plugins/custom-objects/paint/", {
      body: [{ name: "p1" }, { name: "p2" }],
    });
    expect(made.status).toBe(201);
    const [p1, p2] = (made.body as { id: number }[]).map((o) => o.id);
    const co = await t.json("PATCH", "/api/plugins/custom-objects/paint/", {
      body: [
        { id: p1, colour: "r" },
        { id: p2, colour: "purple" },
      ],
    });
    expect(co.status).toBe(400);
    expect(co.body.errors).toEqual([{ id: p2, errors: { colour: [expect.any(String)] } }]);
    const types = await t.json(
      "GET",
      "/api/plugins/custom-objects/custom-object-types/?slug=crate",
    );
    const crate = types.body.results[0].id;
    const cot = await t.json("PATCH", "/api/plugins/custom-objects/custom-object-types/", {
      body: [{ id: crate, slug: "no spaces allowed!" }],
    });
    expect(cot.status).toBe(400);
    expect(cot.body.errors).toEqual([{ id: crate, errors: { slug: [expect.any(String)] } }]);
  });

  test("an item without an id has no id to be named by: it keeps its index", async () => {
    const [a] = await sites("bn", 1);
    const r = await t.json("PATCH", "/api/dcim/sites/", {
      body: [{ id: a, description: "x" }, { description: "no id" }],
    });
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual([{ index: 1, errors: { id: [expect.any(String)] } }]);
  });

  test("one object's own path still answers 404", async () => {
    expect((await t.json("PATCH", "/api/dcim/sites/99999/", { body: {} })).status).toBe(404);
    expect((await t.json("DELETE", "/api/dcim/sites/99999/")).status).toBe(404);
  });
});

describe("a bulk delete whose delete hook answers 404 about another object", () => {
  // A plugin's delete hook without a staged form keeps deletes on the transaction path; this one
  // finds a record of its own missing for one site. The site listed is there: the 400 names it
  // as the item that failed, in the hook's words, not as a site that does not exist.
  let w: TestApp;
  let guarded = 0;
  beforeAll(async () => {
    const hook = async (_ctx: unknown, target: { appLabel: string; model: string; id: number }) => {
      if (target.appLabel === "dcim" && target.model === "site" && target.id === guarded)
        throw notFound("No widget with id 42.");
    };
    const widgets = {
      name: "widgets",
      version: "1.0.0",
      setup: () => ({ hooks: { beforeDelete: [hook] } }),
    };
    w = await makeTestApp(
      { PLUGINS: "widgets" },
      { availablePlugins: [...BUILTIN_PLUGINS, widgets] },
    );
  });
  afterAll(() => w.close());

  test("the listed id is named with what is missing; nothing is deleted", async () => {
    const made = await w.json("POST", "/api/dcim/sites/", {
      body: ["w1", "w2"].map((slug) => ({ name: slug, slug })),
    });
    expect(made.status).toBe(201);
    const [a, b] = (made.body as { id: number }[]).map((s) => s.id) as [number, number];
    guarded = b;
    const r = await w.json("DELETE", "/api/dcim/sites/", { body: [{ id: a }, { id: b }] });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({
      detail: "1 of 2 objects could not be deleted.",
      errors: [{ id: b, errors: { id: ["No widget with id 42."] } }],
    });
    expect((await w.json("GET", `/api/dcim/sites/${a}/`)).status).toBe(200);
    // a listed site that is missing still reads as NetBox's "does not exist"
    const gone = await w.json("DELETE", "/api/dcim/sites/", {
      body: [{ id: a }, { id: 987_001 }],
    });
    expect(gone.body.errors).toEqual([
      { id: 987_001, errors: { id: ["Object with ID 987001 does not exist"] } },
    ]);
    guarded = 0;
    expect(
      (await w.json("DELETE", "/api/dcim/sites/", { body: [{ id: a }, { id: b }] })).status,
    ).toBe(204);
  });
});

describe("tags as NetBox's TagFilter / TagIDFilter: several are all of them (pynetbox .filter(tag=[…]))", () => {
  test("tag= and tag_id= on sites, prefixes and a custom object type; __n is none of them", async () => {
    const tag = async (slug: string) =>
      (await t.json("POST", "/api/extras/tags/", { body: { name: slug, slug } })).body.id as number;
    const [core, edge] = [await tag("tf-core"), await tag("tf-edge")];
    const both = { tags: [{ slug: "tf-core" }, { slug: "tf-edge" }] };
    const one = { tags: [{ slug: "tf-core" }] };
    const made = await t.json("POST", "/api/dcim/sites/", {
      body: [
        { name: "tf-both", slug: "tf-both", ...both },
        { name: "tf-one", slug: "tf-one", ...one },
        { name: "tf-none", slug: "tf-none" },
      ],
    });
    expect(made.status).toBe(201);
    const names = async (path: string) => {
      const r = await t.json("GET", path);
      expect({ path, status: r.status }).toEqual({ path, status: 200 });
      return (r.body.results as { name?: string; prefix?: string }[])
        .map((x) => x.name ?? x.prefix)
        .filter((n) => n?.startsWith("tf-") || n?.startsWith("10.77."))
        .sort();
    };
    const sites = "/api/dcim/sites/?limit=1000&";
    expect(await names(`${sites}tag=tf-core&tag=tf-edge`)).toEqual(["tf-both"]);
    expect(await names(`${sites}tag=tf-core`)).toEqual(["tf-both", "tf-one"]);
    expect(await names(`${sites}tag_id=${core}&tag_id=${edge}`)).toEqual(["tf-both"]);
    expect(await names(`${sites}tag_id=${core}`)).toEqual(["tf-both", "tf-one"]);
    expect(await names(`${sites}tag_id__n=${edge}`)).toEqual(["tf-none", "tf-one"]);
    expect(await names(`${sites}tag__n=tf-core&tag__n=tf-edge`)).toEqual(["tf-none"]);
    const bad = await t.json("GET", "/api/dcim/sites/?tag_id=core");
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body)).toEqual(["tag_id"]);
    await t.json("POST", "/api/ipam/prefixes/", {
      body: [
        { prefix: "10.77.1.0/24", ...both },
        { prefix: "10.77.2.0/24", ...one },
      ],
    });
    expect(await names(`/api/ipam/prefixes/?tag_id=${core}&tag_id=${edge}`)).toEqual([
      "10.77.1.0/24",
    ]);
    const CO = "/api/plugins/custom-objects";
    const cot = await t.json("POST", `${CO}/custom-object-types/`, {
      body: { name: "tf_box", slug: "tf_box" },
    });
    expect(cot.status).toBe(201);
    const field = await t.json("POST", `${CO}/custom-object-type-fields/`, {
      body: { custom_object_type: cot.body.id, name: "name", type: "text", primary: true },
    });
    expect(field.status).toBe(201);
    for (const [name, extra] of [
      ["tf-both", both],
      ["tf-one", one],
    ] as const)
      expect((await t.json("POST", `${CO}/tf_box/`, { body: { name, ...extra } })).status).toBe(
        201,
      );
    expect(await names(`${CO}/tf_box/?tag=tf-core&tag=tf-edge`)).toEqual(["tf-both"]);
    expect(await names(`${CO}/tf_box/?tag_id=${edge}`)).toEqual(["tf-both"]);
  });
});

describe("nb.plugins.installed_plugins() (GET /api/plugins/installed-plugins/)", () => {
  test("a superuser reads each enabled plugin; the plugins root names the endpoint first", async () => {
    const r = await t.json("GET", "/api/plugins/installed-plugins/");
    expect(r.status).toBe(200);
    expect(r.body.map((p: any) => p.package)).toEqual([
      "custom_objects",
      "host_healthcheck_plugin",
    ]);
    expect(Object.keys(r.body[0]).sort()).toEqual([
      "author",
      "author_email",
      "description",
      "name",
      "package",
      "release_track",
      "version",
    ]);
    expect(r.body[0].version).toBe("0.1.0");
    const root = await t.json("GET", "/api/plugins/");
    expect(Object.keys(root.body)[0]).toBe("installed-plugins");
    expect(root.body["installed-plugins"]).toBe("http://host.test/api/plugins/installed-plugins/");
  });

  test("anyone else: 403, as NetBox's IsSuperuser answers", async () => {
    const token = await t.user("plain-plugins-reader");
    expect((await t.json("GET", "/api/plugins/installed-plugins/", { token })).status).toBe(403);
  });
});

describe("custom object types and fields: a list naming one that is not there", () => {
  test("bulk update and delete of types and fields answer NetBox 4.7's 400 naming the id", async () => {
    const CO = "/api/plugins/custom-objects";
    const cot = await t.json("POST", `${CO}/custom-object-types/`, {
      body: { name: "pallet", slug: "pallet" },
    });
    expect(cot.status).toBe(201);
    const types = await t.json("PATCH", `${CO}/custom-object-types/`, {
      body: [
        { id: cot.body.id, description: "x" },
        { id: 777777, description: "y" },
      ],
    });
    expect(types.status).toBe(400);
    expect(types.body.errors).toEqual([
      { id: 777777, errors: { id: ["Object with ID 777777 does not exist"] } },
    ]);
    expect(
      (await t.json("GET", `${CO}/custom-object-types/${cot.body.id}/`)).body.description,
    ).toBe("");
    const fields = await t.json("DELETE", `${CO}/custom-object-type-fields/`, {
      body: [{ id: 777778 }],
    });
    expect(fields.status).toBe(400);
    expect(fields.body.errors).toEqual([
      { id: 777778, errors: { id: ["Object with ID 777778 does not exist"] } },
    ]);
    const gone = await t.json("DELETE", `${CO}/custom-object-types/`, {
      body: [{ id: cot.body.id }, { id: 777777 }],
    });
    expect(gone.status).toBe(400);
    expect((await t.json("GET", `${CO}/custom-object-types/${cot.body.id}/`)).status).toBe(200);
  });
});

describe('filters by a related object\'s slug (pynetbox: .filter(site="hq"), .filter(tenant="acme"))', () => {
  test("?tenant= and ?site= match the related slug, __n excludes it; never every row", async () => {
    const acme = await t.json("POST", "/api/tenancy/tenants/", {
      body: { name: "Acme", slug: "acme" },
    });
    const hq = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Slug HQ", slug: "slug-hq", tenant: acme.body.id },
    });
    const edge = await t.json("POST", "/api/dcim/sites/", {
      body: { name: "Slug Edge", slug: "slug-edge" },
    });
    for (const [name, site] of [
      ["sd1", hq],
      ["sd2", edge],
    ] as const) {
      const d = await t.json("POST", "/api/dcim/devices/", {
        body: { name, site: site.body.id, tenant: name === "sd1" ? acme.body.id : null },
      });
      expect(d.status).toBe(201);
    }
    const names = async (path: string) =>
      ((await t.json("GET", path)).body.results as { name: string }[]).map((r) => r.name).sort();
    expect(await names("/api/dcim/sites/?tenant=acme")).toEqual(["Slug HQ"]);
    expect(await names("/api/dcim/devices/?site=slug-hq")).toEqual(["sd1"]);
    expect(await names("/api/dcim/devices/?site=slug-hq&site=slug-edge")).toEqual(["sd1", "sd2"]);
    expect(await names("/api/dcim/devices/?site__n=slug-hq&name__isw=sd")).toEqual(["sd2"]);
    expect(await names("/api/dcim/devices/?tenant=acme")).toEqual(["sd1"]);
    expect(await names("/api/dcim/devices/?tenant=no-such-tenant")).toEqual([]);
  });

  test("a tenant the caller may not view filters as one that does not exist", async () => {
    const token = await t.user("slug-filter-viewer", [[["view"], "dcim.site"]]);
    const r = await t.json("GET", "/api/dcim/sites/?tenant=acme", { token });
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(0);
  });
});

describe("an empty list (pynetbox: .filter(...).delete() when nothing matched)", () => {
  test("bulk create, update and delete of [] succeed with nothing done, as NetBox's do", async () => {
    const before = (await t.json("GET", "/api/dcim/sites/?limit=1")).body.count;
    const created = await t.json("POST", "/api/dcim/sites/", { body: [] });
    expect(created.status).toBe(201);
    expect(created.body).toEqual([]);
    const updated = await t.json("PATCH", "/api/dcim/sites/", { body: [] });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual([]);
    expect((await t.req("DELETE", "/api/dcim/sites/", { body: [] })).status).toBe(204);
    expect((await t.req("DELETE", "/api/plugins/custom-objects/crate/", { body: [] })).status).toBe(
      204,
    );
    expect((await t.json("GET", "/api/dcim/sites/?limit=1")).body.count).toBe(before);
  });

  test("still needs the permission for the write", async () => {
    const token = await t.user("empty-list-viewer", [[["view"], "dcim.site"]]);
    expect((await t.req("DELETE", "/api/dcim/sites/", { token, body: [] })).status).toBe(403);
  });
});

describe("custom object type fields: .choices() labels as upstream's", () => {
  test("type, on_delete_behavior, filter_logic, ui_visible and ui_editable answer their labels", async () => {
    const r = await t.req("OPTIONS", "/api/plugins/custom-objects/custom-object-type-fields/", {
      headers: { accept: "application/json" },
    });
    const post = ((await r.json()) as any).actions.POST;
    const label = (field: string, value: string) =>
      post[field].choices.find((c: { value: string }) => c.value === value)?.display_name;
    expect(label("type", "multiobject")).toBe("Multiple objects");
    expect(label("type", "datetime")).toBe("Date & time");
    expect(label("on_delete_behavior", "cascade")).toBe("Cascade (delete this object too)");
    expect(label("filter_logic", "loose")).toBe("Loose");
    expect(label("ui_visible", "if-set")).toBe("If set");
    expect(label("ui_editable", "no")).toBe("No");
  });
});
