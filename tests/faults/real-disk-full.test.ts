/**
 * Issue 30 item 6 on a real full disk: the server's data folder on a tmpfs of a few MB (mounted
 * for the test; skipped where mounting is not allowed — `disk-full.test.ts` covers SQLITE_FULL
 * without privileges). Under concurrent writes the disk fills: every answer is 201 or 507 with
 * `Retry-After` (never 500, never TRANSACTION_CLOSED); once space is freed writes come back by
 * themselves; everything acknowledged is there after a restart.
 */
import { afterAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { openDatabase } from "../../src/db/local";
import { runMigrations } from "../../src/migrations";
import { waitFor } from "../tasks/harness";
import { makeTestApp } from "../helpers/app";
import { createClient } from "@libsql/client";
import { HEALTH, healthJson, makeHealthApp } from "../healthcheck/helpers";
import { httpClient, startServerProcess, type ServerProcess } from "../helpers/server-process";

const root = mkdtempSync(join(tmpdir(), "host-disk-full-"));
const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const fn of cleanups.reverse()) await fn();
  rmSync(root, { recursive: true, force: true });
});

/** A tmpfs of `mb` MB, unmounted after the suite; null where mounting is not allowed. */
function tmpfs(name: string, mb: number): string | null {
  const dir = join(root, name);
  mkdirSync(dir);
  if (spawnSync("mount", ["-t", "tmpfs", "-o", `size=${mb}m`, "tmpfs", dir]).status !== 0)
    return null;
  cleanups.unshift(() => spawnSync("umount", ["-l", dir]));
  return dir;
}
const mnt = tmpfs("server", 12);
const groupMnt = tmpfs("group", 16);
const checkpointMnt = tmpfs("checkpoint", 24);
const mounted = mnt !== null && groupMnt !== null && checkpointMnt !== null;

/** Fills the disk under `dir` to `leaveBytes` free with a filler file; returns its path. */
function fill(dir: string, leaveBytes: number): string {
  const out = spawnSync("df", ["-B1", "--output=avail", dir]).stdout.toString().trim().split("\n");
  const path = join(dir, "filler");
  writeFileSync(path, Buffer.alloc(Math.max(0, Number(out.at(-1)) - leaveBytes)));
  return path;
}

test.skipIf(!mounted)(
  "a bulk that meets the full disk inside a group commit: 507 for it, the others answered truly",
  async () => {
    const t = await makeTestApp({ DATABASE_URL: `file:${join(groupMnt!, "host.db")}` });
    cleanups.push(() => t.close());
    const filler = fill(groupMnt!, 1_500_000);
    let n = 0;
    const site = () => {
      const i = ++n;
      return { name: `G ${i}`, slug: `g-${i}`, description: "d".repeat(190) };
    };
    const singles = Array.from({ length: 12 }, site);
    const big = Array.from({ length: 3000 }, site);
    // The bulk's pages spill to the WAL mid-transaction and meet the full disk; SQLite then
    // rolls back the whole shared transaction.
    const answers = await Promise.all([
      ...singles.slice(0, 6).map((body) => t.json("POST", "/api/dcim/sites/", { body })),
      t.json("POST", "/api/dcim/sites/", { body: big }),
      ...singles.slice(6).map((body) => t.json("POST", "/api/dcim/sites/", { body })),
    ]);
    const bulk = answers.splice(6, 1)[0]!;
    expect(bulk.status).toBe(507);
    expect(bulk.body.error).toBe("database_full");
    expect(Number(bulk.res.headers.get("retry-after"))).toBeGreaterThan(0);
    for (const [i, r] of answers.entries()) {
      expect([201, 507]).toContain(r.status);
      const found = await t.json("GET", `/api/dcim/sites/?slug=${singles[i]!.slug}`);
      expect(found.body.count).toBe(r.status === 201 ? 1 : 0);
    }
    expect(answers.filter((r) => r.status === 201).length).toBeGreaterThan(0);
    expect((await t.json("GET", `/api/dcim/sites/?slug=${big[0]!.slug}`)).body.count).toBe(0);
    rmSync(filler);
    expect((await t.json("POST", "/api/dcim/sites/", { body: site() })).status).toBe(201);
  },
  60_000,
);

