/**
 * Deletion parity with upstream netbox-custom-objects (tests/test_deletion.py): what a REST
 * client sees when types, fields, host objects and custom objects that others point at are
 * deleted, and after on_delete_behavior changes.
 *
 * Kept different on purpose: deleting a type that other types' fields point at (upstream drops
 * those fields; we answer 409 until they are removed, decision 0005).
 *
 * Left out: model-cache and cache-timestamp cases (upstream's Django model registry; we rebuild
 * from shape_version, covered elsewhere), and the raw-SQL DELETE variants (they prove
 * PostgreSQL constraints a REST client never reaches; the REST deletes below take the same paths).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, create, makeCot } from "./fixtures";

let t: TestApp;
let n = 0;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

/** A type with a required primary `name` (upstream's create_simple_custom_object_type). */
async function simpleType(name: string) {
  const cot = await makeCot(t, name);
  await addField(t, cot.id, { name: "name", type: "text", primary: true, required: true });
  return cot;
}

async function device() {
  n++;
  const s = await t.json("POST", "/api/dcim/sites/", {
    body: { name: `Del Site ${n}`, slug: `del-site-${n}` },
  });
  const d = await t.json("POST", "/api/dcim/devices/", {
    body: { name: `Del Device ${n}`, site: s.body.id },
  });
  expect(d.status).toBe(201);
  return d.body.id as number;
}

const get = (path: string) => t.json("GET", path);
const del = (path: string) => t.json("DELETE", path);

describe("types and fields", () => {
  test("deleting a type with instances removes the type and its objects", async () => {
    const cot = await simpleType("deltest");
    await create(t, "deltest", { name: "Instance 1" });
    await create(t, "deltest", { name: "Instance 2" });
    expect((await get(`${CO}/deltest/`)).body.count).toBe(2);
    expect((await del(`${CO}/custom-object-types/${cot.id}/`)).status).toBe(204);
    expect((await get(`${CO}/deltest/`)).status).toBe(404);
    expect((await get(`${CO}/custom-object-types/${cot.id}/`)).status).toBe(404);
  });

  // Upstream deletes the other types' fields with the type; we refuse (409) until they are
  // removed (decision 0005): a type delete never drops another type's column as a side effect.
  test("a type other types' fields point at: 409 naming the field; once it is removed, the delete works and the other type stays", async () => {
    const target = await simpleType("target");
    const source = await simpleType("source");
    const ref = await addField(t, source.id, {
      name: "ref_target",
      type: "object",
      related_object_type: "custom_objects.target",
    });
    const refused = await del(`${CO}/custom-object-types/${target.id}/`);
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toContain('"ref_target"');
    expect((await get(`${CO}/custom-object-types/${target.id}/`)).status).toBe(200);
    expect((await del(`${CO}/custom-object-type-fields/${ref.id}/`)).status).toBe(204);
    expect((await del(`${CO}/custom-object-types/${target.id}/`)).status).toBe(204);
    expect((await get(`${CO}/custom-object-type-fields/${ref.id}/`)).status).toBe(404);
    expect((await get(`${CO}/custom-object-types/${source.id}/`)).status).toBe(200);
    expect((await create(t, "source", { name: "still works" })).name).toBe("still works");
  });

  test("deleting a field whose objects hold data succeeds; the objects stay without it", async () => {
    const cot = await simpleType("fielddeltest");
    const extra = await addField(t, cot.id, { name: "extra", type: "text" });
    await create(t, "fielddeltest", { name: "Item 1", extra: "value1" });
    await create(t, "fielddeltest", { name: "Item 2", extra: "value2" });
    expect((await del(`${CO}/custom-object-type-fields/${extra.id}/`)).status).toBe(204);
    const list = await get(`${CO}/fielddeltest/`);
    expect(list.body.count).toBe(2);
    for (const r of list.body.results) expect(r).not.toHaveProperty("extra");
  });
});

