/**
 * D1 refuses a compound SELECT of more than five terms (decision 0161): a compound whose terms are
 * joined from a list (one per field, model or row) goes through `unionAll` / `union` in
 * `src/db/d1-limits.ts`, which groups them within five. Checked on the text of `src/`: no
 * `sql.join` with a compound operator as its separator anywhere else.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const SRC = join(import.meta.dir, "..", "..", "src");
const HELPER = "db/d1-limits.ts";

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : e.name.endsWith(".ts") || e.name.endsWith(".tsx")
        ? [join(dir, e.name)]
        : [],
  );
}

/** A list joined with a compound operator: `sql.join(…, sql\` UNION ALL \`)` and its kin. */
const JOINED_COMPOUND = /sql`\s*(UNION(\s+ALL)?|INTERSECT|EXCEPT)\s*`/i;

test("no list is joined into a compound SELECT outside unionAll/union (D1 takes five terms)", () => {
  const offenders = sources(SRC)
    .map((path) => relative(SRC, path))
    .filter((path) => path !== HELPER)
    .filter((path) => JOINED_COMPOUND.test(readFileSync(join(SRC, path), "utf8")));
  expect(offenders).toEqual([]);
});

test("the check sees such a join", () => {
  expect(JOINED_COMPOUND.test("sql.join(parts, sql` UNION ALL `)")).toBe(true);
  expect(JOINED_COMPOUND.test("sql.join(parts, sql` intersect `)")).toBe(true);
  expect(JOINED_COMPOUND.test("sql`SELECT 1 UNION ALL SELECT 2`")).toBe(false);
});
