/**
 * Issue 30 item 6: a full database answers 507 `database_full` with `Retry-After`, never 500, and
 * never fails the other requests of a group commit; writes come back once there is room. The
 * limit is SQLite's own (`PRAGMA max_page_count` on the writing connection): SQLITE_FULL exactly
 * where a full disk raises it, deterministically. `real-disk-full.test.ts` uses a real tmpfs.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

const pages = async () => Number((await t.deps.db.client.execute("PRAGMA page_count")).rows[0]![0]);
const limitPages = (n: number) => t.deps.db.client.execute(`PRAGMA max_page_count = ${n}`);

let n = 0;
const site = () => {
  const i = ++n;
  return { name: `Full ${i}`, slug: `full-${i}`, description: "x".repeat(150) };
};

test("SQLITE_FULL in one member of a group commit: 507 for it, the others are answered truly", async () => {
  // Warm up: the tables' first pages exist.
  expect((await t.json("POST", "/api/dcim/sites/", { body: site() })).status).toBe(201);
  for (const headroom of [0, 3]) {
    await limitPages((await pages()) + headroom);
    const bodies = Array.from({ length: 24 }, site);
    // Concurrent creates: they share group commits, a savepoint each.
    const answers = await Promise.all(
      bodies.map((body) => t.json("POST", "/api/dcim/sites/", { body })),
    );
    for (const r of answers) {
      expect([201, 507]).toContain(r.status);
      if (r.status === 507) {
        expect(r.body.error).toBe("database_full");
        expect(Number(r.res.headers.get("retry-after"))).toBeGreaterThan(0);
      }
    }
    expect(answers.some((r) => r.status === 507)).toBe(true);
    // Whatever answered 201 is there; whatever answered 507 is not.
    for (const [i, r] of answers.entries()) {
      const found = await t.json("GET", `/api/dcim/sites/?slug=${bodies[i]!.slug}`);
      expect(found.body.count).toBe(r.status === 201 ? 1 : 0);
    }
  }
});

test("writes come back by themselves once there is room", async () => {
  await limitPages(await pages());
  const full = await t.json("POST", "/api/dcim/sites/", { body: Array.from({ length: 50 }, site) });
  expect(full.status).toBe(507);
  await limitPages(1_000_000);
  expect((await t.json("POST", "/api/dcim/sites/", { body: site() })).status).toBe(201);
});