describe("a host object others point at (on_delete_behavior)", () => {
  test("set_null: the custom object stays, its field is null", async () => {
    const dev = await device();
    const cot = await simpleType("devref_sn");
    await addField(t, cot.id, {
      name: "device",
      type: "object",
      related_object_type: "dcim.device",
      on_delete_behavior: "set_null",
    });
    const co = await create(t, "devref_sn", { name: "CO with Device", device: dev });
    expect(co.device.id).toBe(dev);
    expect((await del(`/api/dcim/devices/${dev}/`)).status).toBe(204);
    const after = await get(`${CO}/devref_sn/${co.id}/`);
    expect(after.status).toBe(200);
    expect(after.body.device).toBeNull();
  });

  test("cascade: the custom object goes with it", async () => {
    const dev = await device();
    const cot = await simpleType("devref_casc");
    await addField(t, cot.id, {
      name: "device",
      type: "object",
      related_object_type: "dcim.device",
      on_delete_behavior: "cascade",
    });
    const co = await create(t, "devref_casc", { name: "CO with Device Cascade", device: dev });
    expect((await del(`/api/dcim/devices/${dev}/`)).status).toBe(204);
    expect((await get(`${CO}/devref_casc/${co.id}/`)).status).toBe(404);
  });

  test("protect: the delete is refused (409) and both stay", async () => {
    const dev = await device();
    const cot = await simpleType("devref_prot");
    await addField(t, cot.id, {
      name: "device",
      type: "object",
      related_object_type: "dcim.device",
      on_delete_behavior: "protect",
    });
    const co = await create(t, "devref_prot", { name: "CO with Device Protect", device: dev });
    expect((await del(`/api/dcim/devices/${dev}/`)).status).toBe(409);
    expect((await get(`/api/dcim/devices/${dev}/`)).status).toBe(200);
    expect((await get(`${CO}/devref_prot/${co.id}/`)).status).toBe(200);
  });

  for (const [to, survives] of [
    ["set_null", true],
    ["cascade", false],
  ] as const) {
    test(`changing protect to ${to} changes what the delete does`, async () => {
      const dev = await device();
      const slug = `chg_${to}`;
      const cot = await simpleType(slug);
      const f = await addField(t, cot.id, {
        name: "device",
        type: "object",
        related_object_type: "dcim.device",
        on_delete_behavior: "protect",
      });
      const co = await create(t, slug, { name: "CO Chg", device: dev });
      expect((await del(`/api/dcim/devices/${dev}/`)).status).toBe(409);
      const patched = await t.json("PATCH", `${CO}/custom-object-type-fields/${f.id}/`, {
        body: { on_delete_behavior: to },
      });
      expect(patched.status).toBe(200);
      expect((await del(`/api/dcim/devices/${dev}/`)).status).toBe(204);
      const after = await get(`${CO}/${slug}/${co.id}/`);
      if (survives) {
        expect(after.status).toBe(200);
        expect(after.body.device).toBeNull();
      } else expect(after.status).toBe(404);
    });
  }
});

describe("a custom object others point at", () => {
  async function pair(prefix: string, behavior: string) {
    await simpleType(`${prefix}target`);
    const source = await simpleType(`${prefix}source`);
    await addField(t, source.id, {
      name: "ref_target",
      type: "object",
      related_object_type: `custom_objects.${prefix}target`,
      on_delete_behavior: behavior,
    });
    const target = await create(t, `${prefix}target`, { name: "Target Object" });
    const src = await create(t, `${prefix}source`, {
      name: "Source Object",
      ref_target: target.id,
    });
    return { target, src };
  }

  test("set_null: the source stays with a null reference", async () => {
    const { target, src } = await pair("sn", "set_null");
    expect((await del(`${CO}/sntarget/${target.id}/`)).status).toBe(204);
    const after = await get(`${CO}/snsource/${src.id}/`);
    expect(after.status).toBe(200);
    expect(after.body.ref_target).toBeNull();
  });

  test("cascade: the source goes too", async () => {
    const { target, src } = await pair("casc", "cascade");
    expect((await del(`${CO}/casctarget/${target.id}/`)).status).toBe(204);
    expect((await get(`${CO}/cascsource/${src.id}/`)).status).toBe(404);
  });

  test("protect: 409 and both stay", async () => {
    const { target, src } = await pair("prot", "protect");
    expect((await del(`${CO}/prottarget/${target.id}/`)).status).toBe(409);
    expect((await get(`${CO}/prottarget/${target.id}/`)).status).toBe(200);
    expect((await get(`${CO}/protsource/${src.id}/`)).status).toBe(200);
  });
});

