/**
 * Deep pages of id-ordered lists seek from anchors (`core/rest/page-anchors.ts`, decision 0055):
 * the same rows as LIMIT/OFFSET over the database as it is now — after other connections insert
 * and delete, with filters, with permission constraints, in both directions — while the page
 * query skips fewer than STEP rows.
 */
import { createClient, type Client } from "@libsql/client";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { keptPage, keptRecords, STEP } from "../../src/core/rest/page-anchors";
import { flushSearchIndexesNow } from "../../src/plugins/custom-objects/search/flush";
import { walChangeStamp } from "../../src/db/change-stamp";
import { addField, CO, makeCot } from "../custom-objects/fixtures";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";
import { createApp, servicesOf } from "../../src/app";
import { loadConfig } from "../../src/config";
import { openDatabase } from "../../src/db/local";
import { createCache } from "../../src/services/cache";

let t: TestApp;
let other: Client; // another connection to the same file, as another process would be
let table: string;
const ROWS = 5 * STEP + 300;

/** The truth: the page as plain SQL over the table now. */
async function truth(
  where: string,
  dir: "ASC" | "DESC",
  limit: number,
  offset: number,
): Promise<number[]> {
  const r = await other.execute(
    `SELECT id FROM ${table} WHERE ${where} ORDER BY id ${dir} LIMIT ${limit} OFFSET ${offset}`,
  );
  return r.rows.map((x) => Number(x.id));
}

async function page(query: string, token?: string): Promise<{ count: number; ids: number[] }> {
  const r = await t.json("GET", `${CO}/anchored/?${query}`, token ? { token } : {});
  expect(r.status).toBe(200);
  return { count: r.body.count, ids: r.body.results.map((x: { id: number }) => x.id) };
}

/**
 * Rows written here by plain SQL are pending for the full-text index, and the app indexes them
 * when its flusher runs — a commit, at a moment of its own. Tests that count what one quiet
 * request sends index them first.
 */
const settled = () => flushSearchIndexesNow(servicesOf(t.app));

/** The SQL statements (text and arguments) a piece of work sends to the database client. */
async function traced(
  fn: () => Promise<unknown>,
): Promise<Array<{ sql: string; args: unknown[] }>> {
  const c = t.deps.db.client as any;
  const orig = { execute: c.execute, batch: c.batch };
  const seen: Array<{ sql: string; args: unknown[] }> = [];
  const note = (stmt: any, args?: any) =>
    seen.push(
      typeof stmt === "string"
        ? { sql: stmt, args: args ?? [] }
        : { sql: stmt.sql, args: stmt.args ?? [] },
    );
  c.execute = (stmt: any, args?: any) => {
    note(stmt, args);
    return orig.execute.call(c, stmt, args);
  };
  // A request's reads travel as one batch (decision 0085).
  c.batch = (stmts: any[], mode?: any) => {
    for (const s of stmts) note(s);
    return orig.batch.call(c, stmts, mode);
  };
  try {
    await fn();
  } finally {
    Object.assign(c, orig);
  }
  return seen;
}

beforeAll(async () => {
  // No read pool: every statement goes through the one client the tracer watches.
  t = await makeTestApp({ DATABASE_READ_POOL: "0" });
  const cot = await makeCot(t, "anchored");
  await addField(t, cot.id, { name: "name", type: "text", primary: true });
  await addField(t, cot.id, { name: "n", type: "integer" });
  table = `co_${cot.id}`;
  other = createClient({ url: t.dbUrl });
  await other.execute(
    `INSERT INTO ${table} (created, last_updated, name, n)
     WITH RECURSIVE x(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM x WHERE i < ${ROWS})
     SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'row-' || i, i % 7 FROM x`,
  );
});
afterAll(async () => {
  other.close();
  await t.close();
});

