/**
 * The read pool (decisions 0057, 0060, 0086): reads stated as reads (`Database.reader`,
 * `readRows`) run on native async connections of their own, so neither a slow read nor an open
 * write transaction holds a get-by-id; the answers are the local client's own shapes (rows,
 * bigint, blobs, null, duplicate column names, errors and their codes). The assertions are about
 * order (the GET answered while the slow read or the transaction was provably still under way),
 * not elapsed time: the timings are bench/head-of-line.ts's.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createClient, type Client, type IntMode, type ResultSet } from "@libsql/client";
import { eq, sql } from "drizzle-orm";
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isBusyError } from "../../src/db/client";
import { openDatabase } from "../../src/db/local";
import { ReadPool } from "../../src/db/read-pool";
import { sites } from "../../src/db/schema";
import { makeTestApp, type TestApp } from "../helpers/app";
import { TIMED_OUT, waitFor, within as waitOn } from "../helpers/wait";

/** A read long enough that a GET by id answered from another connection ends first. */
const SLOW_READ =
  "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 8000000) SELECT count(*) AS n FROM c";

/** Settles with `p`, or fails the test after a generous bound instead of hanging it. */
function within<T>(p: Promise<T>, what: string, ms = 30_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, bound]).finally(() => clearTimeout(timer));
}

/** Starts the slow read (stated as a read) and, in the same turn, a GET; the order they ended in. */
async function getDuringSlowRead(t: TestApp, path: string) {
  const order: string[] = [];
  const slow = t.deps.db.reader.all(sql.raw(SLOW_READ)).then((r) => (order.push("slow"), r));
  const get = t.json("GET", path).then((r) => (order.push("get"), r));
  const [r] = await within(Promise.all([get, slow]), "GET and slow read");
  return { get: r, order };
}

/** A write transaction on the main connection held open until `release()`. */
function heldTransaction(t: TestApp, work: (tx: any) => Promise<void> = async () => {}) {
  let inside!: () => void;
  let release!: () => void;
  const opened = new Promise<void>((r) => (inside = r));
  const released = new Promise<void>((r) => (release = r));
  const done = t.deps.db.orm.transaction(async (tx) => {
    await tx.run(sql`SELECT 1`);
    await work(tx);
    inside();
    await released;
  });
  return { opened, release, done };
}

describe("head-of-line: with the pool (DATABASE_READ_POOL=2, the default)", () => {
  let t: TestApp;
  let siteId: number;
  beforeAll(async () => {
    t = await makeTestApp();
    siteId = (await t.json("POST", "/api/dcim/sites/", { body: { name: "S1", slug: "s1" } })).body
      .id;
    // warm: the first request writes the token's last_used and fills caches
    expect((await t.json("GET", `/api/dcim/sites/${siteId}/`)).status).toBe(200);
  });
  afterAll(() => t.close());

  test("a GET by id answers while a slow read is still running", async () => {
    const { get, order } = await getDuringSlowRead(t, `/api/dcim/sites/${siteId}/`);
    expect(get.status).toBe(200);
    expect(get.body.name).toBe("S1");
    expect(order).toEqual(["get", "slow"]);
  });

  test("a GET by id is not held by an open write transaction, and sees only what was committed", async () => {
    let newId = 0;
    const tx = heldTransaction(t, async (txn) => {
      await txn.update(sites).set({ description: "uncommitted" }).where(eq(sites.id, siteId));
      newId = (
        await txn.insert(sites).values({ name: "S2", slug: "s2" }).returning({ id: sites.id })
      )[0]!.id;
    });
    await tx.opened;
    // answered while the transaction is held open (it is released only afterwards)
    const get = await within(t.json("GET", `/api/dcim/sites/${siteId}/`), "GET during a write");
    expect(get.status).toBe(200);
    expect(get.body.description).toBe(""); // the last committed state
    expect((await t.json("GET", `/api/dcim/sites/${newId}/`)).status).toBe(404);
    tx.release();
    await tx.done;
    // read-your-writes: once the commit resolved, the next read sees it
    expect((await t.json("GET", `/api/dcim/sites/${siteId}/`)).body.description).toBe(
      "uncommitted",
    );
    expect((await t.json("GET", `/api/dcim/sites/${newId}/`)).status).toBe(200);
  });

  test("read-your-writes: each create is seen by the GET sent after its answer", async () => {
    for (let i = 0; i < 40; i++) {
      const created = await t.json("POST", "/api/dcim/sites/", {
        body: { name: `ryw-${i}`, slug: `ryw-${i}` },
      });
      expect(created.status).toBe(201);
      const got = await t.json("GET", `/api/dcim/sites/${created.body.id}/`);
      expect(got.status).toBe(200);
      const patched = await t.json("PATCH", `/api/dcim/sites/${created.body.id}/`, {
        body: { description: `d-${i}` },
      });
      expect(patched.status).toBe(200);
      expect((await t.json("GET", `/api/dcim/sites/${created.body.id}/`)).body.description).toBe(
        `d-${i}`,
      );
    }
  });

  test("a query that bypasses an open write transaction still fails at once (it would read around it)", async () => {
    const db = t.deps.db;
    const outcome = await db
      .transaction(async (tx) => {
        await tx.run(sql`SELECT 1`);
        await db.orm.all(sql`SELECT 1`);
        return "ran";
      })
      .catch((e: Error) => `${e.message} ${(e.cause as Error | undefined)?.message}`);
    expect(outcome).toContain("from inside an open write transaction");
  });
});

