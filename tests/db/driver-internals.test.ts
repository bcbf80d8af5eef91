/**
 * The driver internals `src/db/driver-internals.ts` relies on, pinned (issue 28 item 6): each
 * helper has a fallback, so a Drizzle or libSQL upgrade that moves a field would silently take the
 * slow path. These fail instead: the fields are where the helpers expect them.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createClient } from "@libsql/client";
import { and, eq, getTableColumns, sql } from "drizzle-orm";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Database } from "../../src/db/client";
import {
  batchOnLibsql,
  executePositional,
  haltBusyStatement,
  libsqlTransactionClosed,
  type NativeStatement,
  oneRow,
  Prebuilt,
  readOnLibsql,
  renderSql,
  runDdlInGroups,
} from "../../src/db/driver-internals";
import { blob, integer, real, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { LibSQLPreparedQuery } from "drizzle-orm/libsql/session";
import NativeDatabase from "libsql";
import { readFileSync } from "node:fs";
import { createUser } from "../../src/core/auth/provisioning";
import { libsqlDatabase } from "../../src/db/libsql";
import { openDatabase } from "../../src/db/local";
import { drizzle } from "drizzle-orm/libsql";
import { runMigrations } from "../../src/migrations";
import { users } from "../../src/db/schema";
import { startHranaServer } from "../../tools/hrana-server";

let dir: string;
let db: Database;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "host-driver-internals-"));
  db = await openDatabase(`file:${join(dir, "a.db")}`);
});
afterAll(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

test("renderSql: Drizzle's dialect renders SQL text and parameters", () => {
  const q = renderSql(db.orm, sql`SELECT ${1} AS one WHERE ${"x"} = ${"x"}`);
  expect(q).toMatchObject({ sql: "SELECT ? AS one WHERE ? = ?", params: [1, "x", "x"] });
});

test("runDdlInGroups: inside a transaction, the libSQL transaction's executeMultiple runs DDL", async () => {
  const statements = Array.from({ length: 20 }, (_, i) =>
    sql.raw(`CREATE TABLE t${i} (id INTEGER)`),
  );
  const ran = await db.transaction((tx) => runDdlInGroups(tx, statements));
  expect(ran).toBe(true);
  const { rows } = await db.execute({
    sql: "SELECT count(*) AS n FROM sqlite_schema WHERE name LIKE 't%' AND type = 'table'",
    args: [],
  });
  expect(Number(rows[0]!.n)).toBe(20);
});

test("runDdlInGroups: outside a transaction or with bound values, nothing runs", async () => {
  expect(await runDdlInGroups(db.orm, [sql.raw("CREATE TABLE u1 (id INTEGER)")])).toBe(false);
  const bound = [sql`CREATE TABLE u2 (id INTEGER DEFAULT ${1})`];
  expect(await db.transaction((tx) => runDdlInGroups(tx, bound))).toBe(false);
  const { rows } = await db.execute({
    sql: "SELECT count(*) AS n FROM sqlite_schema WHERE name IN ('u1', 'u2')",
    args: [],
  });
  expect(Number(rows[0]!.n)).toBe(0);
});

test("executePositional: the statement goes to the libSQL client or transaction under Drizzle, as it is", async () => {
  // Only the direct path takes a `?` inside a literal: the fallback (a Drizzle template cut at
  // every `?`) refuses it, so this fails when Drizzle's `session.client` / `session.tx` move.
  const text = "SELECT '?' AS q, ? AS v";
  const alone = await executePositional(db.orm, text, [1]);
  expect(alone.rows.map((r) => ({ q: r.q, v: r.v }))).toEqual([{ q: "?", v: 1 }]);
  const inTx = await db.orm.transaction(async (tx) => {
    await tx.run(sql`CREATE TABLE positional (x INTEGER)`);
    await executePositional(tx, "INSERT INTO positional VALUES (?)", [7]);
    // the transaction's own uncommitted row: it ran on the transaction, not beside it
    return (await executePositional(tx, "SELECT x, '?' AS q FROM positional", [])).rows;
  });
  expect(inTx.map((r) => ({ x: r.x, q: r.q }))).toEqual([{ x: 7, q: "?" }]);
});

test("libsqlTransactionClosed: false while the libSQL transaction under a Drizzle one is open, true once SQLite ended it", async () => {
  const seen: boolean[] = [];
  const outcome = await db.orm
    .transaction(async (tx) => {
      seen.push(libsqlTransactionClosed(tx));
      // what SQLite does by itself on a full disk or an I/O error: Drizzle's transaction goes on
      await tx.run(sql`ROLLBACK`);
      seen.push(libsqlTransactionClosed(tx));
    })
    .then(
      () => "committed",
      (e: unknown) => (e as { code?: string }).code,
    );
  expect(seen).toEqual([false, true]);
  expect(outcome).toBe("TRANSACTION_CLOSED");
  // the connection is free again: the next transaction commits
  expect(await db.orm.transaction(async (tx) => libsqlTransactionClosed(tx))).toBe(false);
});

test("the drivers are pinned exactly (an upgrade is a decision, made with these tests)", () => {
  const pkg = JSON.parse(readFileSync(join(import.meta.dir, "../../package.json"), "utf8"));
  for (const name of ["libsql", "@libsql/client", "drizzle-orm"])
    expect(pkg.dependencies[name]).toMatch(/^\d+\.\d+\.\d+$/);
});

/** Two connections to one WAL file: `holder` takes the write lock, `b` (busy_timeout 0) meets it. */
function busyPair(name: string) {
  const path = join(dir, name);
  const holder = new NativeDatabase(path);
  holder.exec("PRAGMA journal_mode=WAL");
  holder.exec("CREATE TABLE t (x INTEGER)");
  const b = new NativeDatabase(path);
  b.exec("PRAGMA busy_timeout=0");
  holder.exec("BEGIN IMMEDIATE");
  const stmt = b.prepare("INSERT INTO t VALUES (?)") as unknown as NativeStatement;
  expect(() => stmt.run([1])).toThrow(/locked|busy/i);
  holder.exec("COMMIT");
  return { holder, b, stmt };
}

