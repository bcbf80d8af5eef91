/**
 * The real `bun src/server.ts` process: the local Redis stack of `npm start` (redis-server + bridge)
 * makes all four checks work over real HTTP; SIGTERM ends it cleanly; start-up failures exit 1.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { TIMED_OUT, within } from "../helpers/wait";
import { HEALTH, healthConfig } from "./helpers";

const ROOT = resolve(import.meta.dir, "../..");
const START_TIMEOUT_MS = 20_000;
const EXIT_TIMEOUT_MS = 15_000;

interface RunningServer {
  proc: ReturnType<typeof Bun.spawn>;
  /** Base URL once listening (null when the process exited first). */
  url: string | null;
  stdout: string[];
  stderr: () => string;
  /** Waits (bounded) for the exit code; null when it did not exit in time. */
  exited(timeoutMs?: number): Promise<number | null>;
}

const running: RunningServer[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const s of running.splice(0)) {
    if (s.proc.exitCode === null && s.proc.signalCode === null) {
      s.proc.kill("SIGKILL");
      await s.exited(5_000);
    }
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "host-server-test-"));
  dirs.push(d);
  return d;
}

/** Starts the server and waits (bounded) until it logs `listening` or exits. */
async function startServer(env: Record<string, string>): Promise<RunningServer> {
  const dir = tempDir();
  const proc = Bun.spawn([process.execPath, "src/server.ts"], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? dir,
      PORT: "0",
      DATABASE_URL: `file:${join(dir, "host.db")}`,
      ...env,
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const stdout: string[] = [];
  let stderrText = "";
  let url: string | null = null;
  let resolveListening!: () => void;
  const listening = new Promise<void>((r) => (resolveListening = r));
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        stdout.push(line);
        try {
          const parsed = JSON.parse(line);
          if (parsed.msg === "listening") {
            url = String(parsed.url).replace(/\/$/, "");
            resolveListening();
          }
        } catch {
          // not a log line
        }
      }
    }
    resolveListening();
  })();
  const stderrDone = (async () => {
    stderrText = await new Response(proc.stderr as ReadableStream<Uint8Array>).text();
  })();
  const server: RunningServer = {
    proc,
    get url() {
      return url;
    },
    stdout,
    stderr: () => stderrText,
    async exited(timeoutMs = EXIT_TIMEOUT_MS) {
      const code = await within(proc.exited, timeoutMs);
      if (code === TIMED_OUT) return null;
      await within(stderrDone, 2_000);
      return code;
    },
  };
  running.push(server);
  await within(Promise.race([listening, proc.exited]), START_TIMEOUT_MS);
  return server;
}

function logLines(s: RunningServer): Array<Record<string, unknown>> {
  return s.stdout.flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

/** True when something accepts TCP connections on the loopback port. */
function listening(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect({ host: "127.0.0.1", port });
    const timer = setTimeout(() => finish(false), 1_000);
    const finish = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      done(ok);
    };
    socket.once("connect", () => finish(true));
    socket.once("error", () => finish(false));
  });
}

async function health(url: string) {
  const res = await fetch(url + HEALTH, {
    headers: { accept: "application/json" },
    signal: AbortSignal.timeout(10_000),
  });
  return {
    status: res.status,
    body: (await res.json()) as { status: string; checks: Record<string, string> },
  };
}

describe("bun src/server.ts", () => {
  test("with redis-server on PATH: local Redis stack, all four checks working over HTTP, SIGTERM exits 0", async () => {
    expect(Bun.which("redis-server")).not.toBeNull();
    const s = await startServer({});
    expect(s.url).not.toBeNull();
    const started = logLines(s).find((l) => l.msg === "local redis started");
    expect(started).toBeDefined();
    const redisPort = Number(new URL(String(started!.redis)).port);
    const bridgeUrl = String(started!.bridge);
    expect(bridgeUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    // Token and cache look-ups go to redis-server over RESP, not through the bridge's loopback HTTP (decision 0043).
    expect(started!.caching).toBe(started!.redis);
    expect(started!.tasks).toBe(bridgeUrl);

    const r = await health(s.url!);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      status: "working",
      checks: {
        Database: "working",
        CacheBackend: "working",
        HostRedisCacheHealthCheck: "working",
        HostRedisTasksHealthCheck: "working",
      },
    });
    const live = await fetch(`${s.url}/livez`, { signal: AbortSignal.timeout(5_000) });
    expect(live.status).toBe(200);
    const ready = await fetch(`${s.url}/readyz`, { signal: AbortSignal.timeout(5_000) });
    expect(ready.status).toBe(200);
    // The bridge wants the random token: nothing in the logs gives it away.
    expect((await fetch(`${bridgeUrl}/ping`, { signal: AbortSignal.timeout(5_000) })).status).toBe(
      401,
    );

    s.proc.kill("SIGTERM");
    expect(await s.exited()).toBe(0);
    expect(logLines(s).some((l) => l.msg === "shutting down" && l.signal === "SIGTERM")).toBe(true);
    expect(await listening(redisPort)).toBe(false); // redis-server went with it
    expect(s.stderr()).toBe("");
  });

  test("without redis-server on PATH: one clear log line, the Redis checks report unavailable", async () => {
    const s = await startServer({ PATH: tempDir() });
    expect(s.url).not.toBeNull();
    const notices = s.stdout.filter((l) => l.includes("redis-server is not on PATH"));
    expect(notices).toHaveLength(1);
    expect(notices[0]).toContain("Redis health checks will report unavailable");
    const r = await health(s.url!);
    expect(r.status).toBe(500);
    expect(r.body.checks).toEqual({
      Database: "working",
      CacheBackend: "working",
      HostRedisCacheHealthCheck:
        "unavailable: REDIS['caching'] is not running: redis-server is not on PATH",
      HostRedisTasksHealthCheck:
        "unavailable: REDIS['tasks'] is not running: redis-server is not on PATH",
    });
    s.proc.kill("SIGINT");
    expect(await s.exited()).toBe(0);
  });

  test("HOST_LOCAL_REDIS=off starts no local Redis", async () => {
    const s = await startServer({ HOST_LOCAL_REDIS: "off" });
    expect(s.url).not.toBeNull();
    expect(logLines(s).some((l) => l.msg === "local redis started")).toBe(false);
    expect(s.stdout.some((l) => l.includes("redis-server is not on PATH"))).toBe(false);
    const r = await health(s.url!);
    expect(r.body.checks.HostRedisCacheHealthCheck).toBe(
      "unavailable: REDIS['caching'] is not configured",
    );
    s.proc.kill("SIGTERM");
    expect(await s.exited()).toBe(0);
  });

  test("an unknown check path stops start-up: one line on stderr, exit 1, local Redis stopped", async () => {
    const s = await startServer({
      PLUGINS_CONFIG: healthConfig({ checks: ["health_check.Database", "acme.NoSuchCheck"] }),
    });
    expect(await s.exited()).toBe(1);
    expect(s.url).toBeNull();
    const lines = s.stderr().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^invalid setting PLUGINS_CONFIG: host_healthcheck_plugin\.checks: unknown health check "acme\.NoSuchCheck"/,
    );
    const started = logLines(s).find((l) => l.msg === "local redis started");
    if (started) expect(await listening(Number(new URL(String(started.redis)).port))).toBe(false);
  });

  test("a bad HOST_LOCAL_REDIS stops start-up with one line", async () => {
    const s = await startServer({ HOST_LOCAL_REDIS: "maybe" });
    expect(await s.exited()).toBe(1);
    expect(s.stderr().trim()).toBe("invalid setting HOST_LOCAL_REDIS: must be on or off");
  });
});
