/**
 * A process that used the app in-process and closed the database ends by itself, as a bench or a
 * CLI run does: nothing the app started keeps it alive (decision 0127). Before, the search index's
 * flushers retried their closed databases every second, holding the process in turn, and
 * `bench/faults.ts` sat idle for minutes after its result; a write that had waited for a long
 * write's lock left its busy-timeout timer running. A real `bun` child (`app-exits.child.ts`)
 * does the work; the test waits, bounded, for it to exit.
 */
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../helpers/wait";

setDefaultTimeout(90_000);

const ROOT = join(import.meta.dir, "..", "..");
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs the child with `mode`; its exit code and output once it has exited by itself. */
async function runChild(mode: "app" | "cli" | "busy" | "drain" | "redis") {
  const dir = mkdtempSync(join(tmpdir(), "host-app-exits-"));
  dirs.push(dir);
  const proc = Bun.spawn([process.execPath, "tests/faults/app-exits.child.ts", mode], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", CHILD_DIR: dir },
    stdout: "pipe",
    stderr: "pipe",
  });
  const stdout = new Response(proc.stdout).text();
  const stderr = new Response(proc.stderr).text();
  try {
    // Generous: the child's own work runs on a busy machine; a process held alive never exits.
    await waitFor(() => proc.exitCode !== null, {
      timeoutMs: 60_000,
      intervalMs: 50,
      message: () => `the ${mode} child to exit by itself after closing`,
    });
  } finally {
    proc.kill("SIGKILL");
  }
  return { code: proc.exitCode, stdout: await stdout, stderr: await stderr };
}

test("after createApp, requests, a schema apply and db.close(), the process exits by itself", async () => {
  const run = await runChild("app");
  expect(run.stderr).toBe("");
  expect(run.stdout.trim()).toBe("closed");
  expect(run.code).toBe(0);
});

test("schema apply and export against a local file (the CLI's in-process app) exit by themselves", async () => {
  const run = await runChild("cli");
  expect(run.stderr).toBe("");
  expect(run.stdout.trim()).toBe("closed");
  expect(run.code).toBe(0);
});

test("a write that waited for a long write's lock: once it is back, the process exits by itself", async () => {
  const run = await runChild("busy");
  expect(run.stderr).toBe("");
  expect(run.stdout.trim()).toBe("closed");
  expect(run.code).toBe(0);
});

test("a drain whose server stopped at once leaves no bound behind: the process exits by itself", async () => {
  const run = await runChild("drain");
  expect(run.stderr).toBe("");
  expect(run.stdout.trim()).toBe("closed");
  expect(run.code).toBe(0);
});

test("the local Redis stopped: its stop's bound is cleared and the process exits by itself", async () => {
  const run = await runChild("redis");
  expect(run.stderr).toBe("");
  expect(run.stdout.trim()).toBe("closed");
  expect(run.code).toBe(0);
});
