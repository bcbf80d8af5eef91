/**
 * Every relative link in README.md and docs/ (decision records included) points at a file that
 * exists, and a `#fragment` into one of our Markdown files at one of its headings, so moving a
 * document or renaming a section cannot leave a reader at a dead end.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return markdownFiles(path);
    return name.endsWith(".md") ? [path] : [];
  });
}

/** The Markdown without fenced code blocks and code spans, where brackets are not links. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[\s\S]*?^\1/gm, "").replace(/`[^`\n]*`/g, "");
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
}

function anchorsOf(path: string): Set<string> {
  const headings = prose(readFileSync(path, "utf8")).match(/^#{1,6} .*$/gm) ?? [];
  return new Set(headings.map((h) => anchorOf(h.replace(/^#+ /, ""))));
}

/** Each relative link of `markdown` (in file `from`) that leads nowhere, as `target`. */
function brokenLinks(from: string, markdown: string): string[] {
  const broken: string[] = [];
  for (const [, target] of prose(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue; // https:, mailto:
    const [file, fragment] = target!.split("#", 2) as [string, string | undefined];
    const path = file ? join(dirname(from), decodeURIComponent(file)) : from;
    if (!existsSync(path)) {
      broken.push(target!);
      continue;
    }
    if (fragment && path.endsWith(".md") && !anchorsOf(path).has(fragment)) broken.push(target!);
  }
  return broken;
}

const documents = [join(ROOT, "README.md"), ...markdownFiles(join(ROOT, "docs"))];

describe("documentation links", () => {
  test("a link to a missing file or heading is caught", () => {
    const from = join(ROOT, "README.md");
    expect(
      brokenLinks(
        from,
        "[ok](docs/operations.md) [gone](docs/no-such-file.md) [web](https://example.com)\n" +
          "[heading](docs/operations.md#no-such-heading) `[code](docs/not-a-link.md)`",
      ),
    ).toEqual(["docs/no-such-file.md", "docs/operations.md#no-such-heading"]);
  });

  test("README.md and docs/ link only to files and headings that exist", () => {
    const broken = documents.flatMap((path) =>
      brokenLinks(path, readFileSync(path, "utf8")).map(
        (target) => `${relative(ROOT, path)} → ${target}`,
      ),
    );
    expect(broken).toEqual([]);
    expect(documents.length).toBeGreaterThan(10);
  });
});
