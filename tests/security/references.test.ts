/**
 * Security (issue 27, row 14): a reference to an object the caller may not view answers exactly
 * as an unknown id (same status, same message), for host models and custom object fields
 * (object and multiobject, single and bulk), so ids cannot be enumerated nor hidden objects
 * linked; a nested form of a hidden object is its id alone (decision 0064).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
let visible: number;
let hidden: number;
let hiddenRow: number;
let bob: string;
const UNKNOWN = 987654;

beforeAll(async () => {
  t = await makeTestApp();
  visible = (await t.json("POST", "/api/dcim/sites/", { body: { name: "A", slug: "a" } })).body.id;
  hidden = (await t.json("POST", "/api/dcim/sites/", { body: { name: "Vault", slug: "vault" } }))
    .body.id;
  const target = await makeCot(t, "target");
  await addField(t, target.id, { name: "name", type: "text", primary: true });
  await create(t, "target", { name: "open" });
  hiddenRow = (await create(t, "target", { name: "closed" })).id;
  const rack = await makeCot(t, "rack");
  await addField(t, rack.id, { name: "name", type: "text", primary: true });
  await addField(t, rack.id, { name: "site", type: "object", related_object_type: "dcim.site" });
  await addField(t, rack.id, {
    name: "sites",
    type: "multiobject",
    related_object_type: "dcim.site",
  });
  await addField(t, rack.id, {
    name: "peer",
    type: "object",
    related_object_type: "custom_objects.target",
  });
  await create(t, "rack", { name: "admin's", site: hidden, sites: [hidden, visible] });
  bob = (
    await userWith(t, "bob", [
      [["view"], "dcim.site", { slug: "a" }],
      [["view", "add", "change"], "dcim.device", null],
      [["view", "add", "change"], "custom_objects.rack", null],
      [["view"], "custom_objects.target", { name: "open" }],
    ])
  ).token;
});
afterAll(() => t.close());

/**
 * The answer with the id it names replaced, so two answers compare whole. Only whole numbers
 * are replaced, and not the counts of a bulk answer's `detail` ("1 of 2 objects …").
 */
const sameAs = (body: unknown, id: number) =>
  JSON.stringify(body).replace(
    new RegExp(`(?<![\\d.]|of )${id}(?![\\d.]| objects| of )`, "g"),
    "<id>",
  );

async function probe(method: string, path: string, body: (id: number) => unknown) {
  const h = await t.json(method, path, { token: bob, body: body(hidden) });
  const u = await t.json(method, path, { token: bob, body: body(UNKNOWN) });
  expect(u.status).toBe(400);
  expect(h.status).toBe(u.status);
  expect(sameAs(h.body, hidden)).toBe(sameAs(u.body, UNKNOWN));
}

describe("row 14: references to objects the caller may not view", () => {
  test("host model foreign key: a hidden site answers as an unknown id", async () => {
    expect((await t.json("GET", `/api/dcim/sites/${hidden}/`, { token: bob })).status).toBe(404);
    await probe("POST", "/api/dcim/devices/", (id) => ({ name: "sw", site: id }));
    await probe("POST", "/api/dcim/devices/", (id) => [
      { name: "sw1", site: visible },
      { name: "sw2", site: id },
    ]);
    const devices = await t.json("GET", "/api/dcim/devices/");
    expect(devices.body.count).toBe(0);
    expect(
      (
        await t.json("POST", "/api/dcim/devices/", {
          token: bob,
          body: { name: "ok", site: visible },
        })
      ).status,
    ).toBe(201);
  });

  test("custom object fields: object and multiobject, single and bulk", async () => {
    await probe("POST", `${CO}/rack/`, (id) => ({ name: "r1", site: id }));
    await probe("POST", `${CO}/rack/`, (id) => ({ name: "r2", sites: [visible, id] }));
    await probe("POST", `${CO}/rack/`, (id) => [
      { name: "r3", site: visible },
      { name: "r4", site: id },
    ]);
    await probe("POST", `${CO}/rack/`, (id) => [
      { name: "r5", sites: [visible] },
      { name: "r6", sites: [id] },
    ]);
    const mine = await t.json("POST", `${CO}/rack/`, {
      token: bob,
      body: { name: "mine", site: visible },
    });
    expect(mine.status).toBe(201);
    await probe("PATCH", `${CO}/rack/${mine.body.id}/`, (id) => ({ site: id }));
    // a custom object the caller may not view, through a custom object field
    const h = await t.json("POST", `${CO}/rack/`, {
      token: bob,
      body: { name: "p1", peer: hiddenRow },
    });
    const u = await t.json("POST", `${CO}/rack/`, {
      token: bob,
      body: { name: "p1", peer: UNKNOWN },
    });
    expect(h.status).toBe(400);
    expect(sameAs(h.body, hiddenRow)).toBe(sameAs(u.body, UNKNOWN));
  });

  test("a reference the object already holds may be sent back unchanged (PUT echoes it)", async () => {
    const device = await t.json("POST", "/api/dcim/devices/", {
      body: { name: "vault-sw", site: hidden },
    });
    const seen = await t.json("GET", `/api/dcim/devices/${device.body.id}/`, { token: bob });
    expect(seen.body.site).toEqual({ id: hidden });
    const echo = await t.json("PATCH", `/api/dcim/devices/${device.body.id}/`, {
      token: bob,
      body: { name: "vault-sw2", site: seen.body.site },
    });
    expect(echo.status).toBe(200);
    const [rack] = (await t.json("GET", `${CO}/rack/?name=admin's`, { token: bob })).body.results;
    const put = await t.json("PUT", `${CO}/rack/${rack.id}/`, {
      token: bob,
      body: { name: "admin's", site: rack.site, sites: rack.sites, peer: null },
    });
    expect(put.status).toBe(200);
    const after = await t.json("GET", `${CO}/rack/${rack.id}/`);
    expect(after.body.site.id).toBe(hidden);
    expect(after.body.sites.map((x: any) => x.id).sort()).toEqual([visible, hidden].sort());
    // but a row that does not hold it yet cannot be given it
    const other = await t.json("POST", `${CO}/rack/`, { token: bob, body: { name: "plain" } });
    await probe("PATCH", `${CO}/rack/${other.body.id}/`, (id) => ({ sites: [visible, id] }));
  });

  test("nested forms: a visible object's link to a hidden site shows its id alone", async () => {
    const racks = await t.json("GET", `${CO}/rack/?name=admin's`, { token: bob });
    expect(racks.status).toBe(200);
    const [rack] = racks.body.results;
    expect(rack.site).toEqual({ id: hidden });
    expect(rack.sites.find((s: any) => s.id === hidden)).toEqual({ id: hidden });
    expect(rack.sites.find((s: any) => s.id === visible).display).toBe("A");
    expect(JSON.stringify(racks.body)).not.toContain("Vault");
  });
});
