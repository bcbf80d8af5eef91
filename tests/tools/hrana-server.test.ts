/** tools/hrana-server.ts against the real libSQL clients (web and http), Drizzle and the app's migrator. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createClient as createNodeClient } from "@libsql/client";
import {
  createClient as createWebClient,
  LibsqlError,
  type Client,
  type Config,
} from "@libsql/client/web";
import { eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/libsql";
import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHranaServer, type HranaServer } from "../../tools/hrana-server";
import { libsqlDatabase } from "../../src/db/libsql";
import { MIGRATIONS_FOLDER } from "../../src/db/migrate";
import { runMigrations } from "../../src/migrations";
import { tags } from "../../src/db/schema";

const TOKEN = "test-token-5f1c";
const ROOT = join(import.meta.dir, "..", "..");

let dir: string;
let server: HranaServer;
const clients: Client[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hrana-test-"));
  server = await startHranaServer({ port: 0, path: join(dir, "main.db"), authToken: TOKEN });
});

afterAll(async () => {
  for (const c of clients) c.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

type Factory = (config: Config) => Client;
const FACTORIES: Array<[string, Factory]> = [
  ["@libsql/client/web", createWebClient],
  ["@libsql/client (http: URL)", createNodeClient as Factory],
];

function connect(
  make: Factory = createWebClient,
  extra: Partial<Config> = {},
  url = server.url,
): Client {
  const client = make({ url, authToken: TOKEN, ...extra });
  clients.push(client);
  return client;
}

// Awaits a rejection and returns the error.
async function failure(p: Promise<unknown>): Promise<LibsqlError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(LibsqlError);
    return e as LibsqlError;
  }
  throw new Error("expected the promise to reject");
}

for (const [label, make] of FACTORIES) {
  describe(`hrana server via ${label}`, () => {
    const t = label.startsWith("@libsql/client/web") ? "web" : "http";
    let c: Client;

    beforeAll(async () => {
      c = connect(make);
      await c.executeMultiple(`
        CREATE TABLE ${t}_items (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, qty INTEGER);
        CREATE TABLE ${t}_vals (i INTEGER, f REAL, s TEXT, b BLOB, n);
      `);
    });

    test("execute with positional and named arguments", async () => {
      const pos = await c.execute({
        sql: "SELECT ? AS a, ? AS b, ?3 AS c",
        args: [1, "two", null],
      });
      expect(pos.columns).toEqual(["a", "b", "c"]);
      expect(pos.rows[0]).toMatchObject({ a: 1, b: "two", c: null });

      const named = await c.execute({
        sql: "SELECT :x AS x, @y AS y, $z AS z, :x + 1 AS x1",
        args: { x: 41, y: "why", z: 2.5 },
      });
      expect(named.rows[0]).toMatchObject({ x: 41, y: "why", z: 2.5, x1: 42 });

      const prefixed = await c.execute({ sql: "SELECT :k AS k", args: { ":k": "kept" } });
      expect(prefixed.rows[0]?.k).toBe("kept");

      const plain = await c.execute(`SELECT 'a''b' AS q, "x" IS NULL AS n FROM (SELECT 1 AS "x")`);
      expect(plain.rows[0]).toMatchObject({ q: "a'b", n: 0 });
    });

    test("every value type round-trips (intMode bigint)", async () => {
      const big = connect(make, { intMode: "bigint" });
      const values = [
        [
          2n ** 62n + 3n,
          3.25,
          "héllo wörld 🌍 ✓ 日本語",
          new Uint8Array([0, 1, 2, 254, 255]),
          null,
        ],
        [-(2n ** 63n), -1e-300, "", new Uint8Array([]), null],
        [2n ** 63n - 1n, 1.5e300, "a\u0000b", new Uint8Array([0x80]), null],
      ] as const;
      for (const v of values)
        await big.execute({ sql: `INSERT INTO ${t}_vals VALUES (?, ?, ?, ?, ?)`, args: [...v] });
      const rs = await big.execute(
        `SELECT i, f, s, b, n, typeof(i) ti, typeof(f) tf, typeof(s) ts, typeof(b) tb, typeof(n) tn FROM ${t}_vals ORDER BY rowid`,
      );
      expect(rs.columnTypes.slice(0, 5)).toEqual(["INTEGER", "REAL", "TEXT", "BLOB", ""]);
      rs.rows.forEach((row, k) => {
        const v = values[k]!;
        expect(row.i).toBe(v[0]);
        expect(row.f).toBe(v[1]);
        expect(row.s).toBe(v[2]);
        expect(row.b).toBeInstanceOf(ArrayBuffer);
        expect([...new Uint8Array(row.b as ArrayBuffer)]).toEqual([...v[3]]);
        expect(row.n).toBeNull();
        expect([row.ti, row.tf, row.ts, row.tb, row.tn]).toEqual([
          "integer",
          "real",
          "text",
          "blob",
          "null",
        ]);
      });

      // The default intMode gives numbers; infinities survive JSON.
      const num = await c.execute(
        "SELECT 7 AS seven, 1e999 AS inf, -1e999 AS ninf, 0.1 + 0.2 AS f",
      );
      expect(num.rows[0]).toMatchObject({ seven: 7, inf: Infinity, ninf: -Infinity, f: 0.1 + 0.2 });
      // Booleans and Dates are converted by the client, bigint args stay exact.
      const conv = await big.execute({
        sql: "SELECT ? AS t, ? AS d, ? AS b",
        args: [true, new Date(1000), 9007199254740993n],
      });
      expect(conv.rows[0]).toMatchObject({ t: 1n, d: 1000n, b: 9007199254740993n });
    });

    test("rowsAffected and lastInsertRowid", async () => {
      const ins = await c.execute({
        sql: `INSERT INTO ${t}_items (name, qty) VALUES (?, ?), (?, ?)`,
        args: ["r1", 1, "r2", 2],
      });
      expect(ins.rowsAffected).toBe(2);
      expect(typeof ins.lastInsertRowid).toBe("bigint");
      const upd = await c.execute({
        sql: `UPDATE ${t}_items SET qty = qty + 10 WHERE name IN ('r1', 'r2')`,
      });
      expect(upd.rowsAffected).toBe(2);
      expect(upd.lastInsertRowid).toBeUndefined();
      const sel = await c.execute(`SELECT * FROM ${t}_items WHERE name IN ('r1', 'r2')`);
      expect(sel.rowsAffected).toBe(0);
      expect(sel.rows.map((r) => r.qty)).toEqual([11, 12]);
      const ret = await c.execute({
        sql: `INSERT INTO ${t}_items (name) VALUES (?) RETURNING id, name`,
        args: ["r3"],
      });
      expect(ret.rows[0]?.name).toBe("r3");
      expect(BigInt(ret.rows[0]?.id as number)).toBe(ret.lastInsertRowid!);
    });

    test("batch(…, 'write') is atomic", async () => {
      const before = await count(c, `${t}_items`);
      const err = await failure(
        c.batch(
          [
            { sql: `INSERT INTO ${t}_items (name) VALUES (?)`, args: ["batch-a"] },
            { sql: `INSERT INTO ${t}_items (name) VALUES (?)`, args: ["batch-a"] },
            { sql: `INSERT INTO ${t}_items (name) VALUES (?)`, args: ["batch-c"] },
          ],
          "write",
        ),
      );
      expect(err.code).toBe("SQLITE_CONSTRAINT");
      expect(err.message).toContain(`UNIQUE constraint failed: ${t}_items.name`);
      expect(await count(c, `${t}_items`)).toBe(before);

      const ok = await c.batch(
        [
          { sql: `INSERT INTO ${t}_items (name, qty) VALUES (?, ?)`, args: ["batch-a", 5] },
          { sql: `INSERT INTO ${t}_items (name, qty) VALUES (?, ?)`, args: ["batch-b", 6] },
          `SELECT sum(qty) AS s FROM ${t}_items WHERE name LIKE 'batch-%'`,
        ],
        "write",
      );
      expect(ok).toHaveLength(3);
      expect(ok[0]!.rowsAffected).toBe(1);
      expect(ok[2]!.rows[0]?.s).toBe(11);
      expect(await count(c, `${t}_items`)).toBe(before + 2);
    });

    test("interactive transaction: several executes, then commit", async () => {
      const other = connect(make);
      const before = await count(c, `${t}_items`);
      const tx = await c.transaction("write");
      await tx.execute({
        sql: `INSERT INTO ${t}_items (name, qty) VALUES (?, ?)`,
        args: ["tx-1", 1],
      });
      await tx.execute({
        sql: `INSERT INTO ${t}_items (name, qty) VALUES (?, ?)`,
        args: ["tx-2", 2],
      });
      await tx.execute(`UPDATE ${t}_items SET qty = qty * 100 WHERE name LIKE 'tx-%'`);
      expect(
        (await tx.execute(`SELECT sum(qty) AS s FROM ${t}_items WHERE name LIKE 'tx-%'`)).rows[0]
          ?.s,
      ).toBe(300);
      const [b1, b2] = await tx.batch([`SELECT count(*) AS n FROM ${t}_items`, `SELECT 1 AS one`]);
      expect(b1!.rows[0]?.n).toBe(before + 2);
      expect(b2!.rows[0]?.one).toBe(1);
      // Readers on other streams do not see uncommitted rows (and are not blocked by the writer).
      expect(await count(other, `${t}_items`)).toBe(before);
      await tx.commit();
      expect(tx.closed).toBe(true);
      expect(await count(other, `${t}_items`)).toBe(before + 2);
    });

    test("interactive transaction: rollback, and DDL rolls back too", async () => {
      const before = await count(c, `${t}_items`);
      const tx = await c.transaction("write");
      await tx.execute({ sql: `INSERT INTO ${t}_items (name) VALUES (?)`, args: ["rb-1"] });
      await tx.execute(`CREATE TABLE ${t}_ddl (x INTEGER)`);
      await tx.execute(`INSERT INTO ${t}_ddl VALUES (1)`);
      await tx.execute(`ALTER TABLE ${t}_items ADD COLUMN extra TEXT`);
      expect((await tx.execute(`SELECT count(*) AS n FROM ${t}_ddl`)).rows[0]?.n).toBe(1);
      await tx.rollback();
      expect(await count(c, `${t}_items`)).toBe(before);
      const tables = await c.execute({
        sql: "SELECT name FROM sqlite_schema WHERE name = ?",
        args: [`${t}_ddl`],
      });
      expect(tables.rows).toHaveLength(0);
      const cols = await c.execute(`SELECT name FROM pragma_table_info('${t}_items')`);
      expect(cols.rows.map((r) => r.name)).not.toContain("extra");
    });

    test("constraint errors keep SQLite's message; a failed statement does not end a transaction", async () => {
      await c.execute({ sql: `INSERT INTO ${t}_items (name) VALUES (?)`, args: ["dup"] });
      const err = await failure(
        c.execute({ sql: `INSERT INTO ${t}_items (name) VALUES (?)`, args: ["dup"] }),
      );
      expect(err.code).toBe("SQLITE_CONSTRAINT");
      expect(err.message).toMatch(new RegExp(`UNIQUE constraint failed: ${t}_items\\.name$`));
      const nn = await failure(c.execute(`INSERT INTO ${t}_items (qty) VALUES (1)`));
      expect(nn.message).toMatch(new RegExp(`NOT NULL constraint failed: ${t}_items\\.name$`));
      const missing = await failure(c.execute("SELECT * FROM no_such_table"));
      expect(missing.message).toContain("no such table: no_such_table");

      const tx = await c.transaction("write");
      await tx.execute({ sql: `INSERT INTO ${t}_items (name) VALUES (?)`, args: ["in-tx"] });
      const inTx = await failure(
        tx.execute({ sql: `INSERT INTO ${t}_items (name) VALUES (?)`, args: ["dup"] }),
      );
      expect(inTx.message).toContain("UNIQUE constraint failed");
      await tx.execute({ sql: `INSERT INTO ${t}_items (name) VALUES (?)`, args: ["in-tx-2"] });
      await tx.commit();
      const names = await c.execute(
        `SELECT name FROM ${t}_items WHERE name LIKE 'in-tx%' ORDER BY name`,
      );
      expect(names.rows.map((r) => r.name)).toEqual(["in-tx", "in-tx-2"]);
    });

    test("executeMultiple runs every statement, including a trigger body", async () => {
      await c.executeMultiple(`
        CREATE TABLE ${t}_audit (name TEXT); -- a comment; with a semicolon
        CREATE TRIGGER ${t}_items_ai AFTER INSERT ON ${t}_items BEGIN
          INSERT INTO ${t}_audit VALUES (new.name);
          INSERT INTO ${t}_audit VALUES (new.name || ';2');
        END;
        /* block; comment */ INSERT INTO ${t}_items (name) VALUES ('trig');
      `);
      const audit = await c.execute(`SELECT name FROM ${t}_audit ORDER BY rowid`);
      expect(audit.rows.map((r) => r.name)).toEqual(["trig", "trig;2"]);
    });

    test("a read transaction refuses writes", async () => {
      const tx = await c.transaction("read");
      expect(typeof (await tx.execute(`SELECT count(*) AS n FROM ${t}_items`)).rows[0]?.n).toBe(
        "number",
      );
      const err = await failure(tx.execute(`INSERT INTO ${t}_items (name) VALUES ('ro')`));
      expect(err.message).toContain("readonly");
      await tx.commit();
      // The connection is writable again afterwards.
      await c.execute(`INSERT INTO ${t}_items (name) VALUES ('after-ro')`);
    });
  });
}

async function count(c: Client, table: string): Promise<number> {
  const rs = await c.execute(`SELECT count(*) AS n FROM ${table}`);
  return Number(rs.rows[0]?.n);
}

describe("auth", () => {
  test("a missing or wrong token is refused", async () => {
    for (const authToken of [undefined, "wrong-token"]) {
      for (const make of [createWebClient, createNodeClient as Factory]) {
        const c = make({ url: server.url, authToken });
        clients.push(c);
        const err = await failure(c.execute("SELECT 1"));
        expect(err.message).toContain("401");
      }
    }
    const raw = await fetch(`${server.url}/v2/pipeline`, {
      method: "POST",
      body: JSON.stringify({ requests: [] }),
    });
    expect(raw.status).toBe(401);
  });

  test("the version probes need no token", async () => {
    for (const path of ["/v2", "/v3"]) expect((await fetch(server.url + path)).status).toBe(200);
    expect((await fetch(`${server.url}/v3-protobuf`)).status).toBe(404);
  });

  test("the web client also accepts libsql://…?tls=0 (it speaks HTTP for libsql: URLs)", async () => {
    const c = createWebClient({
      url: `${server.url.replace("http://", "libsql://")}?tls=0`,
      authToken: TOKEN,
    });
    clients.push(c);
    expect((await c.execute("SELECT 'ok' AS s")).rows[0]?.s).toBe("ok");
  });
});

describe("Drizzle", () => {
  const notes = sqliteTable("drizzle_notes", {
    id: integer("id").primaryKey({ autoIncrement: true }),
    title: text("title").notNull().unique(),
    stars: integer("stars").notNull().default(0),
  });

  test("drizzle(client) queries and transactions", async () => {
    const c = connect();
    await c.execute(
      "CREATE TABLE drizzle_notes (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL UNIQUE, stars INTEGER NOT NULL DEFAULT 0)",
    );
    const orm = drizzle(c);
    const [inserted] = await orm.insert(notes).values({ title: "first" }).returning();
    expect(inserted).toEqual({ id: 1, title: "first", stars: 0 });
    await orm.insert(notes).values([
      { title: "second", stars: 2 },
      { title: "third", stars: 3 },
    ]);
    await orm
      .update(notes)
      .set({ stars: sql`${notes.stars} + 1` })
      .where(eq(notes.title, "first"));
    const rows = await orm.select().from(notes).orderBy(notes.id);
    expect(rows.map((r) => [r.title, r.stars])).toEqual([
      ["first", 1],
      ["second", 2],
      ["third", 3],
    ]);

    await orm.transaction(async (tx) => {
      await tx.insert(notes).values({ title: "in-tx" });
    });
    await expect(
      orm.transaction(async (tx) => {
        await tx.insert(notes).values({ title: "rolled-back" });
        tx.rollback();
      }),
    ).rejects.toThrow();
    const titles = (await orm.select({ title: notes.title }).from(notes)).map((r) => r.title);
    expect(titles).toContain("in-tx");
    expect(titles).not.toContain("rolled-back");
    const dup = await orm
      .insert(notes)
      .values({ title: "first" })
      .catch((e: unknown) => e);
    const messages = [
      (dup as Error).message,
      ((dup as Error).cause as Error | undefined)?.message,
    ].join(" | ");
    expect(messages).toContain("UNIQUE constraint failed: drizzle_notes.title");
  });

  test("runMigrations via libsqlDatabase(client, 'remote') creates the schema and is idempotent", async () => {
    const migrated = await startHranaServer({ path: join(dir, "migrated.db"), authToken: TOKEN });
    try {
      const db = libsqlDatabase(connect(createWebClient, {}, migrated.url), "remote");
      await runMigrations(db);
      const expected = [
        ...readFileSync(join(MIGRATIONS_FOLDER, "0000_init.sql"), "utf8").matchAll(
          /CREATE TABLE `([^`]+)`/g,
        ),
      ].map((m) => m[1]);
      expect(expected.length).toBeGreaterThan(5);
      const schemaRows = async () =>
        (
          await db.client.execute("SELECT type, name FROM sqlite_schema ORDER BY type, name")
        ).rows.map((r) => `${r.type}:${r.name}`);
      const afterFirst = await schemaRows();
      for (const name of expected) expect(afterFirst).toContain(`table:${name}`);
      const journal = JSON.parse(
        readFileSync(join(ROOT, "migrations", "meta", "_journal.json"), "utf8"),
      ) as { entries: unknown[] };
      const applied = async () =>
        Number(
          (await db.client.execute("SELECT count(*) AS n FROM __drizzle_migrations")).rows[0]?.n,
        );
      expect(await applied()).toBe(journal.entries.length);

      await runMigrations(db);
      expect(await applied()).toBe(journal.entries.length);
      expect(await schemaRows()).toEqual(afterFirst);

      // The app's ORM works over the migrated remote database, constraint messages included.
      const [tag] = await db.orm
        .insert(tags)
        .values({ name: "Remote", slug: "remote" })
        .returning();
      expect(tag?.color).toBe("9e9e9e");
      const found = await db.orm.select().from(tags).where(eq(tags.slug, "remote"));
      expect(found.map((r) => r.name)).toEqual(["Remote"]);
      const dup = (await db.orm
        .insert(tags)
        .values({ name: "Remote", slug: "other" })
        .catch((e: unknown) => e)) as Error;
      expect(`${dup.message} ${(dup.cause as Error | undefined)?.message}`).toContain(
        "UNIQUE constraint failed: tags.name",
      );
      await db.close();
    } finally {
      await migrated.stop();
    }
  });
});

