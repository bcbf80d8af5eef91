/**
 * `preparedIn` / `Prebuilt`: a query prepared once on the ORM runs inside a
 * transaction on that transaction (sees its uncommitted rows, is undone by its rollback) and never
 * on another database. If a Drizzle upgrade changes the internals it relies on, these fail.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq, sql } from "drizzle-orm";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Database } from "../../src/db/client";
import { Prebuilt, preparedIn } from "../../src/db/driver-internals";
import { openDatabase } from "../../src/db/local";
import { runMigrations } from "../../src/migrations";
import { tags } from "../../src/db/schema";

let dir: string;
let db: Database;
let other: Database;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "host-prepared-"));
  db = await openDatabase(`file:${join(dir, "a.db")}`);
  other = await openDatabase(`file:${join(dir, "b.db")}`);
  for (const d of [db, other]) await runMigrations(d);
});
afterAll(async () => {
  await db.close();
  await other.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A tag row with its name and slug left as placeholders. */
const tagValues = {
  name: sql.placeholder("name"),
  slug: sql.placeholder("slug"),
  color: "9e9e9e",
  description: "",
  created: "2026-01-01T00:00:00Z",
  lastUpdated: "2026-01-01T00:00:00Z",
};

/** Fails instead of hanging: a query sent to the client while its transaction holds the connection would wait forever. */
const within = <T>(p: Promise<T>) =>
  Promise.race([
    p,
    new Promise<never>((_, no) =>
      setTimeout(() => no(new Error("query ran outside its transaction")), 3000),
    ),
  ]);

describe("preparedIn", () => {
  const byName = () =>
    db.orm
      .select({ id: tags.id })
      .from(tags)
      .where(eq(tags.name, sql.placeholder("name")))
      .prepare();

  test("on its own ORM the prepared query itself is used; in a transaction, a copy", async () => {
    const q = byName();
    expect(preparedIn(q, db.orm)).toBe(q);
    await within(
      db.orm.transaction(async (tx) => {
        const copy = preparedIn(q, tx);
        expect(copy).not.toBeNull();
        expect(copy).not.toBe(q);
      }),
    );
  });

  test("a query prepared on one database is never run on another", async () => {
    const q = byName();
    expect(preparedIn(q, other.orm)).toBeNull();
    await other.orm.transaction(async (tx) => {
      expect(preparedIn(q, tx)).toBeNull();
    });
  });
});

// The outbox's job and outbox rows (`services/tasks/outbox.ts`) are written this way, inside the
// write's transaction.
const insertOnce = new Prebuilt<Array<{ id: number }>>((d) =>
  d.insert(tags).values(tagValues).returning({ id: tags.id }),
);
const countByName = new Prebuilt<Array<{ n: number }>>((d) =>
  d
    .select({ n: sql<number>`count(*)` })
    .from(tags)
    .where(eq(tags.name, sql.placeholder("name"))),
);

describe("Prebuilt awaited alone in transactions", () => {
  test("it runs in the transaction: sees its rows, and a rollback undoes its insert", async () => {
    const failed = await within(
      db.orm
        .transaction(async (tx) => {
          const [row] = await insertOnce.with(tx, { name: "Staged", slug: "staged" }, db.orm);
          expect(row!.id).toBeGreaterThan(0);
          expect(await countByName.with(tx, { name: "Staged" }, db.orm)).toEqual([{ n: 1 }]);
          throw new Error("roll back");
        })
        .catch((e: Error) => e.message),
    );
    expect(failed).toBe("roll back");
    expect(await countByName.with(db.orm, { name: "Staged" })).toEqual([{ n: 0 }]);
    await within(
      db.orm.transaction(async (tx) => {
        await insertOnce.with(tx, { name: "Kept", slug: "kept" }, db.orm);
      }),
    );
    expect(await countByName.with(db.orm, { name: "Kept" })).toEqual([{ n: 1 }]);
  });

  test("on another database it runs there", async () => {
    await insertOnce.with(other.orm, { name: "Apart", slug: "apart" });
    expect(await countByName.with(other.orm, { name: "Apart" })).toEqual([{ n: 1 }]);
    expect(await countByName.with(db.orm, { name: "Apart" })).toEqual([{ n: 0 }]);
  });

  test("its rows as values come unmapped, in the select list's order, in the transaction", async () => {
    const names = new Prebuilt<unknown>((d) =>
      d
        .select({ slug: tags.slug, name: tags.name })
        .from(tags)
        .where(eq(tags.name, sql.placeholder("name"))),
    );
    const valuesOf = async (...args: Parameters<typeof names.values>) =>
      (await names.values(...args)).map((row) => Array.from(row));
    const failed = await within(
      db.orm
        .transaction(async (tx) => {
          await insertOnce.with(tx, { name: "Listed", slug: "listed" }, db.orm);
          expect(await valuesOf(tx, { name: "Listed" }, db.orm)).toEqual([["listed", "Listed"]]);
          throw new Error("roll back");
        })
        .catch((e: Error) => e.message),
    );
    expect(failed).toBe("roll back");
    expect(await valuesOf(db.orm, { name: "Listed" })).toEqual([]);
    await insertOnce.with(other.orm, { name: "Listed", slug: "listed" });
    expect(await valuesOf(other.orm, { name: "Listed" })).toEqual([["listed", "Listed"]]);
  });
});
