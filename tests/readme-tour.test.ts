/**
 * README.md's "Guided tour" works as written: its ```sh blocks run, in order, in one bash shell
 * (`set -euo pipefail`) against a server started the way the tour says (`npm start`, i.e.
 * `src/server.ts` bundled by `tools/bundle.ts` and run from that one file, with its local Redis).
 * Only two things are rewritten: the tour server's address `127.0.0.1:8001` (a free port here) and
 * the database `file:data/tour.db` (a temp file). The tour must work beside the quick-start
 * server: it never names port 8000 and leaves nothing exported in the reader's shell.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BundledServer, startBundledServer } from "./helpers/server-process";
import { HOST_ENGINE_ENV } from "../bench/child-server";
import { bundle } from "../tools/bundle";

setDefaultTimeout(180_000);

const ROOT = join(import.meta.dir, "..");
const README = readFileSync(join(ROOT, "README.md"), "utf8");

/** The text of the section headed `## <title>`, up to the next `## `. */
function section(title: string): string {
  const start = README.indexOf(`\n## ${title}\n`);
  if (start < 0) throw new Error(`README.md has no "## ${title}" section`);
  const end = README.indexOf("\n## ", start + 1);
  return README.slice(start, end < 0 ? undefined : end);
}

const tour = section("Guided tour");
const blocks = [...tour.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
const serverCommand = /`(DATABASE_URL=(\S+) PORT=(\d+) npm start)`/.exec(tour);
const TOUR_ADDRESS = "127.0.0.1:8001";

/** `npm start`: the bundle (decision 0062), then the engine settings it sets (decision 0060) and the server from it. */
const startScript: string = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts
  .start;
const startEnv = Object.fromEntries(
  [...startScript.matchAll(/(\w+)=(\S+) /g)].map((m) => [m[1]!, m[2]!]),
);

const dir = mkdtempSync(join(tmpdir(), "host-tour-"));
const dbUrl = `file:${join(dir, "tour.db")}`;
let port: number;
let server: BundledServer | null = null;

beforeAll(async () => {
  // What `DATABASE_URL=file:data/tour.db PORT=8001 npm start` runs, on the temp database and a free port
  // (bundled into a folder of its own, so a developer's `npm start` meanwhile is not disturbed).
  const script = await bundle("src/server.ts", "tour-server");
  server = await startBundledServer(script, {
    ...startEnv,
    DATABASE_URL: dbUrl,
    LOG_LEVEL: "warn",
  });
  port = server.port;
});

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("README guided tour", () => {
  test("starts the server with npm start on the tour database", () => {
    expect(serverCommand?.[1]).toBe("DATABASE_URL=file:data/tour.db PORT=8001 npm start");
    expect(startScript).toBe(
      "bun tools/bundle.ts && BUN_JSC_heapGrowthMaxIncrease=1 exec bun .build/server/server.js",
    );
    // the benches start the Host server with the same settings
    expect(startEnv).toEqual(HOST_ENGINE_ENV);
    expect(blocks.length).toBeGreaterThanOrEqual(5);
  });

  test("the tour works beside the quick-start server: its own port, nothing exported", () => {
    expect(tour).not.toContain("127.0.0.1:8000");
    expect(blocks.join("\n")).toContain(TOUR_ADDRESS);
    expect(blocks.join("\n")).not.toMatch(/^\s*(export|declare -x|set -a)\b/m);
  });

  test("every command of the tour runs, and does what the tour says", async () => {
    // After the tour, the shell's environment must not hold the tour's database.
    const leftBehind =
      'if env | grep -q "^DATABASE_URL="; then echo "tour exported DATABASE_URL"; exit 3; fi';
    const script = ["set -euo pipefail", ...blocks, leftBehind]
      .join("\n")
      .replaceAll(TOUR_ADDRESS, `127.0.0.1:${port}`)
      .replaceAll("file:data/tour.db", dbUrl);
    const { DATABASE_URL: _unset, ...env } = process.env;
    const proc = Bun.spawn(["bash", "-c", script], {
      cwd: ROOT,
      env: { ...env, FORCE_COLOR: "0" },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const timer = setTimeout(() => proc.kill("SIGKILL"), 170_000);
    const [stdout, stderr, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    clearTimeout(timer);
    expect({
      code,
      stderr:
        code === 0 ? "" : `${stderr}\n--- stdout ---\n${stdout}\n--- server ---\n${server?.log()}`,
    }).toEqual({ code: 0, stderr: "" });

    expect(stdout).toContain('"host-version"'); // /api/status/ with the new token
    expect(stdout).toContain("3 types, 3 new"); // schema preview
    expect(stdout).toContain("Applied."); // schema apply through the server
    expect(stdout).toContain('"cid":"ACME-0001"');
    expect(stdout).toMatch(/"field_name":"a_side".*"cid":"ACME-0001"/); // linked objects of the site
    expect(stdout).toContain('"status":"working"'); // health
    expect(stdout).toContain("openapi: 3.1.0"); // the API description
  });

  test("the bundled server finds what it resolves against its own file: migrations ran, the docs page has its assets", async () => {
    const docs = await fetch(`http://127.0.0.1:${port}/api/docs/`);
    expect(docs.status).toBe(200);
    const asset = await fetch(`http://127.0.0.1:${port}/api/docs/assets/swagger-ui-bundle.js`);
    expect(asset.status).toBe(200);
    expect((await asset.text()).length).toBeGreaterThan(100_000);
    expect((await fetch(`http://127.0.0.1:${port}/livez`)).status).toBe(200);
  });
});