describe("rows that come slowly are stepped off the event loop too", () => {
  /** A read whose 25 rows are spread over 9M joined pairs: each row after the first is found by stepping on. */
  const STREAMING = "SELECT a.x AS x FROM t a, t b WHERE (a.x * 7919 + b.x) % 400009 = 0";
  let dir: string;
  let url: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "host-read-pool-"));
    url = `file:${join(dir, "stream.db")}`;
    const setup = createClient({ url });
    await setup.execute("PRAGMA journal_mode=WAL");
    await setup.execute("CREATE TABLE t (x INTEGER PRIMARY KEY)");
    await setup.execute(
      "WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 3000) INSERT INTO t SELECT x FROM s",
    );
    setup.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** How many event-loop turns (a setImmediate chain) run while `read` is under way. */
  async function turnsDuring(read: Promise<unknown>) {
    let done = false;
    void read.then(() => (done = true));
    let turns = 0;
    for (; !done; turns++) await new Promise((r) => setImmediate(r));
    return turns;
  }

  test("the driver's own async statement steps every row after the first on the event loop", async () => {
    const { default: AsyncDatabase } = await import("libsql/promise");
    const db = new AsyncDatabase(join(dir, "stream.db"), {});
    const pool = new ReadPool({ url, size: 1, busyTimeoutMs: 1000 });
    try {
      await pool.ready();
      // the same read both ways, in the same run: a count of loop turns, not a time (the pool
      // lets ~30x more run here; a busy machine slows both alike)
      const stmt = await db.prepare(STREAMING);
      const driver = await turnsDuring(stmt.raw(true).all([]));
      const pooled = await turnsDuring(pool.execute(STREAMING));
      expect(pooled).toBeGreaterThan(driver * 5); // the driver held the loop for most of the read
    } finally {
      db.close();
      await pool.close();
    }
  });

  test("through the pool the event loop keeps turning while the same read runs", async () => {
    const pool = new ReadPool({ url, size: 1, busyTimeoutMs: 1000 });
    try {
      await pool.ready();
      const order: string[] = [];
      const read = pool.execute(STREAMING).then((r) => (order.push("read"), r));
      // a chain of event-loop turns (no clock): it can only finish first if no row is stepped on the loop
      for (let i = 0; i < 100; i++) await new Promise((r) => setImmediate(r));
      order.push("turns");
      const result = await within(read, "streaming read");
      expect(result.rows.length).toBe(25);
      expect(result.rows.map((r) => r.x)).toEqual(
        (await pool.execute(STREAMING)).rows.map((r) => r.x),
      );
      expect(order).toEqual(["turns", "read"]);
    } finally {
      await pool.close();
    }
  });

  test("a new slow statement's unused form is not finalized while the statement runs (that held the event loop)", async () => {
    const pool = new ReadPool({ url, size: 2, busyTimeoutMs: 1000 });
    try {
      await pool.ready();
      for (let round = 0; round < 3; round++) {
        Bun.gc(true); // what earlier tests left
        const order: string[] = [];
        // a new statement each round: prepared as sent and materialized, one of the two kept aside
        const slow = pool
          .execute(
            // four passes over the 9M pairs: far longer than the turns, the collection and the
            // quick read below even in a loaded full run (one pass lost that race 1 clone in 6)
            `SELECT count(*) AS n FROM t a, t b, (VALUES (1), (2), (3), (4)) c WHERE (a.x * 7919 + b.x) % 400009 = ${round}`,
          )
          .then((r) => (order.push("slow"), r));
        for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
        Bun.gc(true); // collects whatever native statement nothing holds
        await pool.execute({ sql: "SELECT x FROM t WHERE x = ?", args: [round + 1] });
        order.push("quick");
        expect(Number((await within(slow, "slow read")).rows[0]!.n)).toBeGreaterThan(0);
        // held, the quick read (and the collection before it) would wait for the slow one
        expect(order).toEqual(["quick", "slow"]);
      }
    } finally {
      await pool.close();
    }
  });

  test("the order of an ORDER BY read is kept, and repeated column names are left as they are", async () => {
    const pool = new ReadPool({ url, size: 1, busyTimeoutMs: 1000 });
    const client = createClient({ url });
    try {
      for (const q of [
        "SELECT x FROM t ORDER BY x DESC LIMIT 40 OFFSET 7",
        "SELECT x, x AS x FROM t WHERE x % 500 = 0 ORDER BY -x",
        "SELECT x % 7 AS k, count(*) AS n FROM t GROUP BY k ORDER BY n, k DESC",
      ]) {
        const [mine, theirs] = await Promise.all([pool.execute(q), client.execute(q)]);
        expect(mine.columns).toEqual(theirs.columns);
        expect(mine.rows.map((r) => Array.from(r as ArrayLike<unknown>))).toEqual(
          theirs.rows.map((r) => Array.from(r as ArrayLike<unknown>)),
        );
      }
    } finally {
      await pool.close();
      client.close();
    }
  });
});