const countOn = (b: InstanceType<typeof NativeDatabase>) =>
  (b.prepare("SELECT count(*) FROM t").raw(true).all() as number[][])[0]![0];

const commitOn = (b: InstanceType<typeof NativeDatabase>) => {
  try {
    b.exec("BEGIN IMMEDIATE");
    b.exec("COMMIT");
    return "committed";
  } catch (e) {
    b.exec("ROLLBACK");
    return (e as Error).message;
  }
};

test("haltBusyStatement: libsql leaves a statement refused as busy in progress (COMMIT fails) and resets it when it runs again", () => {
  const { holder, b } = busyPair("busy-left.db");
  try {
    // When this passes no more, the driver resets on error itself and the halt is not needed.
    expect(commitOn(b)).toMatch(/statements in progress/);
  } finally {
    holder.close();
    b.close();
  }
});

test("haltBusyStatement: halts it without writing, and the connection's next transaction commits", () => {
  const { holder, b, stmt } = busyPair("busy-halted.db");
  try {
    haltBusyStatement(b, stmt, [1]);
    expect(commitOn(b)).toBe("committed");
    expect(countOn(b)).toBe(0);
    // query_only is off again: writes go on
    stmt.run([2]);
    expect(countOn(b)).toBe(1);
  } finally {
    holder.close();
    b.close();
  }
});

test("Prebuilt: a select in a remote batch, alone, and on a file answers as its builder does", async () => {
  const hranaDir = mkdtempSync(join(tmpdir(), "host-prebuilt-"));
  const hrana = await startHranaServer({ path: join(hranaDir, "r.db"), port: 0 });
  const remote = libsqlDatabase(createClient({ url: hrana.url }), "remote");
  try {
    const byName = new Prebuilt<unknown>((orm) =>
      orm
        .select({ username: users.username, isSuperuser: users.isSuperuser })
        .from(users)
        .where(eq(users.username, sql.placeholder("name"))),
    );
    for (const on of [remote, db]) {
      await runMigrations(on);
      await createUser(on.orm, { username: `probe${on.kind}`, isSuperuser: true });
      const builder = on.orm
        .select({ username: users.username, isSuperuser: users.isSuperuser })
        .from(users)
        .where(eq(users.username, `probe${on.kind}`));
      const expected = [{ username: `probe${on.kind}`, isSuperuser: true }];
      const item = byName.with(on.orm, { name: `probe${on.kind}` });
      const other = byName.with(on.orm, { name: "nobody" });
      // in a batch of several (Drizzle's batch code calls the item's `_prepare`), then alone
      const batched: unknown = await on.read([item, other, builder] as never);
      expect(batched).toEqual([expected, [], expected]);
      expect((await on.read([item] as never)) as unknown).toEqual([expected]);
      expect(await item).toEqual(expected);
      // awaited alone inside a transaction of the ORM: it runs there (sees its uncommitted row)
      const seen = await on.orm
        .transaction(async (tx) => {
          await createUser(tx, { username: `intx${on.kind}`, isSuperuser: true });
          const rows = await byName.with(tx, { name: `intx${on.kind}` }, on.orm);
          throw Object.assign(new Error("rollback"), { rows });
        })
        .catch((e: { rows?: unknown }) => e.rows);
      expect(seen).toEqual([{ username: `intx${on.kind}`, isSuperuser: true }]);
    }
  } finally {
    await remote.close();
    await hrana.stop();
    rmSync(hranaDir, { recursive: true, force: true });
  }
});

