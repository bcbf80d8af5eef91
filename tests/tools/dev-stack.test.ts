/**
 * The local Redis of `npm start` (tools/dev-stack.ts) as a user meets it: `bun run
 * src/server.ts` with a temp data folder. redis-server keeps its data there (append-only file,
 * pidfile); a server killed with SIGKILL leaves its redis-server running, and the next start
 * takes it over instead of tripping over it (or replaces it when it does not answer): one
 * redis-server, a working server, none left after a clean stop.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../tools/dev-stack";
import { waitFor, within } from "../helpers/wait";

const ROOT = join(import.meta.dir, "..", "..");
const data = mkdtempSync(join(tmpdir(), "host-dev-stack-"));
// One local Redis per database: `host.db` → `redis/host/` (decision 0069).
const redisDir = join(data, "redis", "host");
const children: Array<ReturnType<typeof Bun.spawn>> = [];
afterAll(() => {
  for (const c of children) c.kill("SIGKILL");
  for (const pid of redisServers()) process.kill(pid, "SIGKILL");
  rmSync(data, { recursive: true, force: true });
});

/** redis-server processes working in this test's data folder (their cwd). */
function redisServers(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (
        readlinkSync(`/proc/${entry}/cwd`) === redisDir &&
        readFileSync(`/proc/${entry}/cmdline`, "utf8").includes("redis-server")
      )
        pids.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

async function startServer(port: number) {
  const child = Bun.spawn([process.execPath, "run", "src/server.ts"], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      DATABASE_URL: `file:${join(data, "host.db")}`,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
    },
    stdout: "ignore",
    stderr: "ignore",
  });
  children.push(child);
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
      return (await fetch(`http://127.0.0.1:${port}/livez`)).status === 200;
    },
    { timeoutMs: 20_000, intervalMs: 100, message: "the server answering /livez" },
  );
  return child;
}

/** The server answers and its tasks Redis works: the health check reports the Redis checks up. */
async function works(port: number) {
  const res = await fetch(`http://127.0.0.1:${port}/api/status/`);
  expect(res.status).toBeLessThan(500);
  const pid = Number(readFileSync(join(redisDir, "redis.pid"), "utf8"));
  const port2 = Number(readFileSync(join(redisDir, "redis.port"), "utf8"));
  const { RedisClient } = await import("bun");
  const redis = new RedisClient(`redis://127.0.0.1:${port2}`);
  expect(await redis.send("CONFIG", ["GET", "appendonly"])).toEqual({ appendonly: "yes" });
  expect(await redis.send("CONFIG", ["GET", "dir"])).toEqual({ dir: redisDir });
  redis.close();
  return pid;
}

test("SIGKILLed server: the next start reuses its redis-server (one left), a hung one is replaced, a clean stop leaves none", async () => {
  const port = await freePort();
  const first = await startServer(port);
  const firstRedis = await works(port);
  expect(redisServers()).toEqual([firstRedis]);

  first.kill("SIGKILL");
  await first.exited;
  expect(redisServers()).toEqual([firstRedis]); // the orphan SIGKILL leaves behind

  const second = await startServer(port);
  expect(await works(port)).toBe(firstRedis); // taken over, not a second one
  expect(redisServers()).toEqual([firstRedis]);

  second.kill("SIGKILL");
  await second.exited;
  process.kill(firstRedis, "SIGSTOP"); // an orphan that hangs
  const third = await startServer(port);
  const thirdRedis = await works(port);
  expect(thirdRedis).not.toBe(firstRedis);
  expect(redisServers()).toEqual([thirdRedis]);
  expect(existsSync(join(redisDir, "appendonlydir"))).toBe(true);

  third.kill("SIGTERM");
  expect(await within(third.exited, 15_000)).toBe(0);
  await waitFor(() => redisServers().length === 0, {
    timeoutMs: 5_000,
    message: () => `the local redis-server gone (left: ${redisServers().join(", ")})`,
  });
}, 90_000);