describe("head-of-line: without the pool (DATABASE_READ_POOL=0), the same assertions fail", () => {
  let t: TestApp;
  let siteId: number;
  beforeAll(async () => {
    t = await makeTestApp({ DATABASE_READ_POOL: "0" });
    siteId = (await t.json("POST", "/api/dcim/sites/", { body: { name: "S1", slug: "s1" } })).body
      .id;
    expect((await t.json("GET", `/api/dcim/sites/${siteId}/`)).status).toBe(200);
  });
  afterAll(() => t.close());

  test("the GET ends after the slow read", async () => {
    const { get, order } = await getDuringSlowRead(t, `/api/dcim/sites/${siteId}/`);
    expect(get.status).toBe(200);
    expect(order).toEqual(["slow", "get"]);
  });

  test("the GET waits for the open write transaction", async () => {
    const tx = heldTransaction(t);
    await tx.opened;
    let answered = false;
    const get = t.json("GET", `/api/dcim/sites/${siteId}/`).then((r) => ((answered = true), r));
    // many turns of the event loop (no clock): the GET stays queued behind the transaction
    for (let i = 0; i < 200; i++) await new Promise((r) => setImmediate(r));
    expect(answered).toBe(false);
    tx.release();
    await tx.done;
    expect((await within(get, "GET after the write")).status).toBe(200);
  });
});