describe("concurrency", () => {
  test("concurrent interactive transactions from several clients are serialised without lost updates", async () => {
    const setup = connect();
    await setup.batch(
      [
        "CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)",
        "INSERT INTO counter VALUES (1, 0)",
        "CREATE TABLE counter_log (who INTEGER)",
      ],
      "write",
    );
    const workers = [0, 1, 2, 3].map((i) =>
      connect(i % 2 ? (createNodeClient as Factory) : createWebClient),
    );
    // Each transaction's first statement takes the write lock: no other one reads until the
    // holder has sent its commit (the log alternates), so no update is lost.
    const events: string[] = [];
    await Promise.all(
      workers.map(async (client, who) => {
        const tx = await client.transaction("write");
        const n = Number((await tx.execute("SELECT n FROM counter WHERE id = 1")).rows[0]?.n);
        events.push("read");
        await tx.execute({ sql: "UPDATE counter SET n = ? WHERE id = 1", args: [n + 1] });
        await tx.execute({ sql: "INSERT INTO counter_log VALUES (?)", args: [who] });
        events.push("committing");
        await tx.commit();
      }),
    );
    expect(events).toEqual(Array.from({ length: 4 }, () => ["read", "committing"]).flat());
    expect(Number((await setup.execute("SELECT n FROM counter")).rows[0]?.n)).toBe(4);
    expect(
      (await setup.execute("SELECT who FROM counter_log ORDER BY who")).rows.map((r) => r.who),
    ).toEqual([0, 1, 2, 3]);

    // Plain batches and executes from many streams at once also all land.
    await setup.execute("CREATE TABLE burst (k INTEGER)");
    await Promise.all(
      Array.from({ length: 20 }, (_, k) =>
        k % 2
          ? workers[k % 4]!.execute({ sql: "INSERT INTO burst VALUES (?)", args: [k] })
          : workers[k % 4]!.batch([{ sql: "INSERT INTO burst VALUES (?)", args: [k] }], "write"),
      ),
    );
    expect(await count(setup, "burst")).toBe(20);
  });

  test("a writer waiting longer than the busy timeout fails cleanly with SQLITE_BUSY", async () => {
    const busy = await startHranaServer({ path: join(dir, "busy.db"), busyTimeoutMs: 300 });
    try {
      const a = connect(createWebClient, { authToken: undefined }, busy.url);
      const b = connect(createWebClient, { authToken: undefined }, busy.url);
      await a.execute("CREATE TABLE t (x)");
      const tx = await a.transaction("write");
      await tx.execute("INSERT INTO t VALUES (1)");
      const err = await failure(b.execute("INSERT INTO t VALUES (2)"));
      expect(err.code).toBe("SQLITE_BUSY");
      // Reads are not blocked; the holder commits normally and the other writer then gets through.
      expect(await count(b, "t")).toBe(0);
      await tx.commit();
      await b.execute("INSERT INTO t VALUES (2)");
      expect(await count(b, "t")).toBe(2);
    } finally {
      await busy.stop();
    }
  });

  test("an idle stream expires and its transaction is rolled back", async () => {
    const short = await startHranaServer({
      path: join(dir, "expiry.db"),
      streamIdleTimeoutMs: 150,
    });
    try {
      const a = connect(createWebClient, { authToken: undefined }, short.url);
      const b = connect(createNodeClient as Factory, { authToken: undefined }, short.url);
      await a.execute("CREATE TABLE t (x)");
      const tx = await a.transaction("write");
      await tx.execute("INSERT INTO t VALUES (1)");
      // This writer waits for the lock (busy timeout 5 s): it gets it once the idle stream
      // expires (150 ms), which rolls back its insert.
      await b.execute("INSERT INTO t VALUES (2)");
      expect((await b.execute("SELECT x FROM t")).rows.map((r) => r.x)).toEqual([2]);
      const err = await failure(tx.execute("SELECT 1"));
      expect(err.code).toBe("STREAM_EXPIRED");
    } finally {
      await short.stop();
    }
  });

  test("':memory:' is one database shared by every stream", async () => {
    const mem = await startHranaServer({ path: ":memory:" });
    try {
      const a = connect(createWebClient, { authToken: undefined }, mem.url);
      const b = connect(createWebClient, { authToken: undefined }, mem.url);
      await a.execute("CREATE TABLE m (x)");
      const tx = await a.transaction("write");
      await tx.execute("INSERT INTO m VALUES (1)");
      await tx.commit();
      expect(await count(b, "m")).toBe(1);
    } finally {
      await mem.stop();
    }
  });
});

