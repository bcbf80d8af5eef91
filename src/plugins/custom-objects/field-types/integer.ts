/** `integer`: a safe integer in an INTEGER column; numerals in strings are accepted. */
import * as v from "valibot";
import {
  cached,
  columnFilter,
  describe,
  inRange,
  jsonOf,
  parseWith,
  rangeActions,
  requestValue,
} from "./base";
import type { FieldLike, FieldTypeModule } from "./types";

const INT_RE = /^-?\d+$/;
const MESSAGE = "A valid integer is required.";

const schema = (f: FieldLike) =>
  cached(
    f,
    () =>
      v.pipe(
        v.number(MESSAGE),
        v.integer(MESSAGE),
        v.check((n: number) => Number.isSafeInteger(n), MESSAGE),
        ...rangeActions(f),
      ) as v.GenericSchema<unknown, unknown>,
  );
const lenient = (raw: unknown) =>
  typeof raw === "string" && INT_RE.test(raw.trim()) ? Number(raw.trim()) : raw;

export const integer: FieldTypeModule = {
  name: "integer",
  storage: "column",
  sqlType: "INTEGER",
  indexed: false,
  canBeUnique: true,
  canBePrimary: true,
  orderable: true,
  searchable: true,
  takesDefault: true,
  takes: { range: true },
  describeKind: "integer",
  lossless: ["decimal", "text", "longtext"],
  schema,
  encode: (f, raw) => parseWith(schema(f), lenient(raw)),
  encoder: (f) => {
    const s = schema(f);
    return (raw) => {
      const n = lenient(raw);
      return typeof n === "number" && Number.isSafeInteger(n) && inRange(f, n)
        ? { value: n }
        : parseWith(s, n);
    };
  },
  decode: (stored) => (typeof stored === "bigint" ? Number(stored) : (stored ?? null)),
  fromOther: (_api, text) => {
    const r = parseWith(
      schema({
        name: "",
        type: "integer",
        isPolymorphic: false,
        validationRegex: "",
        validationMinimum: null,
        validationMaximum: null,
      }),
      lenient(text.trim()),
    );
    return "error" in r ? undefined : r.value;
  },
  filters: columnFilter("number"),
  readSchema: (f) => ({ type: ["integer", "null"], ...describe(f) }),
  writeSchema: (f) => requestValue(f, jsonOf(schema(f))),
};
