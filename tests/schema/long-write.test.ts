/**
 * Schema applies never stall the server (issue 13, item 4; decision 0039): over real HTTP on
 * 127.0.0.1, GETs keep being answered while a large apply runs, and a write that meets the
 * write lock of a long transaction gets a bounded, retryable 503 `database_busy` — never a hang
 * and never a blocked event loop.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Database from "libsql";
import { createApp } from "../../src/app";
import { openDatabase } from "../../src/db/local";
import type { Database as Db } from "../../src/db/client";
import { createCache } from "../../src/services/cache";
import { makeTestApp, type TestApp } from "../helpers/app";
import { doc, SCHEMA } from "./helpers";

const KINDS = [
  "text",
  "integer",
  "decimal",
  "boolean",
  "date",
  "datetime",
  "url",
  "json",
  "longtext",
  "text",
];
const bigDoc = (prefix: string, types: number, fields: number) =>
  doc(
    Array.from({ length: types }, (_, t) => ({
      name: `${prefix}_${t}`,
      slug: `${prefix}_${t}`,
      fields: Array.from({ length: fields }, (_, f) => ({
        id: f + 1,
        name: `field_${f}`,
        type: KINDS[f % KINDS.length]!,
        primary: f === 0,
      })),
    })),
  );

/** The app over HTTP on loopback, with its own database handle (and busy timeout). */
async function serve(t: TestApp, busyTimeoutMs?: number) {
  const db: Db =
    busyTimeoutMs === undefined
      ? t.deps.db
      : await openDatabase(t.dbUrl, undefined, { busyTimeoutMs });
  const app =
    busyTimeoutMs === undefined
      ? t.app
      : await createApp({ config: t.deps.config, db, cache: createCache("memory", {}) });
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
  const base = `http://127.0.0.1:${server.port}`;
  // answers are numbered in the order they arrive: event order, not time, says what overlapped
  let answered = 0;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(base + path, {
      method,
      headers: { authorization: `Token ${t.admin}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return {
      status: res.status,
      body: text ? JSON.parse(text) : null,
      headers: res.headers,
      seq: ++answered,
    };
  };
  return {
    call,
    async close() {
      server.stop(true);
      if (db !== t.deps.db) await db.close();
    },
  };
}

let t: TestApp;
let siteId: number;
beforeAll(async () => {
  t = await makeTestApp();
  const site = await t.json("POST", "/api/dcim/sites/", {
    body: { name: "Probe", slug: "probe", status: "active" },
  });
  expect(site.status).toBe(201);
  siteId = site.body.id;
  expect(
    (
      await t.json("POST", `${SCHEMA}/apply/`, {
        body: {
          schema: doc([
            {
              name: "probe",
              slug: "probe",
              fields: [{ id: 1, name: "label", type: "text", primary: true }],
            },
          ]),
        },
      })
    ).status,
  ).toBe(200);
  expect(
    (
      await t.json("POST", "/api/plugins/custom-objects/probe/", {
        body: Array.from({ length: 20 }, (_, i) => ({ label: `p${i}` })),
      })
    ).status,
  ).toBe(201);
});
afterAll(() => t.close());

describe("a large schema apply", () => {
  test("GETs are answered while it runs (the POST waiting), then it lands whole", async () => {
    const http = await serve(t);
    try {
      const started = performance.now();
      // 6,000 fields: long enough for many GETs even on a quiet machine, where 3,000 took ~450 ms
      // and let 9–48 GETs through (one fresh clone's 9 fell under the bound). A GET needs a few
      // turns of the event loop, which the apply gives back every 8 ms (src/turns.ts).
      const apply = http.call("POST", `${SCHEMA}/apply/`, { schema: bigDoc("during", 60, 100) });
      let applied: Awaited<typeof apply> | null = null;
      void apply.then((r) => (applied = r));
      const gets: Array<{ status: number; seq: number }> = [];
      // bounded: at most 2000 GETs or 60 s
      for (let i = 0; !applied && i < 2000 && performance.now() - started < 60_000; i++) {
        const path = [
          `/api/dcim/sites/${siteId}/`,
          "/api/plugins/custom-objects/probe/?limit=5",
          "/api/status/",
        ][i % 3]!;
        gets.push(await http.call("GET", path));
      }
      const done = await apply;
      expect(done.status).toBe(200);
      expect(done.body.diffs.filter((d: any) => d.is_new)).toHaveLength(60);
      const during = gets.filter((g) => g.seq < done.seq);
      // the server kept answering while the apply ran: many GETs answered, one after another,
      // before the apply's own answer, all 200 (how quick each was is measured in
      // bench/schema-stall.ts, not asserted here)
      if (process.env.LONG_WRITE_LOG) console.log("GETs during the apply:", during.length);
      expect(during.length).toBeGreaterThanOrEqual(10);
      expect(during.every((g) => g.status === 200)).toBe(true);
      // and the apply's commit is visible to the main connection right after
      const types = await http.call(
        "GET",
        "/api/plugins/custom-objects/custom-object-types/?slug=during_9",
      );
      expect(types.body.count).toBe(1);
      expect(types.body.results[0].fields).toHaveLength(100);
      const rows = await http.call("POST", "/api/plugins/custom-objects/during_9/", {
        field_0: "x",
        field_1: 3,
      });
      expect(rows.status).toBe(201);
    } finally {
      await http.close();
    }
  });

  test("a write meeting its transaction waits at most the busy timeout, then 503 database_busy with Retry-After", async () => {
    const http = await serve(t, 40);
    try {
      const apply = http.call("POST", `${SCHEMA}/apply/`, { schema: bigDoc("busy", 10, 100) });
      let applied = false;
      void apply.then(() => (applied = true));
      const writes: Array<Awaited<ReturnType<typeof http.call>>> = [];
      for (let i = 0; !applied && i < 200; i++) {
        writes.push(
          await http.call("POST", "/api/dcim/sites/", {
            name: `During ${i}`,
            slug: `during-${i}`,
            status: "active",
          }),
        );
        if (writes.at(-1)!.status === 503) break;
      }
      const refused = writes.find((w) => w.status === 503);
      expect(refused).toBeDefined();
      expect(refused!.body).toEqual({
        detail: expect.stringContaining("busy"),
        error: "database_busy",
      });
      expect(refused!.headers.get("retry-after")).toBe("1");
      expect(writes.every((w) => w.status === 201 || w.status === 503)).toBe(true);
      const done = await apply;
      expect(done.status).toBe(200);
      // bounded, not queued behind the transaction: the refusal came before the apply's answer
      expect(refused!.seq).toBeLessThan(done.seq);
      // retried after the apply: it goes through
      expect(
        (
          await http.call("POST", "/api/dcim/sites/", {
            name: "After",
            slug: "after-apply",
            status: "active",
          })
        ).status,
      ).toBe(201);
    } finally {
      await http.close();
    }
  });
});

describe("another connection holding the write lock (a long write of another process)", () => {
  test("writes answer 503 database_busy after the bound while the lock is held; reads go on; then writes pass", async () => {
    const http = await serve(t, 300);
    const other = new Database(t.dbUrl.replace(/^file:/, ""));
    try {
      other.exec("BEGIN IMMEDIATE");
      other.exec(
        "INSERT INTO tags (name, slug, color, description, created, last_updated) VALUES ('held', 'held', 'ffffff', '', 'x', 'x')",
      );
      // the lock is held until the ROLLBACK below, so an answer now is the bound giving up
      const refused = await http.call("POST", "/api/dcim/sites/", {
        name: "Blocked",
        slug: "blocked",
        status: "active",
      });
      expect(refused.status).toBe(503);
      expect(refused.body.error).toBe("database_busy");
      expect(refused.headers.get("retry-after")).toBe("1");
      // an apply waits the same bound for the lock, and says so the same way
      const apply = await http.call("POST", `${SCHEMA}/apply/`, { schema: bigDoc("held", 1, 2) });
      expect(apply.status).toBe(503);
      expect(apply.body.error).toBe("database_busy");
      // reads are not refused
      const read = await http.call("GET", `/api/dcim/sites/${siteId}/`);
      expect(read.status).toBe(200);
      other.exec("ROLLBACK");
      expect(
        (
          await http.call("POST", "/api/dcim/sites/", {
            name: "Unblocked",
            slug: "unblocked",
            status: "active",
          })
        ).status,
      ).toBe(201);
      expect(
        (await http.call("POST", `${SCHEMA}/apply/`, { schema: bigDoc("held", 1, 2) })).status,
      ).toBe(200);
    } finally {
      if (other.inTransaction) other.exec("ROLLBACK");
      other.close();
      await http.close();
    }
  });

  test("a write waiting for the lock waits without holding the event loop, and passes once it is released", async () => {
    // a bound far beyond the test: the write can only end by the lock's release
    const http = await serve(t, 60_000);
    const other = new Database(t.dbUrl.replace(/^file:/, ""));
    try {
      other.exec("BEGIN IMMEDIATE");
      other.exec(
        "INSERT INTO tags (name, slug, color, description, created, last_updated) VALUES ('held2', 'held2', 'ffffff', '', 'x', 'x')",
      );
      const waiting = http.call("POST", "/api/dcim/sites/", {
        name: "Waited",
        slug: "waited",
        status: "active",
      });
      let settled = false;
      void waiting.finally(() => (settled = true));
      // while the write retries, the same server answers reads: a wait that held the event loop
      // (SQLite's own busy handler) would answer none of them before the write
      for (let i = 0; i < 5; i++) {
        expect((await http.call("GET", `/api/dcim/sites/${siteId}/`)).status).toBe(200);
      }
      expect(settled).toBe(false);
      other.exec("ROLLBACK");
      const passed = await waiting;
      expect(passed.status).toBe(201);
    } finally {
      if (other.inTransaction) other.exec("ROLLBACK");
      other.close();
      await http.close();
    }
  });
});