describe("raw protocol", () => {
  const post = (path: string, body: unknown) =>
    fetch(server.url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const int = (n: number) => ({ type: "integer", value: String(n) });

  test("v3 pipeline: batons, get_autocommit and batch conditions", async () => {
    const r1 = await post("/v3/pipeline", {
      baton: null,
      requests: [
        { type: "execute", stmt: { sql: "BEGIN", want_rows: false } },
        { type: "get_autocommit" },
        {
          type: "batch",
          batch: {
            steps: [
              { stmt: { sql: "SELECT 1 AS a" } },
              { condition: { type: "is_autocommit" }, stmt: { sql: "SELECT 2" } },
              {
                condition: {
                  type: "and",
                  conds: [
                    { type: "ok", step: 0 },
                    { type: "not", cond: { type: "is_autocommit" } },
                  ],
                },
                stmt: { sql: "SELECT ? AS b", args: [int(3)] },
              },
              { stmt: { sql: "SELECT * FROM nope" } },
              {
                condition: {
                  type: "or",
                  conds: [
                    { type: "ok", step: 3 },
                    { type: "error", step: 3 },
                  ],
                },
                stmt: { sql: "ROLLBACK" },
              },
            ],
          },
        },
        { type: "get_autocommit" },
      ],
    });
    expect(r1.status).toBe(200);
    expect(r1.headers.get("content-type")).toBe("application/json");
    const body1 = (await r1.json()) as {
      baton: string;
      results: Array<{ type: string; response?: any; error?: any }>;
    };
    expect(typeof body1.baton).toBe("string");
    expect(body1.results.map((r) => r.type)).toEqual(["ok", "ok", "ok", "ok"]);
    expect(body1.results[1]!.response).toEqual({ type: "get_autocommit", is_autocommit: false });
    const batch = body1.results[2]!.response.result;
    expect(batch.step_results[0].rows).toEqual([[int(1)]]);
    expect(batch.step_results[1]).toBeNull();
    expect(batch.step_errors[1]).toBeNull();
    expect(batch.step_results[2].rows).toEqual([[int(3)]]);
    expect(batch.step_results[2].cols).toEqual([{ name: "b", decltype: null }]);
    expect(batch.step_errors[3]).toEqual({
      message: "SQLite error: no such table: nope",
      code: "SQLITE_ERROR",
    });
    expect(batch.step_results[4]).not.toBeNull();
    expect(body1.results[3]!.response.is_autocommit).toBe(true);

    // The baton continues the stream once; reusing it or inventing one is a protocol error.
    const r2 = await post("/v3/pipeline", {
      baton: body1.baton,
      requests: [{ type: "execute", stmt: { sql: "SELECT 5" } }],
    });
    const body2 = (await r2.json()) as { baton: string };
    expect(r2.status).toBe(200);
    const reused = await post("/v3/pipeline", { baton: body1.baton, requests: [] });
    expect(reused.status).toBe(400);
    expect(await reused.text()).toContain("baton");
    expect((await post("/v3/pipeline", { baton: "made.up", requests: [] })).status).toBe(400);

    const closed = await post("/v3/pipeline", {
      baton: body2.baton,
      requests: [{ type: "close" }],
    });
    expect(((await closed.json()) as { baton: unknown }).baton).toBeNull();
  });

  test("v2 refuses v3-only requests", async () => {
    const r = await post("/v2/pipeline", { requests: [{ type: "get_autocommit" }] });
    expect(r.status).toBe(400);
    expect((await post("/v2/cursor", { batch: { steps: [] } })).status).toBe(404);
  });

  test("store_sql / close_sql, describe, statement count and argument errors", async () => {
    const r = await post("/v2/pipeline", {
      requests: [
        { type: "store_sql", sql_id: 7, sql: "SELECT ? + ? AS s" },
        { type: "execute", stmt: { sql_id: 7, args: [int(2), { type: "float", value: 0.5 }] } },
        { type: "close_sql", sql_id: 7 },
        { type: "describe", sql: "SELECT :a AS x, ? AS y, ?4 AS z" },
        { type: "execute", stmt: { sql: "SELECT 1; SELECT 2" } },
        { type: "execute", stmt: { sql: "  -- nothing\n" } },
        { type: "execute", stmt: { sql: "SELECT ?", args: [int(1), int(2)] } },
        {
          type: "execute",
          stmt: { sql: "SELECT :a", args: [int(1)], named_args: [{ name: "a", value: int(1) }] },
        },
        { type: "sequence", sql: "SELECT 1; SELECT * FROM nope; SELECT 2" },
        {
          type: "execute",
          stmt: { sql: "SELECT x'00ff' AS b, ? AS t", args: [{ type: "blob", base64: "AP8=" }] },
        },
        { type: "close" },
      ],
    });
    expect(r.status).toBe(200);
    const { results, baton } = (await r.json()) as {
      baton: unknown;
      results: Array<{ type: string; response?: any; error?: any }>;
    };
    expect(baton).toBeNull();
    expect(results[1]!.response.result.rows).toEqual([[{ type: "float", value: 2.5 }]]);
    expect(results[3]!.response.result).toEqual({
      params: [{ name: ":a" }, { name: null }, { name: null }, { name: "?4" }],
      cols: [
        { name: "x", decltype: null },
        { name: "y", decltype: null },
        { name: "z", decltype: null },
      ],
      is_explain: false,
      is_readonly: true,
    });
    expect(results[4]!.error.code).toBe("SQL_MANY_STATEMENTS");
    expect(results[5]!.error.code).toBe("SQL_NO_STATEMENT");
    expect(results[6]!.error.code).toBe("ARGS_INVALID");
    expect(results[7]!.error.code).toBe("ARGS_BOTH_POSITIONAL_AND_NAMED");
    expect(results[8]!.error.message).toContain("no such table: nope");
    expect(results[9]!.response.result.rows).toEqual([
      [
        { type: "blob", base64: "AP8" },
        { type: "blob", base64: "AP8" },
      ],
    ]);

    // A closed SQL id cannot be used: a protocol error for the whole request.
    const gone = await post("/v2/pipeline", {
      requests: [
        { type: "store_sql", sql_id: 1, sql: "SELECT 1" },
        { type: "close_sql", sql_id: 1 },
        { type: "execute", stmt: { sql_id: 1 } },
      ],
    });
    expect(gone.status).toBe(400);
  });

  test("v3 cursor streams step entries", async () => {
    const r = await post("/v3/cursor", {
      baton: null,
      batch: {
        steps: [
          { stmt: { sql: "SELECT 1 AS a UNION ALL SELECT 2" } },
          { stmt: { sql: "SELECT * FROM nope" } },
          { condition: { type: "ok", step: 1 }, stmt: { sql: "SELECT 3" } },
          { stmt: { sql: "SELECT 'x' AS s" } },
        ],
      },
    });
    expect(r.status).toBe(200);
    const lines = (await r.text())
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, any>);
    expect(typeof lines[0]!.baton).toBe("string");
    expect(lines.slice(1).map((l) => l.type)).toEqual([
      "step_begin",
      "row",
      "row",
      "step_end",
      "step_error",
      "step_begin",
      "row",
      "step_end",
    ]);
    expect(lines[1]).toEqual({
      type: "step_begin",
      step: 0,
      cols: [{ name: "a", decltype: null }],
    });
    expect(lines[3]!.row).toEqual([int(2)]);
    expect(lines[5]!.step).toBe(1);
    expect(lines[6]!.step).toBe(3);
    await post("/v3/pipeline", { baton: lines[0]!.baton, requests: [{ type: "close" }] });
  });
});