describe("deep pages", () => {
  test("match LIMIT/OFFSET at every kind of offset, ascending and descending", async () => {
    for (const offset of [
      0,
      STEP - 1,
      STEP,
      STEP + 1,
      2 * STEP - 3,
      3 * STEP + 17,
      ROWS - 50,
      ROWS - 10,
      ROWS,
      ROWS + 500,
    ]) {
      for (const [ordering, dir] of [
        ["id", "ASC"],
        ["-id", "DESC"],
      ] as const) {
        const got = await page(`limit=50&offset=${offset}&ordering=${ordering}`);
        expect(got.count).toBe(ROWS);
        expect(got.ids).toEqual(await truth("1", dir, 50, offset));
      }
    }
    // The default ordering of a custom object type is by id.
    expect((await page(`limit=20&offset=${4 * STEP + 5}`)).ids).toEqual(
      await truth("1", "ASC", 20, 4 * STEP + 5),
    );
  });

  test("concurrent deep pages right after a change share one build of the anchors and are all right", async () => {
    for (let round = 0; round < 3; round++) {
      await settled(); // no flush of the search index commits in the middle of the round
      // a commit: every entry must be rebuilt, by whichever requests come first — all at once here
      await other.execute(
        `UPDATE ${table} SET name = name || '.' WHERE id = (SELECT min(id) FROM ${table})`,
      );
      const offsets = Array.from(
        { length: 24 },
        (_, i) => STEP + ((i * 997 + round * 131) % (ROWS - STEP - 60)),
      );
      let pages: Awaited<ReturnType<typeof page>>[] = [];
      const sent = await traced(
        async () => (pages = await Promise.all(offsets.map((o) => page(`limit=20&offset=${o}`)))),
      );
      for (const [i, o] of offsets.entries())
        expect(pages[i]!.ids).toEqual(await truth("1", "ASC", 20, o));
      // waiting requests reuse the build under way (a few extensions), not one build each
      expect(sent.filter((x) => /WITH RECURSIVE anchor/.test(x.sql)).length).toBeLessThanOrEqual(4);
    }
  });

  test("a deep page seeks from an anchor: its query skips fewer than STEP rows", async () => {
    await settled();
    await page(`limit=50&offset=${4 * STEP + 100}`); // builds the anchors
    const sent = await traced(() => page(`limit=50&offset=${4 * STEP + 200}`));
    const pageQuery = sent.find((s) => /order by .*"id" ASC LIMIT \? OFFSET \?/i.test(s.sql));
    expect(pageQuery).toBeDefined();
    expect(pageQuery!.sql).toContain(">=");
    expect(Number(pageQuery!.args.at(-1))).toBeLessThan(STEP);
    expect(Number(pageQuery!.args.at(-1))).toBe(200);
  });

  test("writes by another connection are seen at once: deletes before the page, inserts after", async () => {
    const deep = `limit=50&offset=${3 * STEP + 10}`;
    expect((await page(deep)).ids).toEqual(await truth("1", "ASC", 50, 3 * STEP + 10));
    // Deleting rows near the start moves every later row two places up.
    await other.execute(`DELETE FROM ${table} WHERE id IN (3, ${STEP + 5})`);
    const after = await page(deep);
    expect(after.count).toBe(ROWS - 2);
    expect(after.ids).toEqual(await truth("1", "ASC", 50, 3 * STEP + 10));
    await other.execute(
      `INSERT INTO ${table} (created, last_updated, name, n) VALUES ('2026-01-02T00:00:00Z', '2026-01-02T00:00:00Z', 'late', 1)`,
    );
    expect((await page(`limit=50&offset=${4 * STEP + 10}&ordering=-id`)).ids).toEqual(
      await truth("1", "DESC", 50, 4 * STEP + 10),
    );
    // And through the API: a delete there is seen by the next deep page.
    const victim = (await truth("1", "ASC", 1, 10))[0]!;
    expect((await t.req("DELETE", `${CO}/anchored/${victim}/`)).status).toBe(204);
    expect((await page(deep)).ids).toEqual(await truth("1", "ASC", 50, 3 * STEP + 10));
  });

  test("filters and permission constraints get anchors of their own", async () => {
    for (const offset of [STEP, STEP + 7, 2 * STEP - 1]) {
      expect((await page(`n=3&limit=10&offset=${offset - STEP + 1}`)).ids).toEqual(
        await truth("n = 3", "ASC", 10, offset - STEP + 1),
      );
      expect((await page(`n__gte=2&limit=10&offset=${offset}`)).ids).toEqual(
        await truth("n >= 2", "ASC", 10, offset),
      );
      expect((await page(`n__gte=2&limit=10&offset=${offset}&ordering=-id`)).ids).toEqual(
        await truth("n >= 2", "DESC", 10, offset),
      );
    }
    // a search (an OR of its terms and of the index's two sources) as the WHERE of a deep page
    expect((await page(`q=row-1&limit=10&offset=${STEP + 2}`)).ids).toEqual(
      await truth("name LIKE '%row-1%'", "ASC", 10, STEP + 2),
    );
    expect((await page(`q=row-1&limit=10&offset=${STEP + 2}&ordering=-id`)).ids).toEqual(
      await truth("name LIKE '%row-1%'", "DESC", 10, STEP + 2),
    );
    const u = await createUser(t.deps.db.orm, { username: "only-some" });
    const grant = await t.json("POST", "/api/users/permissions/", {
      body: {
        name: "only-some",
        actions: ["view"],
        object_types: ["custom_objects.anchored"],
        users: [u.id],
        constraints: { n__lt: 4 },
      },
    });
    expect(grant.status).toBe(201);
    const token = (await issueToken(t.deps.db.orm, { username: "only-some" })).key;
    // The superuser's anchors for the same query must not serve the constrained user.
    await page(`limit=25&offset=${2 * STEP + 3}`);
    const mine = await page(`limit=25&offset=${2 * STEP + 3}`, token);
    expect(mine.ids).toEqual(await truth("n < 4", "ASC", 25, 2 * STEP + 3));
    expect(mine.count).toBe(
      Number((await other.execute(`SELECT count(*) AS c FROM ${table} WHERE n < 4`)).rows[0]!.c),
    );
  });
});

