/**
 * Issue 30 item 5: the Database check tells the truth. It writes (a read-only database fails it
 * and `/readyz`), notices the file deleted or replaced under the server, and reports damage the
 * integrity check (`PRAGMA quick_check`, at start) finds. Real libSQL files.
 */
import { afterEach, expect, test } from "bun:test";
import {
  closeSync,
  copyFileSync,
  mkdtempSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/local";
import { runMigrations } from "../../src/migrations";
import { HEALTH, healthJson } from "../healthcheck/helpers";
import { makeTestApp, type TestApp } from "../helpers/app";
import { waitFor } from "../tasks/harness";

const ONLY_DATABASE = JSON.stringify({
  host_healthcheck_plugin: { checks: ["health_check.Database"], details: "always" },
});
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

async function app(env: Record<string, string> = {}): Promise<TestApp> {
  const t = await makeTestApp({ PLUGINS_CONFIG: ONLY_DATABASE, ...env });
  cleanups.push(() => t.close());
  return t;
}
const database = async (t: TestApp) => (await healthJson(t, { path: HEALTH })).body.checks.Database;
const ready = async (t: TestApp) => (await t.req("GET", "/readyz", { token: null })).status;

test("a database that cannot be written fails the check and /readyz; it recovers by itself", async () => {
  const t = await app();
  expect(await database(t)).toBe("working");
  expect(await ready(t)).toBe(200);
  // SQLite's own read-only mode on the writing connection: every write meets SQLITE_READONLY,
  // as it does on a read-only file or WAL.
  await t.deps.db.client.execute("PRAGMA query_only = ON");
  expect(await database(t)).toContain(
    "a write failed: the database file (or its folder, or its WAL) is read-only",
  );
  expect(await ready(t)).toBe(503);
  const write = await t.json("POST", "/api/dcim/sites/", { body: { name: "Ro", slug: "ro" } });
  expect(write.status).toBe(503);
  expect(write.body.error).toBe("database_read_only");
  expect(write.res.headers.get("retry-after")).not.toBeNull();
  await t.deps.db.client.execute("PRAGMA query_only = OFF");
  expect(await database(t)).toBe("working");
  expect(await ready(t)).toBe(200);
});

test("the database file deleted under the server fails the check and refuses writes", async () => {
  const t = await app();
  expect(await database(t)).toBe("working");
  const path = t.dbUrl.slice("file:".length);
  rmSync(path);
  expect(await database(t)).toContain("the database file was deleted since the server started");
  expect(await ready(t)).toBe(503);
  // Writes would land in the unlinked file and be lost: refused.
  const write = await t.json("POST", "/api/dcim/sites/", { body: { name: "Lost", slug: "lost" } });
  expect(write.status).toBe(503);
  expect(write.body.error).toBe("database_file_gone");
  // A read served from the unlinked file, or refused the same way; never a 500.
  const read = await t.json("GET", "/api/dcim/sites/");
  if (read.status !== 200)
    expect([read.status, read.body.error]).toEqual([503, "database_file_gone"]);
});

test("the database file replaced under the server fails the check", async () => {
  const t = await app();
  const path = t.dbUrl.slice("file:".length);
  copyFileSync(path, `${path}.other`);
  renameSync(`${path}.other`, path);
  expect(await database(t)).toContain("the database file was replaced since the server started");
  expect(await ready(t)).toBe(503);
});

test("a damaged page is found by the integrity check at start and fails the check", async () => {
  // A migrated database with a table of many pages, closed, then a page near its end overwritten.
  const dir = mkdtempSync(join(tmpdir(), "host-damaged-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const copy = join(dir, "host.db");
  const seed = await openDatabase(`file:${copy}`);
  await runMigrations(seed);
  await seed.client.execute("CREATE TABLE filler (id INTEGER PRIMARY KEY, body TEXT)");
  await seed.client.execute(
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) INSERT INTO filler SELECT i, hex(randomblob(300)) FROM n",
  );
  await seed.client.execute("PRAGMA wal_checkpoint(TRUNCATE)");
  await seed.close();
  const pages = statSync(copy).size / 4096;
  const fd = openSync(copy, "r+");
  writeSync(fd, Buffer.alloc(4096, 0xa5), 0, 4096, Math.floor(pages * 0.9) * 4096);
  closeSync(fd);

  const t = await app({ DATABASE_URL: `file:${copy}` });
  const file = t.deps.db.fileHealth;
  await waitFor("the integrity check at start", () => file.integrity !== null, 10_000);
  expect(file.integrity!.ok).toBe(false);
  expect(await database(t)).toContain("the integrity check found damage");
  expect(await ready(t)).toBe(503);
});
