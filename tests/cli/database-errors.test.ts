/**
 * A database that cannot be reached is one line naming the cause — unauthorized, refused, not
 * found, TLS — for `npm run db:migrate`, `npm run manage` and the Bun server's start, and a busy
 * port is one line too, before anything else starts. Real processes, real servers on loopback.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHranaServer, type HranaServer } from "../../tools/hrana-server";
import { freePort, ROOT } from "../helpers/worker";

setDefaultTimeout(60_000);
const SECRET = "wrong-db-token-6c1f93";

const dir = mkdtempSync(join(tmpdir(), "host-db-errors-"));
let hrana: HranaServer;
let notFound: ReturnType<typeof Bun.serve>;
let plain: ReturnType<typeof Bun.serve>;
let closedPort: number;

beforeAll(async () => {
  hrana = await startHranaServer({
    path: join(dir, "h.db"),
    port: 0,
    authToken: "the-right-token",
  });
  notFound = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => new Response("no such page", { status: 404 }),
  });
  plain = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("plain http") });
  closedPort = await freePort();
});
afterAll(async () => {
  await hrana?.stop();
  notFound?.stop(true);
  plain?.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

async function run(
  cmd: string[],
  env: Record<string, string>,
  stdin: "ignore" | "pipe" = "ignore",
) {
  const proc = Bun.spawn(cmd, {
    cwd: ROOT,
    env: { ...process.env, HOST_LOCAL_REDIS: "off", LOG_LEVEL: "info", ...env },
    stdin,
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 30_000);
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  return { stdout, stderr, code };
}

const COMMANDS: Array<[string, string[], string]> = [
  ["db:migrate", [process.execPath, "run", "src/cli/migrate.ts"], "migration failed: "],
  [
    "manage create-token",
    [process.execPath, "run", "src/cli/manage.ts", "create-token", "--username", "admin"],
    "error: ",
  ],
  [
    "manage schema export",
    [process.execPath, "run", "src/cli/manage.ts", "schema", "export"],
    "error: ",
  ],
  ["npm start (src/server.ts)", [process.execPath, "run", "src/server.ts"], "cannot start: "],
];

const CAUSES: Array<[string, () => Record<string, string>, RegExp]> = [
  [
    "unauthorized",
    () => ({ DATABASE_URL: hrana.url, DATABASE_AUTH_TOKEN: SECRET }),
    /unauthorized: the server refused DATABASE_AUTH_TOKEN \(HTTP 401\)/,
  ],
  ["refused", () => ({ DATABASE_URL: `http://127.0.0.1:${closedPort}` }), /connection refused/],
  [
    "not found",
    () => ({ DATABASE_URL: `http://127.0.0.1:${notFound.port}` }),
    /not found: the server answered HTTP 404/,
  ],
  ["TLS", () => ({ DATABASE_URL: `https://127.0.0.1:${plain.port}` }), /TLS failed/],
];

// Each case is a process of its own that fails before it writes anything: they run side by side.
describe("database connection failures name their cause in one line", () => {
  for (const [name, cmd, prefix] of COMMANDS) {
    for (const [cause, env, pattern] of CAUSES) {
      test.concurrent(`${name}: ${cause}`, async () => {
        const port = String(await freePort());
        const r = await run(cmd, { ...env(), PORT: port });
        expect(r.code).toBe(1);
        const lines = r.stderr.trim().split("\n");
        expect({ lines: lines.length, stdout: r.stdout }).toEqual({ lines: 1, stdout: "" });
        expect(lines[0]!.startsWith(prefix)).toBe(true);
        expect(lines[0]).toMatch(pattern);
        expect(lines[0]).not.toContain("Failed query");
        expect(r.stderr).not.toContain(SECRET);
      });
    }
  }
});

describe("a busy port", () => {
  test("npm start says so in one line, before any local Redis or database work", async () => {
    const busy = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("taken") });
    try {
      const r = await run([process.execPath, "run", "src/server.ts"], {
        DATABASE_URL: `file:${join(dir, "busy.db")}`,
        PORT: String(busy.port),
        HOST_LOCAL_REDIS: "on",
      });
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr.trim()).toBe(
        `cannot start: port ${busy.port} on 127.0.0.1 is already in use (stop what listens there, or set PORT)`,
      );
    } finally {
      busy.stop(true);
    }
  });
});
