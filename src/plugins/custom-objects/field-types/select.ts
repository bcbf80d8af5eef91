/** `select`: one value of the field's choice set, in a TEXT column. */
import * as v from "valibot";
import { ENUM_LABELS } from "../../../core/json-schema";
import { jsonOf, parseWith, requestValue } from "./base";
import type { FieldTypeModule, SchemaEnv, FieldRow } from "./types";

export const notAChoice = (value: unknown) =>
  `"${typeof value === "string" ? value : JSON.stringify(value)}" is not a valid choice.`;
/** The read schema's note naming the choices. */
export const choiceNote = (f: FieldRow, env: SchemaEnv) =>
  f.choiceSetId ? { description: `One of: ${env.choices(f.choiceSetId).join(", ")}.` } : {};

const schema = v.string((issue) => notAChoice(issue.input));

export const select: FieldTypeModule = {
  name: "select",
  storage: "column",
  sqlType: "TEXT",
  indexed: false,
  canBeUnique: true,
  canBePrimary: true,
  orderable: true,
  searchable: true,
  takesDefault: true,
  takes: { choices: true },
  describeKind: "select",
  lossless: ["text", "longtext", "multiselect"],
  schema: () => schema,
  encode: (_f, raw, choices) => {
    const r = parseWith(schema, raw);
    if ("error" in r) return r;
    return choices?.has(raw as string) ? r : { error: notAChoice(raw) };
  },
  encoder: (f) => (raw, choices) =>
    typeof raw === "string" && choices?.has(raw) ? { value: raw } : select.encode(f, raw, choices),
  decode: (stored) => stored ?? null,
  // From a list of choices, its first one.
  fromOther: (api, text, from) =>
    Array.isArray(api) && from.takes.choices ? (api[0] ?? undefined) : text,
  filters: (f, ctx) => ({ [f.name]: { kind: "string", expr: ctx.column } }),
  readSchema: (f, env) => ({ type: ["string", "null"], ...choiceNote(f, env) }),
  writeSchema: (f, env) =>
    requestValue(f, {
      ...jsonOf(schema),
      enum: env.choices(f.choiceSetId),
      [ENUM_LABELS]: env.choiceLabels(f.choiceSetId),
    }),
};
