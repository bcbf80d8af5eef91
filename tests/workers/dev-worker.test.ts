/**
 * `npm run dev:worker` (tools/dev-worker.ts) end to end: Hrana + Redis bridge + `wrangler dev` on
 * loopback answer like production, the cron trigger runs by itself so background jobs complete,
 * and Ctrl-C (SIGINT to the foreground process group, as a terminal sends it) takes every part down.
 */
import { afterAll, describe, expect, test, setDefaultTimeout } from "bun:test";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, ROOT } from "../helpers/worker";
import { processTree, type ProcessTree } from "../helpers/process-tree";
import { waitFor, within } from "../helpers/wait";

// Real workerd, wrangler and redis-server processes: more room than bun's 5 s default
// (this bun does not apply bunfig's [test] timeout).
setDefaultTimeout(30_000);

const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 20_000;

const dir = mkdtempSync(join(tmpdir(), "host-dev-worker-test-"));

/** One `npm run dev:worker` and everything under it (wrangler makes a process group of its own). */
interface DevWorker {
  proc: ChildProcess;
  tree: ProcessTree;
  output: () => string;
}
const started: DevWorker[] = [];

const exited = async (p: ChildProcess, timeoutMs: number): Promise<boolean> =>
  p.exitCode !== null ||
  p.signalCode !== null ||
  (await within(new Promise<boolean>((r) => p.once("exit", () => r(true))), timeoutMs)) === true;

/** Ctrl-C: SIGINT to the whole process group (npm, sh, bun), like a terminal does. */
const ctrlC = (p: ChildProcess, signal: NodeJS.Signals = "SIGINT") => {
  try {
    process.kill(-p.pid!, signal);
  } catch {
    // already gone
  }
};

/** Starts `npm run dev:worker -- ...args` in its own process group, standing in for a terminal. */
function startDevWorker(args: string[]): DevWorker {
  const proc = spawn("npm", ["run", "--silent", "dev:worker", "--", ...args], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  // Keep draining both pipes so no child ever blocks on a full pipe.
  proc.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  proc.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const worker = { proc, tree: processTree(proc.pid!), output: () => output };
  started.push(worker);
  return worker;
}

/**
 * The failure path (a failed or timed-out test) stops whatever the test started: Ctrl-C first,
 * then SIGKILL to every process of the tree still running, wrangler's own group and workerd
 * included, so nothing is left spinning.
 */
async function stop(worker: DevWorker): Promise<void> {
  const { proc, tree } = worker;
  const at = started.indexOf(worker);
  if (at >= 0) started.splice(at, 1);
  tree.snapshot();
  if (!(await exited(proc, 0))) {
    ctrlC(proc);
    if (!(await exited(proc, STOP_TIMEOUT_MS))) ctrlC(proc, "SIGKILL");
  }
  tree.killAll();
}

/** Runs a test's body on its own stack and stops that stack however the body ends. */
async function withDevWorker(args: string[], body: (worker: DevWorker) => Promise<void>) {
  const worker = startDevWorker(args);
  try {
    await body(worker);
  } finally {
    await stop(worker);
  }
}

// A test that timed out may still be running its body: whatever it started stops here.
afterAll(async () => {
  await Promise.all([...started].map(stop));
  rmSync(dir, { recursive: true, force: true });
});

async function waitForOutput(
  worker: DevWorker,
  pattern: RegExp,
  timeoutMs: number,
): Promise<RegExpMatchArray> {
  const { proc, tree, output } = worker;
  const gone = () => proc.exitCode !== null || proc.signalCode !== null;
  await waitFor(
    () => {
      tree.snapshot(); // while it starts, so a cleanup after a timeout still knows every process
      return pattern.test(output()) || gone();
    },
    { timeoutMs, intervalMs: 100, message: () => `${pattern} in the output:\n${output()}` },
  );
  tree.snapshot();
  const m = output().match(pattern);
  if (!m) throw new Error(`the process ended without ${pattern}; output:\n${output()}`);
  return m;
}

/** Ctrl-C took every process down: wrangler, workerd, redis-server, not only npm's group. */
async function nothingLeft({ tree }: DevWorker): Promise<void> {
  await waitFor(() => tree.running() === 0, {
    timeoutMs: STOP_TIMEOUT_MS,
    message: () => `${tree.running()} processes of dev:worker still running after Ctrl-C`,
  });
}

async function listening(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(1_000) });
    await res.body?.cancel();
    return true;
  } catch {
    return false;
  }
}

