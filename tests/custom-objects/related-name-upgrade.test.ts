/**
 * Migration 0013 (decision 0156) on a database made before it: fields sharing a reverse name on
 * one related type (as lists and documents could write before decision 0142, or a race) keep it
 * on the first made (lowest id) and lose it on the others; empty names, polymorphic fields and
 * other related types are untouched; the unique index then refuses a second holder.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { runMigrations } from "../../src/migrations";
import { ROOT } from "../../tools/bundle";
import { makeTestApp, type TestApp } from "../helpers/app";
import { addField, CO, makeCot } from "./fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const run = (sql: string, args: Array<string | number> = []) =>
  t.deps.db.client.execute({ sql, args });

/** When the journal says the migration whose tag starts with `prefix` was made: its row's key. */
function migrationWhen(prefix: string): number {
  const journal = JSON.parse(readFileSync(join(ROOT, "migrations/meta/_journal.json"), "utf8")) as {
    entries: Array<{ tag: string; when: number }>;
  };
  const entry = journal.entries.find((e) => e.tag.startsWith(prefix));
  if (!entry) throw new Error(`no migration ${prefix} in the journal`);
  return entry.when;
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
  // the database as it was before migration 0013: no index, its migration not yet applied
  await run("DROP INDEX cotf_related_name_uq");
  await run("DELETE FROM __drizzle_migrations WHERE created_at >= ?", [migrationWhen("0013_")]);
  // nor any later one: migration 0014's rules stamp and its triggers (decision 0197)
  const triggers = await run(
    "SELECT name FROM sqlite_master WHERE type = 'trigger' AND sql LIKE '%event_rules_stamp%'",
  );
  for (const { name } of triggers.rows) await run(`DROP TRIGGER "${String(name)}"`);
  await run("DROP TABLE event_rules_stamp");
  // duplicates: "base" and "work" take "shared" after "home" did; "rack" keeps "other" (a device)
  await run("UPDATE custom_object_type_fields SET related_name = 'shared' WHERE id IN (?, ?)", [
    made[1]!.id,
    made[2]!.id,
  ]);
  await run("UPDATE custom_object_type_fields SET related_name = 'other' WHERE id = ?", [
    made[6]!.id,
  ]);

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
