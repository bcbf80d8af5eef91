/**
 * A list of ids (or names) for `IN (…)` is bound as one JSON value through `inJsonList` /
 * `jsonListRows` in `src/db/d1-limits.ts`: one bound value however long (D1 takes 100), one
 * statement text for every length. Checked on the text of `src/`: every `json_each(` outside that
 * module is one of the other uses allowed below (a stored JSON column, or bound pairs or objects
 * read as rows of several columns), by file, argument and number of uses.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const SRC = join(import.meta.dir, "..", "..", "src");
const HELPER = "db/d1-limits.ts";
const CO = "plugins/custom-objects";
const RELATED_IDS = "{customObjectTypeFields.relatedObjectTypeIds}";
const CHANGE_JSON = "CASE WHEN json_valid({column}) THEN {column} END";

/**
 * The uses of `json_each` that are not a bound list for `IN (…)`: `[file, argument, uses, why]`,
 * the argument as written with `\${…}` shown as `{…}` and a path argument left off.
 */
const ALLOWED: Array<[string, string, number, string]> = [
  ["core/changes/snapshot-relations.ts", CHANGE_JSON, 1, "a stored change's JSON, at a path"],
  ["core/changes/model.ts", CHANGE_JSON, 1, "a stored change's tags"],
  [`${CO}/types/staged-retype.ts`, "c.column2", 1, "pair chunks, one a VALUES row"],
  [`${CO}/types/staged.ts`, RELATED_IDS, 1, "a polymorphic field's stored targets"],
  [`${CO}/types/field-reads.ts`, "{f.relatedObjectTypeIds}", 1, "stored targets"],
  [`${CO}/schema/operations.ts`, RELATED_IDS, 1, "stored targets"],
  [`${CO}/schema/trash-staged.ts`, "related_object_type_ids", 1, "stored targets"],
  [`${CO}/schema/trash-staged.ts`, RELATED_IDS, 1, "stored targets"],
  [`${CO}/schema/state.ts`, "{f.relatedObjectTypeIds}", 1, "stored targets"],
  [`${CO}/schema/trash.ts`, RELATED_IDS, 1, "stored targets"],
  [`${CO}/objects/models.ts`, "{f.relatedObjectTypeIds}", 2, "stored targets"],
  [`${CO}/schema/impact.ts`, "{col}", 1, "a multiselect column's stored values"],
  [`${CO}/field-types/multiselect.ts`, "{ctx.column}", 1, "a multiselect column"],
  [`${CO}/field-types/multiselect.ts`, "{column}", 1, "a multiselect column"],
  [`${CO}/search/search-index.ts`, "{c}", 1, "a multiselect column's text"],
  [`${CO}/objects/shape.ts`, "cs.extra_choices", 1, "a choice set's stored pairs"],
  [
    "core/models/staged.ts",
    "{read}",
    1,
    "bound [id, stamp] pairs of rows deleted as read (bulk deletes, 0184; cascades)",
  ],
  ["core/changes/record.ts", "{document}", 1, "bound change records, five columns each (0198)"],
  [
    "services/tasks/outbox.ts",
    "{set.document}",
    1,
    "bound deliveries, a job and its row each (0197)",
  ],
  [`${CO}/ddl.ts`, "{chunk}", 1, "bound [id, value] pairs: two columns"],
  [`${CO}/ddl.ts`, "{byName}", 2, "a bound object read by key"],
  [`${CO}/ddl.ts`, "{byTable}", 2, "a bound object read by key"],
];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : /\.tsx?$/.test(e.name)
        ? [join(dir, e.name)]
        : [],
  );
}

/** The first argument of each `json_each(…)` in `text`, outside comment lines. */
function jsonEachArguments(text: string): string[] {
  const code = text
    .split("\n")
    .filter((line) => !/^\s*(\/\/|\/\*|\*)/.test(line))
    .join("\n");
  const out: string[] = [];
  for (const m of code.matchAll(/json_each\(/g)) {
    let depth = 1;
    let end = m.index + m[0].length;
    for (; end < code.length && depth > 0; end++) {
      if (code[end] === "(") depth++;
      else if (code[end] === ")") depth--;
    }
    const whole = code.slice(m.index + m[0].length, end - 1).replaceAll("${", "{");
    out.push(whole.replace(/, ('\$[^']*'|\{path\})$/, ""));
  }
  return out;
}

/** `file: argument` → uses, over `src/` without the helper's own module. */
function usesInSource(): Record<string, number> {
  const uses: Record<string, number> = {};
  for (const path of sources(SRC)) {
    const file = relative(SRC, path);
    if (file === HELPER) continue;
    for (const arg of jsonEachArguments(readFileSync(path, "utf8")))
      uses[`${file}: ${arg}`] = (uses[`${file}: ${arg}`] ?? 0) + 1;
  }
  return uses;
}

test("no list for IN (…) is bound through a hand-written json_each outside inJsonList/jsonListRows", () => {
  const allowed: Record<string, number> = {};
  for (const [file, arg, n] of ALLOWED) allowed[`${file}: ${arg}`] = n;
  // a new use fails here, and so does an allowed one no longer there (keep the list true)
  expect(usesInSource()).toEqual(allowed);
});

test("the check sees a hand-written list, and reads a use's argument", () => {
  const written = `sql\`x IN (SELECT value FROM json_each(\${JSON.stringify(ids)}))\``;
  expect(jsonEachArguments(written)).toEqual(["{JSON.stringify(ids)}"]);
  expect(jsonEachArguments("sql`FROM json_each(CASE WHEN a THEN b END, '$.tags')`")).toEqual([
    "CASE WHEN a THEN b END",
  ]);
  expect(jsonEachArguments("// json_each(ids) in a comment\n * json_each(x)")).toEqual([]);
});
