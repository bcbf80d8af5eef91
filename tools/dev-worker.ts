/**
 * `npm run dev:worker`: the Worker locally in workerd via `wrangler dev`, with a Hrana server on a
 * local file (migrated) as its libSQL database and, when redis-server is on PATH, a Redis behind
 * the Upstash bridge. Everything listens on 127.0.0.1 only; Ctrl-C stops all of it. The cron
 * trigger runs every `--cron-interval` seconds (default 10), as production runs it every minute.
 * `--d1`: the Worker on miniflare's D1 instead (wrangler.toml's `d1` environment), kept under
 * `--d1-dir` (default data/worker-dev-d1) and migrated with `wrangler d1 migrations apply --local`.
 */
import { createClient } from "@libsql/client/web";
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { eq } from "drizzle-orm";
import { startHranaServer, type HranaServer } from "./hrana-server";
import type { Database } from "../src/db/client";
import { libsqlDatabase } from "../src/db/libsql";
import { orAfter } from "../src/db/bounded-wait";
import { runMigrations } from "../src/migrations";
import { users } from "../src/db/schema";
import { createUser, issueToken } from "../src/core/auth/provisioning";
import { startRedisStack, type RedisStack } from "../tests/helpers/redis-bridge";
import { d1SuperuserToken, migrateLocalD1, withLocalD1 } from "./d1-local";

const ROOT = resolve(import.meta.dir, "..");
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;

const { values: args } = parseArgs({
  args: process.argv.slice(2),
  options: {
    port: { type: "string", default: "8787" },
    "inspector-port": { type: "string" },
    db: { type: "string", default: "data/worker-dev.db" },
    "no-redis": { type: "boolean", default: false },
    "cron-interval": { type: "string", default: "10" },
    d1: { type: "boolean", default: false },
    "d1-dir": { type: "string", default: "data/worker-dev-d1" },
  },
});
const cronIntervalSeconds = Number(args["cron-interval"]);
if (
  !Number.isInteger(cronIntervalSeconds) ||
  cronIntervalSeconds < 0 ||
  cronIntervalSeconds > 3600
) {
  console.error(
    "dev-worker: --cron-interval must be a whole number of seconds between 0 (off) and 3600",
  );
  process.exit(2);
}
const port = Number(args.port);
if (!Number.isInteger(port) || port < 1 || port > 65535) {
  console.error("dev-worker: --port must be a whole number between 1 and 65535");
  process.exit(2);
}

const log = (msg: string) => console.log(`[dev-worker] ${msg}`);
const cleanups: Array<() => Promise<unknown> | unknown> = [];
let wrangler: ChildProcess | null = null;
let stopping: Promise<void> | null = null;

/**
 * Stops wrangler first (SIGINT: it shuts workerd down and reaps it), falling back to killing its
 * whole process group, then Redis, then the database server.
 */
function stopAll(code: number): Promise<void> {
  stopping ??= (async () => {
    const w = wrangler;
    if (w?.pid && w.exitCode === null && w.signalCode === null) {
      const exited = new Promise<boolean>((r) => w.once("exit", () => r(true)));
      const within = (ms: number) => orAfter(exited, ms, false);
      w.kill("SIGINT");
      if (!(await within(STOP_TIMEOUT_MS))) {
        try {
          process.kill(-w.pid, "SIGKILL");
        } catch {
          // already gone
        }
        await within(STOP_TIMEOUT_MS);
      }
    }
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch (e) {
        console.error(`[dev-worker] cleanup failed: ${(e as Error).message}`);
      }
    }
    process.exit(code);
  })();
  return stopping;
}
process.on("SIGINT", () => void stopAll(0));
process.on("SIGTERM", () => void stopAll(0));

function onPath(bin: string): boolean {
  return Bun.which(bin) !== null;
}

/** A superuser token for the local database ("admin" is created on first run). */
async function devToken(db: Database): Promise<string> {
  const [admin] = await db.orm
    .select({ id: users.id })
    .from(users)
    .where(eq(users.username, "admin"));
  if (!admin) await createUser(db.orm, { username: "admin", isSuperuser: true });
  return (await issueToken(db.orm, { username: "admin", description: "dev-worker" })).key;
}

/** Waits until the app answers (any status but a start-up failure); a start-up failure is fatal. */
async function waitUntilServing(url: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (wrangler && (wrangler.exitCode !== null || wrangler.signalCode !== null))
      throw new Error("wrangler dev exited");
    let res: Response | null = null;
    try {
      res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    } catch {
      // not listening yet
    }
    if (res) {
      const body = await res.text();
      if (res.status < 500) return;
      if (body.includes('"startup_failed"') || body.includes('"database_unavailable"'))
        throw new Error(`the Worker could not start: ${body}`);
    }
    await Bun.sleep(250);
  }
  throw new Error(`wrangler dev did not answer ${url} within ${READY_TIMEOUT_MS} ms`);
}

let cronStopped = false;

/**
 * Production runs the cron trigger (wrangler.toml `[triggers]`) every minute; `wrangler dev` only
 * runs it when asked at `/cdn-cgi/handler/scheduled`. This asks every `--cron-interval` seconds,
 * one run at a time, so queued jobs (webhooks, background applies) complete locally.
 */
