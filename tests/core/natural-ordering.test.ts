/**
 * Names order naturally, as NetBox orders them: "Site 2" before "Site 10", on the default
 * ordering and on `?ordering=name`, for sites and devices; rows written before the key column
 * existed get their keys when migrations run.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { naturalize } from "../../src/db/natural";
import { runMigrations } from "../../src/migrations";
import { makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
const NAMES = ["Site 10", "Site 2", "Site 1", "site 3b", "Site 2a", "Alpha", "Site 100", "Site 20"];

beforeAll(async () => {
  t = await makeTestApp();
  for (const [i, name] of NAMES.entries())
    expect(
      (await t.json("POST", "/api/dcim/sites/", { body: { name, slug: `s${i}` } })).status,
    ).toBe(201);
});
afterAll(() => t.close());

const names = async (query = "") =>
  (
    (await t.json("GET", `/api/dcim/sites/?limit=100${query}`)).body.results as { name: string }[]
  ).map((r) => r.name);

describe("natural ordering", () => {
  test("the default list and ?ordering=name put numbers in numeric order", async () => {
    const expected = [
      "Alpha",
      "Site 1",
      "Site 2",
      "Site 2a",
      "site 3b",
      "Site 10",
      "Site 20",
      "Site 100",
    ];
    expect(await names()).toEqual(expected);
    expect(await names("&ordering=name")).toEqual(expected);
    expect(await names("&ordering=-name")).toEqual([...expected].reverse());
  });

  test("a rename moves the object to its new place", async () => {
    const one = (await t.json("GET", "/api/dcim/sites/?name=Site 100")).body.results[0];
    expect(
      (await t.json("PATCH", `/api/dcim/sites/${one.id}/`, { body: { name: "Site 3" } })).status,
    ).toBe(200);
    expect((await names()).slice(0, 5)).toEqual(["Alpha", "Site 1", "Site 2", "Site 2a", "Site 3"]);
  });

  test("devices too, names in any case and nulls first", async () => {
    const site = (await t.json("GET", "/api/dcim/sites/?limit=1")).body.results[0].id;
    for (const name of ["sw10", "sw9", null, "sw1"])
      expect((await t.json("POST", "/api/dcim/devices/", { body: { name, site } })).status).toBe(
        201,
      );
    const r = await t.json("GET", "/api/dcim/devices/?ordering=name");
    expect(r.body.results.map((d: any) => d.name)).toEqual([null, "sw1", "sw9", "sw10"]);
  });

  test("rows from before the key column get keys when migrations run", async () => {
    await t.deps.db.orm.run(sql`UPDATE sites SET _name = NULL`);
    await runMigrations(t.deps.db);
    const rows = (await t.deps.db.orm.all(sql`SELECT name, _name AS n FROM sites`)) as {
      name: string;
      n: string;
    }[];
    for (const r of rows) expect(r.n).toBe(naturalize(r.name)!);
  });

  test("the key pads every digit run", () => {
    expect(naturalize("ge-0/0/10")).toBe("ge-00000000/00000000/00000010");
    expect(naturalize(null)).toBeNull();
  });
});
