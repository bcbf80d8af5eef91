/** Helpers the field type modules share: valibot parsing, schema caching, JSON Schema output. */
import { toJsonSchema } from "@valibot/to-json-schema";
import { sql, type SQL } from "drizzle-orm";
import * as v from "valibot";
import { ValidationError } from "../../../core/errors";
import { orNull, type JsonSchema } from "../../../core/json-schema";
import { jsonListRows } from "../../../db/d1-limits";
import { APP_LABEL } from "../constants";
import {
  parseEmpty,
  parseFilterNumber,
  type FilterSpec,
  type Lookup,
} from "../../../core/rest/query";
import type { Checked, FieldLike, FieldRow, FilterContext } from "./types";
import { compilePattern } from "./pattern";

type Schema = v.GenericSchema<unknown, unknown>;

/** Field rows are stable within a built model, so each one's schema is built once. */
// Module-level on purpose: a pure memo of immutable inputs (a row object → its schema), no app state (docs/architecture.md).
const cache = new WeakMap<object, Schema>();
export function cached(f: FieldLike, build: () => Schema): Schema {
  let s = cache.get(f);
  if (!s) cache.set(f, (s = build()));
  return s;
}

/** Runs a value schema; the first issue's message is the field's error. */
export function parseWith(schema: Schema, raw: unknown): Checked {
  const r = v.safeParse(schema, raw, { abortEarly: true });
  return r.success ? { value: r.output } : { error: r.issues[0].message };
}

/** The JSON Schema of a value schema (checks JSON Schema cannot express are left out). */
export function jsonOf(schema: Schema): JsonSchema {
  const { $schema: _s, ...rest } = toJsonSchema(schema, {
    target: "draft-2020-12",
    errorMode: "ignore",
  }) as JsonSchema;
  return rest;
}

/** validation_minimum / validation_maximum as valibot actions. */
export function rangeActions(f: FieldLike) {
  const out: v.PipeItem<number, number, v.BaseIssue<unknown>>[] = [];
  if (f.validationMinimum != null)
    out.push(
      v.minValue(
        f.validationMinimum,
        `Ensure this value is greater than or equal to ${f.validationMinimum}.`,
      ),
    );
  if (f.validationMaximum != null)
    out.push(
      v.maxValue(
        f.validationMaximum,
        `Ensure this value is less than or equal to ${f.validationMaximum}.`,
      ),
    );
  return out;
}

/** Whether `n` is within validation_minimum / validation_maximum, as `rangeActions` checks it. */
export function inRange(f: FieldLike, n: number): boolean {
  return (
    (f.validationMinimum == null || n >= f.validationMinimum) &&
    (f.validationMaximum == null || n <= f.validationMaximum)
  );
}

/**
 * validation_regex as a test (always true without one), or null for a pattern RE2 refuses:
 * what `regexActions` checks, for a module's `encoder`.
 */
export function regexTest(f: FieldLike): ((s: string) => boolean) | null {
  if (!f.validationRegex) return () => true;
  const pattern = compilePattern(f.validationRegex);
  return "refused" in pattern ? null : pattern.test;
}

/**
 * validation_regex as a valibot action, matched by RE2 in linear time (decision 0068). A pattern
 * stored before RE2 (a lookaround, a backreference) that RE2 refuses cannot be checked safely:
 * writes that set the field answer 400 saying so; reads never run it.
 */
export function regexActions(f: FieldLike): v.PipeItem<string, string, v.BaseIssue<unknown>>[] {
  if (!f.validationRegex) return [];
  const pattern = compilePattern(f.validationRegex);
  if ("refused" in pattern)
    return [
      v.check(
        () => false,
        `This field's validation regex uses syntax the server no longer runs (${pattern.refused}); change the field's validation_regex.`,
      ),
    ];
  return [v.check(pattern.test, `Values must match this regex: ${f.validationRegex}`)];
}

/** A request value: nullable unless required; description and default added. */
export function requestValue(f: FieldRow, schema: JsonSchema): JsonSchema {
  const base: JsonSchema = {};
  if (f.description) base.description = f.description;
  if (f.default !== null && f.default !== undefined) base.default = f.default;
  return { ...(f.required ? schema : orNull(schema)), ...base };
}

export const describe = (f: FieldRow): JsonSchema =>
  f.description ? { description: f.description } : {};

