/**
 * Conditional constraints of a custom object type (issue 32, decision 0087): partial unique keys
 * (`unique_together` entries `{fields, condition}`) and checks (`{name, condition}`). A condition
 * is a NetBox permission-constraint object (an AND of lookups; a list ORs them), turned into SQL
 * by the lookup code permission constraints use (`parseLookupKey`, `filterTerm`) over the type's
 * own columns only, and rendered as DDL text with literal values (DDL takes no bound values).
 */
import { and, or, sql, type SQL } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import type { Executor } from "../../../db/client";
import { filterTerm, parseLookupKey } from "../../../core/auth/restrict";
import { ValidationError } from "../../../core/errors";
import { hasControlCharacter } from "../../../core/limits";
import type { FilterSpec } from "../../../core/rest/query";
import { fieldColumns, hasLinkTable, ident, tableName, valueColumn } from "../ddl";
import { fieldType } from "../field-types";
import type { FieldLike } from "../field-types/types";
import { countScalar, duplicatesCountSql, existingRows } from "./impact";

type Condition = Record<string, unknown> | Array<Record<string, unknown>>;
export interface PartialKey {
  fields: string[];
  condition: Condition;
}
export interface Check {
  name: string;
  condition: Condition;
}
export interface Conditional {
  unique: PartialKey[];
  checks: Check[];
}
/**
 * A field as a condition reads it. `sqlColumn` (preview of a document) names the column that
 * holds its values now when that is not its own name (a rename), or null when it has none yet;
 * then every row reads `sqlValue` (a field the apply adds: its stored default, decision 0142).
 */
export type ConditionField = Pick<FieldLike, "name" | "type" | "isPolymorphic"> &
  Partial<FieldLike> & { sqlColumn?: string | null; sqlValue?: unknown };

const MAX_KEYS = 16;
const MAX_CHECKS = 16;
const MAX_ALTERNATIVES = 10;
const MAX_LOOKUPS = 20;
const MAX_VALUES = 50;
const MAX_TEXT = 200;
const CHECK_NAME = /^[a-z][a-z0-9_]{0,49}$/;
const FIELD_NAME = /^[a-z0-9]+(_[a-z0-9]+)*$/;

/** A condition, key or check that cannot be: the message says what and where. */
class ConstraintIssue extends Error {}
const issue = (message: string) => new ConstraintIssue(message);

/** The filters a condition may use: plain filters on a field's own column, by filter name. */
function columnFilters(fields: ConditionField[], row: "" | "NEW"): Record<string, FilterSpec> {
  const out: Record<string, FilterSpec> = Object.create(null);
  const column = (name: string) => (row ? sql`NEW.${ident(name)}` : ident(name));
  for (const f of fields) {
    const own = hasLinkTable(f) ? null : valueColumn(f);
    if (!own || f.isPolymorphic) continue;
    const expr = f.sqlColumn === null ? valueToday(f.sqlValue) : column(f.sqlColumn ?? own);
    const filters = fieldType(f.type).filters(f as FieldLike, {
      column: expr as never,
      columnNamed: (n) => column(n) as never,
      id: sql`id` as never,
      linkTable: sql`0`,
      typeKey: () => undefined,
    });
    for (const [name, spec] of Object.entries(filters))
      if (!spec.build && spec.expr === expr) out[name] = spec;
  }
  return out;
}

/** The value every row reads of a field with no column yet: its default, or NULL. */
const valueToday = (value: unknown) =>
  ["string", "number", "boolean"].includes(typeof value) ? sql`${value}` : sql`NULL`;

