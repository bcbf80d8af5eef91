/**
 * Row 3 and row 12 of issue 27, as the attacker tried them: a user-defined `validation_regex`
 * must not let one request hold the event loop, and distinct patterns sent to schema preview
 * must not stay in memory forever (decision 0068). The time it took is bench/attacks.ts's job;
 * here the bounded behaviour itself is pinned: patterns a linear-time engine cannot run are
 * refused when defined, values are capped before any pattern runs, the pattern cache is bounded.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, makeCot } from "../custom-objects/fixtures";
import { MAX_TEXT_CHARS } from "../../src/core/limits";
import {
  cachedPatternCount,
  PATTERN_CACHE_SIZE,
} from "../../src/plugins/custom-objects/field-types/pattern";

let t: TestApp;
let adder: string;
let cot: { id: number; slug: string };

beforeAll(async () => {
  t = await makeTestApp();
  cot = await makeCot(t, "gadget");
  await addField(t, cot.id, { name: "title", type: "text", primary: true });
  await addField(t, cot.id, { name: "code", type: "text", validation_regex: "^(a+)+$" });
  adder = await t.user("adder", [[["add", "view"], "custom_objects.gadget"]]);
});
afterAll(() => t.close());

/** Patterns a backtracking engine runs in exponential time and RE2 cannot express at all. */
const UNBOUNDED = ["^(?=(a+)+$)a*$", "^(a+)+\\1$", "(?<=a)(b+)+c", "^(?!(a|aa)+$)"];

describe("patterns are checked when a field is defined", () => {
  test("lookarounds and backreferences answer 400 on the field endpoint", async () => {
    for (const pattern of UNBOUNDED) {
      const r = await t.json("POST", `${CO}/custom-object-type-fields/`, {
        body: { custom_object_type: cot.id, name: "bad", type: "text", validation_regex: pattern },
      });
      expect(r.status).toBe(400);
      expect(r.body.validation_regex[0]).toContain("linear-time engine");
    }
  });

  test("and in schema documents (preview and apply)", async () => {
    const doc = {
      schema_version: "1",
      types: [
        {
          name: "evil",
          slug: "evil",
          fields: [{ id: 1, name: "v", type: "text", validation_regex: UNBOUNDED[0] }],
        },
      ],
    };
    for (const path of ["schema/preview/", "schema/apply/"]) {
      const r = await t.json("POST", `${CO}/${path}`, { body: { schema: doc } });
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body)).toContain("linear-time engine");
    }
  });
});

describe("values are matched by a bounded engine", () => {
  test("a user with add only posts the attack value: a plain 400, the pattern still applies", async () => {
    const attack = `${"a".repeat(28)}!`;
    const r = await t.json("POST", `${CO}/gadget/`, {
      token: adder,
      body: { title: "x", code: attack },
    });
    expect(r.status).toBe(400);
    expect(r.body.code[0]).toContain("must match");
    const ok = await t.json("POST", `${CO}/gadget/`, {
      token: adder,
      body: { title: "y", code: "a".repeat(5000) },
    });
    expect(ok.status).toBe(201);
  });

  test("a value longer than the text cap is refused before any pattern runs", async () => {
    const r = await t.json("POST", `${CO}/gadget/`, {
      token: adder,
      body: { title: "z", code: "a".repeat(MAX_TEXT_CHARS + 1) },
    });
    expect(r.status).toBe(400);
    expect(r.body.code[0]).toContain(`no more than ${MAX_TEXT_CHARS} characters`);
  });

  test("a pattern stored before the check (a backreference) refuses writes to that field, reads go on", async () => {
    const field = await addField(t, cot.id, { name: "legacy", type: "text" });
    await t.deps.db.orm.run(
      sql`UPDATE custom_object_type_fields SET validation_regex = ${"^(a)\\1$"} WHERE id = ${field.id}`,
    );
    // The definition changed under the app (as an upgrade finds it): its model is rebuilt.
    await t.deps.db.orm.run(
      sql`UPDATE custom_object_types SET shape_version = shape_version + 1 WHERE id = ${cot.id}`,
    );
    const w = await t.json("POST", `${CO}/gadget/`, { body: { title: "l", legacy: "aa" } });
    expect(w.status).toBe(400);
    expect(w.body.legacy[0]).toContain("no longer runs");
    const other = await t.json("POST", `${CO}/gadget/`, { body: { title: "m" } });
    expect(other.status).toBe(201);
    const list = await t.json("GET", `${CO}/gadget/?title=m`);
    expect(list.status).toBe(200);
    expect(list.body.count).toBe(1);
  });
});

describe("the pattern cache is bounded (row 12)", () => {
  test("300 distinct patterns sent to schema preview keep at most the cache's size", async () => {
    for (let i = 0; i < 300; i++) {
      const doc = {
        schema_version: "1",
        types: [
          {
            name: `p${i}`,
            slug: `p${i}`,
            fields: [{ id: 1, name: "v", type: "text", validation_regex: `^x{${i % 50}}y${i}$` }],
          },
        ],
      };
      const r = await t.json("POST", `${CO}/schema/preview/`, { body: doc });
      expect(r.status).toBe(200);
    }
    // Exactly the cache size: the patterns were compiled and kept, the oldest let go.
    expect(cachedPatternCount()).toBe(PATTERN_CACHE_SIZE);
  });
});