describe("command line", () => {
  test("serves with --port/--db/--auth-token and prints one line with the URL (never the token)", async () => {
    const proc = Bun.spawn(
      [
        process.execPath,
        join(ROOT, "tools", "hrana-server.ts"),
        "--port",
        "0",
        "--db",
        join(dir, "cli.db"),
        "--auth-token",
        "cli-secret-token",
      ],
      {
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    try {
      const reader = proc.stdout.getReader();
      let out = "";
      while (!out.includes("\n")) {
        const { value, done } = await reader.read();
        if (done) break;
        out += new TextDecoder().decode(value);
      }
      reader.releaseLock();
      const line = out.trim();
      expect(line).toMatch(/^hrana-server listening on http:\/\/127\.0\.0\.1:\d+$/);
      expect(line).not.toContain("cli-secret-token");
      const url = line.slice(line.indexOf("http://"));
      const c = createWebClient({ url, authToken: "cli-secret-token" });
      clients.push(c);
      expect((await c.execute("SELECT 41 + 1 AS n")).rows[0]?.n).toBe(42);
      expect(
        await failure(createWebClient({ url, authToken: "nope" }).execute("SELECT 1")),
      ).toBeInstanceOf(LibsqlError);
    } finally {
      proc.kill("SIGTERM");
      await proc.exited;
    }
  });
});
