/**
 * The gate that `npm test` runs first (tools/gate.sh): a copy of the checkout with one fault of
 * each kind fails it, and every failing step is named; over-long functions fail only in `src/`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
let copy: string;

function gate(): { code: number; out: string } {
  const r = Bun.spawnSync(["bash", "tools/gate.sh"], { cwd: copy, stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, out: r.stdout.toString() + r.stderr.toString() };
}

beforeAll(() => {
  copy = mkdtempSync(join(tmpdir(), "host-gate-"));
  const listed = Bun.spawnSync(
    ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    { cwd: ROOT, stdout: "pipe" },
  );
  for (const path of listed.stdout.toString().split("\0").filter(Boolean)) {
    try {
      cpSync(join(ROOT, path), join(copy, path), { recursive: true });
    } catch {
      // A file deleted in the work tree but not yet in the index.
    }
  }
  symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"));
  Bun.spawnSync(["git", "init", "-q"], { cwd: copy });
});

afterAll(() => rmSync(copy, { recursive: true, force: true }));

describe("the gate", () => {
  test("a clean copy passes every step", () => {
    const { code, out } = gate();
    expect(out).toContain("gate: format ok");
    expect(out).toContain("gate: lint ok");
    expect(out).toContain("gate: types ok");
    expect(out).toContain("gate: unused ok");
    expect(code).toBe(0);
  }, 120_000);

  test("each kind of fault fails its own step, and the step is named", () => {
    // Misformatted, and a type error.
    writeFileSync(join(copy, "src", "gate-probe.ts"), 'export const  n : number = "x"\n');
    // An unused import (lint) in a file that is otherwise clean.
    writeFileSync(
      join(copy, "src", "gate-probe-lint.ts"),
      'import { join } from "node:path";\n\nexport const m = 1;\n',
    );
    const { code, out } = gate();
    expect(code).not.toBe(0);
    expect(out).toContain("gate: format FAILED");
    expect(out).toContain("gate: lint FAILED");
    expect(out).toContain("gate: types FAILED");
    // Neither file is imported from an entry: knip reports them as unused files.
    expect(out).toContain("gate: unused FAILED");
    expect(out).toContain("gate-probe");
  }, 120_000);

  test("a function over 100 lines fails lint in src/, not in tests/", () => {
    const body = Array.from({ length: 101 }, (_, i) => `  total += ${i};\n`).join("");
    const long = `/** A probe. */\nexport function long(): number {\n  let total = 0;\n${body}  return total;\n}\n`;
    writeFileSync(join(copy, "src", "gate-probe-long.ts"), long);
    writeFileSync(join(copy, "tests", "gate-probe-long.ts"), long);
    const r = Bun.spawnSync(
      [
        join(ROOT, "node_modules", ".bin", "biome"),
        "lint",
        "--colors=off",
        "src/gate-probe-long.ts",
        "tests/gate-probe-long.ts",
      ],
      { cwd: copy, stdout: "pipe", stderr: "pipe" },
    );
    const out = r.stdout.toString() + r.stderr.toString();
    expect(out).toContain("src/gate-probe-long.ts:2:8 lint/complexity/noExcessiveLinesPerFunction");
    expect(out).not.toContain("tests/gate-probe-long.ts:");
    expect(out).toContain("Found 1 error.");
    expect(r.exitCode).not.toBe(0);
  }, 120_000);
});
