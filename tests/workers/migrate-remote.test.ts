/**
 * `npm run db:migrate` against a remote libSQL URL (the Hrana server standing in for Turso), as the
 * README's deploy steps do, and a Worker serving the database it migrated.
 */
import { afterAll, beforeAll, describe, expect, test, setDefaultTimeout } from "bun:test";
import { createClient, type Client } from "@libsql/client/web";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHranaServer, type HranaServer } from "../../tools/hrana-server";
import { libsqlDatabase } from "../../src/db/libsql";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { ROOT, startWorker } from "../helpers/worker";

// Real workerd, wrangler and redis-server processes: more room than bun's 5 s default
// (this bun does not apply bunfig's [test] timeout).
setDefaultTimeout(30_000);

const TOKEN = "turso-like-token-3c9d1e7f";
const MIGRATE_TIMEOUT_MS = 30_000;

let dir: string;
let hrana: HranaServer;
let client: Client;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "host-migrate-remote-"));
  hrana = await startHranaServer({ path: join(dir, "remote.db"), port: 0, authToken: TOKEN });
  client = createClient({ url: hrana.url, authToken: TOKEN });
});
afterAll(async () => {
  client?.close();
  await hrana?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `npm run db:migrate` with the given settings; bounded, never throws. */
async function migrate(env: Record<string, string>): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn(["npm", "run", "--silent", "db:migrate"], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: "silent", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), MIGRATE_TIMEOUT_MS);
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  return { code, out: stdout + stderr };
}

const journalEntries = () =>
  (
    JSON.parse(readFileSync(join(ROOT, "migrations", "meta", "_journal.json"), "utf8")) as {
      entries: unknown[];
    }
  ).entries.length;
const applied = async () =>
  Number((await client.execute("SELECT count(*) AS n FROM __drizzle_migrations")).rows[0]!.n);

describe("npm run db:migrate on a remote libSQL URL", () => {
  test("a wrong auth token fails with exit 1 and does not print the token", async () => {
    const r = await migrate({ DATABASE_URL: hrana.url, DATABASE_AUTH_TOKEN: "wrong-token-8e2a4b" });
    expect(r.code).toBe(1);
    expect(r.out).toContain("migration failed");
    expect(r.out).not.toContain("wrong-token-8e2a4b");
    const tables = await client.execute(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'users'",
    );
    expect(tables.rows.length).toBe(0);
  });

  test("http:// URL + DATABASE_AUTH_TOKEN: applies every migration, prints the URL without the token", async () => {
    const r = await migrate({ DATABASE_URL: hrana.url, DATABASE_AUTH_TOKEN: TOKEN });
    expect(r.out).toContain(`migrations applied to ${hrana.url}/`);
    expect(r.code).toBe(0);
    expect(r.out).not.toContain(TOKEN);
    expect(await applied()).toBe(journalEntries());
    const tables = (
      await client.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    ).rows.map((row) => row.name);
    for (const t of ["users", "tokens", "sites", "custom_object_types"])
      expect(tables).toContain(t);
  });

  test("libsql://…?tls=0 (the Turso URL form) works too, and a second run changes nothing", async () => {
    const r = await migrate({
      DATABASE_URL: `libsql://127.0.0.1:${hrana.port}?tls=0`,
      DATABASE_AUTH_TOKEN: TOKEN,
    });
    expect(r.code).toBe(0);
    expect(await applied()).toBe(journalEntries());
  });

  test("a Worker serves the migrated database (libsql: URL, auth token as a secret)", async () => {
    const db = libsqlDatabase(createClient({ url: hrana.url, authToken: TOKEN }), "remote");
    await createUser(db.orm, { username: "deployer", isSuperuser: true });
    const key = (await issueToken(db.orm, { username: "deployer" })).key;
    await db.close();
    const worker = await startWorker({
      bindings: {
        DATABASE_URL: `libsql://127.0.0.1:${hrana.port}?tls=0`,
        DATABASE_AUTH_TOKEN: TOKEN,
      },
    });
    try {
      const res = await worker.fetch("/api/status/", {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { "database-kind": string })["database-kind"]).toBe("remote");
    } finally {
      await worker.stop();
    }
  });
});