test.skipIf(!mounted)(
  "checkpoints that fail on a full disk fail the Database check, logged once; space back, all is well",
  async () => {
    const dbUrl = `file:${join(checkpointMnt!, "host.db")}`;
    const t = await makeHealthApp({
      DATABASE_URL: dbUrl,
      PLUGINS_CONFIG: JSON.stringify({
        host_healthcheck_plugin: { checks: ["health_check.Database"], details: "always" },
      }),
    });
    cleanups.push(() => t.close());
    const file = t.deps.db.fileHealth;
    let n = 0;
    const sites = (count: number) =>
      Array.from({ length: count }, () => {
        const i = ++n;
        return { name: `C ${i}`, slug: `c-${i}`, description: "c".repeat(190) };
      });
    // A reader keeps its snapshot while a burst is written: the burst stays in the WAL.
    const reader = createClient({ url: dbUrl });
    cleanups.push(() => reader.close());
    const snapshot = await reader.transaction("read");
    await snapshot.execute("SELECT count(*) FROM sites");
    for (let i = 0; i < 2; i++)
      expect((await t.json("POST", "/api/dcim/sites/", { body: sites(1000) })).status).toBe(201);
    const filler = fill(checkpointMnt!, 200_000);
    snapshot.close();
    // Each small write nudges a checkpoint, which must grow the database file: the disk is full.
    await waitFor("a failing checkpoint", async () => {
      await t.json("POST", "/api/dcim/sites/", { body: sites(1)[0] });
      return file.checkpointError !== null;
    });
    for (let i = 0; i < 5; i++) await t.json("POST", "/api/dcim/sites/", { body: sites(1)[0] });
    const page = await healthJson(t, { path: HEALTH });
    expect(page.body.checks.Database).toContain("checkpoints fail");
    expect(t.logs.filter((l) => l.includes("database checkpoints fail")).length).toBe(1);
    rmSync(filler);
    await waitFor("checkpoints to succeed", async () => {
      await t.json("POST", "/api/dcim/sites/", { body: sites(1)[0] });
      return file.checkpointError === null;
    });
    expect((await healthJson(t, { path: HEALTH })).body.checks.Database).toBe("working");
    expect(t.logs.filter((l) => l.includes("database checkpoints succeed again")).length).toBe(1);
  },
  60_000,
);

test.skipIf(!mounted)(
  "a full disk answers 507, never 500, and writes come back when space returns",
  async () => {
    const dbUrl = `file:${join(mnt!, "data", "host.db")}`;
    const db = await openDatabase(dbUrl);
    await runMigrations(db);
    await createUser(db.orm, { username: "admin", isSuperuser: true });
    const token = (await issueToken(db.orm, { username: "admin" })).key;
    await db.close();
    const env = { DATABASE_URL: dbUrl, HOST_LOCAL_REDIS: "off", LOG_LEVEL: "info" };
    let server: ServerProcess = await startServerProcess(env);
    cleanups.push(() => server.kill());
    const api = httpClient(server.url, token);
    const filler = fill(mnt!, 600_000);

    const statuses = new Map<number, number>();
    const errors = new Set<string>();
    let acknowledged = 0;
    let n = 0;
    // 8 writers, bulk and single creates, until the disk is full for a while (bounded).
    const writer = async () => {
      for (let round = 0; round < 400 && (statuses.get(507) ?? 0) < 40; round++) {
        const size = round % 3 === 0 ? 40 : 1;
        const body = Array.from({ length: size }, () => {
          const i = ++n;
          return { name: `Disk ${i}`, slug: `disk-${i}`, description: "d".repeat(180) };
        });
        const r = await api.json("POST", "/api/dcim/sites/", { body: size === 1 ? body[0] : body });
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        if (r.status === 201) acknowledged += size;
        else {
          errors.add(`${r.status} ${r.body?.error}`);
          if (r.status === 507) expect(Number(r.res.headers.get("retry-after"))).toBeGreaterThan(0);
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, writer));
    expect([...errors]).toEqual(["507 database_full"]);
    expect(statuses.get(507)).toBeGreaterThan(0);

    rmSync(filler); // space returns
    const back = await waitFor(
      "writes to come back",
      async () => {
        const i = ++n;
        const r = await api.json("POST", "/api/dcim/sites/", {
          body: { name: `Back ${i}`, slug: `back-${i}` },
        });
        if (r.status === 201) acknowledged++;
        return r.status === 201;
      },
      15_000,
      100,
    );
    expect(back).toBe(true);

    server.proc.kill("SIGTERM");
    expect(await server.exited()).toBe(0);
    server = await startServerProcess(env);
    cleanups.push(() => server.kill());
    const count = await httpClient(server.url, token).json("GET", "/api/dcim/sites/?limit=1");
    expect(count.body.count).toBe(acknowledged);
  },
  120_000,
);
