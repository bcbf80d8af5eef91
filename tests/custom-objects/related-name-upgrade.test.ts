/**
 * Migration 0013 (decision 0156) on a database made before it: fields sharing a reverse name on
 * one related type (as lists and documents could write before decision 0142, or a race) keep it
 * on the first made (lowest id) and lose it on the others; empty names, polymorphic fields and
 * other related types are untouched; the unique index then refuses a second holder.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { MIGRATIONS_FOLDER } from "../../src/db/migrate";
import { runMigrations } from "../../src/migrations";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, makeCot } from "./fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const run = (sql: string, args: Array<string | number> = []) =>
  t.deps.db.client.execute({ sql, args });

/** The text of migration 0013. */
function migration0013(): string {
  const file = readdirSync(MIGRATIONS_FOLDER).find((f) => f.startsWith("0013_"));
  if (!file) throw new Error("no migration 0013");
  return readFileSync(join(MIGRATIONS_FOLDER, file), "utf8");
}

test("start-up on a database with duplicate reverse names: the first holder keeps each, the others are cleared, then the index holds", async () => {
  const one = await makeCot(t, "rn_up_one");
  const two = await makeCot(t, "rn_up_two");
  const field = (cotId: number, name: string, related_object_type: string, related_name = "") =>
    addField(t, cotId, { name, type: "object", related_object_type, related_name });
  const made = [
    await field(one.id, "home", "dcim.site", "shared"),
    await field(two.id, "base", "dcim.site", "other"),
    await field(two.id, "work", "dcim.site", "third"),
    await field(one.id, "rack", "dcim.device", "other"),
    await field(one.id, "plain", "dcim.site"),
    await field(two.id, "plain", "dcim.site"),
    await addField(t, one.id, {
      name: "any",
      type: "object",
      is_polymorphic: true,
      related_object_types: ["dcim.site", "dcim.device"],
      related_name: "anything",
    }),
  ];
  // the database as it was before migration 0013: no index
  await run("DROP INDEX cotf_related_name_uq");
  // duplicates: "base" and "work" take "shared" after "home" did; "rack" keeps "other" (a device)
  await run("UPDATE custom_object_type_fields SET related_name = 'shared' WHERE id IN (?, ?)", [
    made[1]!.id,
    made[2]!.id,
  ]);
  await run("UPDATE custom_object_type_fields SET related_name = 'other' WHERE id = ?", [
    made[6]!.id,
  ]);

  // migration 0013's SQL as start-up runs it: drizzle's migrator runs only those newer than the
  // last applied, and the later ones (0014's columns, 0015's triggers) cannot run twice
  for (const statement of migration0013().split("--> statement-breakpoint")) await run(statement);
  await runMigrations(t.deps.db);

  const names = new Map(
    (
      await t.json("GET", `${CO}/custom-object-type-fields/?limit=100&ordering=id`)
    ).body.results.map((f: { id: number; related_name: string }) => [f.id, f.related_name]),
  );
  expect(made.map((f) => names.get(f.id))).toEqual([
    "shared", // the first made keeps it
    "",
    "",
    "other", // another related type
    "",
    "",
    "other", // polymorphic: no single related type, outside the index
  ]);
  const again = await t.json("PATCH", `${CO}/custom-object-type-fields/${made[1]!.id}/`, {
    body: { related_name: "shared" },
  });
  expect(again.status, JSON.stringify(again.body)).toBe(400);
  // the index itself refuses a second holder, whatever writes it
  await expect(
    run("UPDATE custom_object_type_fields SET related_name = 'shared' WHERE id = ?", [made[2]!.id]),
  ).rejects.toThrow(/UNIQUE constraint failed/);
  // a second start changes nothing
  await runMigrations(t.deps.db);
  expect(
    (await run("SELECT count(*) AS n FROM custom_object_type_fields WHERE related_name = 'shared'"))
      .rows[0]!.n,
  ).toBe(1);
});
