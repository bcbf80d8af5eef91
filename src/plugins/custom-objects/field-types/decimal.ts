/** `decimal`: a finite number in a REAL column; numerals in strings are accepted. */
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

const DECIMAL_RE = /^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/;
const MESSAGE = "A valid number is required.";

const schema = (f: FieldLike) =>
  cached(
    f,
    () =>
      v.pipe(v.number(MESSAGE), v.finite(MESSAGE), ...rangeActions(f)) as v.GenericSchema<
        unknown,
        unknown
      >,
  );
const lenient = (raw: unknown) =>
  typeof raw === "string" && DECIMAL_RE.test(raw.trim()) ? Number(raw.trim()) : raw;
const plain = {
  name: "",
  type: "decimal",
  isPolymorphic: false,
  validationRegex: "",
  validationMinimum: null,
  validationMaximum: null,
};

export const decimal: FieldTypeModule = {
  name: "decimal",
  storage: "column",
  sqlType: "REAL",
  indexed: false,
  canBeUnique: true,
  canBePrimary: true,
  orderable: true,
  searchable: true,
  takesDefault: true,
  takes: { range: true },
  describeKind: "decimal",
  lossless: ["text", "longtext"],
  schema,
  encode: (f, raw) => parseWith(schema(f), lenient(raw)),
  encoder: (f) => {
    const s = schema(f);
    return (raw) => {
      const n = lenient(raw);
      return typeof n === "number" && Number.isFinite(n) && inRange(f, n)
        ? { value: n }
        : parseWith(s, n);
    };
  },
  decode: (stored) => (typeof stored === "string" ? Number(stored) : (stored ?? null)),
  fromOther: (_api, text) => {
    const r = parseWith(schema(plain), lenient(text.trim()));
    return "error" in r ? undefined : r.value;
  },
  filters: columnFilter("number"),
  readSchema: (f) => ({ type: ["number", "null"], ...describe(f) }),
  writeSchema: (f) => requestValue(f, jsonOf(schema(f))),
};
