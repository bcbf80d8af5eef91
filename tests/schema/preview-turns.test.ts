/**
 * A schema preview counting what a retype loses where only the converter can tell (json to date,
 * decision 0207) gives the event loop its turns between values: a local file's reads never wait,
 * so the pages alone would hold the loop for the whole column. The clock `yieldWhenDue` measures
 * stretches on is injected: the test counts turns, never milliseconds.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { servicesOf } from "../../src/app";
import { tableName } from "../../src/plugins/custom-objects/constants";
import { SLICE_MS, useTurnClock } from "../../src/turns";
import { makeTestApp, type TestApp } from "../helpers/app";
import { turnCounter } from "../helpers/livez-probe";
import { addField, makeCot } from "../custom-objects/fixtures";
import { SCHEMA } from "./helpers";

const VALUES = 3_000;

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());
afterEach(() => useTurnClock(null));

test("a preview counting json → date in JavaScript gives the loop turns between values", async () => {
  const cot = await makeCot(t, "notes");
  await addField(t, cot.id, { name: "name", type: "text", primary: true });
  await addField(t, cot.id, { name: "doc", type: "json" });
  await servicesOf(t.app).db.orm.run(
    sql.raw(
      `INSERT INTO "${tableName(cot.id)}" (created, last_updated, name, doc) WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${VALUES}) SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'n' || i, CASE i % 2 WHEN 0 THEN '"2024-02-29"' ELSE '{"a": ' || i || '}' END FROM s`,
    ),
  );
  const exported = (await t.json("GET", `${SCHEMA}/export?slug=notes`)).body;
  for (const f of exported.types[0].fields) if (f.name === "doc") f.type = "date";

  // each check finds the work under way a slice older: every other check gives turns
  let now = 0;
  const counter = turnCounter();
  /** The loop's turn count at each check (each reading of the clock). */
  const checks: number[] = [];
  useTurnClock({
    now: () => {
      checks.push(counter.turns);
      now += SLICE_MS;
      return now;
    },
  });
  let res: { status: number; body: any };
  try {
    res = await t.json("POST", `${SCHEMA}/preview/`, { body: { schema: exported } });
  } finally {
    counter.stop();
  }
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.destructive_changes).toEqual([
    expect.objectContaining({ field: "doc", reason: "lossy_type_change", rows: VALUES / 2 }),
  ]);
  // a check a value (before: none, the column counted in one stretch)
  expect(checks.length).toBeGreaterThanOrEqual(VALUES);
  let longest = 1;
  for (let i = 1, run = 1; i < checks.length; i++) {
    run = checks[i] === checks[i - 1] ? run + 1 : 1;
    longest = Math.max(longest, run);
  }
  expect(longest).toBeLessThanOrEqual(2);
});