/** A value a condition may hold: a short text without control characters, a number, a boolean, null. */
function checkValue(key: string, value: unknown): void {
  if (value === "$user") throw issue(`"${key}": $user has no meaning in a table constraint.`);
  if (Array.isArray(value)) {
    if (value.length > MAX_VALUES) throw issue(`"${key}": at most ${MAX_VALUES} values.`);
    for (const v of value) {
      if (Array.isArray(v)) throw issue(`"${key}": a list of plain values is expected.`);
      checkValue(key, v);
    }
    return;
  }
  if (typeof value === "string") {
    if (value.length > MAX_TEXT || hasControlCharacter(value))
      throw issue(
        `"${key}": a text value has at most ${MAX_TEXT} characters and no control characters.`,
      );
    return;
  }
  if (typeof value === "number" && !Number.isFinite(value))
    throw issue(`"${key}": numbers must be finite.`);
  if (value !== null && !["number", "boolean"].includes(typeof value))
    throw issue(`"${key}": a value is text, a number, a boolean, null or a list of them.`);
}

function lookupTerm(filters: Record<string, FilterSpec>, key: string, value: unknown): SQL {
  if (key.length > 100) throw issue("A lookup is at most 100 characters.");
  const { parts, lookupName, mapped } = parseLookupKey(key);
  if (parts.length !== 1)
    throw issue(`"${key}": a condition reads the type's own fields only (no related lookups).`);
  checkValue(key, value);
  const name = parts[0]!;
  const spec = Object.hasOwn(filters, name) ? filters[name] : undefined;
  if (!spec) throw issue(`"${name}" is not a field of this type a condition can read.`);
  let term: SQL | null;
  try {
    // DDL: a partial index's WHERE takes no subquery, so a list's values are written in line
    term = filterTerm(name, spec, mapped, value, { inDdl: true });
  } catch (e) {
    if (!(e instanceof ValidationError) || Array.isArray(e.fields)) throw e;
    throw issue(`"${key}": ${Object.values(e.fields).flat().join(" ")}`);
  }
  if (!term)
    throw issue(`"${key}": the lookup "${lookupName}" does not take ${JSON.stringify(value)}.`);
  return term;
}

/** A condition as SQL over the type's columns (`NEW.<column>` in a trigger). Throws ConstraintIssue. */
function conditionSql(condition: unknown, fields: ConditionField[], row: "" | "NEW"): SQL {
  const sets = Array.isArray(condition) ? condition : [condition];
  if (!sets.length || sets.length > MAX_ALTERNATIVES)
    throw issue(
      `A condition is an object of lookups or a list of 1 to ${MAX_ALTERNATIVES} of them.`,
    );
  const filters = columnFilters(fields, row);
  const alternatives = sets.map((set) => {
    if (!set || typeof set !== "object" || Array.isArray(set))
      throw issue("A condition is an object of lookups or a list of them.");
    const entries = Object.entries(set as Record<string, unknown>);
    if (!entries.length || entries.length > MAX_LOOKUPS)
      throw issue(`Each condition object holds 1 to ${MAX_LOOKUPS} lookups.`);
    return and(...entries.map(([key, value]) => lookupTerm(filters, key, value))) as SQL;
  });
  return (alternatives.length === 1 ? alternatives[0] : or(...alternatives)) as SQL;
}

const dialect = new SQLiteAsyncDialect();

/** A bound value as an SQL literal: text quoted with its quotes doubled, finite numbers as digits. */
function literal(value: unknown): string {
  if (value === null) return "NULL";
  if (typeof value === "boolean") return value ? "1" : "0";
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  if (typeof value === "string" && !value.includes("\0")) return `'${value.replaceAll("'", "''")}'`;
  throw new Error("a condition value that cannot be an SQL literal");
}

/** `q` as one SQL text with every bound value written in as a literal (for DDL). */
function renderDdl(q: SQL): string {
  const { sql: text, params } = dialect.sqlToQuery(q);
  let out = "";
  let k = 0;
  let quote: string | null = null;
  for (const ch of text) {
    if (quote) {
      if (ch === quote) quote = null; // a doubled quote closes and reopens
    } else if (ch === "'" || ch === '"') quote = ch;
    else if (ch === "?") {
      out += literal(params[k++]);
      continue;
    }
    out += ch;
  }
  if (quote || k !== params.length) throw new Error("a condition rendered to malformed SQL");
  return out;
}

