/**
 * Issue 30 item 5: a server never starts on a new, empty database in place of one that vanished,
 * nor on another database put in its place, without the operator saying so (deleting the
 * `<file>.identity` marker). Real server processes over a real data folder.
 */
import { afterAll, expect, test } from "bun:test";
import { copyFileSync, existsSync, rmSync } from "node:fs";
import { resolve } from "node:path";
import { dataFolder, startServerProcess } from "../helpers/server-process";
import { TIMED_OUT, within } from "../helpers/wait";

const ROOT = resolve(import.meta.dir, "../..");
const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

/** Runs the server expecting it to refuse: its exit code and stderr. */
async function refused(env: Record<string, string>) {
  const proc = Bun.spawn([process.execPath, "src/server.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: "/tmp", PORT: "0", HOST_LOCAL_REDIS: "off", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const exited = await within(proc.exited, 20_000); // a bound on a hang, not a speed check
  const code = exited === TIMED_OUT ? null : exited;
  if (code === null) proc.kill("SIGKILL");
  return { code, stderr: await new Response(proc.stderr as ReadableStream).text() };
}

test("a vanished or replaced database stops start-up with one line; deleting the marker allows it", async () => {
  const folder = await dataFolder();
  cleanups.push(folder.remove);
  const path = folder.dbUrl.slice("file:".length);
  const env = { DATABASE_URL: folder.dbUrl, HOST_LOCAL_REDIS: "off" };
  const first = await startServerProcess(env);
  cleanups.push(() => first.kill());
  first.proc.kill("SIGTERM");
  expect(await first.exited()).toBe(0);
  expect(existsSync(`${path}.identity`)).toBe(true);
  const files = ["", "-wal"].filter((suffix) => existsSync(path + suffix));
  for (const suffix of files) copyFileSync(path + suffix, `${path}.saved${suffix}`);

  // The file vanishes: no new empty database appears in its place.
  for (const suffix of ["", "-wal", "-shm"]) rmSync(path + suffix, { force: true });
  const gone = await refused(env);
  expect(gone.code).toBe(1);
  expect(gone.stderr).toContain(`cannot start: the database file ${path} is gone`);
  expect(gone.stderr.trim().split("\n")).toHaveLength(1);
  expect(existsSync(path)).toBe(false);

  // Another database in its place (a fresh one): refused too.
  const other = await dataFolder();
  cleanups.push(other.remove);
  copyFileSync(other.dbUrl.slice("file:".length), path);
  const replaced = await refused(env);
  expect(replaced.code).toBe(1);
  expect(replaced.stderr).toContain("is not the database this folder held");

  // The right file restored, as an operator restores a backup: the other database's WAL and
  // shared-memory index go with it (a stale index beside a restored file names the other's pages).
  for (const suffix of ["", "-wal", "-shm"]) rmSync(path + suffix, { force: true });
  for (const suffix of files) copyFileSync(`${path}.saved${suffix}`, path + suffix);
  const restored = await startServerProcess(env);
  cleanups.push(() => restored.kill());
  restored.proc.kill("SIGTERM");
  expect(await restored.exited()).toBe(0);

  // The operator says so: a new, empty database.
  for (const suffix of ["", "-wal", "-shm", ".identity"]) rmSync(path + suffix, { force: true });
  const fresh = await startServerProcess(env);
  cleanups.push(() => fresh.kill());
  fresh.proc.kill("SIGTERM");
  expect(await fresh.exited()).toBe(0);
}, 90_000);
