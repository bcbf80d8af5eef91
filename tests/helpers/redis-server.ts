/**
 * Starts a throwaway redis-server on a free loopback port for a test suite, and makes sure it
 * dies with the test process even when a suite forgets to stop it.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { freePort } from "../../tools/dev-stack";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TIMED_OUT, waitFor, within } from "./wait";

/** A running redis-server started by {@link startRedisServer}. */
export interface RedisServerHandle {
  url: `redis://127.0.0.1:${number}`;
  port: number;
  pid: number;
  /** Stops the server (SIGTERM, then SIGKILL) and removes its directory. Safe to call twice. */
  stop(): Promise<void>;
  /** SIGSTOP: the server keeps its socket but answers nothing (a hung Redis). */
  freeze(): void;
  /** SIGCONT: undoes {@link RedisServerHandle.freeze}. */
  thaw(): void;
}

const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;
const REDIS_BIN = process.env.REDIS_SERVER_BIN ?? "redis-server";

// Servers not yet stopped, killed (and their directories removed) when the process exits.
const live = new Set<{ proc: { kill(signal?: NodeJS.Signals | number): void }; dir: string }>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const { proc, dir } of live) {
      try {
        proc.kill("SIGCONT");
        proc.kill("SIGKILL");
      } catch {
        // already gone
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

// Sends PING over a raw socket; true on +PONG (or NOAUTH: up, but password-protected).
export function ping(port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    let answer = "";
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      answer += chunk.toString();
      if (answer.includes("\r\n")) done(answer.startsWith("+PONG") || answer.startsWith("-NOAUTH"));
    });
  });
}

function readLog(path: string): string {
  try {
    return readFileSync(path, "utf8").split("\n").slice(-15).join("\n");
  } catch {
    return "(no log)";
  }
}

/** Options of {@link startRedisServer}. */
export interface RedisServerOptions {
  /** Extra redis-server arguments, e.g. `["--requirepass", "pw"]`. */
  extraArgs?: string[];
}

async function startOnce(options: RedisServerOptions): Promise<RedisServerHandle> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "host-redis-"));
  const logFile = join(dir, "redis.log");
  const proc = Bun.spawn(
    [
      REDIS_BIN,
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir,
      "--logfile",
      logFile,
      "--daemonize",
      "no",
      ...(options.extraArgs ?? []),
    ],
    { stdin: "ignore", stdout: "ignore", stderr: "ignore" },
  );
  const entry = { proc, dir };
  live.add(entry);
  installExitHook();

  let stopped: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      try {
        proc.kill("SIGCONT");
        proc.kill("SIGTERM");
      } catch {
        // already gone
      }
      if ((await within(proc.exited, STOP_TIMEOUT_MS)) === TIMED_OUT) {
        proc.kill("SIGKILL");
        await within(proc.exited, STOP_TIMEOUT_MS);
      }
      rmSync(dir, { recursive: true, force: true });
      live.delete(entry);
    })();
    return stopped;
  };

  const exitedEarly = () => proc.exitCode !== null || proc.signalCode !== null;
  try {
    await waitFor(async () => exitedEarly() || (await ping(port, 500)), {
      timeoutMs: START_TIMEOUT_MS,
      intervalMs: 25,
      message: `redis-server answering PING (port ${port})`,
    });
  } catch (e) {
    const log = readLog(logFile);
    await stop();
    throw new Error(`${(e as Error).message}:\n${log}`);
  }
  if (exitedEarly()) {
    const log = readLog(logFile);
    await stop();
    throw new Error(`redis-server exited early (port ${port}):\n${log}`);
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: proc.pid,
    stop,
    freeze: () => proc.kill("SIGSTOP"),
    thaw: () => proc.kill("SIGCONT"),
  };
}

/**
 * Starts redis-server (no persistence, loopback only, temp dir) and waits until it answers PING.
 * Retries on a port race. Always call `stop()` (e.g. in `afterAll`).
 * @example const redis = await startRedisServer(); try { … } finally { await redis.stop(); }
 */
export async function startRedisServer(
  options: RedisServerOptions = {},
): Promise<RedisServerHandle> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(options);
    } catch (e) {
      lastError = e;
    }
  }
  throw lastError;
}