test("Prebuilt: a select's rows are mapped by its own mapper (Drizzle's not called) exactly as Drizzle maps them", async () => {
  const hranaDir = mkdtempSync(join(tmpdir(), "host-prebuilt-map-"));
  const hrana = await startHranaServer({ path: join(hranaDir, "r.db"), port: 0 });
  const remote = libsqlDatabase(createClient({ url: hrana.url }), "remote");
  const kinds = sqliteTable("map_kinds", {
    id: integer("id").primaryKey(),
    flag: integer("flag", { mode: "boolean" }),
    at: integer("at", { mode: "timestamp_ms" }),
    doc: text("doc", { mode: "json" }),
    label: text("label"),
    big: blob("big", { mode: "bigint" }),
    data: blob("data", { mode: "buffer" }),
    ratio: real("ratio"),
  });
  const fields = {
    ...getTableColumns(kinds),
    doubled: sql<number>`${kinds.id} * 2`.mapWith(Number),
    shout: sql<string>`upper(${kinds.label})`.as("shout"),
    raw: sql`${kinds.label} || '!'`,
  };
  const built = new Prebuilt<unknown>((orm) =>
    orm
      .select(fields)
      .from(kinds)
      .where(sql`${kinds.id} >= ${sql.placeholder("from")}`),
  );
  const guard = new Prebuilt<unknown>((orm) =>
    orm
      .select({ n: sql<number>`count(*)` })
      .from(kinds)
      .where(sql`${kinds.id} > ${sql.placeholder("x")}`),
  );
  const drizzleMaps = LibSQLPreparedQuery.prototype.mapResult;
  try {
    for (const on of [remote, db]) {
      await on.execute({
        sql: "CREATE TABLE map_kinds (id INTEGER PRIMARY KEY, flag INTEGER, at INTEGER, doc TEXT, label TEXT, big INTEGER, data BLOB, ratio REAL)",
        args: [],
      });
      await on.execute({
        sql: "INSERT INTO map_kinds VALUES (1, 1, 1700000000000, '{\"a\":[1,2]}', 'one', CAST('12345' AS BLOB), x'00ff10', 0.5), (2, 0, NULL, NULL, NULL, NULL, NULL, NULL)",
        args: [],
      });
      // what Drizzle's own mapping answers (the builder awaited as Drizzle runs it)
      const expected = await on.orm.select(fields).from(kinds).where(sql`${kinds.id} >= ${1}`);
      expect(expected.length).toBe(2);
      LibSQLPreparedQuery.prototype.mapResult = () => {
        throw new Error("Drizzle's mapResult was called");
      };
      try {
        // remote: folded into one statement with a one-row guard (readOnLibsql); a file: a batch
        const [, rows] = (await on.read([
          oneRow(guard.with(on.orm, { x: 100 })),
          built.with(on.orm, { from: 1 }),
        ] as never)) as unknown as [unknown, unknown];
        const [alone] = (await on.read([built.with(on.orm, { from: 1 })] as never)) as unknown as [
          unknown,
        ];
        for (const got of [rows, alone]) {
          expect(got).toEqual(expected);
          const [first] = got as Record<string, unknown>[];
          expect(Object.keys(first!)).toEqual(Object.keys(expected[0]!));
          expect(first!.at).toBeInstanceOf(Date);
          expect(first!.data).toBeInstanceOf(Buffer);
          const typesOf = (row: Record<string, unknown>) =>
            Object.values(row).map((v) =>
              v === null ? "null" : (v?.constructor?.name ?? typeof v),
            );
          expect(typesOf(first!)).toEqual(typesOf(expected[0]!));
        }
      } finally {
        LibSQLPreparedQuery.prototype.mapResult = drizzleMaps;
      }
    }
  } finally {
    LibSQLPreparedQuery.prototype.mapResult = drizzleMaps;
    await remote.close();
    await hrana.stop();
    rmSync(hranaDir, { recursive: true, force: true });
  }
});

