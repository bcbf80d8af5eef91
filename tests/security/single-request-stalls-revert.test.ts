/**
 * Outside probe (decision 0193): a revert read every later change record of its object whole —
 * 100 records each holding a 150,000-item JSON value held the event loop 1.6–1.9 s and grew
 * memory by 540–640 MB on one `?dry_run=true`, repeatable, writing nothing. The stall was one
 * synchronous stretch (parse, then compare), so the loop's answers do not tell it from a short
 * one: these tests count what causes both, the bytes the revert's reads bring into the process,
 * through the database client. They measure no time.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Database } from "../../src/db/client";
import { MAX_REVERT_REVIEW_BYTES } from "../../src/core/limits";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

/** Later change records of the probed object, each holding a JSON value of `ITEMS` items twice. */
const LATER = 30;
const ITEMS = 150_000;
/**
 * What a revert may bring back of the database, however long the object's history: the object's
 * own value (two or three characters an item) a few times (the object read, the new record's
 * text returned); its later records hold it 2 · LATER times.
 */
const READ_BOUND = 12 * ITEMS;

let t: TestApp;
let editor: string;

beforeAll(async () => {
  // every read on the one client `charsRead` weighs (a read pool's connections answer elsewhere)
  t = await makeTestApp({ DATABASE_READ_POOL: "0" });
  const cot = await makeCot(t, "doc");
  await addField(t, cot.id, { name: "name", type: "text", primary: true });
  await addField(t, cot.id, { name: "notes", type: "text" });
  await addField(t, cot.id, { name: "data", type: "json" });
  // an ordinary account: it may view and change these objects and view their change records
  editor = (
    await userWith(t, "editor", [
      [["view", "change"], "custom_objects.doc", null],
      [["view"], "core.objectchange", null],
    ])
  ).token;
});
afterAll(() => t.close());

/** The latest change record of doc `id`. */
async function lastChange(id: number): Promise<number> {
  const r = await t.json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.doc&changed_object_id=${id}&ordering=-id&limit=1`,
  );
  return r.body.results[0].id;
}

const patch = async (id: number, body: Record<string, unknown>) =>
  expect((await t.json("PATCH", `${CO}/doc/${id}/`, { body })).status).toBe(200);

/** A doc whose `notes` went from n0 to n1 (the record answered), then `later` data changes. */
async function docWithHistory(name: string, later: number, items: number) {
  const doc = await create(t, "doc", { name, notes: "n0", data: [] });
  await patch(doc.id, { notes: "n1" });
  const change = await lastChange(doc.id);
  for (let k = 1; k <= later; k++) await patch(doc.id, { data: Array(items).fill(k) });
  return { id: doc.id, change };
}

/**
 * Runs `fn`, counting the characters of the text values the database client answers meanwhile
 * (every statement: `execute`, `batch`, and those of the transactions it opens); answers `fn`'s
 * result and the count.
 */
async function charsRead<T>(db: Database, fn: () => Promise<T>): Promise<[T, number]> {
  type Rows = { rows?: ArrayLike<unknown>[] };
  const client = (db as unknown as { client: any }).client;
  const orig = { execute: client.execute, batch: client.batch, transaction: client.transaction };
  let chars = 0;
  const weigh = (rs: Rows) => {
    for (const row of rs?.rows ?? [])
      for (let i = 0; i < row.length; i++) {
        const v = row[i];
        if (typeof v === "string") chars += v.length;
      }
    return rs;
  };
  const weighed = <C extends { execute: any; batch: any }>(target: C): C => {
    const { execute, batch } = target;
    target.execute = async (...a: unknown[]) => weigh(await execute.apply(target, a));
    target.batch = async (...a: unknown[]) => ((await batch.apply(target, a)) as Rows[]).map(weigh);
    return target;
  };
  weighed(client);
  client.transaction = async (...a: unknown[]) => weighed(await orig.transaction.apply(client, a));
  try {
    return [await fn(), chars];
  } finally {
    Object.assign(client, orig);
  }
}

const revert = (id: number, query = "") =>
  charsRead(t.deps.db, () =>
    t.json("POST", `/api/core/object-changes/${id}/revert/${query}`, { token: editor }),
  );

describe("a revert of an object with a long, heavy history", () => {
  test("a dry run and the revert read none of the later records' snapshots", async () => {
    const doc = await docWithHistory("heavy", LATER, ITEMS);
    for (let i = 0; i < 2; i++) {
      // repeated as the probe did: nothing written, nothing remembered that makes it cheaper
      const [dry, chars] = await revert(doc.change, "?dry_run=true");
      expect(dry.status).toBe(200);
      expect(dry.body.changes).toEqual({ notes: { from: "n1", to: "n0" } });
      expect(dry.body.object.notes).toBe("n0");
      expect(chars).toBeLessThan(READ_BOUND);
    }
    const [done, chars] = await revert(doc.change);
    expect(done.status).toBe(200);
    expect(done.body.changes).toEqual({ notes: { from: "n1", to: "n0" } });
    expect(chars).toBeLessThan(READ_BOUND);
    expect((await t.json("GET", `${CO}/doc/${doc.id}/`)).body.notes).toBe("n0");
  });

  test("a field changed again since is still a conflict; past the limit its records go unnamed", async () => {
    const doc = await docWithHistory("conflicted", LATER, ITEMS);
    await patch(doc.id, { notes: "n2" });
    const [refused, chars] = await revert(doc.change, "?dry_run=true");
    expect(chars).toBeLessThan(READ_BOUND);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe("revert_conflict");
    expect(refused.body.conflicts).toEqual([
      {
        reason: "later_change",
        field: "notes",
        detail: `"notes" was changed again since (its later change records, more than ${MAX_REVERT_REVIEW_BYTES} bytes, were not reviewed).`,
      },
    ]);
    // forced, the field is left out, named in `skipped`: nothing else to write
    const [forced] = await revert(doc.change, "?dry_run=true&force=true");
    expect(forced.status).toBe(200);
    expect(forced.body.changes).toEqual({});
    expect(forced.body.skipped).toEqual(refused.body.conflicts);
  });

  test("within the limit a conflict names the later records that touched the field", async () => {
    const doc = await docWithHistory("light", 3, 10);
    await patch(doc.id, { notes: "n2" });
    const touched = await lastChange(doc.id);
    await patch(doc.id, { data: [1] });
    const [refused] = await revert(doc.change, "?dry_run=true");
    expect(refused.status).toBe(409);
    expect(refused.body.conflicts).toEqual([
      {
        reason: "later_change",
        field: "notes",
        detail: `"notes" was changed again since (change ${touched}).`,
        changes: [touched],
      },
    ]);
  });
});
