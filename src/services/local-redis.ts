/**
 * The local Redis of `npm start`: a redis-server on a loopback port behind the in-process
 * Upstash REST bridge, so the app's Upstash client path runs. With a data folder it keeps its
 * data there, one server per database (`<data>/redis/<database>/`, decision 0069; the last
 * process using it stops it), with an append-only file and a pidfile, so a server killed with SIGKILL leaves nothing a
 * second start trips over: a live one that answers is reused, a hung one replaced
 * (docs/decisions/0036-tasks-local-redis.md). Without one: a throwaway server in a temp dir.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { orAfter } from "../db/bounded-wait";
import { startRedisBridge, type RedisBridge } from "./redis-bridge";

/** A running local stack. */
export interface LocalRedisStack {
  /** The bridge's base URL (Upstash REST); use it for both `REDIS_CACHING_URL` and `REDIS_TASKS_URL`. */
  url: string;
  /** The bridge's random token. */
  token: string;
  /** The redis-server behind the bridge (`redis://127.0.0.1:PORT`, no password). */
  redisUrl: string;
  redisPid: number;
  /** True when a redis-server left running by an earlier (killed) start was taken over. */
  reused?: boolean;
  /** Stops the bridge and the server (SIGTERM, then SIGKILL) and removes the temp dir. Safe to call twice. */
  stop(): Promise<void>;
}

/** Options of {@link startLocalRedisStack}. */
export interface LocalRedisStackOptions {
  /** The redis-server binary; default: `redis-server` found on PATH. */
  redisServerBin?: string;
  /** How long to wait for redis-server to answer PING; default 10000 ms. */
  startTimeoutMs?: number;
  /** Without `dataDir`: how long `stop` waits for the server after SIGTERM, then SIGKILL; default 5000 ms. */
  stopTimeoutMs?: number;
  /**
   * Keep the data: redis-server runs in `<dataDir>/redis` with `appendonly yes` and writes
   * `redis.pid` and `redis.port` there. Default: none (a temp dir, no persistence).
   */
  dataDir?: string;
  /**
   * With `dataDir`: the database this Redis belongs to (`host` for `data/host.db`). Each
   * database gets its own redis-server in `<dataDir>/redis/<database>/` (decision 0069).
   */
  database?: string;
}

const DEFAULT_START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;

/** Asks the kernel for a free loopback port. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      const port = typeof address === "object" && address ? address.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error("no free port"))));
    });
  });
}

/** PING over a raw socket; true on `+PONG` within `timeoutMs`. */
async function answersPing(port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    let answer = "";
    let settled = false;
    let socket: { end(): void } | null = null;
    const done = (ok: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket?.end();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(s) {
          s.write("PING\r\n");
        },
        data(_s, chunk) {
          answer += chunk.toString();
          if (answer.includes("\r\n")) done(answer.startsWith("+PONG"));
        },
        error: () => done(false),
        connectError: () => done(false),
        close: () => done(false),
      },
    }).then(
      (s) => {
        socket = s;
        if (settled) s.end();
      },
      () => done(false),
    );
  });
}

/**
 * Waits until redis-server on `port` answers PING; throws when `exitedEarly` says why it stopped
 * (its text goes in the message) or when `timeoutMs` passes.
 */
async function awaitPing(
  port: number,
  timeoutMs: number,
  exitedEarly: () => string | null,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const why = exitedEarly();
    if (why) throw new Error(`redis-server exited early (${why})`);
    if (await answersPing(port, 500)) return;
    await Bun.sleep(25);
  }
  throw new Error(`redis-server did not answer PING within ${timeoutMs} ms`);
}

/**
 * Starts redis-server and the bridge with a random token, or returns null when no redis-server
 * binary is available. Throws when the server starts but never answers.
 * @example const stack = await startLocalRedisStack(); if (stack) env.REDIS_CACHING_URL = stack.url;
 */
