/**
 * A schema apply gives the event loop its turns from JavaScript that runs no statement, too
 * (`turns.ts`): drafting a thousand added fields is ~60 ms of it, which the long-write
 * connection's statements cannot break up. The clock `yieldWhenDue` measures stretches on is
 * injected, so these tests count the loop's turns, never milliseconds.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { SLICE_MS, useTurnClock, yieldWhenDue } from "../../src/turns";
import { makeTestApp, type TestApp } from "../helpers/app";
import { turnCounter } from "../helpers/livez-probe";
import { doc, SCHEMA } from "./helpers";

/** A turn of the event loop that the code under test did not give (the ticker's own pace). */
const naturalTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

afterEach(() => useTurnClock(null));

describe("yieldWhenDue", () => {
  test("gives no turn before the stretch is a slice long, then gives some", async () => {
    let now = 1000;
    useTurnClock({ now: () => now });
    await naturalTurn();
    const counter = turnCounter();
    try {
      await yieldWhenDue(); // the stretch starts
      now += SLICE_MS - 1;
      await yieldWhenDue();
      // only settled promises so far: the loop has not turned
      expect(counter.turns).toBe(0);
      now += 1;
      await yieldWhenDue();
      expect(counter.turns).toBeGreaterThan(0);
    } finally {
      counter.stop();
    }
  });

  test("a turn of the loop from elsewhere (I/O, a timer) starts a new stretch", async () => {
    let now = 1000;
    useTurnClock({ now: () => now });
    await yieldWhenDue(); // a stretch starts
    await naturalTurn(); // and ends here: waiting is not holding the loop
    now += 10 * SLICE_MS;
    const counter = turnCounter();
    try {
      await yieldWhenDue(); // the stretch after the turn starts now: not due
      expect(counter.turns).toBe(0);
    } finally {
      counter.stop();
    }
  });
});

describe("a schema apply adding many fields", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await makeTestApp();
  });
  afterAll(() => t.close());

  test("gives the loop turns while it drafts the fields, not only between statements", async () => {
    const FIELDS = 400;
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
    let res: Awaited<ReturnType<TestApp["json"]>>;
    try {
      res = await t.json("POST", `${SCHEMA}/apply/`, {
        body: {
          schema: doc([
            {
              name: "wide",
              slug: "wide",
              fields: Array.from({ length: FIELDS }, (_, f) => ({
                id: f + 1,
                name: `field_${f}`,
                type: "text",
                primary: f === 0,
              })),
            },
          ]),
        },
      });
    } finally {
      counter.stop();
    }
    expect(res.status).toBe(200);
    // each drafted field is a check (the apply's statements are some thirty more): without the
    // drafts' own checks, a thousand drafts would hold the loop for ~60 ms between two statements
    expect(checks.length).toBeGreaterThanOrEqual(FIELDS);
    // and each check after a turn gives the loop its turns again, inside the apply as in isolation
    let longest = 1;
    for (let i = 1, run = 1; i < checks.length; i++) {
      run = checks[i] === checks[i - 1] ? run + 1 : 1;
      longest = Math.max(longest, run);
    }
    expect(longest).toBeLessThanOrEqual(2);
  });
});