/** `conditionSql` rendered, for DDL and the counts of preview. */
const conditionText = (condition: unknown, fields: ConditionField[], row: "" | "NEW") =>
  renderDdl(conditionSql(condition, fields, row));

/** The list and object forms of `unique_together` apart: plain keys, partial keys. */
export function splitTogether(raw: unknown): { plain: unknown[]; partial: unknown[] } {
  if (!Array.isArray(raw)) return { plain: raw as unknown[], partial: [] };
  const isPartial = (e: unknown) => !!e && typeof e === "object" && !Array.isArray(e);
  return { plain: raw.filter((e) => !isPartial(e)), partial: raw.filter(isPartial) };
}

/** `unique_together` as answered and exported: the plain keys, then the partial ones. */
export const mergedTogether = (plain: string[][], conditional: Conditional | null | undefined) => [
  ...plain,
  ...(conditional?.unique ?? []),
];

/**
 * Checks partial keys and checks against the type's fields; returns them in one spelling (key
 * fields sorted) or throws a ConstraintIssue keyed by `unique_together` or `checks`.
 */
export function checkConditional(
  rawKeys: unknown[],
  rawChecks: unknown,
  fields: ConditionField[],
): { conditional: Conditional; errors: Record<string, string[]> } {
  const errors: Record<string, string[]> = {};
  const add = (key: string, m: string) => (errors[key] ??= []).push(m);
  const unique: PartialKey[] = [];
  if (rawKeys.length > MAX_KEYS) add("unique_together", `At most ${MAX_KEYS} partial keys.`);
  for (const raw of rawKeys.slice(0, MAX_KEYS)) {
    try {
      unique.push(partialKey(raw, fields));
    } catch (e) {
      if (!(e instanceof ConstraintIssue)) throw e;
      add("unique_together", e.message);
    }
  }
  const checks: Check[] = [];
  if (rawChecks !== undefined && rawChecks !== null && !Array.isArray(rawChecks))
    add("checks", "Expected a list of {name, condition}.");
  const list = Array.isArray(rawChecks) ? rawChecks : [];
  if (list.length > MAX_CHECKS) add("checks", `At most ${MAX_CHECKS} checks.`);
  for (const raw of list.slice(0, MAX_CHECKS)) {
    try {
      const c = oneCheck(raw, fields);
      if (checks.some((x) => x.name === c.name))
        throw issue(`The check "${c.name}" is named twice.`);
      checks.push(c);
    } catch (e) {
      if (!(e instanceof ConstraintIssue)) throw e;
      add("checks", e.message);
    }
  }
  return { conditional: { unique, checks }, errors };
}

function partialKey(raw: unknown, fields: ConditionField[]): PartialKey {
  const o = raw as Record<string, unknown>;
  const extra = Object.keys(o).filter((k) => k !== "fields" && k !== "condition");
  if (extra.length)
    throw issue(`A partial key has only "fields" and "condition" (not ${extra.join(", ")}).`);
  const names = o.fields;
  if (
    !Array.isArray(names) ||
    names.length < 1 ||
    names.length > 16 ||
    !names.every((n) => typeof n === "string" && FIELD_NAME.test(n))
  )
    throw issue("A partial key's fields are a list of 1 to 16 field names.");
  if (new Set(names).size !== names.length)
    throw issue(`[${names.join(", ")}] names a field twice.`);
  for (const n of names as string[]) {
    const f = fields.find((x) => x.name === n);
    if (!f) throw issue(`"${n}" is not a field of this type.`);
    if (hasLinkTable(f)) throw issue(`A ${f.type} field cannot be part of a unique key.`);
  }
  conditionSql(o.condition, fields, "");
  return { fields: [...(names as string[])].sort(), condition: o.condition as Condition };
}