describe("counts", () => {
  test("a list query counts once per state of the database; any commit counts again", async () => {
    await settled();
    const q = "n__gte=5&limit=5";
    const first = await page(q);
    expect(first.count).toBe(
      Number((await other.execute(`SELECT count(*) AS c FROM ${table} WHERE n >= 5`)).rows[0]!.c),
    );
    const again = await traced(() => page(q));
    expect(again.some((s) => /count\(\*\)/i.test(s.sql))).toBe(false);
    await other.execute(
      `UPDATE ${table} SET n = 6 WHERE id = (SELECT min(id) FROM ${table} WHERE n < 5)`,
    );
    const after = await traced(async () => expect((await page(q)).count).toBe(first.count + 1));
    expect(after.some((s) => /count\(\*\)/i.test(s.sql))).toBe(true);
    // Another filter is another count.
    expect((await page("n__gte=6&limit=5")).count).toBe(
      Number((await other.execute(`SELECT count(*) AS c FROM ${table} WHERE n >= 6`)).rows[0]!.c),
    );
  });
});

describe("a search's page", () => {
  /** The truth for `q=row-12`: names holding it, newest first (LIKE folds case as `q` does). */
  const truthOfSearch = async (limit: number) => ({
    count: Number(
      (await other.execute(`SELECT count(*) AS c FROM ${table} WHERE name LIKE '%row-12%'`))
        .rows[0]!.c,
    ),
    ids: (
      await other.execute(
        `SELECT id FROM ${table} WHERE name LIKE '%row-12%' ORDER BY id DESC LIMIT ${limit}`,
      )
    ).rows.map((x) => Number(x.id)),
  });

  test("is read from the index once per state of the database; any commit reads it again", async () => {
    await settled();
    const q = "q=row-12&ordering=-id&limit=5";
    expect(await page(q)).toEqual(await truthOfSearch(5));
    // Asked again with nothing committed: neither the count nor the page touches the index.
    let answer!: { count: number; ids: number[] };
    const again = await traced(async () => (answer = await page(q)));
    expect(answer).toEqual(await truthOfSearch(5));
    expect(again.some((s) => /\bMATCH\b/.test(s.sql))).toBe(false);
    // ...nor are the page's rows read again: the request sends nothing (decision 0116)
    expect(again).toEqual([]);
    // A row written by another connection, pending for the index: the next page has it.
    await other.execute(
      `INSERT INTO ${table} (created, last_updated, name, n) VALUES ('2026-01-02T00:00:00Z', '2026-01-02T00:00:00Z', 'ROW-12-late', 1)`,
    );
    const after = await traced(async () => (answer = await page(q)));
    expect(answer).toEqual(await truthOfSearch(5));
    expect(answer.ids[0]).toBe(
      Number((await other.execute(`SELECT max(id) AS m FROM ${table}`)).rows[0]!.m),
    );
    expect(after.some((s) => /\bMATCH\b/.test(s.sql))).toBe(true);
    // Another page of the same search is another page.
    expect((await page("q=row-12&ordering=-id&limit=5&offset=5")).ids).toEqual(
      (await truthOfSearch(10)).ids.slice(5),
    );
    await other.execute(`DELETE FROM ${table} WHERE name = 'ROW-12-late'`);
    await settled();
  });

  test("its records are read again after any commit, and kept for one base URL", async () => {
    await settled();
    const q = "q=row-12&ordering=-id&limit=5";
    const records = async (base = BASE) => {
      const r = await t.app.request(`${base}${CO}/anchored/?${q}`, {
        headers: { authorization: `Token ${t.admin}` },
      });
      expect(r.status).toBe(200);
      return ((await r.json()) as { results: { id: number; url: string; name: string }[] }).results;
    };
    const first = await records();
    expect(await records()).toEqual(first); // kept
    // Another connection renames a row of the page (still a match): the next answer has it.
    const id = first[1]!.id;
    await other.execute(`UPDATE ${table} SET name = 'ROW-12-renamed' WHERE id = ${id}`);
    const after = await records();
    expect(after.find((r) => r.id === id)!.name).toBe("ROW-12-renamed");
    // Records kept for one base URL are not served under another (their urls name it).
    const elsewhere = await records("http://elsewhere.test");
    expect(elsewhere.map((r) => r.id)).toEqual(after.map((r) => r.id));
    expect(elsewhere.every((r) => r.url.startsWith("http://elsewhere.test/"))).toBe(true);
    expect((await records()).every((r) => r.url.startsWith(`${BASE}/`))).toBe(true);
    await other.execute(`UPDATE ${table} SET name = 'row-12-' || id WHERE id = ${id}`);
    await settled();
  });
});

