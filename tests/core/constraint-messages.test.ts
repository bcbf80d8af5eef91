/**
 * Constraint failures as each backend words them become the same 400/409 answers: D1 appends the
 * result code to SQLite's message, which must not be read as part of the column list.
 */
import { expect, test } from "bun:test";
import { mapConstraintError } from "../../src/core/rest/constraints";
import { ValidationError } from "../../src/core/errors";

const site = { verboseName: "site", fieldForColumn: (c: string) => c };

test("a unique failure names the field on libSQL and on D1 alike", () => {
  for (const message of [
    "SQLITE_CONSTRAINT_UNIQUE: UNIQUE constraint failed: sites.name",
    "D1_ERROR: UNIQUE constraint failed: sites.name: SQLITE_CONSTRAINT (extended: SQLITE_CONSTRAINT_UNIQUE)",
  ]) {
    const mapped = mapConstraintError(new Error(message), site);
    expect(mapped).toBeInstanceOf(ValidationError);
    expect((mapped as ValidationError).fields).toEqual({
      name: ["site with this name already exists."],
    });
  }
});

test("a NOT NULL failure on D1 names the field", () => {
  const mapped = mapConstraintError(
    new Error(
      "D1_ERROR: NOT NULL constraint failed: sites.slug: SQLITE_CONSTRAINT (extended: SQLITE_CONSTRAINT_NOTNULL)",
    ),
    site,
  );
  expect((mapped as ValidationError).fields).toEqual({ slug: ["This field is required."] });
});
