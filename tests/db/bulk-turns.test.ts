/**
 * A bulk write of thousands of objects on a local file must not hold the event loop for the whole
 * request: other requests are answered while it runs (decision 0184). A bulk delete of ids that do
 * not exist must cost no more than the check that they do not (no read per id), and its answer
 * names no database the server is not on. The clock `yieldWhenDue` measures stretches on is
 * injected: these tests count answers and statements, never milliseconds.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { guardChanged, isWriteConflict, type Queries } from "../../src/db/client";
import { BUILD_CHUNK, LONG_BATCH } from "../../src/db/local";
import { useTurnClock } from "../../src/turns";
import { askLivez, turnsAtEveryOtherCheck } from "../helpers/livez-probe";
import { makeTestApp, type TestApp } from "../helpers/app";
import { countStatements } from "../helpers/statements";
import { addField, makeCot } from "../custom-objects/fixtures";

let t: TestApp;
let probeId: number;
const CO = "/api/plugins/custom-objects/widget/";

beforeAll(async () => {
  t = await makeTestApp();
  const site = await t.json("POST", "/api/dcim/sites/", { body: { name: "probe", slug: "probe" } });
  probeId = site.body.id;
  const cot = await makeCot(t, "widget", "widget");
  await addField(t, cot.id, { name: "name", type: "text", primary: true, required: true });
  await addField(t, cot.id, { name: "site", type: "object", related_object_type: "dcim.site" });
});
afterAll(() => t.close());
afterEach(() => useTurnClock(null));

/**
 * Runs `write` while another client asks `/livez` again and again (`askLivez`), turns given at
 * every other check; answers the write's response and how many of the other requests were
 * answered while it ran.
 */
async function whileWriting(write: () => Promise<Response>) {
  turnsAtEveryOtherCheck();
  let answered = 0;
  const stop = askLivez(t, () => answered++);
  try {
    const res = await write();
    return { res, answered };
  } finally {
    await stop();
  }
}

const N = 1_000;
/** An answer every other item: the write gives the loop turns all along, not once in a while. */
const BOUND = N / 2;

describe("a long bulk write on a local file", () => {
  test("other requests are answered while sites are bulk created and bulk deleted", async () => {
    const body = Array.from({ length: N }, (_, i) => ({ name: `bulk ${i}`, slug: `bulk-${i}` }));
    const created = await whileWriting(() => t.req("POST", "/api/dcim/sites/", { body }));
    expect(created.res.status).toBe(201);
    expect(created.answered).toBeGreaterThanOrEqual(BOUND);
    const ids = ((await created.res.json()) as Array<{ id: number }>).map((s) => ({ id: s.id }));
    const deleted = await whileWriting(() => t.req("DELETE", "/api/dcim/sites/", { body: ids }));
    expect(deleted.res.status).toBe(204);
    expect(deleted.answered).toBeGreaterThanOrEqual(BOUND);
  });

  test("other requests are answered while custom objects are bulk created and deleted", async () => {
    const body = Array.from({ length: N }, (_, i) => ({ name: `w ${i}`, site: probeId }));
    const created = await whileWriting(() => t.req("POST", CO, { body }));
    expect(created.res.status).toBe(201);
    expect(created.answered).toBeGreaterThanOrEqual(BOUND);
    const ids = ((await created.res.json()) as Array<{ id: number }>).map((s) => ({ id: s.id }));
    const deleted = await whileWriting(() => t.req("DELETE", CO, { body: ids }));
    expect(deleted.res.status).toBe(204);
    expect(deleted.answered).toBeGreaterThanOrEqual(BOUND);
  });
});

/**
 * Counts the statements of the `write` batches that `fn` sends and the `/livez` answers that
 * arrive while one of them is under way: the batch itself must give the loop turns, not only the
 * per-item loops before it. The count goes through the interface (each batch still runs).
 */
async function answeredDuringBatches(fn: () => Promise<Response>) {
  const db = t.deps.db;
  const write = db.write;
  let open = 0;
  let statements = 0;
  let during = 0;
  db.write = (async (queries: Parameters<typeof write>[0]) => {
    open++;
    statements += queries.length;
    try {
      return await write(queries);
    } finally {
      open--;
    }
  }) as unknown as typeof write;
  const probe = t.req;
  t.req = (async (...a: Parameters<typeof probe>) => {
    const r = await probe(...a);
    if (a[1] === "/livez" && open > 0) during++;
    return r;
  }) as typeof probe;
  try {
    const { res } = await whileWriting(fn);
    return { res, statements, during };
  } finally {
    db.write = write;
    t.req = probe;
  }
}