function oneCheck(raw: unknown, fields: ConditionField[]): Check {
  if (!raw || typeof raw !== "object" || Array.isArray(raw))
    throw issue("A check is {name, condition}.");
  const o = raw as Record<string, unknown>;
  const extra = Object.keys(o).filter((k) => k !== "name" && k !== "condition");
  if (extra.length)
    throw issue(`A check has only "name" and "condition" (not ${extra.join(", ")}).`);
  if (typeof o.name !== "string" || !CHECK_NAME.test(o.name))
    throw issue(
      "A check's name is 1 to 50 lowercase letters, digits and underscores, first a letter.",
    );
  try {
    conditionSql(o.condition, fields, "");
  } catch (e) {
    if (e instanceof ConstraintIssue) throw issue(`check "${o.name}": ${e.message}`);
    throw e;
  }
  return { name: o.name, condition: o.condition as Condition };
}

/** Field names a constraint reads (its key's fields and its condition's lookups). */
function namesRead(c: PartialKey | Check): string[] {
  const sets = Array.isArray(c.condition) ? c.condition : [c.condition];
  const keys = sets.flatMap((s) => Object.keys(s ?? {}).map((k) => parseLookupKey(k).parts[0]!));
  return [...new Set([...("fields" in c ? c.fields : []), ...keys])];
}

/** The constraints with field `from` renamed `to` (keys and condition lookups alike). */
export function renameInConditional(c: Conditional, from: string, to: string): Conditional {
  const renameKey = (key: string) => {
    const { parts, lookupName } = parseLookupKey(key);
    if (parts[0] !== from) return key;
    return [to, ...parts.slice(1), ...(key.endsWith(`__${lookupName}`) ? [lookupName] : [])].join(
      "__",
    );
  };
  const renameCondition = (cond: Condition): Condition => {
    const one = (s: Record<string, unknown>) =>
      Object.fromEntries(Object.entries(s).map(([k, v]) => [renameKey(k), v]));
    return Array.isArray(cond) ? cond.map(one) : one(cond);
  };
  return {
    unique: c.unique.map((k) => ({
      fields: k.fields.map((n) => (n === from ? to : n)).sort(),
      condition: renameCondition(k.condition),
    })),
    checks: c.checks.map((k) => ({ name: k.name, condition: renameCondition(k.condition) })),
  };
}

const keyIndex = (cotId: number, i: number) => `${tableName(cotId)}_uc${i}`;
const checkTrigger = (cotId: number, i: number, op: "i" | "u") =>
  `${tableName(cotId)}_ck${i}_${op}`;

/** Drops the type's partial unique indexes and check triggers (before its columns move). */
export async function dropConditional(db: Executor, cotId: number): Promise<void> {
  const rows = (await db.all(
    sql`SELECT type, name FROM sqlite_master WHERE tbl_name = ${tableName(cotId)} AND type IN ('index', 'trigger')`,
  )) as Array<{ type: string; name: string }>;
  const ours = new RegExp(`^${tableName(cotId)}_(uc\\d+|ck\\d+_[iu])$`);
  for (const r of rows) {
    if (!ours.test(r.name)) continue;
    await db.run(
      r.type === "index"
        ? sql`DROP INDEX IF EXISTS ${ident(r.name)}`
        : sql`DROP TRIGGER IF EXISTS ${ident(r.name)}`,
    );
  }
}

/** Rows sharing a partial key's values among the rows its condition admits. */
function countPartialDuplicates(
  db: Executor,
  cotId: number,
  fields: ConditionField[],
  key: PartialKey,
): Promise<number> {
  const count = partialDuplicatesSql(cotId, fields, key);
  return count ? countScalar(db, count) : Promise.resolve(0);
}

/**
 * `countPartialDuplicates` as a scalar subquery, or null when a key field has no column yet and
 * no default (it holds no values, and empty values never clash); one with a default fills every
 * row alike, so it does not tell rows apart.
 */
export function partialDuplicatesSql(
  cotId: number,
  fields: ConditionField[],
  key: PartialKey,
  from?: SQL,
): SQL | null {
  const keyFields = key.fields.map((n) => fields.find((f) => f.name === n)!);
  const empty = (f: ConditionField) => f.sqlValue === null || f.sqlValue === undefined;
  if (keyFields.some((f) => f.sqlColumn === null && empty(f))) return null;
  const columns = keyFields
    .filter((f) => f.sqlColumn !== null)
    .map((f) => f.sqlColumn ?? fieldColumns(f)[0]!);
  return duplicatesCountSql(
    cotId,
    columns,
    sql.raw(conditionText(key.condition, fields, "")),
    from,
  );
}

