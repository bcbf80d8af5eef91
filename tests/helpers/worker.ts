/**
 * Runs `src/worker.ts` in real workerd for tests: bundles it once with wrangler's esbuild, then
 * starts Miniflare over a Hrana server (our libSQL-over-HTTP stand-in for Turso) on loopback.
 */
import { createClient } from "@libsql/client/web";
import type { Miniflare, MiniflareOptions } from "miniflare";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { startHranaServer, type HranaServer } from "../../tools/hrana-server";
import type { Database } from "../../src/db/client";
import { libsqlDatabase } from "../../src/db/libsql";
import { runMigrations } from "../../src/migrations";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { d1PersistDir, d1Settings } from "../../tools/d1-local";
import { startMiniflare, type WorkerdWatch } from "./workerd-watch";

export const ROOT = join(import.meta.dir, "..", "..");
const BUILD_TIMEOUT_MS = 120_000;

/** The bundle wrangler would upload, and the settings it was built with. */
export interface WorkerBundle {
  dir: string;
  scriptPath: string;
  compatibilityDate: string;
  compatibilityFlags: string[];
}

/** `compatibility_date` and `compatibility_flags` of wrangler.toml (so tests run what deploys). */
function wranglerSettings(): { compatibilityDate: string; compatibilityFlags: string[] } {
  const toml = Bun.TOML.parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as {
    compatibility_date?: string;
    compatibility_flags?: string[];
  };
  if (!toml.compatibility_date) throw new Error("wrangler.toml has no compatibility_date");
  return {
    compatibilityDate: toml.compatibility_date,
    compatibilityFlags: toml.compatibility_flags ?? [],
  };
}

/** Runs a command with a deadline; throws with its output when it fails. */
async function run(
  cmd: string[],
  opts: { env?: Record<string, string>; timeoutMs?: number; cwd?: string } = {},
): Promise<{ stdout: string; stderr: string }> {
  const proc = Bun.spawn(cmd, {
    cwd: opts.cwd ?? ROOT,
    env: { ...process.env, ...opts.env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), opts.timeoutMs ?? BUILD_TIMEOUT_MS);
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  if (code !== 0) throw new Error(`${cmd.join(" ")} exited with ${code}:\n${stdout}\n${stderr}`);
  return { stdout, stderr };
}

/** Environment for wrangler: no telemetry, no network lookups. */
const WRANGLER_ENV = {
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
  WRANGLER_HIDE_BANNER: "true",
  WRANGLER_LOG: "warn",
};

/** A loopback TCP port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}

let bundle: Promise<WorkerBundle> | null = null;

/**
 * Bundles the Worker exactly as `wrangler deploy` would (`--dry-run --outdir`), once per test
 * process; the output directory is removed when the process exits.
 */
export function buildWorkerBundle(): Promise<WorkerBundle> {
  bundle ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), "host-worker-bundle-"));
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
    await run(
      [join(ROOT, "node_modules", ".bin", "wrangler"), "deploy", "--dry-run", "--outdir", dir],
      { env: WRANGLER_ENV },
    );
    return { dir, scriptPath: join(dir, "worker.js"), ...wranglerSettings() };
  })();
  return bundle;
}

/** A Hrana server on a fresh file, migrated, with a web client over it. */
export interface RemoteDatabase {
  hrana: HranaServer;
  /** `@libsql/client/web` over the server, wrapped like the Worker's. */
  db: Database;
  url: string;
  /** Creates a superuser (if missing) and returns a fresh token for it. */
  superuserToken(username?: string): Promise<string>;
  stop(): Promise<void>;
}

/** Options of {@link startRemoteDatabase}. */
export interface RemoteDatabaseOptions {
  /** Port to listen on; default a free one. */
  port?: number;
  /** Require `Authorization: Bearer <authToken>` (what `DATABASE_AUTH_TOKEN` sends). */
  authToken?: string;
}