describe("a bulk create's one atomic batch on a local file", () => {
  /** Large enough that its batch held the loop for the whole of it (decision 0185). */
  const SITES = 4_000;
  test("other requests are answered while its batch is written", async () => {
    const body = Array.from({ length: SITES }, (_, i) => ({ name: `big ${i}`, slug: `big-${i}` }));
    const { res, statements, during } = await answeredDuringBatches(() =>
      t.req("POST", "/api/dcim/sites/", { body }),
    );
    expect(res.status).toBe(201);
    expect(((await res.json()) as unknown[]).length).toBe(SITES);
    expect(statements).toBeGreaterThan(1_000);
    // the batch gives turns all along: an answer for (about) every other few statements
    expect(during).toBeGreaterThanOrEqual(statements / 8);
    const listed = await t.json("GET", "/api/dcim/sites/?name__isw=big&limit=1");
    expect(listed.body.count).toBe(SITES);
  });
});

describe("a long write batch stays one atomic write with its guards", () => {
  const table = "scratch_long_batch";
  const inserts = (n: number) =>
    Array.from({ length: n }, (_, i) =>
      t.deps.db.orm.run(sql.raw(`INSERT INTO ${table} VALUES (${i})`)),
    );
  const rows = async () =>
    (await t.deps.db.execute({ sql: `SELECT count(*) AS n FROM ${table}`, args: [] })).rows[0]!.n;
  beforeAll(() => t.deps.db.execute({ sql: `CREATE TABLE ${table} (n INTEGER)`, args: [] }));

  /** Statements before an UPDATE that ends a chunk Drizzle builds: its guard opens the next. */
  const ACROSS = Math.ceil(LONG_BATCH / BUILD_CHUNK + 1) * BUILD_CHUNK - 1;

  test("a guard that fails after many statements rolls all of them back", async () => {
    const { orm } = t.deps.db;
    const missed = orm.run(sql.raw(`UPDATE ${table} SET n = n WHERE n < 0`));
    const failed = await t.deps.db
      .write([...inserts(ACROSS), missed, guardChanged(orm)] as unknown as Queries)
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(isWriteConflict(failed)).toBe(true);
    expect(await rows()).toBe(0);
  });

  test("other writes meanwhile wait for it and are written too", async () => {
    turnsAtEveryOtherCheck(); // the long batch gives turns at once
    const { orm } = t.deps.db;
    const hit = orm.run(sql.raw(`UPDATE ${table} SET n = n WHERE n = 0`));
    const long = t.deps.db.write([
      ...inserts(LONG_BATCH * 2),
      hit,
      guardChanged(orm),
    ] as unknown as Queries);
    const small = t.deps.db.write(inserts(3) as unknown as Queries);
    const [l, s] = await Promise.all([long, small]);
    expect(l.length).toBe(LONG_BATCH * 2 + 2);
    expect(s.length).toBe(3);
    expect(await rows()).toBe(LONG_BATCH * 2 + 3);
  });
});

describe("a bulk delete of ids that do not exist", () => {
  const missing = (n: number) => Array.from({ length: n }, (_, i) => ({ id: 10_000_000 + i }));
  const statementsOf = async (path: string, n: number) => {
    let status = 0;
    const count = await countStatements(t.deps.db, async () => {
      const r = await t.req("DELETE", path, { body: missing(n) });
      status = r.status;
      await r.arrayBuffer();
    });
    return { status, count };
  };

  for (const path of ["/api/dcim/sites/", CO])
    test(`${path}: as many statements for 2,000 ids as for 2`, async () => {
      await statementsOf(path, 2); // what a first delete of the type reads once
      const few = await statementsOf(path, 2);
      const many = await statementsOf(path, 2_000);
      // NetBox 4.7's 400 naming the ids not found (0200)
      expect(few.status).toBe(400);
      expect(many.status).toBe(400);
      expect(many.count).toBe(few.count);
    });

  for (const path of ["/api/dcim/sites/", CO])
    test(`${path}: 50,000 ids answer 400 naming no database`, async () => {
      const r = await t.json("DELETE", path, { body: missing(50_000) });
      expect(r.status).toBe(400);
      expect(r.body.errors.length).toBeLessThanOrEqual(1_000);
      expect(JSON.stringify(r.body)).not.toMatch(/D1|Cloudflare/i);
    });
});