async function runCronLoop(url: string, everyMs: number): Promise<void> {
  let failedBefore = false;
  while (!cronStopped && !stopping) {
    await Bun.sleep(everyMs);
    if (cronStopped || stopping) break;
    try {
      const res = await fetch(
        `${url}/cdn-cgi/handler/scheduled?cron=${encodeURIComponent("* * * * *")}`,
        { signal: AbortSignal.timeout(120_000) },
      );
      await res.body?.cancel();
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      if (failedBefore) log("cron trigger runs again");
      failedBefore = false;
    } catch (e) {
      // Once per outage, not every interval.
      if (!failedBefore && !stopping)
        console.error(
          `[dev-worker] cron trigger failed: ${(e as Error).message}; retrying every ${everyMs / 1000} s`,
        );
      failedBefore = true;
    }
  }
}

/** The libSQL database: a Hrana server on `--db`, migrated. */
async function hranaDatabase(vars: Record<string, string>, secrets: Record<string, string>) {
  const dbFile = resolve(ROOT, args.db!);
  const dbToken = `dev-${crypto.randomUUID()}`;
  const hrana: HranaServer = await startHranaServer({ path: dbFile, port: 0, authToken: dbToken });
  cleanups.push(() => hrana.stop());
  const db = libsqlDatabase(createClient({ url: hrana.url, authToken: dbToken }), "remote");
  cleanups.push(() => db.close());
  await runMigrations(db);
  const apiToken = await devToken(db);
  log(`database ${dbFile} served at ${hrana.url} (migrated)`);
  vars.DATABASE_URL = hrana.url;
  secrets.DATABASE_AUTH_TOKEN = dbToken;
  return { apiToken, wranglerArgs: [] as string[] };
}

/** miniflare's D1 under `--d1-dir`, migrated as a deploy migrates D1; wrangler's `d1` environment. */
async function d1Database() {
  const persistTo = resolve(ROOT, args["d1-dir"]!);
  await migrateLocalD1(persistTo);
  const apiToken = await withLocalD1(persistTo, (binding) => d1SuperuserToken(binding, "admin"));
  log(`D1 database under ${persistTo} (migrated)`);
  return { apiToken, wranglerArgs: ["--env", "d1", "--persist-to", persistTo] };
}

async function main(): Promise<void> {
  const vars: Record<string, string> = { CACHE_BACKEND: "kv" };
  // Secrets go through an env file (shown as hidden by wrangler), never on the command line.
  const secrets: Record<string, string> = {};
  const database = args.d1 ? await d1Database() : await hranaDatabase(vars, secrets);
  const { apiToken } = database;
  let redis: RedisStack | null = null;
  if (!args["no-redis"] && onPath("redis-server")) {
    redis = await startRedisStack();
    cleanups.push(() => redis!.stop());
    vars.REDIS_CACHING_URL = vars.REDIS_TASKS_URL = redis.bridge.url;
    secrets.REDIS_CACHING_TOKEN = secrets.REDIS_TASKS_TOKEN = redis.bridge.token;
    log(`redis-server at ${redis.redis.url}, Upstash bridge at ${redis.bridge.url}`);
  } else {
    log("running without Redis (redis-server not on PATH, or --no-redis)");
  }

  const secretsDir = mkdtempSync(join(tmpdir(), "host-dev-worker-"));
  cleanups.push(() => rmSync(secretsDir, { recursive: true, force: true }));
  const envFile = join(secretsDir, "secrets.env");
  writeFileSync(
    envFile,
    `${Object.entries(secrets)
      .map(([k, v]) => `${k}=${v}`)
      .join("\n")}\n`,
    { mode: 0o600 },
  );
  chmodSync(envFile, 0o600);

  const wranglerArgs = [
    "dev",
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--inspector-ip",
    "127.0.0.1",
    ...(args["inspector-port"] ? ["--inspector-port", args["inspector-port"]] : []),
    "--show-interactive-dev-session=false",
    ...database.wranglerArgs,
    "--env-file",
    envFile,
    ...Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}:${v}`]),
  ];
  wrangler = spawn(join(ROOT, "node_modules", ".bin", "wrangler"), wranglerArgs, {
    cwd: ROOT,
    detached: true, // its own process group, so workerd goes down with it
    stdio: ["ignore", "inherit", "inherit"],
    env: {
      ...process.env,
      CLOUDFLARE_CF_FETCH_ENABLED: "false",
      WRANGLER_SEND_METRICS: "false",
      WRANGLER_HIDE_BANNER: "true",
    },
  });
  wrangler.once("exit", (code, signal) => {
    if (!stopping) {
      console.error(`[dev-worker] wrangler dev exited (${signal ?? code}); stopping`);
      void stopAll(code ?? 1);
    }
  });
  const url = `http://127.0.0.1:${port}`;
  await waitUntilServing(`${url}/api/status/`);
  log(`ready: ${url}/api/  (Authorization: Token ${apiToken})`);
  log(`health: ${url}/plugins/host_healthcheck_plugin/healthcheck/?format=json`);
  if (cronIntervalSeconds > 0) {
    cleanups.push(() => (cronStopped = true));
    void runCronLoop(url, cronIntervalSeconds * 1000);
    log(
      `cron trigger every ${cronIntervalSeconds} s (the job queue drains locally; --cron-interval 0 turns it off)`,
    );
  }
  log("Ctrl-C stops wrangler, Redis and the database server");
}

main().catch(async (e) => {
  console.error(`[dev-worker] ${(e as Error).message}`);
  await stopAll(1);
});
