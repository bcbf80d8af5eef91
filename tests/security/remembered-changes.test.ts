/**
 * Change records remembered for a revert (decision 0118, `core/changes/seen.ts`) are bounded in
 * bytes, not only in number: a change record holds two snapshots of its object, and an ordinary
 * account that may write a type with long text fields makes them megabytes each. Five hundred of
 * those held by the process would be gigabytes; a large record is left to be read when reverted.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { servicesOf } from "../../src/app";
import { seenChange } from "../../src/core/changes/seen";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";
import { addField, CO, create, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
let writer: string;
beforeAll(async () => {
  t = await makeTestApp();
  const cot = await makeCot(t, "notes");
  await addField(t, cot.id, { name: "name", type: "text", primary: true });
  await addField(t, cot.id, { name: "body", type: "longtext" });
  await addField(t, cot.id, { name: "size", type: "integer" });
  writer = (
    await userWith(t, "note-writer", [
      [["view", "add", "change"], "custom_objects.notes", null],
      [["view"], "core.objectchange", null],
    ])
  ).token;
});
afterAll(() => t.close());

/** An object changed once by the ordinary account, and its change record as the log lists it. */
async function changedNote(name: string, body: string) {
  const note = await create(t, "notes", { name, body, size: 1 });
  const patched = await t.json("PATCH", `${CO}/notes/${note.id}/`, {
    token: writer,
    body: { size: 2 },
  });
  expect(patched.status).toBe(200);
  const log = await t.json(
    "GET",
    `/api/core/object-changes/?changed_object_type=custom_objects.notes&changed_object_id=${note.id}&ordering=-id&limit=1`,
    { token: writer },
  );
  expect(log.status).toBe(200);
  return { note, change: log.body.results[0] as { id: number } };
}

test("a large change record is not held in memory; its revert still works", async () => {
  const services = servicesOf(t.app);
  const small = await changedNote("small", "short");
  // read through the log: a record of ordinary size is remembered (the test can fail)
  expect(seenChange(services, small.change.id)).toBeDefined();

  const big = await changedNote("big", "x".repeat(600_000)); // two snapshots: 1.2 MB of record
  expect(seenChange(services, big.change.id) === undefined).toBe(true);
  // the revert path's own read of the record does not keep it either
  const dry = await t.json("POST", `/api/core/object-changes/${big.change.id}/revert/?dry_run=1`, {
    token: writer,
  });
  expect(dry.status, JSON.stringify(dry.body).slice(0, 300)).toBe(200);
  expect(seenChange(services, big.change.id) === undefined).toBe(true);
  const done = await t.json("POST", `/api/core/object-changes/${big.change.id}/revert/`, {
    token: writer,
  });
  expect(done.status).toBe(200);
  expect((await t.json("GET", `${CO}/notes/${big.note.id}/`)).body.size).toBe(1);
});

test("a remembered record answers one who may not view it as an unknown id, whatever the flags", async () => {
  const { change } = await changedNote("hidden", "text"); // listed, so remembered
  expect(seenChange(servicesOf(t.app), change.id)).toBeDefined();
  const outsider = (
    await userWith(t, "note-outsider", [
      [["view", "add", "change", "delete"], "custom_objects.notes", { name: "other" }],
      [["view"], "core.objectchange", null],
    ])
  ).token;
  const unknown = 987654;
  for (const query of ["", "?dry_run=1", "?dry_run=bogus", "?force=1", "?dry_run=1&force=yes"]) {
    const hidden = await t.json("POST", `/api/core/object-changes/${change.id}/revert/${query}`, {
      token: outsider,
    });
    const missing = await t.json("POST", `/api/core/object-changes/${unknown}/revert/${query}`, {
      token: outsider,
    });
    expect(hidden.status, query).toBe(missing.status);
    expect(hidden.body, query).toEqual(missing.body);
  }
  expect((await t.json("GET", `${CO}/notes/?name=hidden`)).body.results[0].size).toBe(2);
});