describe("a kept page's records", () => {
  test("are bounded: pages used least recently give theirs up first", async () => {
    await settled();
    const services = servicesOf(t.app);
    const loads: string[] = [];
    const records = (key: string) => async () => {
      loads.push(key);
      return Array.from({ length: 600 }, (_, i) => ({ id: i, key }));
    };
    const kept = async (key: string) => {
      const page = await keptPage(services, `bound-test\u0000${key}`, async () => [{ id: 1 }]);
      return keptRecords(services, page, BASE, records(key));
    };
    for (const key of ["a", "b", "c"]) await kept(key);
    await kept("a"); // kept: "a" is now the most recently used
    expect(loads).toEqual(["a", "b", "c"]);
    expect(Object.isFrozen((await kept("a"))[0])).toBe(true);
    await kept("d"); // 2,400 records: "b", the least recently used, gives its up
    await kept("c");
    await kept("a");
    await kept("b");
    expect(loads).toEqual(["a", "b", "c", "d", "b"]);
  });

  test("are bounded in bytes too: pages of long texts give theirs up, a huge one is not kept", async () => {
    await settled();
    const services = servicesOf(t.app);
    const loads: string[] = [];
    // 50 records of 70 KB each: 3.5 MB a page, within a default response budget
    const records =
      (key: string, each = 70_000) =>
      async () => {
        loads.push(key);
        return Array.from({ length: 50 }, (_, i) => ({
          id: i,
          key,
          text: `${key}${i}`.padEnd(each),
        }));
      };
    const kept = async (key: string, each?: number) => {
      const page = await keptPage(services, `bytes-test\u0000${key}`, async () => [{ id: 1 }]);
      return keptRecords(services, page, BASE, records(key, each));
    };
    for (const key of ["a", "b", "c", "d", "e"]) await kept(key); // 17.5 MB asked to be kept
    await kept("e");
    await kept("a"); // the least recently used gave theirs up
    expect(loads).toEqual(["a", "b", "c", "d", "e", "a"]);
    await kept("huge", 400_000); // 20 MB alone: never kept
    await kept("huge", 400_000);
    expect(loads.filter((k) => k === "huge")).toEqual(["huge", "huge"]);
  });
});

describe("custom object type freshness", () => {
  test("the type's version is looked up only when something committed since the last look", async () => {
    await settled();
    await page("limit=1");
    const quiet = await traced(() => page("limit=1"));
    expect(quiet.some((s) => /shape_version/.test(s.sql))).toBe(false);
    // Another process (a second app on the same file) adds a field: the next request sees it.
    const config = loadConfig({ LOG_LEVEL: "silent", DATABASE_URL: t.dbUrl }, "bun");
    const db2 = await openDatabase(config.database.url);
    try {
      const app2 = await createApp({ config, db: db2, cache: createCache("memory", {}) });
      const cotId = Number(table.slice(3));
      const res = await app2.request(`${BASE}${CO}/custom-object-type-fields/`, {
        method: "POST",
        headers: { authorization: `Token ${t.admin}`, "content-type": "application/json" },
        body: JSON.stringify({ custom_object_type: cotId, name: "extra", type: "text" }),
      });
      expect(res.status).toBe(201);
    } finally {
      await db2.close();
    }
    const after = await traced(async () => {
      const r = await t.json("GET", `${CO}/anchored/?limit=1`);
      expect(r.body.results[0]).toHaveProperty("extra");
    });
    expect(after.some((s) => /shape_version/.test(s.sql))).toBe(true);
  });
});

describe("the change stamp", () => {
  test("changes with each commit from any connection, not with reads", async () => {
    const stamp = walChangeStamp(t.dbUrl)!;
    const s0 = stamp();
    expect(s0).toBeString();
    await other.execute(`SELECT count(*) FROM ${table}`);
    expect(stamp()).toBe(s0);
    await other.execute(
      `UPDATE ${table} SET name = name || '!' WHERE id = (SELECT max(id) FROM ${table})`,
    );
    const s1 = stamp();
    expect(s1).not.toBe(s0);
    await t.req("POST", `${CO}/anchored/`, { body: { name: "via-api", n: 2 } });
    expect(stamp()).not.toBe(s1);
  });

  test("is absent where there is no WAL index", () => {
    expect(walChangeStamp(":memory:")).toBeNull();
    expect(walChangeStamp("libsql://example.invalid")).toBeNull();
    expect(walChangeStamp("file:/nonexistent-dir/x.db")!()).toBeNull();
  });
});
