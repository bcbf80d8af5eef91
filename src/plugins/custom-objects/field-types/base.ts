/** Helpers the field type modules share: valibot parsing, schema caching, JSON Schema output. */
import { toJsonSchema } from "@valibot/to-json-schema";
import { sql } from "drizzle-orm";
import * as v from "valibot";
import { ValidationError } from "../../../core/errors";
import { orNull, type JsonSchema } from "../../../openapi/json-schema";
import { parseFilterNumber, type FilterSpec } from "../../../core/rest/query";
import type { Checked, FieldLike, FieldRow, FilterContext } from "./types";

type Schema = v.GenericSchema<unknown, unknown>;

/** Field rows are stable within a built model, so each one's schema is built once. */
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
  const { $schema: _s, ...rest } = toJsonSchema(schema, { target: "draft-2020-12", errorMode: "ignore" }) as JsonSchema;
  return rest;
}

/** Regexes come from users: compile once per pattern and keep them. */
const regexCache = new Map<string, RegExp | null>();
export function compileRegex(pattern: string): RegExp | null {
  if (!regexCache.has(pattern)) {
    try {
      regexCache.set(pattern, new RegExp(pattern));
    } catch {
      regexCache.set(pattern, null);
    }
  }
  return regexCache.get(pattern)!;
}

/** validation_minimum / validation_maximum as valibot actions. */
export function rangeActions(f: FieldLike) {
  const out: v.PipeItem<number, number, v.BaseIssue<unknown>>[] = [];
  if (f.validationMinimum != null) out.push(v.minValue(f.validationMinimum, `Ensure this value is greater than or equal to ${f.validationMinimum}.`));
  if (f.validationMaximum != null) out.push(v.maxValue(f.validationMaximum, `Ensure this value is less than or equal to ${f.validationMaximum}.`));
  return out;
}

/** validation_regex as a valibot action (an invalid stored pattern checks nothing). */
export function regexActions(f: FieldLike) {
  const re = f.validationRegex ? compileRegex(f.validationRegex) : null;
  return re ? [v.regex(re, `Values must match this regex: ${f.validationRegex}`)] : [];
}

/** A request value: nullable unless required; description and default added. */
export function requestValue(f: FieldRow, schema: JsonSchema): JsonSchema {
  const base: JsonSchema = {};
  if (f.description) base.description = f.description;
  if (f.default !== null && f.default !== undefined) base.default = f.default;
  return { ...(f.required ? schema : orNull(schema)), ...base };
}

export const describe = (f: FieldRow): JsonSchema => (f.description ? { description: f.description } : {});

/** `name` filtered as one plain column. */
export const columnFilter =
  (kind: FilterSpec["kind"]) =>
  (f: FieldLike, ctx: FilterContext): Record<string, FilterSpec> => ({ [f.name]: { kind, expr: ctx.column } });

/** `name` / `name_id` filtered through a link table (`empty`, `exact`, `n` on target ids). */
export function linkFilters(f: FieldLike, ctx: FilterContext): Record<string, FilterSpec> {
  const build = (lookup: string, values: string[]) => {
    if (lookup === "empty") {
      const has = sql`${ctx.id} IN (SELECT source_id FROM ${ctx.linkTable})`;
      return values[0] === "true" ? sql`NOT ${has}` : has;
    }
    const nums = values.map((value) => {
      const n = /^\d+$/.test(value.trim()) ? parseFilterNumber(value) : null;
      if (n === null) throw new ValidationError({ [`${f.name}_id`]: ["Enter a number."] });
      return n;
    });
    const has = sql`${ctx.id} IN (SELECT source_id FROM ${ctx.linkTable} WHERE target_id IN (${sql.join(
      nums.map((n) => sql`${n}`),
      sql`, `,
    )}))`;
    return lookup === "n" ? sql`NOT ${has}` : has;
  };
  const spec: FilterSpec = { kind: "number", expr: ctx.id, lookups: ["exact", "n", "empty"], build };
  return { [`${f.name}_id`]: spec, [f.name]: spec };
}
