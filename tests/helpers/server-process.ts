/**
 * A real `bun src/server.ts` process on a free port, for tests of what a person running the
 * server sees (its log lines, its answers over HTTP, its exit) and for the fault tests (issue 30):
 * a data folder with an admin token provisioned before it starts, and an API client over HTTP.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { openDatabase } from "../../src/db/local";
import { runMigrations } from "../../src/migrations";
import type { TestApp } from "./app";
import { TIMED_OUT, waitFor, within } from "./wait";
import { freePort } from "./worker";

const ROOT = resolve(import.meta.dir, "../..");
const START_TIMEOUT_MS = 20_000;

/** A data folder (`<dir>/data/host.db`) with a migrated database and an admin token. */
export async function dataFolder(): Promise<{
  dir: string;
  dbUrl: string;
  token: string;
  remove(): void;
}> {
  const dir = mkdtempSync(join(tmpdir(), "host-faults-"));
  mkdirSync(join(dir, "data"));
  const dbUrl = `file:${join(dir, "data", "host.db")}`;
  const db = await openDatabase(dbUrl);
  await runMigrations(db);
  await createUser(db.orm, { username: "admin", isSuperuser: true });
  const token = (await issueToken(db.orm, { username: "admin" })).key;
  await db.close();
  return { dir, dbUrl, token, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface ServerProcess {
  proc: ReturnType<typeof Bun.spawn>;
  url: string;
  /** Log lines so far: JSON parsed, or `{ text }` for a line that is not JSON. */
  logs: Array<Record<string, unknown>>;
  /** Waits (bounded) for the exit code; null when it did not exit in time. */
  exited(timeoutMs?: number): Promise<number | null>;
  /** SIGTERM (the server drains and exits), then the exit code; null when it hung. */
  stop(): Promise<number | null>;
  /** SIGKILL when still running (cleanup). */
  kill(): Promise<void>;
}

/**
 * Starts the server on a free port with `env` (its `DATABASE_URL` among it) and waits (bounded)
 * for its `listening` line. Nothing else is inherited but PATH and HOME.
 */
export async function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  const proc = Bun.spawn([process.execPath, "src/server.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", PORT: "0", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "inherit",
  });
  const logs: Array<Record<string, unknown>> = [];
  let url = "";
  let listening!: () => void;
  const ready = new Promise<void>((r) => (listening = r));
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        let parsed: Record<string, unknown>;
        try {
          parsed = JSON.parse(line) as Record<string, unknown>;
        } catch {
          parsed = { text: line };
        }
        logs.push(parsed);
        if (parsed.msg === "listening") {
          url = String(parsed.url).replace(/\/$/, "");
          listening();
        }
      }
    }
    listening();
  })();
  await within(Promise.race([ready, proc.exited]), START_TIMEOUT_MS); // a bound on a hang
  if (!url) {
    proc.kill("SIGKILL");
    throw new Error(`the server did not start: ${JSON.stringify(logs.slice(-5))}`);
  }
  const exited = async (timeoutMs = 15_000) => {
    const code = await within(proc.exited, timeoutMs);
    return code === TIMED_OUT ? null : code;
  };
  return {
    proc,
    url,
    logs,
    exited,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      return exited();
    },
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      await exited(5_000);
    },
  };
}

/** The `json` half of a TestApp over real HTTP (for the task harness helpers). */
export function httpClient(url: string, token: string): Pick<TestApp, "json"> {
  return {
    async json(method, path, opts = {}) {
      const res = await fetch(url + path, {
        method,
        headers: {
          authorization: `Token ${opts.token ?? token}`,
          "content-type": "application/json",
          ...(opts.headers ?? {}),
        },
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
        signal: AbortSignal.timeout(15_000),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null, res };
    },
  };
}

/** A bundled server (tools/bundle.ts) running on a free port. */
export interface BundledServer {
  port: number;
  /** What it printed so far (stdout and stderr). */
  log(): string;
  /** SIGTERM, then waits for its exit. */
  stop(): Promise<void>;
}

/**
 * Runs the bundled server file `script` from the repository with this process's environment and
 * `env` over it, on a free port of 127.0.0.1, and waits (bounded) until it answers `/livez`.
 */
export async function startBundledServer(
  script: string,
  env: Record<string, string>,
): Promise<BundledServer> {
  const port = await freePort();
  let log = "";
  const proc = Bun.spawn([process.execPath, script], {
    cwd: ROOT,
    env: { ...process.env, ...env, HOST: "127.0.0.1", PORT: String(port) },
    stdout: "pipe",
    stderr: "pipe",
  });
  void new Response(proc.stderr as ReadableStream).text().then((t) => (log += t));
  void new Response(proc.stdout as ReadableStream).text().then((t) => (log += t));
  await waitFor(() => fetch(`http://127.0.0.1:${port}/livez`).then((r) => r.ok), {
    timeoutMs: 30_000,
    intervalMs: 100,
    message: () => `the bundled server answering /livez:\n${log}`,
  });
  return {
    port,
    log: () => log,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}