describe("answers keep the local client's shapes", () => {
  let dir: string;
  let url: string;
  const pools: ReadPool[] = [];
  const clients: Client[] = [];
  const pair = async (intMode?: IntMode) => {
    const pool = new ReadPool({ url, size: 1, intMode, busyTimeoutMs: 1000 });
    await pool.ready();
    const client = createClient({ url, intMode });
    pools.push(pool);
    clients.push(client);
    return { pool, client };
  };
  /** Everything a caller can see of a result set. */
  const view = (rs: ResultSet) => ({
    columns: rs.columns,
    columnTypes: rs.columnTypes,
    rowsAffected: rs.rowsAffected,
    lastInsertRowid: rs.lastInsertRowid,
    json: JSON.stringify(rs.toJSON()),
    rows: rs.rows.map((row) => ({
      length: row.length,
      values: Array.from(row as ArrayLike<unknown>),
      keys: Object.keys(row),
      named: Object.fromEntries(Object.keys(row).map((k) => [k, row[k]])),
      spread: { ...row },
    })),
  });
  const errorView = (e: any) => ({
    name: e?.name,
    message: e?.message,
    code: e?.code,
    extendedCode: e?.extendedCode,
    rawCode: e?.rawCode,
    ctor: e?.constructor?.name,
    cause: e?.cause
      ? {
          name: e.cause.name,
          message: e.cause.message,
          code: e.cause.code,
          rawCode: e.cause.rawCode,
        }
      : undefined,
  });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "host-read-pool-"));
    url = `file:${join(dir, "shapes.db")}`;
    const setup = createClient({ url });
    await setup.execute("PRAGMA journal_mode=WAL");
    await setup.execute(
      "CREATE TABLE t (id INTEGER PRIMARY KEY, big INTEGER, blob BLOB, txt TEXT, num REAL, vacant TEXT)",
    );
    await setup.execute({
      sql: "INSERT INTO t (big, blob, txt, num, vacant) VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)",
      args: [
        9007199254740993n,
        new Uint8Array([0, 1, 2, 255]).buffer,
        "é ☃",
        1.5,
        null,
        -42,
        new Uint8Array([]).buffer,
        "",
        -0.25,
        null,
      ],
    });
    setup.close();
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.close()));
    for (const c of clients) c.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("bigint (intMode bigint and string), blobs, null, reals, duplicate column names", async () => {
    for (const intMode of ["bigint", "string"] as const) {
      const { pool, client } = await pair(intMode);
      for (const q of [
        "SELECT * FROM t ORDER BY id",
        "SELECT id, big AS id, txt, txt AS txt, vacant, blob FROM t ORDER BY id",
        { sql: "SELECT id, big FROM t WHERE big = ?", args: [9007199254740993n] },
        {
          sql: "SELECT :a AS a, $b AS b, @c AS c",
          args: { a: 1, b: true, c: new Uint8Array([7]).buffer },
        },
        "SELECT id FROM t WHERE id < 0",
      ]) {
        const [mine, theirs] = await Promise.all([pool.execute(q), client.execute(q)]);
        expect(view(mine)).toEqual(view(theirs));
      }
      const rs = await pool.execute("SELECT big, blob FROM t ORDER BY id");
      expect(rs.rows[0]!.big).toBe(intMode === "bigint" ? 9007199254740993n : "9007199254740993");
      expect(rs.rows[0]!.blob).toBeInstanceOf(ArrayBuffer);
      expect([...new Uint8Array(rs.rows[0]!.blob as ArrayBuffer)]).toEqual([0, 1, 2, 255]);
    }
  });

  test("intMode number: safe integers as numbers, an unsafe one the same RangeError", async () => {
    const { pool, client } = await pair("number");
    const q = "SELECT id, big FROM t WHERE id = 2";
    expect(view(await pool.execute(q))).toEqual(view(await client.execute(q)));
    // reals past 2^53 with no fraction are numbers, as the client gives them (not an integer's RangeError)
    const reals = "SELECT 1e20 AS r, -9007199254740993.0 AS s, 2.5 AS t, 9007199254740991 AS u";
    expect(view(await pool.execute(reals))).toEqual(view(await client.execute(reals)));
    const mine = await pool.execute("SELECT big FROM t WHERE id = 1").catch((e) => e);
    const theirs = await client.execute("SELECT big FROM t WHERE id = 1").catch((e) => e);
    expect(mine).toBeInstanceOf(RangeError);
    expect(errorView(mine)).toEqual(errorView(theirs));
  });

  test("SQLite errors come back as the same LibsqlError (code, extendedCode, rawCode, cause)", async () => {
    const { pool, client } = await pair();
    for (const q of [
      "SELECT * FROM no_such_table",
      "SELECT json('{bad')",
      "SELEC 1",
      "SELECT abs(-9223372036854775808)",
    ]) {
      const mine = await pool.execute(q).then(
        () => null,
        (e) => e,
      );
      const theirs = await client.execute(q).then(
        () => null,
        (e) => e,
      );
      expect(theirs).not.toBeNull();
      expect(errorView(mine)).toEqual(errorView(theirs));
      expect(mine.constructor.name).toBe("LibsqlError");
    }
  });

  test("readRows: the same values as plain arrays; refused around an open write transaction", async () => {
    const db = await openDatabase(url, undefined, { readPool: 1 });
    try {
      const q = "SELECT id, big, txt, num, vacant FROM t WHERE id = ? ORDER BY id";
      const rows = (await db.readRows!(q, [2])).rows;
      const theirs = await db.client.execute({ sql: q, args: [2] });
      expect(rows).toEqual(theirs.rows.map((r) => Array.from(r as ArrayLike<unknown>)));
      expect(Array.isArray(rows[0])).toBe(true);
      expect(
        await db.readRows!("SELECT big FROM t WHERE id = 1", []).catch((e) => e),
      ).toBeInstanceOf(RangeError);
      await db.transaction(async (tx) => {
        await tx.run(sql`SELECT 1`);
        expect(await db.readRows!("SELECT 1", []).catch((e) => String(e))).toContain(
          "open write transaction",
        );
      });
    } finally {
      await db.close();
    }
  });

  test("the pool's connections are read-only (query_only), and a write sent as a read runs on the main connection", async () => {
    const { pool } = await pair();
    const refused = await pool.execute("INSERT INTO t (txt) VALUES ('x')").catch((e) => e);
    expect(refused.code).toBe("SQLITE_READONLY");
    expect(isBusyError(refused)).toBe(false);
    const db = await openDatabase(url, undefined, { readPool: 1 });
    try {
      // a write sent through `reader` (a CTE that writes): the pool refuses it, the main connection runs it
      await db.reader.run(
        sql.raw("WITH v(x) AS (SELECT 'cte') INSERT INTO t (txt) SELECT x FROM v"),
      );
      expect(
        (await db.client.execute("SELECT count(*) AS n FROM t WHERE txt = 'cte'")).rows[0]!.n,
      ).toBe(1);
    } finally {
      await db.close();
    }
  });

  test("a schema change on the main connection reaches the pool's statement caches (memoised column lists)", async () => {
    const db = await openDatabase(url, undefined, { readPool: 1 });
    const pooled = (q: string) => db.readRows(q, []);
    try {
      await db.client.execute("CREATE TABLE s (id INTEGER PRIMARY KEY, a TEXT)");
      await db.client.execute("INSERT INTO s (a) VALUES ('one')");
      expect((await pooled("SELECT * FROM s")).columns).toEqual(["id", "a"]);
      await db.client.execute("ALTER TABLE s ADD COLUMN b TEXT DEFAULT 'bee'");
      const after = await pooled("SELECT * FROM s");
      expect(after.columns).toEqual(["id", "a", "b"]);
      expect(after.rows[0]).toEqual([1, "one", "bee"]);
      // inside a transaction: the pool reads the old schema meanwhile, and the new one after COMMIT
      await db.orm.transaction(async (tx) => {
        await tx.run(sql`ALTER TABLE s ADD COLUMN c TEXT DEFAULT 'sea'`);
        expect((await pooled("SELECT * FROM s")).columns).toEqual(["id", "a", "b"]);
      });
      const committed = await pooled("SELECT * FROM s");
      expect(committed.columns).toEqual(["id", "a", "b", "c"]);
      expect(committed.rows[0]).toEqual([1, "one", "bee", "sea"]);
    } finally {
      await db.close();
    }
  });

  test("the caller's intent decides where a read runs: `reader` and `readRows` on the pool, `orm` and `execute` on the main connection", async () => {
    const db = await openDatabase(url, undefined, { readPool: 1 });
    try {
      let release!: () => void;
      let opened!: () => void;
      const isOpen = new Promise<void>((r) => (opened = r));
      const held = db.orm.transaction(async (tx) => {
        await tx.run(sql`SELECT 1`);
        opened();
        await new Promise<void>((r) => (release = r));
      });
      await isOpen;
      // the main connection is held: reads stated as reads are answered meanwhile
      expect(await within(db.reader.all(sql`SELECT 7 AS n`), "reader")).toEqual([{ n: 7 }]);
      expect((await within(db.readRows("SELECT 8", []), "readRows")).rows).toEqual([[8]]);
      // the same SELECT sent as `execute` (intent: any statement) waits for the main connection
      let ran = false;
      const main = db.execute({ sql: "SELECT 9 AS n", args: [] }).then((r) => ((ran = true), r));
      for (let i = 0; i < 200; i++) await new Promise((r) => setImmediate(r));
      expect(ran).toBe(false);
      release();
      await held;
      expect((await within(main, "execute")).rows).toEqual([{ n: 9 }]);
    } finally {
      await db.close();
    }
  });
});

