/**
 * WAL checkpoints off the event loop (decision 0061): a commit that leaves more than the
 * threshold in the WAL returns without copying pages back (SQLite would have checkpointed inside
 * that COMMIT, on the event loop), and the checkpoint connection then copies them on its own
 * thread; fewer pages are copied back once writes pause, so the WAL starts over instead of growing
 * to the backstop. Writes from a long write (the background connection) are checkpointed the same way.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BACKSTOP_PAGES, Checkpointer, THRESHOLD_PAGES } from "../../src/db/checkpointer";
import type { LibsqlDatabase as Database } from "../../src/db/libsql";
import { openDatabase } from "../../src/db/local";
import { waitFor } from "../helpers/wait";

let dir: string;
let path: string;
let db: Database;
/** Reads the WAL-index only; its own connection is never opened (no nudge). */
let probe: Checkpointer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "host-checkpoint-"));
  path = join(dir, "c.db");
  db = await openDatabase(`file:${path}`);
  await db.client.execute("CREATE TABLE blob_rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL)");
  probe = new Checkpointer(path);
});
afterAll(async () => {
  await probe.close();
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One transaction writing about `pages` pages of 4 KiB. */
const writePages = (pages: number) =>
  db.orm.transaction(async (tx) => {
    for (let i = 0; i < pages; i++)
      await tx.run(sql`INSERT INTO blob_rows (body) VALUES (${"x".repeat(3900)})`);
  });

/** Waits (bounded) until the WAL holds fewer than `below` pages not copied back; how many do. */
async function drained(below: number): Promise<number> {
  const { waiting } = await waitFor(
    () => {
      const waiting = probe.waitingPages();
      return waiting !== null && waiting < below ? { waiting } : null;
    },
    { message: () => `fewer than ${below} WAL pages waiting (now ${probe.waitingPages()})` },
  );
  return waiting;
}

describe("background checkpoints", () => {
  test("the writing connection's own checkpoints are only a backstop", async () => {
    const [row] = (await db.client.execute("PRAGMA wal_autocheckpoint")).rows;
    expect(Number(row![0])).toBe(BACKSTOP_PAGES);
  });

  test("a commit past the threshold returns with the pages still in the WAL; they are copied back after it", async () => {
    await writePages(THRESHOLD_PAGES + 300);
    // the COMMIT did not checkpoint: SQLite's default would have left nothing waiting here
    expect(probe.waitingPages()!).toBeGreaterThan(THRESHOLD_PAGES);
    // the checkpoint connection copies them back, off the event loop
    expect(await drained(50)).toBeLessThan(50);
    // and the next writer starts the WAL over instead of growing it
    await writePages(10);
    expect(probe.waitingPages()!).toBeLessThan(50);
  });

  test("pages under the threshold are copied back once writes pause, not in the COMMIT", async () => {
    await drained(1);
    await writePages(200);
    // read right after the COMMIT returned: it copied nothing back
    expect(probe.waitingPages()!).toBeGreaterThanOrEqual(200);
    // and once writes pause, the trailing checkpoint copies every page back
    expect(await drained(1)).toBe(0);
  });

  test("bursts of small commits keep the WAL near the threshold: it starts over instead of growing to the backstop", async () => {
    await drained(1);
    const walBytes = () => statSync(`${path}-wal`).size;
    let most = 0;
    for (let burst = 0; burst < 12; burst++) {
      for (let i = 0; i < 10; i++) await writePages(50);
      most = Math.max(most, probe.waitingPages()!);
      // the writes pause until the trailing checkpoint has copied every page back
      await drained(1);
    }
    // 6,000 pages written in all; what waited never came near the backstop
    expect(most).toBeLessThan(2 * THRESHOLD_PAGES);
    expect(walBytes()).toBeLessThan(2 * THRESHOLD_PAGES * 4200);
  });

  test("a long write's commit is checkpointed the same way", async () => {
    await drained(THRESHOLD_PAGES);
    await db.longWrite!(() => writePages(THRESHOLD_PAGES + 100));
    expect(probe.waitingPages()!).toBeGreaterThan(THRESHOLD_PAGES);
    expect(await drained(50)).toBeLessThan(50);
  });
});
