/**
 * A redis-server that a test can freeze, stop and start again on the same port — with its data
 * (append-only file) or empty (a fresh directory): the tasks Redis faults of the outbox tests.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../tools/dev-stack";
import { ping } from "./redis-server";
import { TIMED_OUT, waitFor, within } from "./wait";

const REDIS_BIN = process.env.REDIS_SERVER_BIN ?? "redis-server";
const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;

/** A redis-server whose process the test controls. */
export interface RedisProcess {
  url: string;
  port: number;
  /** SIGSTOP: the socket stays open, nothing answers (a hung Redis). */
  freeze(): void;
  /** SIGCONT. */
  thaw(): void;
  /** SIGTERM (the append-only file is flushed), and waits for the exit. */
  stop(): Promise<void>;
  /** SIGKILL: no flush, no goodbye. */
  kill(): Promise<void>;
  /** Starts again on the same port: with the data left in its directory, or `empty` in a new one. */
  start(options?: { empty?: boolean }): Promise<void>;
  /** Stops for good and removes every directory it used. Safe to call twice. */
  close(): Promise<void>;
}

const alive = new Set<{ kill(signal?: number | NodeJS.Signals): void }>();
process.on("exit", () => {
  for (const proc of alive) {
    try {
      proc.kill("SIGCONT");
      proc.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
});

/**
 * Starts redis-server on a free loopback port with append-only persistence (`appendfsync
 * everysec`, the production setting of `npm start`).
 * @example const redis = await startRedisProcess(); redis.freeze(); … redis.thaw(); await redis.close();
 */
export async function startRedisProcess(): Promise<RedisProcess> {
  const port = await freePort();
  const dirs: string[] = [];
  let dir = "";
  let proc: ReturnType<typeof Bun.spawn> | null = null;

  const launch = async () => {
    const p = Bun.spawn(
      [
        REDIS_BIN,
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--dir",
        dir,
        "--daemonize",
        "no",
        "--logfile",
        join(dir, "redis.log"),
      ],
      { stdin: "ignore", stdout: "ignore", stderr: "ignore" },
    );
    proc = p;
    alive.add(p);
    const exitedEarly = () => p.exitCode !== null || p.signalCode !== null;
    await waitFor(async () => exitedEarly() || (await ping(port, 500)), {
      timeoutMs: START_TIMEOUT_MS,
      intervalMs: 25,
      message: `redis-server answering PING on port ${port}`,
    });
    if (exitedEarly()) throw new Error(`redis-server exited early on port ${port}`);
  };
  const newDir = () => {
    dir = mkdtempSync(join(tmpdir(), "host-redis-fault-"));
    dirs.push(dir);
  };
  const end = async (signal: NodeJS.Signals) => {
    const p = proc;
    if (!p) return;
    proc = null;
    try {
      p.kill("SIGCONT");
      p.kill(signal);
    } catch {
      // already gone
    }
    if ((await within(p.exited, STOP_TIMEOUT_MS)) === TIMED_OUT) {
      p.kill("SIGKILL");
      await p.exited;
    }
    alive.delete(p);
  };

  newDir();
  await launch();
  let closed: Promise<void> | null = null;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    freeze: () => proc?.kill("SIGSTOP"),
    thaw: () => proc?.kill("SIGCONT"),
    stop: () => end("SIGTERM"),
    kill: () => end("SIGKILL"),
    async start(options = {}) {
      await end("SIGTERM");
      if (options.empty) newDir();
      await launch();
    },
    close() {
      closed ??= (async () => {
        await end("SIGTERM");
        for (const d of dirs) rmSync(d, { recursive: true, force: true });
      })();
      return closed;
    },
  };
}
