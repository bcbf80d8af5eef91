/**
 * A write that starts from a cached model the type has left (a schema apply renamed a field
 * since): its read names a column that is gone. That is the stale model it is — the write runs
 * again on the type as it now is — not a 409 `schema_changed` that every retry met again on a
 * local file, where nothing else refreshed the cached model.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO } from "./fixtures";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const apply = (fields: unknown[]) =>
  t.json("POST", `${CO}/schema/apply/`, {
    body: { schema: { schema_version: "1", types: [{ name: "crate", slug: "crate", fields }] } },
  });

test("an object PATCH and DELETE after an apply renamed a field the cached model still names", async () => {
  const code = { id: 1, name: "code", type: "text" };
  expect((await apply([code, { id: 2, name: "depth", type: "text" }])).status).toBe(200);
  const made = await t.json("POST", `${CO}/crate/`, { body: { code: "a", depth: "3" } });
  expect(made.status).toBe(201);
  // the write path's model, cached
  const first = await t.json("PATCH", `${CO}/crate/${made.body.id}/`, { body: { depth: "4" } });
  expect(first.status).toBe(200);
  expect((await apply([code, { id: 2, name: "height", type: "text" }])).status).toBe(200);
  const patched = await t.json("PATCH", `${CO}/crate/${made.body.id}/`, { body: { height: "5" } });
  expect(patched.status, JSON.stringify(patched.body)).toBe(200);
  expect(patched.body.height).toBe("5");
  expect(
    (
      await apply([
        { ...code, name: "label" },
        { id: 2, name: "height", type: "text" },
      ])
    ).status,
  ).toBe(200);
  const gone = await t.json("DELETE", `${CO}/crate/${made.body.id}/`);
  expect(gone.status, JSON.stringify(gone.body)).toBe(204);
});