/** Rows a check's condition does not admit (an unknown result counts as not admitted). */
const countCheckViolations = (
  db: Executor,
  cotId: number,
  fields: ConditionField[],
  check: Check,
): Promise<number> => countScalar(db, checkViolationsSql(cotId, fields, check));

/** `countCheckViolations` as a scalar subquery; `from` stands for the table (`duplicatesCountSql`). */
export function checkViolationsSql(
  cotId: number,
  fields: ConditionField[],
  check: Check,
  from: SQL = ident(tableName(cotId)),
): SQL {
  const where = sql.raw(`NOT ifnull((${conditionText(check.condition, fields, "")}), 0)`);
  return sql`(SELECT count(*) FROM ${from} WHERE ${where})`;
}

/** The message of a check a row fails: the raised text names the check and the fields it reads. */
const raised = (check: Check) => `host_check:${check.name}:${namesRead(check).join(",")}`;

/**
 * The first key or check existing rows would break, as the 400 naming it and counting them
 * (every row; the number is not said where it is `withheld` from the caller, decision 0183).
 */
export async function conditionalViolation(
  db: Executor,
  cotId: number,
  fields: ConditionField[],
  c: Conditional,
  withheld: boolean,
): Promise<ValidationError | null> {
  for (const key of c.unique) {
    const dup = await countPartialDuplicates(db, cotId, fields, key);
    if (dup)
      return new ValidationError({
        unique_together: [
          `${existingRows(dup, withheld)} matching the condition share values of ${key.fields.join(", ")}; they must make a unique set.`,
        ],
      });
  }
  for (const check of c.checks) {
    const bad = await countCheckViolations(db, cotId, fields, check);
    if (bad)
      return new ValidationError({
        checks: [`${existingRows(bad, withheld)} do not match the check "${check.name}".`],
      });
  }
  return null;
}

/**
 * The statements that replace a type's conditional constraints (`had` dropped by name, `c`
 * built), for one atomic batch: a check is proven over the existing rows by a write guard before
 * its triggers (a trigger checks only the rows written after it; `counted`: the caller counted
 * them already), and a partial key's index refuses the rows it would break by itself. Throws
 * ConstraintIssue.
 */
export function conditionalStatements(
  cotId: number,
  had: Conditional,
  fields: ConditionField[],
  c: Conditional,
  counted = false,
): SQL[] {
  const out: SQL[] = [];
  for (let i = 0; i < had.unique.length; i++)
    out.push(sql`DROP INDEX IF EXISTS ${ident(keyIndex(cotId, i))}`);
  for (let i = 0; i < had.checks.length; i++)
    for (const op of ["i", "u"] as const)
      out.push(sql`DROP TRIGGER IF EXISTS ${ident(checkTrigger(cotId, i, op))}`);
  const t = ident(tableName(cotId));
  for (const [i, key] of c.unique.entries()) {
    const cols = key.fields.map((n) => ident(fieldColumns(fields.find((f) => f.name === n)!)[0]!));
    const where = sql.raw(conditionText(key.condition, fields, ""));
    out.push(
      sql`CREATE UNIQUE INDEX ${ident(keyIndex(cotId, i))} ON ${t} (${sql.join(cols, sql`, `)}) WHERE ${where}`,
    );
  }
  for (const [i, check] of c.checks.entries()) {
    const refused = sql.raw(`NOT ifnull((${conditionText(check.condition, fields, "")}), 0)`);
    if (!counted)
      out.push(
        sql`INSERT INTO write_guard (ok) SELECT NOT EXISTS (SELECT 1 FROM ${t} WHERE ${refused})`,
      );
    const when = sql.raw(`NOT ifnull((${conditionText(check.condition, fields, "NEW")}), 0)`);
    const message = sql.raw(`'${raised(check)}'`);
    for (const [op, event] of [
      ["i", sql`INSERT`],
      ["u", sql`UPDATE`],
    ] as const)
      out.push(
        sql`CREATE TRIGGER ${ident(checkTrigger(cotId, i, op))} BEFORE ${event} ON ${t} FOR EACH ROW WHEN ${when} BEGIN SELECT RAISE(ABORT, ${message}); END`,
      );
  }
  return out;
}