describe("lifetime", () => {
  /** How many of this process's open file descriptors point at `file` (its connections). */
  const handlesOn = (file: string) =>
    readdirSync("/proc/self/fd").filter((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`).startsWith(file); // with its -wal and -shm
      } catch {
        return false; // closed meanwhile
      }
    }).length;

  test("closing the database closes the pool's connections", async () => {
    const dir = mkdtempSync(join(tmpdir(), "host-read-pool-"));
    const file = join(dir, "x.db");
    try {
      const plain = await openDatabase(`file:${file}`, undefined, { readPool: 0 });
      const without = handlesOn(file);
      await plain.close();
      Bun.gc(true);
      const before = handlesOn(file);
      const db = await openDatabase(`file:${file}`, undefined, { readPool: 3 });
      // three more connections, each with the file open
      expect(handlesOn(file)).toBeGreaterThanOrEqual(without + 3);
      expect(Number((await db.client.execute("SELECT 41 + 1 AS n")).rows[0]!.n)).toBe(42);
      await db.close();
      // a native connection lets its file go once its statements are collected too
      await waitFor(
        () => {
          Bun.gc(true);
          return handlesOn(file) <= before;
        },
        { message: "the closed connections' file handles to go" },
      );
      expect(await db.client.execute("SELECT 1").catch((e) => e.code)).toBe("CLIENT_CLOSED");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the pool runs no JavaScript threads (a Worker costs 50–60 MB under load, decision 0060)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "host-read-pool-"));
    try {
      const db = await openDatabase(`file:${join(dir, "w.db")}`, undefined, { readPool: 2 });
      const sent = Array.from({ length: 8 }, () => db.readRows("SELECT 1 AS one", []));
      const names = readdirSync("/proc/self/task").map((tid) => {
        try {
          return readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim();
        } catch {
          return "";
        }
      });
      await Promise.all(sent);
      expect(names.filter((n) => n === "Worker")).toEqual([]);
      await db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a script that reads through the pool exits by itself, with or without closing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "host-read-pool-"));
    try {
      for (const close of [true, false]) {
        const script = join(dir, `s-${close}.ts`);
        writeFileSync(
          script,
          `import { openDatabase } from ${JSON.stringify(join(import.meta.dir, "../../src/db/local"))};
const db = await openDatabase(${JSON.stringify(`file:${join(dir, "y.db")}`)}, undefined, { readPool: 2 });
const r = await db.readRows(${JSON.stringify(SLOW_READ.replace("8000000", "300000"))}, []);
console.log("n=" + r.rows[0][0]);
${close ? "await db.close();" : ""}`,
        );
        const child = Bun.spawn([process.execPath, script], { stdout: "pipe", stderr: "pipe" });
        const code = await waitOn(child.exited, 15_000); // a bound on a hang, not a speed check
        if (code === TIMED_OUT) child.kill("SIGKILL");
        expect({ close, code, out: (await new Response(child.stdout).text()).trim() }).toEqual({
          close,
          code: 0,
          out: "n=300000",
        });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
