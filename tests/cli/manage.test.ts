/**
 * `npm run manage`: help on every command (stdout, exit 0), unknown commands named, the
 * createsuperuser password from a hidden terminal prompt or `--password-stdin`, and the README's
 * token capture working exactly as pasted.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { openDatabase } from "../../src/db/local";
import { users } from "../../src/db/schema";
import { verifyPassword } from "../../src/core/auth/passwords";
import { ROOT } from "../helpers/worker";

setDefaultTimeout(60_000);
const dir = mkdtempSync(join(tmpdir(), "host-manage-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let dbCount = 0;
const freshDb = () => `file:${join(dir, `m${++dbCount}.db`)}`;

async function manage(args: string[], opts: { env?: Record<string, string>; input?: string } = {}) {
  const proc = Bun.spawn([process.execPath, "run", "src/cli/manage.ts", ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: freshDb(), ...opts.env },
    stdin: opts.input === undefined ? "ignore" : "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  if (opts.input !== undefined) {
    (proc.stdin as import("bun").FileSink).write(opts.input);
    (proc.stdin as import("bun").FileSink).end();
  }
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { stdout, stderr, code };
}

async function passwordOf(dbUrl: string, username: string, candidate: string): Promise<boolean> {
  const db = await openDatabase(dbUrl);
  try {
    const [row] = await db.orm
      .select({ hash: users.passwordHash, su: users.isSuperuser })
      .from(users)
      .where(eq(users.username, username));
    return !!row?.su && (await verifyPassword(candidate, row.hash));
  } finally {
    await db.close();
  }
}

describe("manage --help", () => {
  const cases: Array<[string[], string]> = [
    [["--help"], "commands:"],
    [["-h"], "commands:"],
    [["help"], "commands:"],
    [["createsuperuser", "--help"], "--password-stdin"],
    [["create-token", "--help"], "--read-only"],
    [["create-token", "-h"], "--read-only"],
    [["help", "create-token"], "--read-only"],
    [["schema", "--help"], "schema apply FILE"],
    [["schema", "apply", "--help"], "schema apply FILE"],
  ];
  // each a process of its own that only prints: side by side
  for (const [args, marker] of cases) {
    test.concurrent(`manage ${args.join(" ")} → usage on stdout, exit 0`, async () => {
      const r = await manage(args);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
      expect(r.stdout).toContain("usage:");
      expect(r.stdout).toContain(marker);
    });
  }
});

describe("manage errors", () => {
  test("an unknown command says so (stderr, exit 1)", async () => {
    const r = await manage(["frobnicate"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr.split("\n")[0]).toBe("Unknown command: frobnicate");
    const sub = await manage(["schema", "frob"]);
    expect(sub.code).toBe(1);
    expect(sub.stderr.split("\n")[0]).toBe("Unknown command: schema frob");
  });

  test("an unknown option names itself and shows the command's usage", async () => {
    const r = await manage(["create-token", "--usernam", "x"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("--usernam");
    expect(r.stderr).toContain("usage: npm run manage -- create-token");
  });
});

describe("createsuperuser passwords", () => {
  test("--password-stdin reads the first line of standard input", async () => {
    const db = freshDb();
    const r = await manage(["createsuperuser", "--username", "root", "--password-stdin"], {
      env: { DATABASE_URL: db },
      input: "correct horse battery\n",
    });
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
    expect(r.stdout).toContain('superuser "root" created');
    expect(await passwordOf(db, "root", "correct horse battery")).toBe(true);
  });

  test("--password-stdin with empty input is refused and creates nothing", async () => {
    const db = freshDb();
    const r = await manage(["createsuperuser", "--username", "root", "--password-stdin"], {
      env: { DATABASE_URL: db },
      input: "",
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("standard input held no password");
  });

  test("without a terminal and without a password: a token-only user, said on stderr", async () => {
    const db = freshDb();
    const r = await manage(["createsuperuser", "--username", "robot"], {
      env: { DATABASE_URL: db },
    });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("no password set");
  });

  const scriptBin = Bun.which("script");
  test.skipIf(!scriptBin)(
    "on a terminal it prompts twice with echo off, and the password works",
    async () => {
      const db = freshDb();
      const secret = "s3cret-Prompted-77";
      // `script` gives the command a real pseudo-terminal; we type only after each prompt shows.
      const cmd = `${process.execPath} run src/cli/manage.ts createsuperuser --username typed`;
      const proc = Bun.spawn([scriptBin!, "-qfec", cmd, "/dev/null"], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: db },
        stdin: "pipe",
        stdout: "pipe",
        stderr: "pipe",
      });
      let seen = "";
      const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
      const waitFor = async (text: string, from: number) => {
        const deadline = Date.now() + 20_000;
        while (seen.indexOf(text, from) < 0) {
          if (Date.now() > deadline)
            throw new Error(`no ${JSON.stringify(text)} in ${JSON.stringify(seen)}`);
          const { value, done } = await reader.read();
          if (done)
            throw new Error(`ended before ${JSON.stringify(text)}: ${JSON.stringify(seen)}`);
          seen += new TextDecoder().decode(value);
        }
        return seen.indexOf(text, from) + text.length;
      };
      const stdin = proc.stdin as import("bun").FileSink;
      const first = await waitFor("Password: ", 0);
      stdin.write(`${secret}\r`);
      stdin.flush();
      await waitFor("Password (again): ", first);
      stdin.write(`${secret}\r`);
      stdin.flush();
      await waitFor("created", first);
      stdin.end();
      expect(await proc.exited).toBe(0);
      expect(seen).not.toContain(secret);
      expect(await passwordOf(db, "typed", secret)).toBe(true);
    },
  );
});

describe("the README's token capture", () => {
  const README = readFileSync(join(ROOT, "README.md"), "utf8");
  const start = README.indexOf("\n## First token\n");
  const firstToken = README.slice(start, README.indexOf("\n## ", start + 1));
  const capture = firstToken.split("\n").find((l) => l.startsWith("TOKEN=$("));

  test("the First token section captures the token with TOKEN=$(…), and only the token is captured when pasted", async () => {
    expect(capture).toBeDefined();
    const db = freshDb();
    const script = [
      "set -euo pipefail",
      "npm run --silent manage -- createsuperuser --username admin --no-input >/dev/null 2>&1",
      capture!.replace(/\s+#.*$/, ""),
      'printf "%s" "$TOKEN"',
    ].join("\n");
    const proc = Bun.spawn(["bash", "-c", script], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: db },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
    expect(stdout).toMatch(/^nbt_[A-Za-z0-9]{12}\.[A-Za-z0-9]{40}$/);
  });

  test("every npm run manage command in the README whose output is captured runs with --silent", () => {
    const captured = [...README.matchAll(/\$\((npm run[^)]*)\)/g)].map((m) => m[1]!);
    expect(captured.length).toBeGreaterThan(0);
    for (const c of captured) expect(c).toStartWith("npm run --silent ");
  });
});