export async function startLocalRedisStack(
  options: LocalRedisStackOptions = {},
): Promise<LocalRedisStack | null> {
  const bin = options.redisServerBin ?? Bun.which("redis-server");
  if (!bin) return null;
  const startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  if (options.dataDir)
    return startPersistent(
      bin,
      resolve(options.dataDir, "redis", safeName(options.database ?? "default")),
      startTimeoutMs,
    );
  let lastError: unknown;
  // The free port may be taken between asking and binding: try again on a fresh one.
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(bin, startTimeoutMs, options.stopTimeoutMs ?? STOP_TIMEOUT_MS);
    } catch (e) {
      lastError = e;
    }
  }
  throw lastError;
}

async function startOnce(
  bin: string,
  startTimeoutMs: number,
  stopTimeoutMs: number,
): Promise<LocalRedisStack> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "host-dev-redis-"));
  const proc = Bun.spawn(
    [
      bin,
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
      "--daemonize",
      "no",
      "--loglevel",
      "warning",
    ],
    { stdin: "ignore", stdout: "ignore", stderr: "ignore" },
  );
  // If this process dies without stopping the stack, take redis-server with it.
  const killOnExit = () => {
    try {
      proc.kill("SIGKILL");
    } catch {
      // already gone
    }
  };
  process.on("exit", killOnExit);

  let bridge: RedisBridge | null = null;
  let stopped: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      try {
        await bridge?.stop();
      } catch {
        // the server goes anyway
      }
      try {
        proc.kill("SIGCONT");
        proc.kill("SIGTERM");
      } catch {
        // already gone
      }
      // bounds whose timers are cleared once the server exits: a left one held the process
      const exited = await orAfter(
        proc.exited.then(() => true),
        stopTimeoutMs,
        false,
      );
      if (!exited) {
        killOnExit();
        await orAfter(proc.exited, stopTimeoutMs, undefined);
      }
      process.off("exit", killOnExit);
      rmSync(dir, { recursive: true, force: true });
    })();
    return stopped;
  };

  try {
    await awaitPing(port, startTimeoutMs, () =>
      proc.exitCode !== null || proc.signalCode !== null
        ? `code ${proc.exitCode ?? proc.signalCode}`
        : null,
    );
    const redisUrl = `redis://127.0.0.1:${port}`;
    const token = `local-${crypto.randomUUID()}`;
    bridge = await startRedisBridge({ redisUrl, token });
    return { url: bridge.url, token, redisUrl, redisPid: proc.pid, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** The files of a persistent local Redis, in its directory. */
const PID_FILE = "redis.pid";
const PORT_FILE = "redis.port";
/** One empty file per user of the server, named by its pid: the last one out stops it. */
const USERS_DIR = "users";

/** A database name as a folder name: letters, digits, dots, dashes and underscores. */
function safeName(name: string): string {
  const cleaned = name.replace(/[^A-Za-z0-9._-]/g, "_").replace(/^\.+/, "_");
  return cleaned.slice(0, 100) || "default";
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Records a user of the server in `dir` (`<pid>-<random>`: one process may start two stacks). */
function addUser(dir: string): string {
  const id = `${process.pid}-${crypto.randomUUID().slice(0, 8)}`;
  mkdirSync(join(dir, USERS_DIR), { recursive: true });
  writeFileSync(join(dir, USERS_DIR, id), "");
  return id;
}

/**
 * Removes user `id` of the server in `dir`; true when another live user is left (a second
 * server on the same database), which keeps its Redis.
 */
function removeUserAndCheckOthers(dir: string, id: string): boolean {
  const users = join(dir, USERS_DIR);
  rmSync(join(users, id), { force: true });
  let names: string[] = [];
  try {
    names = readdirSync(users);
  } catch {
    return false;
  }
  let others = false;
  for (const name of names) {
    const pid = Number(name.split("-")[0]);
    if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) others = true;
    else rmSync(join(users, name), { force: true });
  }
  return others;
}

/** True when `pid` is a live redis-server working in `dir` (Linux: its cwd; elsewhere: alive). */
function isOurRedis(pid: number, dir: string): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return readlinkSync(`/proc/${pid}/cwd`) === dir;
  } catch {
    return !existsSync("/proc/self"); // no /proc: trust the pidfile
  }
}

