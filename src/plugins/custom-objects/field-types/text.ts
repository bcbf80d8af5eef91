/** `text`: a string in a TEXT column; `""` is stored as null. `textLike` also makes longtext and url. */
import * as v from "valibot";
import { cached, describe, jsonOf, parseWith, regexActions, regexTest, requestValue } from "./base";
import type { JsonSchema } from "../../../core/json-schema";
import { MAX_TEXT_CHARS } from "../../../core/limits";
import type { FieldLike, FieldRow, FieldTypeModule } from "./types";

type Actions = (f: FieldLike) => v.PipeItem<string, string, v.BaseIssue<unknown>>[];

export function textLike(options: {
  name: string;
  indexed: boolean;
  canBeUnique: boolean;
  lossless: string[];
  format?: string;
  actions?: Actions;
  checkOther?: boolean;
  /**
   * What `actions` check, as one test of a string: the values `encoder` takes without the schema.
   * A type with `actions` and no `accepts` always asks its schema.
   */
  accepts?: (s: string) => boolean;
  /** Characters one value may have (decision 0068); checked before any pattern runs. */
  maxChars: number;
}): FieldTypeModule {
  const cap = v.maxLength<string, number, string>(
    options.maxChars,
    `Ensure this field has no more than ${options.maxChars} characters.`,
  );
  const schema = (f: FieldLike) =>
    cached(
      f,
      () =>
        v.pipe(
          v.string("Not a valid string."),
          cap,
          ...(options.actions?.(f) ?? []),
          ...regexActions(f),
        ) as v.GenericSchema<unknown, unknown>,
    );
  const plain: FieldLike = {
    name: "",
    type: options.name,
    isPolymorphic: false,
    validationRegex: "",
    validationMinimum: null,
    validationMaximum: null,
  };
  const format = options.format ? { format: options.format } : {};
  /** Within the cap, passing `accepts` and the field's pattern: what the schema takes unchanged. */
  const plainlyValid = (f: FieldLike): ((s: string) => boolean) => {
    const matches = regexTest(f);
    const { actions, accepts = actions ? () => false : () => true, maxChars } = options;
    if (!matches) return () => false;
    return (s) => s.length <= maxChars && accepts(s) && matches(s);
  };
  return {
    name: options.name,
    storage: "column",
    sqlType: "TEXT",
    indexed: options.indexed,
    canBeUnique: options.canBeUnique,
    canBePrimary: true,
    orderable: true,
    searchable: true,
    takesDefault: true,
    takes: { regex: true },
    describeKind: "string",
    lossless: options.lossless,
    schema,
    encode: (f, raw) => (raw === "" ? { value: null } : parseWith(schema(f), raw)),
    encoder: (f) => {
      const s = schema(f);
      const valid = plainlyValid(f);
      return (raw) =>
        raw === ""
          ? { value: null }
          : typeof raw === "string" && valid(raw)
            ? { value: raw }
            : parseWith(s, raw);
    },
    decode: (stored) => stored ?? null,
    // Text carries over as it is; types with their own checks (`checkOther`) keep only what passes them.
    fromOther: (_api, text) => {
      if (!options.checkOther) return text;
      const r = text === "" ? { value: null } : parseWith(schema(plain), text);
      return "error" in r ? undefined : r.value;
    },
    filters: (f, ctx) => ({
      [f.name]: {
        kind: "string",
        expr: ctx.column,
        bareLookup: f.filterLogic === "loose" ? "ic" : "exact",
      },
    }),
    readSchema: (f: FieldRow) => ({ type: ["string", "null"], ...format, ...describe(f) }),
    writeSchema: (f: FieldRow) => {
      const s: JsonSchema = {
        ...jsonOf(schema(f)),
        ...format,
        ...(f.required ? { minLength: 1 } : {}),
      };
      if (f.validationRegex) s.pattern = f.validationRegex;
      return requestValue(f, s);
    },
  };
}

export const text = textLike({
  name: "text",
  indexed: false,
  canBeUnique: true,
  lossless: ["longtext"],
  maxChars: MAX_TEXT_CHARS,
});
