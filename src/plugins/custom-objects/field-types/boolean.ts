/**
 * `boolean`: stored as 0/1. Writes take what Django REST framework's BooleanField takes (as
 * upstream): `true`/`false`, `1`/`0`, and the strings `"true"`, `"1"`, `"yes"`, `"on"`, `"t"`,
 * `"y"` (and their false twins, in the case forms DRF lists). Never unique.
 */
import * as v from "valibot";
import { columnFilter, describe, jsonOf, parseWith, requestValue } from "./base";
import type { FieldTypeModule } from "./types";

const schema = v.pipe(
  v.boolean("Must be a valid boolean."),
  v.transform((b) => (b ? 1 : 0)),
);
// DRF's TRUE_VALUES / FALSE_VALUES.
const spelled = (words: string[]) =>
  new Set(words.flatMap((w) => [w, w.toUpperCase(), w[0]!.toUpperCase() + w.slice(1)]));
const TRUE_WORDS = spelled(["t", "y", "yes", "true", "on", "1"]);
const FALSE_WORDS = spelled(["f", "n", "no", "false", "off", "0"]);
const lenient = (raw: unknown) =>
  raw === 1 || (typeof raw === "string" && TRUE_WORDS.has(raw))
    ? true
    : raw === 0 || (typeof raw === "string" && FALSE_WORDS.has(raw))
      ? false
      : raw;

export const boolean: FieldTypeModule = {
  name: "boolean",
  storage: "column",
  sqlType: "INTEGER",
  indexed: false,
  canBeUnique: false,
  canBePrimary: true,
  orderable: true,
  searchable: false,
  takesDefault: true,
  takes: {},
  describeKind: "boolean",
  lossless: ["text", "longtext"],
  schema: () => schema,
  encode: (_f, raw) => parseWith(schema, lenient(raw)),
  encoder: () => (raw) => {
    const b = lenient(raw);
    return typeof b === "boolean" ? { value: b ? 1 : 0 } : parseWith(schema, b);
  },
  decode: (stored) =>
    stored === null || stored === undefined
      ? null
      : stored === 1 || stored === 1n || stored === true,
  fromOther: (_api, text) => {
    const t = text.trim().toLowerCase();
    if (["true", "1", "yes"].includes(t)) return 1;
    if (["false", "0", "no"].includes(t)) return 0;
    return undefined;
  },
  filters: columnFilter("boolean"),
  readSchema: (f) => ({ type: ["boolean", "null"], ...describe(f) }),
  writeSchema: (f) =>
    requestValue(f, {
      anyOf: [
        jsonOf(schema),
        { type: "integer", enum: [0, 1] },
        { type: "string", enum: [...TRUE_WORDS, ...FALSE_WORDS] },
      ],
    }),
};