/**
 * Replaces the type's conditional constraints in the database. Existing rows that would break
 * one answer 400 on `unique_together` or `checks`, naming it and counting them (`withheld`:
 * without their number, decision 0183).
 */
async function buildConditional(
  db: Executor,
  cotId: number,
  fields: ConditionField[],
  c: Conditional,
  withheld: boolean,
): Promise<void> {
  await dropConditional(db, cotId);
  const violation = await conditionalViolation(db, cotId, fields, c, withheld);
  if (violation) throw violation;
  const none = { unique: [], checks: [] };
  for (const s of conditionalStatements(cotId, none, fields, c, true)) await db.run(s);
}

/** The stored constraints of a type, never null. */
export const conditionalOf = (cot: {
  conditionalConstraints?: Conditional | null;
}): Conditional => ({
  unique: cot.conditionalConstraints?.unique ?? [],
  checks: cot.conditionalConstraints?.checks ?? [],
});

/** Whether any of the type's conditional constraints reads field `name`. */
export const readsField = (c: Conditional, name: string) =>
  [...c.unique, ...c.checks].some((k) => namesRead(k).includes(name));

/** A condition the fields no longer support, as the 400 `rebuildConditional` answers. */
export function asConditionalError(e: unknown): unknown {
  if (!(e instanceof ConstraintIssue)) return e;
  return new ValidationError({
    non_field_errors: [`A conditional constraint of this type: ${e.message}`],
  });
}

/** `buildConditional`, with a condition the fields no longer support answered as a 400. */
export async function rebuildConditional(
  db: Executor,
  cotId: number,
  fields: ConditionField[],
  c: Conditional,
  withheld: boolean,
): Promise<void> {
  try {
    await buildConditional(db, cotId, fields, c, withheld);
  } catch (e) {
    throw asConditionalError(e);
  }
}

/** The list keys of a document's `unique_together` (its partial keys left out). */
export const plainTogether = (raw: unknown[] | undefined): string[][] =>
  (raw ?? []).filter((e): e is string[] => Array.isArray(e));

/** The conditional constraints a document's type entry asks for, in the stored spelling. */
export function wantedConditional(t: {
  unique_together?: unknown[];
  checks?: Check[];
}): Conditional {
  const partial = splitTogether(t.unique_together ?? []).partial as PartialKey[];
  return {
    unique: partial.map((k) => ({ fields: [...k.fields].sort(), condition: k.condition })),
    checks: (t.checks ?? []).map((c) => ({ name: c.name, condition: c.condition })),
  };
}

/**
 * A unique clash on fields `names` answered as the partial key it is (its condition named), when
 * a partial key has exactly those fields and no plain key does; else null.
 */
export function partialClash(
  cot: {
    conditionalConstraints?: Conditional | null;
    uniqueTogether?: string[][] | null;
  },
  fields: Array<{ name: string; unique?: boolean | null }>,
  names: string[],
  what: string,
): ValidationError | null {
  const set = [...names].sort().join(",");
  const plain =
    (names.length === 1 && fields.some((f) => f.name === names[0] && f.unique)) ||
    (cot.uniqueTogether ?? []).some((s) => [...s].sort().join(",") === set);
  const key = conditionalOf(cot).unique.find((k) => k.fields.join(",") === set);
  if (plain || !key) return null;
  const message = `Another ${what} matching ${JSON.stringify(key.condition)} has the same ${names.join(", ")} (a partial unique key).`;
  return new ValidationError(Object.fromEntries(names.map((n) => [n, [message]])));
}