function readNumber(path: string): number | null {
  try {
    const n = Number(readFileSync(path, "utf8").trim());
    return Number.isInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}

/**
 * The redis-server a previous start left in `dir` (its owner was killed): reused when it
 * answers PING, else killed. Returns its pid and port when reusable.
 */
async function adoptLeftover(dir: string): Promise<{ pid: number; port: number } | null> {
  const pid = readNumber(join(dir, PID_FILE));
  const port = readNumber(join(dir, PORT_FILE));
  if (!pid || !isOurRedis(pid, dir)) return null;
  if (port && (await answersPing(port, 1_000))) return { pid, port };
  // Alive but not answering (hung, or stopped with SIGSTOP): replace it.
  try {
    process.kill(pid, "SIGCONT");
    process.kill(pid, "SIGKILL");
  } catch {
    // gone meanwhile
  }
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (isOurRedis(pid, dir) && Date.now() < deadline) await Bun.sleep(20);
  return null;
}

async function startPersistent(
  bin: string,
  dir: string,
  startTimeoutMs: number,
): Promise<LocalRedisStack> {
  mkdirSync(dir, { recursive: true });
  let pid: number;
  let port: number;
  let exited: () => boolean;
  const leftover = await adoptLeftover(dir);
  if (leftover) {
    ({ pid, port } = leftover);
    exited = () => !isOurRedis(pid, dir);
  } else {
    rmSync(join(dir, PID_FILE), { force: true });
    port = await freePort();
    const proc = Bun.spawn(
      [
        bin,
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
        "--pidfile",
        join(dir, PID_FILE),
        "--daemonize",
        "no",
        "--loglevel",
        "warning",
        "--logfile",
        join(dir, "redis.log"),
      ],
      { cwd: dir, stdin: "ignore", stdout: "ignore", stderr: "ignore" },
    );
    pid = proc.pid;
    exited = () => proc.exitCode !== null || proc.signalCode !== null;
    writeFileSync(join(dir, PORT_FILE), `${port}\n`);
  }
  // Never a pid that is no longer our redis-server: it may be another process's by now.
  const signal = (sig: NodeJS.Signals) => {
    if (exited()) return;
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  };
  const user = addUser(dir);
  // A clean exit of this process takes redis-server with it (SIGKILL cannot: the next start adopts
  // it), unless another server on the same database still uses it.
  const killOnExit = () => {
    if (!removeUserAndCheckOthers(dir, user)) signal("SIGTERM");
  };
  process.on("exit", killOnExit);

  let bridge: RedisBridge | null = null;
  let stopped: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      try {
        await bridge?.stop();
      } catch {
        // the server goes anyway
      }
      process.off("exit", killOnExit);
      // Another live server on this database keeps using it: it is theirs to stop (0069).
      if (removeUserAndCheckOthers(dir, user)) return;
      signal("SIGCONT");
      signal("SIGTERM"); // redis-server flushes the append-only file on SIGTERM
      const deadline = Date.now() + STOP_TIMEOUT_MS;
      while (!exited() && Date.now() < deadline) await Bun.sleep(20);
      if (!exited()) signal("SIGKILL");
    })();
    return stopped;
  };

  try {
    await awaitPing(port, startTimeoutMs, () =>
      exited() ? `see ${join(dir, "redis.log")}` : null,
    );
    const redisUrl = `redis://127.0.0.1:${port}`;
    const token = `local-${crypto.randomUUID()}`;
    bridge = await startRedisBridge({ redisUrl, token });
    return { url: bridge.url, token, redisUrl, redisPid: pid, reused: !!leftover, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
