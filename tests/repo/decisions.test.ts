/**
 * Decision records share one template (`# NNNN — Title`, `Status: accepted …` or
 * `Status: superseded by NNNN …`, then `## Context` / `## Decision` / `## Consequences`), and
 * docs/decisions/README.md indexes every one with its title and the start of its status.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const DIR = join(import.meta.dir, "..", "..", "docs", "decisions");
const records = readdirSync(DIR)
  .filter((name) => /^\d{4}-.*\.md$/.test(name))
  .sort();
const index = readFileSync(join(DIR, "README.md"), "utf8");

interface Record {
  file: string;
  title: string;
  status: string;
  sections: string[];
}

function parse(file: string): Record {
  const lines = readFileSync(join(DIR, file), "utf8").split("\n");
  const title = new RegExp(`^# ${file.slice(0, 4)} — (.+)$`).exec(lines[0] ?? "")?.[1] ?? "";
  const status = /^Status: (.+)$/.exec(lines[2] ?? "")?.[1] ?? "";
  const sections = lines.filter((l) => l.startsWith("## ")).map((l) => l.slice(3));
  return { file, title, status, sections };
}

describe("decision records", () => {
  test("every record follows the template", () => {
    const wrong = records
      .map(parse)
      .filter(
        (r) =>
          r.title === "" ||
          !/^(accepted|superseded by \d{4})\b/.test(r.status) ||
          !r.sections.includes("Decision") ||
          r.sections.some((s) => !["Context", "Decision", "Consequences"].includes(s)),
      );
    expect(wrong.map((r) => r.file)).toEqual([]);
    expect(records.length).toBeGreaterThan(50);
  });

  test("the index lists every record with its title and status", () => {
    const rows = new Map(
      [...index.matchAll(/^\| \[(\d{4})\]\(([^)]+)\) \| (.+) \| (.+) \|$/gm)].map((m) => [
        m[2]!,
        { title: m[3]!, status: m[4]! },
      ]),
    );
    const unlisted = records
      .map(parse)
      .filter((r) => {
        const row = rows.get(r.file);
        return !row || row.title !== r.title || !r.status.startsWith(row.status);
      })
      .map((r) => `| [${r.file.slice(0, 4)}](${r.file}) | ${r.title} | ${r.status} |`);
    expect(unlisted).toEqual([]);
    expect(rows.size).toBe(records.length);
  });
});
