/**
 * A database failure at start or in `manage` is one line naming the cause and the file, and
 * nothing is left running: a read-only database file, tried as an operator would.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");
const dir = mkdtempSync(join(tmpdir(), "host-start-failures-"));
const file = join(dir, "host.db");
const isRoot = process.getuid?.() === 0;

function run(cmd: string[], env: Record<string, string> = {}) {
  const r = Bun.spawnSync([process.execPath, ...cmd], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: dir,
      PORT: "0",
      DATABASE_URL: `file:${file}`,
      ...env,
    },
    stdout: "pipe",
    stderr: "pipe",
    timeout: 30_000,
  });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

/** Root ignores file modes; the immutable attribute stops root's writes too. */
function makeReadOnly(readOnly: boolean) {
  const r = isRoot
    ? Bun.spawnSync(["chattr", readOnly ? "+i" : "-i", file])
    : Bun.spawnSync(["chmod", readOnly ? "444" : "644", file]);
  expect(r.exitCode).toBe(0);
}

const redisServersIn = (path: string) =>
  Bun.spawnSync(["ps", "-eo", "args"])
    .stdout.toString()
    .split("\n")
    .filter((l) => l.includes("redis-server") && l.includes(path));

beforeAll(() => {
  const made = run(["src/cli/manage.ts", "createsuperuser", "--username", "admin", "--no-input"]);
  expect(made.code).toBe(0);
  // Fold the WAL into the file so the read-only file holds everything.
  const folded = run([
    "-e",
    `const { createClient } = require("@libsql/client"); const c = createClient({ url: "file:${file}" }); await c.execute("PRAGMA wal_checkpoint(TRUNCATE)"); c.close();`,
  ]);
  expect(folded.code).toBe(0);
  for (const suffix of ["-wal", "-shm"]) rmSync(`${file}${suffix}`, { force: true });
  makeReadOnly(true);
});
afterAll(() => {
  makeReadOnly(false);
  rmSync(dir, { recursive: true, force: true });
});

describe("a read-only database file", () => {
  test("the server exits 1 with one line naming the cause and the file, and leaves no Redis running", () => {
    const r = run(["src/server.ts"]);
    expect(r.code).toBe(1);
    const lines = r.err.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("read-only");
    expect(lines[0]).toContain(file);
    expect(redisServersIn(dir)).toEqual([]);
  });

  test("manage create-token prints one line naming the cause; no SQL, no values", () => {
    const r = run(["src/cli/manage.ts", "create-token", "--username", "admin"]);
    expect(r.code).toBe(1);
    expect(r.out).toBe("");
    const lines = r.err.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("read-only");
    expect(lines[0]).toContain(file);
    expect(r.err).not.toMatch(/insert|params|query/i);
  });
});
