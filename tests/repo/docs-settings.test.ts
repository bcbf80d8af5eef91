/**
 * docs/operations.md's configuration reference names every setting: each key of `src/config.ts`'s
 * schema and each name it knows to be read elsewhere (`npm start`, the CLI, the tools), so a new
 * setting cannot ship undocumented.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { unknownSettings } from "../../src/config";

const ROOT = join(import.meta.dir, "..", "..");
const CONFIG = readFileSync(join(ROOT, "src/config.ts"), "utf8");
const OPERATIONS = readFileSync(join(ROOT, "docs/operations.md"), "utf8");

/** The keys of `EnvSchema` (two-space indented `NAME:` lines of `v.object({…})`). */
function schemaKeys(): string[] {
  const start = CONFIG.indexOf("const EnvSchema = v.object({");
  const end = CONFIG.indexOf("\n});", start);
  return [...CONFIG.slice(start, end).matchAll(/^ {2}([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1]!);
}

/** The names of `READ_ELSEWHERE`. */
function readElsewhere(): string[] {
  const start = CONFIG.indexOf("const READ_ELSEWHERE = new Set([");
  const end = CONFIG.indexOf("]);", start);
  return [...CONFIG.slice(start, end).matchAll(/"([A-Z][A-Z0-9_]+)"/g)].map((m) => m[1]!);
}

describe("configuration reference", () => {
  test("the lists read from src/config.ts are the settings it knows", () => {
    const known = [...schemaKeys(), ...readElsewhere()];
    expect(schemaKeys()).toContain("TRUSTED_PROXY_HOPS");
    expect(readElsewhere()).toContain("HOST_LOCAL_REDIS");
    // none of them is "unknown" to the start-up warning, and a name beside them is
    expect(unknownSettings(Object.fromEntries(known.map((k) => [k, "x"])))).toEqual([]);
    expect(unknownSettings({ LOG_LEVELS: "x" })).toHaveLength(1);
  });

  test("docs/operations.md names every one of them", () => {
    const missing = [...schemaKeys(), ...readElsewhere()].filter(
      (name) => !OPERATIONS.includes(`\`${name}\``),
    );
    expect(missing).toEqual([]);
  });
});