test("Prebuilt: the text rendered once, with this use's values, is what Drizzle renders for them", () => {
  const guard = (o: Database["orm"], hash: unknown, print: unknown) =>
    sql`INSERT INTO write_guard (ok) SELECT coalesce((${o
      .select({ id: users.id })
      .from(users)
      .where(and(eq(users.isActive, true), eq(users.username, hash as string)))}), '') = ${print}`;
  const once = new Prebuilt<unknown>((o) =>
    o.run(guard(o, sql.placeholder("hash"), sql.placeholder("print"))),
  );
  for (const [hash, print] of [
    ["a", "p?1"],
    ["b'; --", "p2"],
  ]) {
    const item = once.with(db.orm, { hash, print }) as unknown as {
      _prepare(): { getQuery(): { sql: string; params: unknown[] } };
    };
    const { sql: text, params } = item._prepare().getQuery();
    // the fixed parameter (true) stays, the values land where the placeholders were
    const drizzles = renderSql(db.orm, guard(db.orm, hash, print))!;
    expect({ sql: text, params }).toEqual({ sql: drizzles.sql, params: drizzles.params });
  }
  // a value not given fails the use rather than binding another use's
  const missing = once.with(db.orm, { hash: "a" }) as unknown as { _prepare(): unknown };
  expect(() => missing._prepare()).toThrow(/print/);
});

const items = sqliteTable("pb_items", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  itemName: text("name"),
});

test("Prebuilt: built once per ORM; as batch items of read and write and awaited alone, each use with its own values", async () => {
  await db.execute({
    sql: "CREATE TABLE pb_items (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT)",
    args: [],
  });
  let builds = 0;
  const insert = new Prebuilt<Array<{ id: number }>>((orm) => {
    builds++;
    return orm
      .insert(items)
      .values({ itemName: sql.placeholder("name") })
      .returning({ id: items.id });
  });
  const byName = new Prebuilt<Array<{ id: number; itemName: string | null }>>((orm) => {
    builds++;
    return orm
      .select()
      .from(items)
      .where(sql`${items.itemName} = ${sql.placeholder("name")}`);
  });
  const touch = new Prebuilt<{ rowsAffected: number }>((orm) => {
    builds++;
    return orm.run(sql`UPDATE pb_items SET name = name WHERE id <= ${2}`);
  });
  const [a, b, touched] = await db.write([
    insert.with(db.orm, { name: "a" }),
    insert.with(db.orm, { name: "b" }),
    touch.with(db.orm),
  ]);
  expect([a, b]).toEqual([[{ id: 1 }], [{ id: 2 }]]);
  expect(touched.rowsAffected).toBe(2);
  // Drizzle's own mapping (the property name, not the column name)
  const [x, y] = await db.read([
    byName.with(db.orm, { name: "b" }),
    byName.with(db.orm, { name: "a" }),
  ]);
  expect(x).toEqual([{ id: 2, itemName: "b" }]);
  expect(y).toEqual([{ id: 1, itemName: "a" }]);
  expect(await insert.with(db.orm, { name: "c" })).toEqual([{ id: 3 }]);
  expect(await byName.with(db.orm, { name: "c" })).toEqual([{ id: 3, itemName: "c" }]);
  expect(builds).toBe(3);
  // another ORM (the reader) has its own
  await byName.with(db.reader, { name: "a" });
  expect(builds).toBe(db.reader === db.orm ? 3 : 4);
});

test("Prebuilt: a raw statement with placeholders runs in batches and alone, its values bound each time", async () => {
  let builds = 0;
  const raw = new Prebuilt<Array<{ x: number; s: string }>>((orm) => {
    builds++;
    return orm.all(sql`SELECT ${sql.placeholder("x")} + 1 AS x, ${sql.placeholder("s")} AS s`);
  });
  const [a, b] = await db.write([
    raw.with(db.orm, { x: 1, s: "a?" }),
    raw.with(db.orm, { x: 41, s: "b" }),
  ]);
  expect([a, b]).toEqual([[{ x: 2, s: "a?" }], [{ x: 42, s: "b" }]]);
  expect(await raw.with(db.orm, { x: 9, s: "c" })).toEqual([{ x: 10, s: "c" }]);
  const [alone] = await db.read([raw.with(db.orm, { x: 0, s: "d" })]);
  expect(alone).toEqual([{ x: 1, s: "d" }]);
  expect(builds).toBe(1);
});

