/**
 * A bulk create of thousands of sites on a local file gives the event loop turns while its handler
 * stages the batch, not only while the batch runs (decision 0186), and a write of another client
 * meanwhile waits for the bulk's one atomic write instead of answering 503 (0186). The clock
 * `yieldWhenDue` measures stretches on is injected, and the busy timeout is short: these tests count
 * statements and answers, never milliseconds.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app";
import type { Queries } from "../../src/db/client";
import type { LibsqlDatabase } from "../../src/db/libsql";
import { LONG_BATCH, openDatabase } from "../../src/db/local";
import { WriteBatch } from "../../src/core/rest/write-batch";
import { createCache } from "../../src/services/cache";
import { useTurnClock } from "../../src/turns";
import { aTurn, askLivez, turnsAtEveryOtherCheck } from "../helpers/livez-probe";
import { BASE, makeTestApp, type TestApp } from "../helpers/app";

let t: TestApp;
afterAll(() => t.close());
afterEach(() => useTurnClock(null));

/** Statements staged so far by any request, counted through `WriteBatch.add` (which still runs). */
let staged = 0;
const add = WriteBatch.prototype.add;
beforeAll(async () => {
  t = await makeTestApp();
  WriteBatch.prototype.add = function (this: WriteBatch, ...a: Parameters<typeof add>) {
    staged++;
    return add.apply(this, a);
  } as typeof add;
});
afterAll(() => {
  WriteBatch.prototype.add = add;
});

const sites = (n: number, prefix: string) =>
  Array.from({ length: n }, (_, i) => ({ name: `${prefix} ${i}`, slug: `${prefix}-${i}` }));

describe("a bulk create's staging on a local file", () => {
  const SITES = 5_000;
  /** The batch itself answers once per eight statements (0185): its staging at least as often. */
  const MOST_BETWEEN_ANSWERS = 8;

  test("other requests are answered while its statements are staged, not once at the end", async () => {
    turnsAtEveryOtherCheck();
    // the statements staged when each `/livez` answer arrived: the longest run between two
    // answers is the longest stretch the handler's staging held the event loop
    const marks = [staged];
    const stop = askLivez(t, () => marks.push(staged));
    const res = await t.req("POST", "/api/dcim/sites/", { body: sites(SITES, "staged") });
    await stop();
    marks.push(staged);
    expect(res.status).toBe(201);
    expect(((await res.json()) as unknown[]).length).toBe(SITES);
    const total = marks.at(-1)! - marks[0]!;
    expect(total).toBeGreaterThan(1_000);
    const longest = Math.max(...marks.slice(1).map((m, i) => m - marks[i]!));
    expect(longest).toBeLessThanOrEqual(MOST_BETWEEN_ANSWERS);
  });
});

describe("another client's write during a bulk create's long batch", () => {
  /** Past what a 5 s busy timeout outlasted (0185); within MAX_BODY_BYTES (~600 KB). */
  const SITES = 15_000;
  /** Another client's bulk create meanwhile: a long batch too (~170 statements). */
  const SECOND = 500;
  /** A busy timeout the long batch outlasts many times over: a bound write would answer 503. */
  const BUSY_MS = 50;
  let db: LibsqlDatabase;
  let app: Awaited<ReturnType<typeof createApp>>;
  beforeAll(async () => {
    db = await openDatabase(t.dbUrl, undefined, { busyTimeoutMs: BUSY_MS });
    app = await createApp({ config: t.deps.config, db, cache: createCache("memory", {}) });
  });
  afterAll(() => db.close());

  const call = (token: string, body: unknown) =>
    app.request(`${BASE}/api/dcim/sites/`, {
      method: "POST",
      headers: { authorization: `Token ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });

  test("waits for its commit and is written (201, not 503): a create, a bulk create", async () => {
    const other = await t.user("other-writer", [[["add", "view"], "dcim.site"]]);
    // which write batches are under way, through the interface (each still runs)
    const write = db.write;
    let longOpen = 0;
    const met = { short: 0, long: 0 };
    db.write = (async (queries: Queries) => {
      const long = queries.length >= LONG_BATCH;
      if (longOpen > 0) met[long ? "long" : "short"]++;
      if (long) longOpen++;
      try {
        return await write(queries);
      } finally {
        if (long) longOpen--;
      }
    }) as unknown as typeof write;
    turnsAtEveryOtherCheck();
    try {
      const bulk = call(t.admin, sites(SITES, "huge"));
      while (longOpen === 0) await aTurn(); // the bulk's batch holds the write lock
      const [single, second] = await Promise.all([
        call(other, { name: "meanwhile", slug: "meanwhile" }),
        call(other, sites(SECOND, "second")), // a long batch of its own
      ]);
      // each of their writes met a long batch under way
      expect(met).toEqual({ short: expect.any(Number), long: 1 });
      expect(met.short).toBeGreaterThanOrEqual(1);
      const bulkRes = await bulk;
      expect(bulkRes.status).toBe(201);
      expect(single.status).toBe(201);
      expect(((await single.json()) as { slug: string }).slug).toBe("meanwhile");
      expect(second.status).toBe(201);
      expect(((await second.json()) as unknown[]).length).toBe(SECOND);
    } finally {
      db.write = write;
    }
    const listed = await t.json("GET", "/api/dcim/sites/?name__isw=huge&limit=1");
    expect(listed.body.count).toBe(SITES);
    const lone = await t.json("GET", "/api/dcim/sites/?slug=meanwhile");
    expect(lone.body.count).toBe(1);
    const theirs = await t.json("GET", "/api/dcim/sites/?name__isw=second&limit=1");
    expect(theirs.body.count).toBe(SECOND);
  });
});