/** `name` filtered as one plain column. */
export const columnFilter =
  (kind: FilterSpec["kind"]) =>
  (f: FieldLike, ctx: FilterContext): Record<string, FilterSpec> => ({
    [f.name]: { kind, expr: ctx.column },
  });

/** Filter values that must be object ids, as SQL rows for `IN (…)`, or 400 keyed by `param`. */
function idList(param: string, values: string[]): SQL {
  const nums = values.map((value) => {
    const n = /^\d+$/.test(value.trim()) ? parseFilterNumber(value) : null;
    if (n === null) throw new ValidationError({ [param]: ["Enter a number."] });
    return n;
  });
  // one JSON list: one bound value, one statement text for any number of ids (0188)
  return jsonListRows(nums);
}

const paramOf = (name: string, lookup: Lookup) =>
  lookup === "exact" ? name : `${name}__${lookup}`;

/**
 * A polymorphic reference's filters (decision 0046): one per allowed type, named
 * `<field>_<app_label>_<model>` as upstream names them, taking ids of that type (`exact`, `n`).
 * `<field>` and `<field>_id` keep `__empty` and refuse ids with a 400 naming those filters:
 * an id alone names no object when the field can point at several types.
 */
export function polymorphicFilters(
  f: FieldLike,
  ctx: FilterContext,
  matching: (typeId: number, ids: SQL) => SQL,
  isEmpty: SQL,
): Record<string, FilterSpec> {
  const out: Record<string, FilterSpec> = {};
  const names: string[] = [];
  const perType = (name: string, typeId: number, label: string): FilterSpec => ({
    kind: "number",
    expr: ctx.id,
    lookups: ["exact", "n"],
    targetTypeId: typeId,
    targetLabel: label,
    build: (lookup, values) => {
      const has = sql`COALESCE(${matching(typeId, idList(paramOf(name, lookup), values))}, 0)`;
      return lookup === "n" ? sql`NOT ${has}` : has;
    },
  });
  for (const typeId of f.relatedObjectTypeIds ?? []) {
    const type = ctx.typeKey(typeId);
    if (!type) continue;
    const name = `${f.name}_${type.key}`;
    names.push(name);
    out[name] = perType(name, typeId, type.label);
    // upstream's app label, as scripts written for upstream name the type (`parseLabel` takes it)
    if (type.key.startsWith(`${APP_LABEL}_`)) {
      const alias = `${f.name}_netbox_${type.key}`;
      out[alias] = { ...perType(alias, typeId, type.label), alias: true };
    }
  }
  for (const name of [f.name, `${f.name}_id`]) {
    out[name] = {
      kind: "number",
      expr: ctx.id,
      lookups: ["exact", "n", "empty"],
      build: (lookup, values) => {
        const param = paramOf(name, lookup);
        if (lookup === "empty") return parseEmpty(param, values[0]) ? isEmpty : sql`NOT ${isEmpty}`;
        // The message names no type: the caller may not be allowed to view some of them.
        throw new ValidationError({
          [param]: [
            `${f.name} can point at several object types: filter with ${f.name}_<app_label>_<model>=<id>.`,
          ],
        });
      },
    };
  }
  return out;
}

/** `name` / `name_id` filtered through a link table (`empty`, `exact`, `n` on target ids). */
export function linkFilters(f: FieldLike, ctx: FilterContext): Record<string, FilterSpec> {
  const linked = sql`${ctx.id} IN (SELECT source_id FROM ${ctx.linkTable})`;
  if (f.isPolymorphic) {
    return polymorphicFilters(
      f,
      ctx,
      (typeId, ids) =>
        sql`${ctx.id} IN (SELECT source_id FROM ${ctx.linkTable} WHERE target_type = ${typeId} AND target_id IN (${ids}))`,
      sql`NOT ${linked}`,
    );
  }
  const spec = (name: string): FilterSpec => ({
    kind: "number",
    expr: ctx.id,
    lookups: ["exact", "n", "empty"],
    build: (lookup, values) => {
      if (lookup === "empty")
        return parseEmpty(paramOf(name, lookup), values[0]) ? sql`NOT ${linked}` : linked;
      const has = sql`${ctx.id} IN (SELECT source_id FROM ${ctx.linkTable} WHERE target_id IN (${idList(paramOf(name, lookup), values)}))`;
      return lookup === "n" ? sql`NOT ${has}` : has;
    },
  });
  return { [`${f.name}_id`]: spec(`${f.name}_id`), [f.name]: spec(f.name) };
}
