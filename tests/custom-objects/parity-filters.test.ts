/**
 * Filter parity with upstream netbox-custom-objects (tests/test_filtersets.py and its
 * filtersets): the behaviour a REST client sees, ported as HTTP requests. Also the filter fixes of
 * issue 15 (per-type polymorphic filters, datetime instants, JSON, `q` over date, datetime and
 * multiselect, booleans as 1/0), on custom objects and on host models sharing the machinery.
 *
 * Left out of upstream's file: the `get_filterform_field` cases (Django UI form classes, no REST
 * counterpart).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, choiceSet, create, makeCot } from "./fixtures";

let t: TestApp;
let sites: any[];
let devices: any[];

const ids = async (path: string) => {
  const r = await t.json("GET", path);
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return (r.body.results as { id: number }[]).map((x) => x.id).sort((a, b) => a - b);
};

beforeAll(async () => {
  t = await makeTestApp();
  const s = await t.json("POST", "/api/dcim/sites/", {
    body: [1, 2, 3].map((n) => ({ name: `PF Site ${n}`, slug: `pf-site-${n}` })),
  });
  sites = s.body.map((x: any) => x.id);
  const d = await t.json("POST", "/api/dcim/devices/", {
    body: [1, 2].map((n) => ({ name: `PF Device ${n}`, site: sites[0] })),
  });
  devices = d.body.map((x: any) => x.id);
});
afterAll(() => t.close());

describe("object and multiobject fields (upstream ObjectFieldFiltersetTestCase, MultiObjectFieldFiltersetTestCase)", () => {
  test("?device=<pk> and ?device_id=<pk> return the objects pointing at that device", async () => {
    const cot = await makeCot(t, "obj_fs_test");
    await addField(t, cot.id, { name: "name", type: "text", primary: true, required: true });
    await addField(t, cot.id, {
      name: "device",
      type: "object",
      related_object_type: "dcim.device",
    });
    const d1 = await create(t, "obj_fs_test", { name: "Obj D1", device: devices[0] });
    const d2 = await create(t, "obj_fs_test", { name: "Obj D2", device: devices[1] });
    const none = await create(t, "obj_fs_test", { name: "Obj None" });
    expect(await ids(`${CO}/obj_fs_test/?device=${devices[0]}`)).toEqual([d1.id]);
    expect(await ids(`${CO}/obj_fs_test/?device_id=${devices[0]}`)).toEqual([d1.id]);
    expect(await ids(`${CO}/obj_fs_test/?device=${devices[1]}`)).toEqual([d2.id]);
    expect(await ids(`${CO}/obj_fs_test/`)).toEqual([d1.id, d2.id, none.id]);
  });

  test("?sites=a&sites=b is a union without duplicates", async () => {
    const cot = await makeCot(t, "mo_fs_test");
    await addField(t, cot.id, { name: "name", type: "text", primary: true, required: true });
    await addField(t, cot.id, {
      name: "sites",
      type: "multiobject",
      related_object_type: "dcim.site",
    });
    const s1 = await create(t, "mo_fs_test", { name: "Obj S1", sites: [sites[0]] });
    const s2 = await create(t, "mo_fs_test", { name: "Obj S2", sites: [sites[1]] });
    const both = await create(t, "mo_fs_test", { name: "Obj Both", sites: [sites[0], sites[1]] });
    const none = await create(t, "mo_fs_test", { name: "Obj None" });
    expect(await ids(`${CO}/mo_fs_test/?sites=${sites[0]}`)).toEqual([s1.id, both.id]);
    expect(await ids(`${CO}/mo_fs_test/?sites=${sites[1]}`)).toEqual([s2.id, both.id]);
    const union = await t.json("GET", `${CO}/mo_fs_test/?sites=${sites[0]}&sites=${sites[1]}`);
    expect(union.body.count).toBe(3);
    expect(union.body.results.map((x: any) => x.id).sort()).toEqual([s1.id, s2.id, both.id].sort());
    expect(await ids(`${CO}/mo_fs_test/`)).toEqual([s1.id, s2.id, both.id, none.id]);
  });

  test("object and multiobject fields pointing at another custom object type filter by its ids", async () => {
    const target = await makeCot(t, "target_obj");
    await addField(t, target.id, { name: "name", type: "text", primary: true, required: true });
    const t1 = await create(t, "target_obj", { name: "Target 1" });
    const t2 = await create(t, "target_obj", { name: "Target 2" });
    const src = await makeCot(t, "source_obj");
    await addField(t, src.id, { name: "name", type: "text", primary: true, required: true });
    await addField(t, src.id, {
      name: "related",
      type: "object",
      related_object_type: "custom_objects.target_obj",
    });
    await addField(t, src.id, {
      name: "related_items",
      type: "multiobject",
      related_object_type: "custom_objects.target_obj",
    });
    const a = await create(t, "source_obj", {
      name: "Source T1",
      related: t1.id,
      related_items: [t1.id],
    });
    const b = await create(t, "source_obj", {
      name: "Source T2",
      related: t2.id,
      related_items: [t2.id],
    });
    const both = await create(t, "source_obj", {
      name: "Source Both",
      related_items: [t1.id, t2.id],
    });
    await create(t, "source_obj", { name: "Source None" });
    expect(await ids(`${CO}/source_obj/?related=${t1.id}`)).toEqual([a.id]);
    expect(await ids(`${CO}/source_obj/?related=${t2.id}`)).toEqual([b.id]);
    expect(await ids(`${CO}/source_obj/?related_items=${t1.id}`)).toEqual([a.id, both.id]);
    expect(await ids(`${CO}/source_obj/?related_items=${t1.id}&related_items=${t2.id}`)).toEqual([
      a.id,
      b.id,
      both.id,
    ]);
  });
});

describe("polymorphic fields: one filter per allowed type", () => {
  let rows: any;
  beforeAll(async () => {
    const cot = await makeCot(t, "poly_fs");
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    await addField(t, cot.id, {
      name: "target",
      type: "object",
      is_polymorphic: true,
      related_object_types: ["dcim.device", "dcim.site"],
    });
    await addField(t, cot.id, {
      name: "targets",
      type: "multiobject",
      is_polymorphic: true,
      related_object_types: ["dcim.device", "dcim.site"],
    });
    // devices[0] and sites[0] may share an id: the filters must tell them apart by type
    rows = {
      device: (
        await create(t, "poly_fs", {
          name: "dev",
          target: { object_type: "dcim.device", id: devices[0] },
          targets: [{ object_type: "dcim.site", id: sites[1] }],
        })
      ).id,
      site: (
        await create(t, "poly_fs", {
          name: "site",
          target: { object_type: "dcim.site", id: devices[0] },
          targets: [{ object_type: "dcim.device", id: sites[1] }],
        })
      ).id,
      both: (
        await create(t, "poly_fs", {
          name: "both",
          targets: [
            { object_type: "dcim.site", id: sites[1] },
            { object_type: "dcim.site", id: sites[2] },
          ],
        })
      ).id,
      none: (await create(t, "poly_fs", { name: "none" })).id,
    };
  });

  test("?target_dcim_device=<id> matches only references to that device", async () => {
    expect(await ids(`${CO}/poly_fs/?target_dcim_device=${devices[0]}`)).toEqual([rows.device]);
    expect(await ids(`${CO}/poly_fs/?target_dcim_site=${devices[0]}`)).toEqual([rows.site]);
    expect(await ids(`${CO}/poly_fs/?target_dcim_device=999999`)).toEqual([]);
  });

  test("?targets_dcim_site=<id> matches links to that site of that type; several ids are a union", async () => {
    expect(await ids(`${CO}/poly_fs/?targets_dcim_site=${sites[1]}`)).toEqual([
      rows.device,
      rows.both,
    ]);
    expect(await ids(`${CO}/poly_fs/?targets_dcim_device=${sites[1]}`)).toEqual([rows.site]);
    const union = await t.json(
      "GET",
      `${CO}/poly_fs/?targets_dcim_site=${sites[1]}&targets_dcim_site=${sites[2]}`,
    );
    expect(union.body.count).toBe(2);
    expect(await ids(`${CO}/poly_fs/?targets_dcim_site__n=${sites[1]}`)).toEqual([
      rows.site,
      rows.none,
    ]);
  });

  test("?target_id=<id> no longer matches any type: 400 showing the per-type filter pattern (decision 0046)", async () => {
    for (const key of ["target_id", "target", "targets", "targets_id"]) {
      const r = await t.json("GET", `${CO}/poly_fs/?${key}=${devices[0]}`);
      expect(r.status).toBe(400);
      // the message shows the pattern and names no type (the caller may not view every target)
      expect(r.body[key][0]).toContain(`${key.replace(/_id$/, "")}_<app_label>_<model>=<id>`);
      expect(r.body[key][0]).not.toContain("dcim_device");
    }
    // emptiness does not depend on the type
    expect(await ids(`${CO}/poly_fs/?target__empty=true`)).toEqual([rows.both, rows.none]);
    expect(await ids(`${CO}/poly_fs/?targets__empty=1`)).toEqual([rows.none]);
  });

  test("a custom object target type is named by its object type id, never its slug", async () => {
    const cot = await makeCot(t, "poly_target");
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    const target = await create(t, "poly_target", { name: "tgt" });
    const src = await makeCot(t, "poly_src");
    await addField(t, src.id, { name: "name", type: "text", primary: true });
    await addField(t, src.id, {
      name: "target",
      type: "object",
      is_polymorphic: true,
      related_object_types: ["dcim.site", "custom_objects.poly_target"],
    });
    const hit = await create(t, "poly_src", {
      name: "hit",
      target: { object_type: "custom_objects.poly_target", id: target.id },
    });
    await create(t, "poly_src", {
      name: "site",
      target: { object_type: "dcim.site", id: target.id },
    });
    expect(
      await ids(`${CO}/poly_src/?target_custom_objects_${cot.object_type.id}=${target.id}`),
    ).toEqual([hit.id]);
    // upstream's app label (`netbox_custom_objects`), as scripts written for upstream send it
    expect(
      await ids(`${CO}/poly_src/?target_netbox_custom_objects_${cot.object_type.id}=${target.id}`),
    ).toEqual([hit.id]);
    const other = await ids(
      `${CO}/poly_src/?target_netbox_custom_objects_${cot.object_type.id}__n=${target.id}`,
    );
    expect(other).not.toContain(hit.id);
    expect(other.length).toBeGreaterThan(0);
    const bad = await t.json(
      "GET",
      `${CO}/poly_src/?target_netbox_custom_objects_${cot.object_type.id}=x`,
    );
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body)).toEqual([`target_netbox_custom_objects_${cot.object_type.id}`]);
    // the alias is accepted, not described: the schema names each filter once
    const doc = await t.json("GET", "/api/schema/", { headers: { accept: "application/json" } });
    const params = doc.body.paths[`${CO}/poly_src/`].get.parameters.map((p: any) => p.name);
    expect(params).toContain(`target_custom_objects_${cot.object_type.id}`);
    expect(params.some((n: string) => n.includes("netbox_custom_objects"))).toBe(false);
    const refused = await t.json("GET", `${CO}/poly_src/?target_id=${target.id}`);
    expect(refused.body.target_id[0]).toContain("target_<app_label>_<model>=<id>");
    expect(refused.body.target_id[0]).not.toContain(`custom_objects_${cot.object_type.id}`);
    expect(refused.body.target_id[0]).not.toContain("poly_target");
  });

  test("a bad id answers 400", async () => {
    const r = await t.json("GET", `${CO}/poly_fs/?target_dcim_device=abc`);
    expect(r.status).toBe(400);
    expect(Object.keys(r.body)).toEqual(["target_dcim_device"]);
  });
});

describe("scalar filters and q", () => {
  let rows: any;
  beforeAll(async () => {
    await choiceSet(t, "pf_states", ["active", "planned", "retired"]);
    const cot = await makeCot(t, "scalar_fs");
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    await addField(t, cot.id, { name: "ts", type: "datetime" });
    await addField(t, cot.id, { name: "day", type: "date" });
    await addField(t, cot.id, { name: "flag", type: "boolean" });
    await addField(t, cot.id, { name: "data", type: "json" });
    await addField(t, cot.id, { name: "tags_ms", type: "multiselect", choice_set: "pf_states" });
    rows = {
      nine: (
        await create(t, "scalar_fs", {
          name: "nine",
          ts: "2025-06-01T09:00:00Z",
          day: "2025-01-15",
          flag: true,
          data: { vlan: 100, role: "core" },
          tags_ms: ["active"],
        })
      ).id,
      // the same instant written with an offset, and one an hour later
      ten: (
        await create(t, "scalar_fs", {
          name: "ten",
          ts: "2025-06-01T12:00:00+02:00",
          day: "2025-02-20",
          flag: false,
          data: ["edge"],
          tags_ms: ["planned", "retired"],
        })
      ).id,
      none: (await create(t, "scalar_fs", { name: "none" })).id,
    };
  });

  test("datetime filters compare instants, whatever the spelling", async () => {
    expect(await ids(`${CO}/scalar_fs/?ts=2025-06-01T09:00:00Z`)).toEqual([rows.nine]);
    expect(await ids(`${CO}/scalar_fs/?ts=2025-06-01T09:00:00.000Z`)).toEqual([rows.nine]);
    expect(await ids(`${CO}/scalar_fs/?ts=2025-06-01T11:00:00%2B02:00`)).toEqual([rows.nine]);
    // 10:00+02:00 is 08:00Z: the 09:00Z row is not before it
    expect(await ids(`${CO}/scalar_fs/?ts__lt=2025-06-01T10:00:00%2B02:00`)).toEqual([]);
    expect(await ids(`${CO}/scalar_fs/?ts__lt=2025-06-01T12:00:00%2B02:00`)).toEqual([rows.nine]);
    expect(await ids(`${CO}/scalar_fs/?ts__gte=2025-06-01T09:30:00Z`)).toEqual([rows.ten]);
    expect(await ids(`${CO}/scalar_fs/?ts__n=2025-06-01T10:00:00Z`)).toEqual([
      rows.nine,
      rows.none,
    ]);
    const bad = await t.json("GET", `${CO}/scalar_fs/?ts=yesterday`);
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body)).toEqual(["ts"]);
  });

  test("booleans accept 1/0 and true/false", async () => {
    expect(await ids(`${CO}/scalar_fs/?flag=1`)).toEqual([rows.nine]);
    expect(await ids(`${CO}/scalar_fs/?flag=0`)).toEqual([rows.ten]);
    expect(await ids(`${CO}/scalar_fs/?flag=True`)).toEqual([rows.nine]);
    expect(await ids(`${CO}/scalar_fs/?flag__empty=1`)).toEqual([rows.none]);
    expect(await ids(`${CO}/scalar_fs/?tags_ms__empty=1`)).toEqual([rows.none]);
    expect(await ids(`${CO}/scalar_fs/?tags_ms__empty=0`)).toEqual([rows.nine, rows.ten]);
  });

  test("JSON fields: ?data= matches a part of the JSON text; __empty; __nic", async () => {
    expect(await ids(`${CO}/scalar_fs/?data=core`)).toEqual([rows.nine]);
    expect(await ids(`${CO}/scalar_fs/?data=EDGE`)).toEqual([rows.ten]);
    expect(await ids(`${CO}/scalar_fs/?data__ic=vlan`)).toEqual([rows.nine]);
    expect(await ids(`${CO}/scalar_fs/?data__nic=vlan`)).toEqual([rows.ten, rows.none]);
    expect(await ids(`${CO}/scalar_fs/?data__empty=true`)).toEqual([rows.none]);
    const bad = await t.json("GET", `${CO}/scalar_fs/?data__gt=1`);
    expect(bad.status).toBe(400);
  });

  test("q searches date, datetime, multiselect and JSON fields", async () => {
    expect(await ids(`${CO}/scalar_fs/?q=2025-01-15`)).toEqual([rows.nine]);
    expect(await ids(`${CO}/scalar_fs/?q=2025-06-01T10:00:00Z`)).toEqual([rows.ten]);
    expect(await ids(`${CO}/scalar_fs/?q=2025-06-01T11:00:00%2B02:00`)).toEqual([rows.nine]);
    expect(await ids(`${CO}/scalar_fs/?q=retired`)).toEqual([rows.ten]);
    expect(await ids(`${CO}/scalar_fs/?q=core`)).toEqual([rows.nine]);
    expect(await ids(`${CO}/scalar_fs/?q=not-a-date`)).toEqual([]);
  });
});

describe("q on non-text primary fields (upstream issue #440 cases)", () => {
  test("integer primary: q=311 finds it, q=999 and q=abc find nothing, q= finds all", async () => {
    const cot = await makeCot(t, "netarea");
    await addField(t, cot.id, { name: "major", type: "integer", primary: true, required: true });
    const a = await create(t, "netarea", { major: 311 });
    const b = await create(t, "netarea", { major: 400 });
    expect(await ids(`${CO}/netarea/?q=311`)).toEqual([a.id]);
    expect(await ids(`${CO}/netarea/?q=999`)).toEqual([]);
    expect(await ids(`${CO}/netarea/?q=abc`)).toEqual([]);
    expect(await ids(`${CO}/netarea/?q=`)).toEqual([a.id, b.id]);
  });

  test("select primary: q=active, q=plan (part of a value), q=retired (no row)", async () => {
    await choiceSet(t, "status_choices_440", ["active", "planned", "retired"]);
    const cot = await makeCot(t, "status_obj_440");
    await addField(t, cot.id, {
      name: "status",
      type: "select",
      primary: true,
      required: true,
      choice_set: "status_choices_440",
    });
    const a = await create(t, "status_obj_440", { status: "active" });
    const p = await create(t, "status_obj_440", { status: "planned" });
    expect(await ids(`${CO}/status_obj_440/?q=active`)).toEqual([a.id]);
    expect(await ids(`${CO}/status_obj_440/?q=plan`)).toEqual([p.id]);
    expect(await ids(`${CO}/status_obj_440/?q=retired`)).toEqual([]);
  });

  test("date primary: q=2025-01-15 finds it, q=not-a-date finds nothing", async () => {
    const cot = await makeCot(t, "date_obj_440");
    await addField(t, cot.id, { name: "start_date", type: "date", primary: true, required: true });
    const jan = await create(t, "date_obj_440", { start_date: "2025-01-15" });
    await create(t, "date_obj_440", { start_date: "2025-02-20" });
    expect(await ids(`${CO}/date_obj_440/?q=2025-01-15`)).toEqual([jan.id]);
    expect(await ids(`${CO}/date_obj_440/?q=not-a-date`)).toEqual([]);
  });
});

describe("host models share the machinery (issue 15, item 4)", () => {
  test("datetime filters compare instants (tokens.expires)", async () => {
    const me = await t.json("GET", "/api/users/users/?username=admin");
    const uid = me.body.results[0].id;
    const a = await t.json("POST", "/api/users/tokens/", {
      body: { user: uid, expires: "2030-06-01T09:00:00Z", description: "pf-a" },
    });
    expect(a.status).toBe(201);
    const b = await t.json("POST", "/api/users/tokens/", {
      body: { user: uid, expires: "2030-06-01T12:00:00+02:00", description: "pf-b" },
    });
    expect(b.status).toBe(201);
    expect(await ids(`/api/users/tokens/?expires=2030-06-01T09:00:00Z`)).toEqual([a.body.id]);
    expect(await ids(`/api/users/tokens/?expires__lt=2030-06-01T10:00:00%2B02:00`)).toEqual([]);
    expect(await ids(`/api/users/tokens/?expires__lte=2030-06-01T12:00:00%2B02:00`)).toEqual([
      a.body.id,
      b.body.id,
    ]);
  });

  test("created filters compare instants", async () => {
    const s = await t.json("GET", `/api/dcim/sites/${sites[0]}/`);
    const created = new Date(s.body.created);
    // the same instant written in +02:00 with whole seconds: created__gte at the second before
    const floor = new Date(Math.floor(created.getTime() / 1000) * 1000 + 2 * 3600_000)
      .toISOString()
      .slice(0, 19);
    expect(await ids(`/api/dcim/sites/?id=${sites[0]}&created__gte=${floor}%2B02:00`)).toEqual([
      sites[0],
    ]);
    expect(await ids(`/api/dcim/sites/?id=${sites[0]}&created__lt=${floor}%2B02:00`)).toEqual([]);
  });

  test("JSON fields filter by part of their text (choice sets' extra_choices); booleans take 1/0", async () => {
    const cs = await choiceSet(t, "pf_json_host", ["zebra", "yak"]);
    expect(await ids(`/api/extras/custom-field-choice-sets/?extra_choices=zebra`)).toEqual([cs.id]);
    const r = await t.json(
      "GET",
      `/api/extras/custom-field-choice-sets/?extra_choices__empty=false&order_alphabetically=0`,
    );
    expect(r.status).toBe(200);
    expect(r.body.results.map((x: any) => x.id)).toContain(cs.id);
  });
});
