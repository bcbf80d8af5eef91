/**
 * A custom object's `_context` (upstream's: its context fields' display texts) derived from a
 * related object the caller may not view: the object's nested form is cut to its id (decision
 * 0064), and its display shows in `_context` no more than there. In the full and the brief form,
 * by id and in lists, and in a revert's dry run; a superuser sees it whole.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
let token: string;
let id: number;
const site = (name: string, slug: string) =>
  t.json("POST", "/api/dcim/sites/", { body: { name, slug } }).then((r) => r.body.id as number);

beforeAll(async () => {
  t = await makeTestApp();
  const open = await site("Open Site", "open");
  const vault = await site("Vault Site", "vault");
  const cot = await makeCot(t, "ctx_holder");
  await addField(t, cot.id, { name: "label", type: "text", primary: true });
  const ref = { type: "object", related_object_type: "dcim.site", context: true };
  await addField(t, cot.id, { name: "home", ...ref });
  await addField(t, cot.id, { name: "away", ...ref });
  await addField(t, cot.id, {
    name: "visits",
    type: "multiobject",
    related_object_type: "dcim.site",
    context: true,
  });
  await addField(t, cot.id, { name: "note", type: "text", context: true });
  // a flat field: its value read again from its parts
  await addField(t, cot.id, { name: "spot", type: "coordinates", context: true });
  id = (
    await create(t, "ctx_holder", {
      label: "one",
      home: open,
      away: vault,
      visits: [vault, open],
      spot_latitude: 1.5,
      spot_longitude: 2.25,
    })
  ).id;
  // an update whose revert the dry run previews
  await t.json("PATCH", `${CO}/ctx_holder/${id}/`, { body: { note: "noted" } });
  token = (
    await userWith(t, "ctx_prober", [
      [["view"], "dcim.site", { slug: "open" }],
      [["view", "change"], "custom_objects.ctx_holder", null],
      [["view"], "core.objectchange", null],
    ])
  ).token;
});
afterAll(() => t.close());

test("`_context` shows no display of a related object the caller may not view", async () => {
  const shown = { display: "Open Site, noted, 1.5, 2.25, Open Site" };
  const one = await t.json("GET", `${CO}/ctx_holder/${id}/`, { token });
  expect(one.status).toBe(200);
  expect(one.body.away).toEqual({ id: expect.any(Number) });
  expect(one.body._context).toEqual(shown);
  const list = await t.json("GET", `${CO}/ctx_holder/`, { token });
  expect(list.body.results[0]._context).toEqual(shown);
  const brief = await t.json("GET", `${CO}/ctx_holder/?brief=true`, { token });
  expect(brief.body.results[0]._context).toEqual(shown);
  expect(JSON.stringify([one.body, list.body, brief.body])).not.toContain("Vault");
  // a revert's dry run answers the object as the revert would, hidden alike
  const changes = await t.json(
    "GET",
    `/api/core/object-changes/?changed_object_id=${id}&action=update`,
  );
  const change = changes.body.results[0].id;
  const dry = await t.json("POST", `/api/core/object-changes/${change}/revert/?dry_run=true`, {
    token,
  });
  expect(dry.status, JSON.stringify(dry.body)).toBe(200);
  expect(dry.body.object._context).toEqual({ display: "Open Site, 1.5, 2.25, Open Site" });
  expect(JSON.stringify(dry.body)).not.toContain("Vault");
  // a superuser sees every display
  const admin = await t.json("GET", `${CO}/ctx_holder/${id}/`);
  expect(admin.body._context).toEqual({
    display: "Vault Site, Open Site, noted, 1.5, 2.25, Vault Site, Open Site",
  });
});
