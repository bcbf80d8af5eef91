/**
 * The newcomer's path: `GET /` points to the docs, GraphQL and health; a misspelled setting is
 * named at start; `manage backup` copies a live database and the documented restore brings it
 * back. A real server process on a temporary database.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { unknownSettings } from "../../src/config";
import { type ServerProcess, startServerProcess } from "../helpers/server-process";

const ROOT = resolve(import.meta.dir, "../..");
const dir = mkdtempSync(join(tmpdir(), "host-newcomer-"));
let server: ServerProcess;
let token = "";
const serverEnv = { DATABASE_URL: `file:${join(dir, "host.db")}`, HOST_LOCAL_REDIS: "off" };

function manage(args: string[], env: Record<string, string> = {}) {
  const r = Bun.spawnSync([process.execPath, "src/cli/manage.ts", ...args], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      DATABASE_URL: `file:${join(dir, "host.db")}`,
      HOST_LOCAL_REDIS: "off",
      ...env,
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${server.url}${path}`, {
    ...init,
    headers: { Authorization: `Token ${token}`, "Content-Type": "application/json" },
  });

beforeAll(async () => {
  server = await startServerProcess({ ...serverEnv, LOGIN_REQUIRD: "false", HOST_PORTT: "1" });
  expect(manage(["createsuperuser", "--username", "admin", "--no-input"]).code).toBe(0);
  token = manage(["create-token", "--username", "admin"]).out.trim();
});
afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("GET /", () => {
  test("a browser gets a page linking the docs, GraphQL and health", async () => {
    const r = await fetch(`${server.url}/`, { headers: { Accept: "text/html" } });
    expect(r.status).toBe(200);
    const html = await r.text();
    for (const path of ["/api/docs/", "/graphql/", "/plugins/host_healthcheck_plugin/healthcheck/"])
      expect(html).toContain(`href="${path}"`);
  });

  test("an API client gets the same links as JSON, absolute", async () => {
    const r = await fetch(`${server.url}/`);
    expect(r.status).toBe(200);
    const body = (await r.json()) as { links: Record<string, string> };
    expect(body.links.docs).toBe(`${server.url}/api/docs/`);
    expect(body.links.graphql).toBe(`${server.url}/graphql/`);
    const docs = await fetch(body.links.docs!);
    expect(docs.status).toBe(200);
  });
});

describe("settings that look like ours", () => {
  test("a misspelled setting is named once at start, with the setting it likely meant", () => {
    const warnings = server.logs.filter((l) => String(l.msg ?? "").startsWith("unknown settings"));
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0]!.msg)).toContain("LOGIN_REQUIRD (did you mean LOGIN_REQUIRED?)");
    expect(String(warnings[0]!.msg)).toContain("HOST_PORTT");
  });

  test("known settings, other programs' variables and our own tools' settings are not named", () => {
    expect(
      unknownSettings({
        LOGIN_REQUIRED: "false",
        HOSTNAME: "box",
        PATH: "/bin",
        HOST_LOCAL_REDIS: "off",
        REDIS_TASKS_URL: "redis://x",
      }),
    ).toEqual([]);
    expect(unknownSettings({ REDIS_TASK_URL: "x" })).toEqual([
      "REDIS_TASK_URL (did you mean REDIS_TASKS_URL?)",
    ]);
  });
});

describe("manage backup", () => {
  test("copies the live database while it takes writes; the documented restore brings it back", async () => {
    for (let i = 0; i < 5; i++) {
      const r = await api("/api/dcim/sites/", {
        method: "POST",
        body: JSON.stringify({ name: `before-${i}`, slug: `before-${i}` }),
      });
      expect(r.status).toBe(201);
    }
    const backup = join(dir, "backup.db");
    // Writes go on while the copy is taken.
    const writes = Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        api("/api/dcim/sites/", {
          method: "POST",
          body: JSON.stringify({ name: `during-${i}`, slug: `during-${i}` }),
        }).then((r) => r.status),
      ),
    );
    const result = manage(["backup", backup]);
    expect(await writes).toEqual(Array(10).fill(201));
    expect(result.code).toBe(0);
    expect(result.out).toContain("checked");
    expect(manage(["backup", backup]).err).toContain("exists");

    // After the backup: a site that the restore must not bring back.
    await api("/api/dcim/sites/", {
      method: "POST",
      body: JSON.stringify({ name: "after", slug: "after" }),
    });
    expect(await server.stop()).toBe(0); // drained and closed: the file is whole to restore over
    copyFileSync(backup, join(dir, "host.db"));
    for (const suffix of ["-wal", "-shm"]) rmSync(join(dir, `host.db${suffix}`), { force: true });
    server = await startServerProcess(serverEnv);
    const list = (await (await api("/api/dcim/sites/?limit=100")).json()) as {
      results: Array<{ slug: string }>;
    };
    const slugs = list.results.map((s) => s.slug);
    for (let i = 0; i < 5; i++) expect(slugs).toContain(`before-${i}`);
    expect(slugs).not.toContain("after");
  });

  test("a remote database is refused with one line; nothing is written", () => {
    const target = join(dir, "remote-backup.db");
    const r = manage(["backup", target], { DATABASE_URL: "libsql://127.0.0.1:9" });
    expect(r.code).toBe(1);
    expect(r.err.trim().split("\n")).toHaveLength(1);
    expect(r.err).toContain("not a local file");
    expect(existsSync(target)).toBe(false);
  });
});