/** Starts a Hrana server on a temp file and applies our migrations through the web client. */
export async function startRemoteDatabase(
  options: RemoteDatabaseOptions = {},
): Promise<RemoteDatabase> {
  const dir = mkdtempSync(join(tmpdir(), "host-worker-db-"));
  const hrana = await startHranaServer({
    path: join(dir, "host.db"),
    port: options.port ?? 0,
    authToken: options.authToken,
  });
  const db = libsqlDatabase(
    createClient({ url: hrana.url, authToken: options.authToken }),
    "remote",
  );
  try {
    await runMigrations(db);
  } catch (e) {
    await hrana.stop();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const made = new Set<string>();
  let stopped: Promise<void> | null = null;
  return {
    hrana,
    db,
    url: hrana.url,
    async superuserToken(username = "admin") {
      if (!made.has(username)) {
        await createUser(db.orm, { username, isSuperuser: true });
        made.add(username);
      }
      return (await issueToken(db.orm, { username })).key;
    },
    stop() {
      stopped ??= (async () => {
        await db.close();
        await hrana.stop();
        rmSync(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

/** A Worker running in workerd via Miniflare. */
export interface RunningWorker {
  mf: Miniflare;
  /** `http://127.0.0.1:PORT/` */
  url: URL;
  /** Its workerd: its pid, and how it ended if it ended before `stop`. */
  workerd: WorkerdWatch;
  /** Plain HTTP to the worker (through Miniflare's loopback entry). */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** A request to one of the workers by name (`host` or one of `extraWorkers`), i.e. to its isolate. */
  fetchVia(worker: string, path: string, init?: RequestInit): Promise<Response>;
  stop(): Promise<void>;
}

/** Options of {@link startWorker}. */
export interface StartWorkerOptions {
  /** String bindings (the `[vars]` and secrets). */
  bindings: Record<string, string>;
  /** Extra workers in the same Miniflare (each its own isolate); they share the `CACHE` namespace. */
  extraWorkers?: string[];
  /** Bind the `CACHE` KV namespace; default true. */
  kv?: boolean;
  /**
   * Bind the local D1 database kept under this `--persist-to` directory (tools/d1-local.ts) as
   * wrangler.toml's `d1` environment binds it; the Worker then uses D1, not `DATABASE_URL`.
   */
  d1PersistTo?: string;
  /** Receives every line workerd prints (the Worker's console output, e.g. its JSON log lines). */
  onOutput?: (line: string) => void;
  /** Which test started it, for the message when its workerd ends early; default `worker`. */
  name?: string;
}

/**
 * Starts the bundled Worker in workerd with a KV namespace `CACHE` and the given bindings.
 * @example const w = await startWorker({ bindings: { DATABASE_URL: db.url } }); await w.fetch("/api/status/");
 */
export async function startWorker(options: StartWorkerOptions): Promise<RunningWorker> {
  const b = await buildWorkerBundle();
  const d1 = d1Settings();
  const worker = (name: string) => ({
    name,
    modules: true,
    modulesRoot: b.dir,
    scriptPath: b.scriptPath,
    compatibilityDate: b.compatibilityDate,
    compatibilityFlags: b.compatibilityFlags,
    // One namespace id: every isolate sees the same KV, as in production.
    kvNamespaces: options.kv === false ? {} : { CACHE: "host-cache" },
    ...(options.d1PersistTo ? { d1Databases: { [d1.binding]: d1.databaseId } } : {}),
    bindings: { LOG_LEVEL: "silent", ...options.bindings },
  });
  const opts: MiniflareOptions = {
    ...(options.d1PersistTo ? { d1Persist: d1PersistDir(options.d1PersistTo) } : {}),
    host: "127.0.0.1",
    port: 0,
    workers: [worker("host"), ...(options.extraWorkers ?? []).map(worker)],
  };
  if (options.onOutput) {
    const onOutput = options.onOutput;
    opts.handleRuntimeStdio = (stdout: Readable, stderr: Readable) => {
      for (const stream of [stdout, stderr]) {
        let rest = "";
        stream.on("data", (chunk: Buffer) => {
          const lines = (rest + chunk.toString()).split("\n");
          rest = lines.pop()!;
          for (const line of lines) onOutput(line);
        });
      }
    };
  }
  const { mf, url, workerd, stop } = await startMiniflare(options.name ?? "worker", opts);
  // a request after workerd ended fails naming how it ended, not as a bare ECONNREFUSED
  const explained = <T>(work: () => Promise<T>) =>
    work().catch(async (e) => {
      throw await workerd.explain(e);
    });
  return {
    mf,
    url,
    workerd,
    fetch: (path, init) => explained(() => fetch(new URL(path, url), init)),
    fetchVia: (name, path, init = {}) =>
      explained(async () => {
        const target = await mf.getWorker(name);
        const body = typeof init.body === "string" ? init.body : undefined;
        const res = await target.fetch(new URL(path, url).href, {
          method: init.method,
          headers: init.headers as Record<string, string>,
          body,
        });
        // Miniflare answers with undici's Response; hand tests the runtime's own.
        return new Response(res.status === 204 ? null : await res.arrayBuffer(), {
          status: res.status,
          headers: [...res.headers],
        });
      }),
    stop,
  };
}