describe("cascades in one read and one batch (decision 0109)", () => {
  test("a bulk delete of two targets whose cascades share an object: 204, it goes once", async () => {
    await simpleType("bothtarget");
    const source = await simpleType("bothsource");
    for (const name of ["first", "second"])
      await addField(t, source.id, {
        name,
        type: "object",
        related_object_type: "custom_objects.bothtarget",
        on_delete_behavior: "cascade",
      });
    const one = await create(t, "bothtarget", { name: "one" });
    const two = await create(t, "bothtarget", { name: "two" });
    const src = await create(t, "bothsource", { name: "shared", first: one.id, second: two.id });
    const r = await t.json("DELETE", `${CO}/bothtarget/`, {
      body: [{ id: one.id }, { id: two.id }],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(204);
    expect((await get(`${CO}/bothsource/${src.id}/`)).status).toBe(404);
    const logged = await get(`/api/core/object-changes/?changed_object_id=${src.id}&limit=50`);
    const deletes = logged.body.results.filter(
      (c: { changed_object_type: string; action: { value: string } }) =>
        c.changed_object_type === "custom_objects.bothsource" && c.action.value === "delete",
    );
    expect(deletes.length).toBe(1);
  });

  test("a cascade over the bound of one batch (10,000 objects, decision 0198) still deletes them all (in a transaction)", async () => {
    await simpleType("bigtop");
    const item = await simpleType("bigitem");
    await addField(t, item.id, {
      name: "top",
      type: "object",
      related_object_type: "custom_objects.bigtop",
      on_delete_behavior: "cascade",
    });
    const db = servicesOf(t.app).db;
    const transaction = db.transaction;
    const transactions: number[] = [];
    try {
      for (const size of [3, 9_999, 10_000]) {
        const top = await create(t, "bigtop", { name: `top ${size}` });
        const items = Array.from({ length: size }, (_, k) => ({ name: `i${k}`, top: top.id }));
        for (let at = 0; at < size; at += 5_000)
          expect(
            (await t.json("POST", `${CO}/bigitem/`, { body: items.slice(at, at + 5_000) })).status,
          ).toBe(201);
        let n = 0;
        db.transaction = (work) => {
          n++;
          return transaction(work);
        };
        expect((await del(`${CO}/bigtop/${top.id}/`)).status).toBe(204);
        db.transaction = transaction;
        transactions.push(n);
        expect((await get(`${CO}/bigitem/?top_id=${top.id}`)).body.count).toBe(0);
      }
    } finally {
      db.transaction = transaction;
    }
    // the target and 9,999 dependants: one batch; one more: the transaction
    expect(transactions.map((n) => n > 0)).toEqual([false, false, true]);
    expect((await get(`${CO}/bigitem/`)).body.count).toBe(0);
  });

  test("a type cascading to itself, three levels deep: all go, each logged once, deepest first", async () => {
    const node = await simpleType("treenode");
    await addField(t, node.id, {
      name: "parent",
      type: "object",
      related_object_type: "custom_objects.treenode",
      on_delete_behavior: "cascade",
    });
    for (const k of [1, 2]) {
      const root = await create(t, "treenode", { name: `root ${k}` });
      const mid = await create(t, "treenode", { name: `mid ${k}`, parent: root.id });
      const leaf = await create(t, "treenode", { name: `leaf ${k}`, parent: mid.id });
      const r = await del(`${CO}/treenode/${root.id}/`);
      expect(r.status, JSON.stringify(r.body)).toBe(204);
      const ids = [root.id, mid.id, leaf.id];
      for (const id of ids) expect((await get(`${CO}/treenode/${id}/`)).status).toBe(404);
      const logged = await get(
        `/api/core/object-changes/?changed_object_type=custom_objects.treenode&action=delete&limit=50`,
      );
      const order = logged.body.results
        .map((c: { changed_object_id: number; id: number }) => c)
        .filter((c: { changed_object_id: number }) => ids.includes(c.changed_object_id))
        .sort((a: { id: number }, b: { id: number }) => a.id - b.id)
        .map((c: { changed_object_id: number }) => c.changed_object_id);
      expect(order).toEqual([leaf.id, mid.id, root.id]);
    }
  });

  test("a type cascading to itself, 24 levels deep: reads as deep as it goes, one batch, no transaction (decision 0136)", async () => {
    // past the 16 levels that sent it to a transaction (409 cascade_too_large on D1)
    const node = await simpleType("deepnode");
    await addField(t, node.id, {
      name: "parent",
      type: "object",
      related_object_type: "custom_objects.deepnode",
      on_delete_behavior: "cascade",
    });
    const db = servicesOf(t.app).db;
    const transaction = db.transaction;
    let transactions = 0;
    db.transaction = (work) => {
      transactions++;
      return transaction(work);
    };
    try {
      const ids: number[] = [];
      for (let k = 0; k <= 24; k++)
        ids.push((await create(t, "deepnode", { name: `n${k}`, parent: ids[k - 1] ?? null })).id);
      const r = await del(`${CO}/deepnode/${ids[0]}/`);
      expect(r.status, JSON.stringify(r.body)).toBe(204);
      expect((await get(`${CO}/deepnode/`)).body.count).toBe(0);
      const logged = await get(
        `/api/core/object-changes/?changed_object_type=custom_objects.deepnode&action=delete&limit=50&ordering=id`,
      );
      const order = logged.body.results.map(
        (c: { changed_object_id: number }) => c.changed_object_id,
      );
      expect(order).toEqual([...ids].reverse());
      expect(transactions).toBe(0);
    } finally {
      db.transaction = transaction;
    }
  });

  test("a type that 40 cascade fields point at, each with dependants below: one read, one batch, no transaction (decision 0136)", async () => {
    // more fields than one read plans across its branches: the first level is planned whole,
    // the levels below it take another read
    await simpleType("hub");
    const spoke = await simpleType("spoke");
    for (let k = 0; k < 40; k++)
      await addField(t, spoke.id, {
        name: `via${k}`,
        type: "object",
        related_object_type: "custom_objects.hub",
        on_delete_behavior: "cascade",
      });
    const rim = await simpleType("rim");
    await addField(t, rim.id, {
      name: "spoke",
      type: "object",
      related_object_type: "custom_objects.spoke",
      on_delete_behavior: "cascade",
    });
    const db = servicesOf(t.app).db;
    const transaction = db.transaction;
    let transactions = 0;
    db.transaction = (work) => {
      transactions++;
      return transaction(work);
    };
    try {
      for (const round of [1, 2]) {
        const hub = await create(t, "hub", { name: `hub ${round}` });
        const spokes = [];
        for (const k of [0, 17, 39])
          spokes.push(await create(t, "spoke", { name: `s${round}-${k}`, [`via${k}`]: hub.id }));
        for (const s of spokes) await create(t, "rim", { name: `r-${s.name}`, spoke: s.id });
        const r = await del(`${CO}/hub/${hub.id}/`);
        expect(r.status, JSON.stringify(r.body)).toBe(204);
        expect((await get(`${CO}/spoke/`)).body.count).toBe(0);
        expect((await get(`${CO}/rim/`)).body.count).toBe(0);
      }
      expect(transactions).toBe(0);
    } finally {
      db.transaction = transaction;
    }
  });

  test("permissions as NetBox's: delete on the target is enough for what its cascade takes", async () => {
    await simpleType("permtop");
    const item = await simpleType("permitem");
    await addField(t, item.id, {
      name: "top",
      type: "object",
      related_object_type: "custom_objects.permtop",
      on_delete_behavior: "cascade",
    });
    const viewer = await t.user("cascade-viewer", [[["view"], "custom_objects.permtop"]]);
    const deleter = await t.user("cascade-deleter", [
      [["view", "delete"], "custom_objects.permtop"],
    ]);
    for (const k of [1, 2]) {
      const top = await create(t, "permtop", { name: `top ${k}` });
      const it = await create(t, "permitem", { name: `item ${k}`, top: top.id });
      const refused = await t.json("DELETE", `${CO}/permtop/${top.id}/`, { token: viewer });
      expect(refused.status).toBe(403);
      expect((await get(`${CO}/permitem/${it.id}/`)).status).toBe(200);
      const r = await t.json("DELETE", `${CO}/permtop/${top.id}/`, { token: deleter });
      expect(r.status, JSON.stringify(r.body)).toBe(204);
      expect((await get(`${CO}/permitem/${it.id}/`)).status).toBe(404);
    }
  });

  test("a bulk delete naming a node and its child (a type cascading to itself): 204, each once", async () => {
    const node = await simpleType("bulknode");
    await addField(t, node.id, {
      name: "parent",
      type: "object",
      related_object_type: "custom_objects.bulknode",
      on_delete_behavior: "cascade",
    });
    for (const k of [1, 2]) {
      const root = await create(t, "bulknode", { name: `root ${k}` });
      const mid = await create(t, "bulknode", { name: `mid ${k}`, parent: root.id });
      const leaf = await create(t, "bulknode", { name: `leaf ${k}`, parent: mid.id });
      const r = await t.json("DELETE", `${CO}/bulknode/`, {
        body: [{ id: root.id }, { id: mid.id }],
      });
      expect(r.status, JSON.stringify(r.body)).toBe(204);
      for (const id of [root.id, mid.id, leaf.id])
        expect((await get(`${CO}/bulknode/${id}/`)).status).toBe(404);
      const logged = await get(`/api/core/object-changes/?changed_object_id=${mid.id}&limit=50`);
      const deletes = logged.body.results.filter(
        (c: { changed_object_type: string; action: { value: string } }) =>
          c.changed_object_type === "custom_objects.bulknode" && c.action.value === "delete",
      );
      expect(deletes.length).toBe(1);
    }
  });

  test("a protected link to a cascaded object: 409 protected, nothing deleted", async () => {
    await simpleType("pctop");
    const mid = await simpleType("pcmid");
    await addField(t, mid.id, {
      name: "top",
      type: "object",
      related_object_type: "custom_objects.pctop",
      on_delete_behavior: "cascade",
    });
    const guard = await simpleType("pcguard");
    await addField(t, guard.id, {
      name: "mid",
      type: "object",
      related_object_type: "custom_objects.pcmid",
      on_delete_behavior: "protect",
    });
    // twice: the first delete learns the fields, the second plans the cascade in its one read
    for (const k of [1, 2]) {
      const top = await create(t, "pctop", { name: `top ${k}` });
      const m = await create(t, "pcmid", { name: `mid ${k}`, top: top.id });
      const g = await create(t, "pcguard", { name: `guard ${k}`, mid: m.id });
      const r = await del(`${CO}/pctop/${top.id}/`);
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      expect(r.body.error).toBe("protected");
      expect(r.body.protected_objects[0]).toMatchObject({ field_name: "mid", object_id: g.id });
      expect((await get(`${CO}/pctop/${top.id}/`)).status).toBe(200);
      expect((await get(`${CO}/pcmid/${m.id}/`)).status).toBe(200);
    }
  });
});

describe("multiobject fields across types", () => {
  test("deleting the source drops its links; the target stays", async () => {
    await simpleType("m2mtrg");
    const source = await simpleType("m2msrc");
    await addField(t, source.id, {
      name: "refs",
      type: "multiobject",
      related_object_type: "custom_objects.m2mtrg",
    });
    const target = await create(t, "m2mtrg", { name: "Target 1" });
    const src = await create(t, "m2msrc", { name: "Source 1", refs: [target.id] });
    const linked = await get(
      `${CO}/linked-objects/?object_type=custom_objects.m2mtrg&object_id=${target.id}`,
    );
    expect(linked.body.count).toBe(1);
    expect((await del(`${CO}/m2msrc/${src.id}/`)).status).toBe(204);
    expect((await get(`${CO}/m2mtrg/${target.id}/`)).status).toBe(200);
    expect(
      (await get(`${CO}/linked-objects/?object_type=custom_objects.m2mtrg&object_id=${target.id}`))
        .body.count,
    ).toBe(0);
  });

  test("deleting a target drops the links to it; the source stays", async () => {
    await simpleType("m2mtrg2");
    const source = await simpleType("m2msrc2");
    await addField(t, source.id, {
      name: "refs",
      type: "multiobject",
      related_object_type: "custom_objects.m2mtrg2",
    });
    const t1 = await create(t, "m2mtrg2", { name: "Target 2" });
    const t2 = await create(t, "m2mtrg2", { name: "Target 3" });
    const src = await create(t, "m2msrc2", { name: "Source 2", refs: [t1.id, t2.id] });
    expect((await del(`${CO}/m2mtrg2/${t1.id}/`)).status).toBe(204);
    const after = await get(`${CO}/m2msrc2/${src.id}/`);
    expect(after.status).toBe(200);
    expect(after.body.refs.map((r: any) => r.id)).toEqual([t2.id]);
  });

  test("a chain A → B → C of multiobject fields: deleting the middle object keeps both ends", async () => {
    await simpleType("hop_c");
    const b = await simpleType("hop_b");
    await addField(t, b.id, {
      name: "cs",
      type: "multiobject",
      related_object_type: "custom_objects.hop_c",
    });
    const a = await simpleType("hop_a");
    await addField(t, a.id, {
      name: "bs",
      type: "multiobject",
      related_object_type: "custom_objects.hop_b",
    });
    const c1 = await create(t, "hop_c", { name: "C" });
    const b1 = await create(t, "hop_b", { name: "B", cs: [c1.id] });
    const a1 = await create(t, "hop_a", { name: "A", bs: [b1.id] });
    expect((await del(`${CO}/hop_b/${b1.id}/`)).status).toBe(204);
    const aa = await get(`${CO}/hop_a/${a1.id}/`);
    expect(aa.body.bs).toEqual([]);
    expect((await get(`${CO}/hop_c/${c1.id}/`)).status).toBe(200);
  });
});
