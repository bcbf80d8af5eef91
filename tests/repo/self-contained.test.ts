/**
 * The repository stands alone: a plain clone has no sibling folder beside it, so nothing the
 * suite, the tools or the README use may point outside the checkout. The example documents live in `examples/`.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
const SELF = relative(ROOT, import.meta.path);
// A parent-directory path to the sibling folder, in slash or `join("..", …)` spelling: a path
// that leaves the checkout.
const OUTSIDE = /\.\.(?:["'`]?\s*[,/]\s*["'`]?\.\.)*["'`]?\s*[,/]\s*["'`]?shared\b/;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory()
      ? files(path)
      : /\.(ts|md|sh|json)$/.test(name)
        ? [path]
        : [];
  });
}

describe("self-contained repository", () => {
  test("tests, sources, tools, benchmarks and the README never read the sibling folder", () => {
    const offenders = [
      ...["src", "tests", "tools", "bench", ".ci"].flatMap((d) =>
        existsSync(join(ROOT, d)) ? files(join(ROOT, d)) : [],
      ),
      join(ROOT, "README.md"),
    ]
      .map((p) => relative(ROOT, p))
      .filter((p) => p !== SELF && OUTSIDE.test(readFileSync(join(ROOT, p), "utf8")));
    expect(offenders).toEqual([]);
  });

  test("the example schema document the README tour and the schema tests use is in the repository", () => {
    const doc = JSON.parse(readFileSync(join(ROOT, "examples", "inventory-schema.json"), "utf8"));
    expect(doc.schema_version).toBe("1");
    expect(doc.types.map((t: { slug: string }) => t.slug)).toEqual([
      "circuit_provider",
      "circuit",
      "dhcp_scope",
    ]);
    expect(readFileSync(join(ROOT, "README.md"), "utf8")).toContain(
      "schema apply examples/inventory-schema.json",
    );
  });
});