test("batchOnLibsql: Drizzle's batch items, each distinct statement sent once, each item its own rows", async () => {
  const hranaDir = mkdtempSync(join(tmpdir(), "host-batch-once-"));
  const hrana = await startHranaServer({ path: join(hranaDir, "r.db"), port: 0 });
  const client = createClient({ url: hrana.url });
  const sent: { sql: string; args: unknown[] }[][] = [];
  const modes: unknown[] = [];
  // the real client, its batches recorded
  const recording: Pick<typeof client, "batch"> = {
    batch: (statements, mode) => {
      sent.push(statements as never);
      modes.push(mode);
      return client.batch(statements, mode);
    },
  };
  const orm = drizzle(client);
  try {
    await client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, data BLOB)");
    await client.execute("INSERT INTO t VALUES (1, 'one', x'01'), (2, 'two', x'01')");
    const table = sqliteTable("t", { id: integer("id"), name: text("name") });
    const byId = (id: number) => orm.select().from(table).where(eq(table.id, id));
    const raw = () => orm.all(sql`SELECT name FROM t WHERE id = ${1}`);
    const byBlob = () => orm.all(sql`SELECT id FROM t WHERE data = ${new Uint8Array([1])}`);
    const items = [byId(1), byId(2), byId(1), raw(), raw(), byBlob(), byBlob()];
    const answers = (await batchOnLibsql(recording, items, "read")) as unknown[][];
    expect(answers).toEqual([
      [{ id: 1, name: "one" }],
      [{ id: 2, name: "two" }],
      [{ id: 1, name: "one" }],
      [{ name: "one" }],
      [{ name: "one" }],
      [{ id: 1 }, { id: 2 }],
      [{ id: 1 }, { id: 2 }],
    ]);
    // byId(1) and the raw statement once each; byId(2) apart (other values); blobs never merged
    expect(sent).toHaveLength(1);
    expect(sent[0]).toHaveLength(5);
    expect(modes).toEqual(["read"]);
    // a repeat's rows are its own: what one caller does to them, the other never sees
    (answers[3]![0] as { name: string }).name = "changed";
    expect(answers[4]).toEqual([{ name: "one" }]);
    expect(answers[0]![0]).not.toBe(answers[2]![0]);
  } finally {
    client.close();
    await hrana.stop();
    rmSync(hranaDir, { recursive: true, force: true });
  }
});

test("readOnLibsql: one-row guards and one query folded into one statement, no transaction; answers as a batch gives them", async () => {
  const hranaDir = mkdtempSync(join(tmpdir(), "host-fold-"));
  const hrana = await startHranaServer({ path: join(hranaDir, "f.db"), port: 0 });
  const client = createClient({ url: hrana.url });
  const executed: string[] = [];
  const batches: unknown[] = [];
  const recording: Pick<typeof client, "batch" | "execute"> = {
    batch: (statements, mode) => {
      batches.push(statements);
      return client.batch(statements, mode);
    },
    execute: ((s: { sql: string; args: unknown[] }) => {
      executed.push(s.sql);
      return client.execute(s as never);
    }) as never,
  };
  const orm = drizzle(client);
  try {
    await client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, n INTEGER)");
    await client.execute("INSERT INTO t VALUES (1, 'one', NULL), (2, 'two', 2), (3, 'three', 3)");
    const table = sqliteTable("t", { id: integer("id"), name: text("name"), n: integer("n") });
    const one = (id: number) =>
      orm.select({ name: table.name, n: table.n }).from(table).where(eq(table.id, id)).limit(1);
    const guard = (id: number) =>
      oneRow(orm.select({ name: table.name }).from(table).where(eq(table.id, id)).limit(1));
    const rows = (ids: number[], desc = true) =>
      orm
        .select()
        .from(table)
        .where(
          sql`${table.id} IN (${sql.join(
            ids.map((i) => sql`${i}`),
            sql`, `,
          )})`,
        )
        .orderBy(desc ? sql`${table.id} DESC` : table.id);
    const cases = [
      [guard(1), guard(2), rows([1, 2, 3])], // rows in the query's order, NULL values kept
      [guard(9), rows([2, 3], false)], // a guard with no row
      [guard(1), rows([])], // a query with no rows
      [guard(9), one(9)], // neither
      [guard(3), one(1)], // the last a row with a NULL value
    ];
    for (const items of cases) {
      const folded = await readOnLibsql(recording, items);
      expect(folded).toEqual(await orm.batch(items.map((q) => q) as never));
    }
    expect(executed).toHaveLength(cases.length);
    expect(batches).toHaveLength(0);
    // not folded: a raw statement (mapped by column name), or a query before the last unmarked
    await readOnLibsql(recording, [guard(1), orm.all(sql`SELECT name FROM t WHERE id = ${1}`)]);
    await readOnLibsql(recording, [one(1), rows([1])]);
    expect(executed).toHaveLength(cases.length);
    expect(batches).toHaveLength(2);
  } finally {
    client.close();
    await hrana.stop();
    rmSync(hranaDir, { recursive: true, force: true });
  }
});
