/**
 * A custom object list refuses a parameter that looks like a filter but names none of the type's
 * (decision 0206): upstream's per-field filtersets ignore it (django-filter), which answers every
 * row, so pynetbox's `.filter(nmae="x").delete()` would delete them all. Locally and remotely.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { type RemoteDb, startRemoteDb } from "../helpers/remote-db";
import { addField, CO, makeCot } from "./fixtures";

let db: RemoteDb;
const apps: Record<string, TestApp> = {};

beforeAll(async () => {
  db = await startRemoteDb("unknown-filters");
  apps.local = await makeTestApp();
  apps.remote = await makeTestApp({ DATABASE_URL: db.url });
  for (const t of Object.values(apps)) {
    const cot = await makeCot(t, "box");
    await addField(t, cot.id, { name: "name", type: "text", primary: true });
    await addField(t, cot.id, { name: "size", type: "integer" });
    await addField(t, cot.id, { name: "secret", type: "text", filter_logic: "disabled" });
    const made = await t.json("POST", `${CO}/box/`, {
      body: [
        { name: "a", size: 1, secret: "s" },
        { name: "b", size: 2, secret: "s" },
      ],
    });
    if (made.status !== 201) throw new Error(JSON.stringify(made.body));
  }
});
afterAll(async () => {
  for (const t of Object.values(apps)) await t.close();
  await db.stop();
});

for (const where of ["local", "remote"]) {
  describe(`${where}: /api/plugins/custom-objects/box/`, () => {
    const get = (query: string) => apps[where]!.json("GET", `${CO}/box/?${query}`);

    test("a typo of a field's name, with or without a lookup: 400 naming the parameter", async () => {
      for (const param of ["nmae", "nmae__ic", "nmae__n", "colour"]) {
        const r = await get(`${param}=x`);
        expect({ param, status: r.status }).toEqual({ param, status: 400 });
        expect(Object.keys(r.body)).toEqual([param]);
        expect(r.body[param][0]).toContain(param.split("__")[0]);
      }
    });

    test("a lookup no filter of the field takes, or NetBox's filters Host lacks: 400", async () => {
      for (const param of ["name__regex", "size__in", "id__in", "tag_id", "cf_x", "filter_id"]) {
        const r = await get(`${param}=1`);
        expect({ param, status: r.status, keys: Object.keys(r.body ?? {}) }).toEqual({
          param,
          status: 400,
          keys: [param],
        });
      }
    });

    test("a field whose filtering is disabled (filter_logic) is refused, not ignored", async () => {
      const r = await get("secret=nope");
      expect(r.status).toBe(400);
      expect(r.body.secret[0]).toContain("disabled");
    });

    test("the type's own filters still filter; general parameters are no filters", async () => {
      expect((await get("name=a")).body.count).toBe(1);
      expect((await get("size__gte=2")).body.count).toBe(1);
      // pynetbox's parameters, then what a browser or the UI adds: never refused
      const client = await get(
        "limit=1&offset=0&brief=1&ordering=-id&fields=id&omit=name&exclude=config_context&format=json&q=",
      );
      expect(client.status).toBe(200);
      expect(client.body.count).toBe(2);
      const ui = await get("return_url=%2Fx&per_page=5&page=1&export=&_=1732700000");
      expect(ui.status).toBe(200);
      expect(ui.body.count).toBe(2);
    });
  });
}
