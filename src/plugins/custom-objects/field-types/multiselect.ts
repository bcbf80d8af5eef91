/** `multiselect`: a list of distinct choice-set values, stored as a JSON array (null when empty). */
import { sql } from "drizzle-orm";
import * as v from "valibot";
import { likeContains, parseEmpty } from "../../../core/rest/query";
import { inJsonList } from "../../../db/d1-limits";
import { ENUM_LABELS } from "../../../core/json-schema";
import { jsonOf, parseWith, requestValue } from "./base";
import { choiceNote, notAChoice } from "./select";
import type { FieldTypeModule } from "./types";

const schema = v.array(
  v.string((issue) => notAChoice(issue.input)),
  (issue) => `Expected a list of items but got type "${typeof issue.input}".`,
);

/** A list whose every item (holes too, as `encode` reads them) is one of `choices`. */
function allChoices(raw: unknown, choices: ReadonlySet<string> | null): raw is string[] {
  if (!Array.isArray(raw) || !choices) return false;
  for (const value of raw) if (typeof value !== "string" || !choices.has(value)) return false;
  return true;
}

export const multiselect: FieldTypeModule = {
  name: "multiselect",
  storage: "column",
  sqlType: "TEXT",
  indexed: false,
  canBeUnique: true,
  canBePrimary: true,
  orderable: false,
  searchable: true,
  takesDefault: true,
  takes: { choices: true },
  describeKind: "multiselect",
  lossless: [],
  schema: () => schema,
  encode: (_f, raw, choices) => {
    const r = parseWith(schema, raw);
    // The first item that is not a choice (or not a string) names the error.
    if (Array.isArray(raw))
      for (const value of raw)
        if (typeof value !== "string" || !choices?.has(value)) return { error: notAChoice(value) };
    if ("error" in r) return r;
    const values = r.value as string[];
    return { value: values.length ? JSON.stringify([...new Set(values)]) : null };
  },
  encoder: (f) => (raw, choices) =>
    allChoices(raw, choices)
      ? { value: raw.length ? JSON.stringify([...new Set(raw)]) : null }
      : multiselect.encode(f, raw, choices),
  decode: (stored) => {
    if (stored === null || stored === undefined) return [];
    try {
      return JSON.parse(String(stored));
    } catch {
      return [];
    }
  },
  // A single choice becomes a list of one; other text splits at commas.
  fromOther: (api, text, from) =>
    JSON.stringify(
      from.takes.choices && !Array.isArray(api)
        ? [text]
        : text
            .split(",")
            .map((s) => s.trim())
            .filter(Boolean),
    ),
  filters: (f, ctx) => ({
    [f.name]: {
      kind: "string",
      expr: ctx.column,
      lookups: ["exact", "n", "empty"],
      build: (lookup, values) => {
        if (lookup === "empty")
          return parseEmpty(`${f.name}__empty`, values[0])
            ? sql`${ctx.column} IS NULL`
            : sql`${ctx.column} IS NOT NULL`;
        // the choices asked for are one JSON list: one bound value, one text for any number (0188)
        const has = sql`EXISTS (SELECT 1 FROM json_each(${ctx.column}) je WHERE ${inJsonList(sql`je.value`, values)})`;
        return lookup === "n" ? sql`NOT ${has}` : has;
      },
    },
  }),
  // `q` matches part of one of the values (upstream: one of the values).
  search: (column) => ({
    match: (q) =>
      sql`EXISTS (SELECT 1 FROM json_each(${column}) je WHERE ${likeContains(sql`je.value`, q)})`,
  }),
  readSchema: (f, env) => ({ type: "array", items: { type: "string" }, ...choiceNote(f, env) }),
  writeSchema: (f, env) =>
    requestValue(f, {
      ...jsonOf(schema),
      items: {
        type: "string",
        enum: env.choices(f.choiceSetId),
        [ENUM_LABELS]: env.choiceLabels(f.choiceSetId),
      },
      ...(f.required ? { minItems: 1 } : {}),
    }),
};
