/**
 * Domain code is backend-blind (issue 28 item 1, decision 0157): outside `src/db`, nothing reads
 * `Database.kind` to choose what to do; the implementation, or `src/db/policy.ts`, decides. Every
 * database in `src/` is named `db` (`services.db`, a `db: Database` parameter), so a read of it
 * is `db.kind`, `db["kind"]`, `{ kind } = …db`, or a type asking for it (`Pick<Database, "kind">`).
 * The files that display the backend's name to a person are listed.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const SRC = join(import.meta.dir, "..", "..", "src");
/** Files that show the backend's name (the status page, the health check's `driver`). */
const DISPLAYS = new Set(["core/routes.ts", "plugins/healthcheck/checks/database.ts"]);

const READS = [
  /\bdb\s*\??\.\s*kind\b/,
  /\bdb\s*\??\.?\s*\[\s*["'`]kind["'`]\s*\]/,
  /\{[^{}]*\bkind\b[^{}]*\}\s*=\s*[\w.?]*\bdb\b/,
  /\bDatabase\b\s*,\s*(?:"[^"]*"\s*\|\s*)*"kind"/,
];

/** The lines of `text` that read `Database.kind`, as `file:line`. */
export function kindReads(file: string, text: string): string[] {
  return text
    .split("\n")
    .flatMap((line, i) => (READS.some((re) => re.test(line)) ? [`${file}:${i + 1}`] : []));
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return /\.tsx?$/.test(name) ? [relative(SRC, path)] : [];
  });
}

describe("backend-blind domain code", () => {
  test("no module outside src/db branches on Database.kind", () => {
    const domain = sources(SRC).filter((f) => !f.startsWith("db/") && !DISPLAYS.has(f));
    expect(domain.length).toBeGreaterThan(100);
    const found = domain.flatMap((f) => kindReads(f, readFileSync(join(SRC, f), "utf8")));
    expect(found).toEqual([]);
  });

  test("the check finds such a read however it is spelled, and nothing else", () => {
    const reads = [
      'if (c.var.services.db.kind !== "local") {',
      "const token = db.kind === 'local' ? a : b;",
      'if (ctx.services.db?.kind === "d1") return;',
      'const remote = services.db["kind"] !== "local";',
      "const { kind, orm } = ctx.services.db;",
      'export function overBound(db: Pick<Database, "kind">, n: number) {',
      'const f = (db: Pick<Database, "orm" | "kind">) => 0;',
    ];
    const others = [
      'if (spec.kind === "string") return;',
      "cause: database.kind,",
      "const { kind } = filter;",
      'db: Pick<Database, "needTransaction">,',
      "const kinds = dbKinds;",
    ];
    const text = [...reads, ...others].join("\n");
    expect(kindReads("probe.ts", text)).toEqual(reads.map((_, i) => `probe.ts:${i + 1}`));
  });
});