// The two stacks run side by side (own ports, files and process trees): most of their time is
// waiting for wrangler and workerd to start.
describe("npm run dev:worker", () => {
  test.concurrent(
    "serves the app from workerd over the local stack; Ctrl-C stops wrangler, workerd, Redis and Hrana",
    async () => {
      const [port, inspector] = [await freePort(), await freePort()];
      const args = [
        ...["--port", String(port), "--inspector-port", String(inspector)],
        ...["--db", join(dir, "dev.db"), "--cron-interval", "1"],
      ];
      await withDevWorker(args, async (worker) => {
        const { proc } = worker;
        const [, base, token] = await waitForOutput(
          worker,
          /ready: (http:\/\/127\.0\.0\.1:\d+)\/api\/ +\(Authorization: Token (\S+)\)/,
          READY_TIMEOUT_MS,
        );
        expect(base).toBe(`http://127.0.0.1:${port}`);
        const output = worker.output;
        const hranaPort = Number(output().match(/served at http:\/\/127\.0\.0\.1:(\d+)/)![1]);
        const bridgePort = Number(
          output().match(/Upstash bridge at http:\/\/127\.0\.0\.1:(\d+)/)?.[1] ?? 0,
        );

        const status = await fetch(`${base}/api/status/`, {
          headers: { authorization: `Token ${token}` },
        });
        expect(status.status).toBe(200);
        expect(((await status.json()) as { runtime: string }).runtime).toBe("workerd");
        expect((await fetch(`${base}/api/status/`)).status).toBe(403);
        const health = await fetch(
          `${base}/plugins/host_healthcheck_plugin/healthcheck/?format=json`,
        );
        const checks = ((await health.json()) as { checks: Record<string, string> }).checks;
        expect(checks.Database).toBe("working");
        expect(checks.CacheBackend).toBe("working");
        if (Bun.which("redis-server")) {
          expect(bridgePort).toBeGreaterThan(0);
          expect(checks.HostRedisCacheHealthCheck).toBe("working");
          expect(health.status).toBe(200);
        }
        if (Bun.which("redis-server")) {
          // A background job completes by itself: dev:worker runs the cron trigger (every second here).
          expect(output()).toContain("cron trigger every 1 s");
          const type = {
            name: "dev_widget",
            slug: "dev_widget",
            fields: [{ id: 1, name: "code", type: "text", primary: true }],
          };
          const queued = await fetch(
            `${base}/api/plugins/custom-objects/schema/apply/?background=true`,
            {
              method: "POST",
              headers: { authorization: `Token ${token}`, "content-type": "application/json" },
              body: JSON.stringify({ schema: { schema_version: "1", types: [type] } }),
            },
          );
          expect(queued.status).toBe(202);
          const jobUrl = `${base}/api/core/jobs/${((await queued.json()) as { job: { id: number } }).job.id}/`;
          const job = await waitFor(
            async () => {
              const seen = (await (
                await fetch(jobUrl, { headers: { authorization: `Token ${token}` } })
              ).json()) as { status: { value: string } };
              return !["pending", "running"].includes(seen.status.value) && seen;
            },
            { timeoutMs: 20_000, intervalMs: 250, message: "the background job finished" },
          );
          expect(job).toMatchObject({ status: { value: "completed" } });
        }
        // Secrets reach wrangler through a private file and are shown as hidden.
        expect(output()).not.toMatch(/dev-[0-9a-f]{8}-[0-9a-f]{4}-/);

        ctrlC(proc);
        expect(await exited(proc, STOP_TIMEOUT_MS)).toBe(true);
        await nothingLeft(worker);
        for (const p of [port, hranaPort, ...(bridgePort ? [bridgePort] : [])])
          expect(await listening(p)).toBe(false);
      });
    },
    READY_TIMEOUT_MS + STOP_TIMEOUT_MS + 10_000,
  );

  test.concurrent(
    "--d1: the Worker on miniflare's D1, migrated by wrangler, answers reads; Ctrl-C stops it",
    async () => {
      const [port, inspector] = [await freePort(), await freePort()];
      const d1Dir = join(dir, "d1");
      const args = [
        ...["--d1", "--d1-dir", d1Dir, "--no-redis", "--cron-interval", "0"],
        ...["--port", String(port), "--inspector-port", String(inspector)],
      ];
      await withDevWorker(args, async (worker) => {
        const { proc, output } = worker;
        const [, base, token] = await waitForOutput(
          worker,
          /ready: (http:\/\/127\.0\.0\.1:\d+)\/api\/ +\(Authorization: Token (\S+)\)/,
          READY_TIMEOUT_MS,
        );
        expect(output()).toContain(`D1 database under ${d1Dir} (migrated)`);
        const auth = { authorization: `Token ${token}` };
        const status = await fetch(`${base}/api/status/`, { headers: auth });
        expect(status.status).toBe(200);
        expect(await status.json()).toMatchObject({ runtime: "workerd", "database-kind": "d1" });
        // the migrated schema answers (an empty list, not a missing table)
        const sites = await fetch(`${base}/api/dcim/sites/`, { headers: auth });
        expect(sites.status).toBe(200);
        expect(await sites.json()).toMatchObject({ count: 0, results: [] });
        const health = await fetch(
          `${base}/plugins/host_healthcheck_plugin/healthcheck/?format=json`,
        );
        const checks = ((await health.json()) as { checks: Record<string, string> }).checks;
        expect(checks.Database).toBe("working");
        ctrlC(proc);
        expect(await exited(proc, STOP_TIMEOUT_MS)).toBe(true);
        await nothingLeft(worker);
        expect(await listening(port)).toBe(false);
      });
    },
    READY_TIMEOUT_MS + STOP_TIMEOUT_MS + 30_000,
  );
});
