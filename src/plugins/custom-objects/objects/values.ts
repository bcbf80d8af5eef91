/**
 * Instance values of a field, whatever its type: checking what a client writes (§5 rule 6),
 * encoding it for the column, decoding it for the record, and converting stored values on a
 * type change. Each type's rules live in its module under `field-types/`.
 */
import type { ErrorCollector } from "../../../core/errors";
import type { ApiRecord } from "../../../core/rest/resource";
import {
  fieldType,
  type Checked,
  type FieldLike,
  type FieldRow,
  type ScalarEncoder,
} from "../field-types";
import type { Shape } from "./shape";

export type { Checked, FieldRow };

/**
 * Checks and encodes a scalar value (not object/multiobject) for its column.
 * `choices` are the allowed values of the field's choice set.
 */
export function encodeScalar(
  f: FieldLike,
  raw: unknown,
  choices: ReadonlySet<string> | null,
): Checked {
  if (raw === null || raw === undefined) return { value: null };
  return fieldType(f.type).encode(f, raw, choices);
}

/** `encodeScalar` for one field, its module and checks looked up once (a bulk's rows share it). */
export function scalarEncoder(f: FieldLike): ScalarEncoder {
  const m = fieldType(f.type);
  const encode: ScalarEncoder = m.encoder
    ? m.encoder(f)
    : (raw, choices) => m.encode(f, raw, choices);
  return (raw, choices) =>
    raw === null || raw === undefined ? { value: null } : encode(raw, choices);
}

/** A change whose stored values always carry over (nothing needs counting). */
export const isLossless = (from: string, to: string) => fieldType(from).lossless.includes(to);

/**
 * How a stored value of type `from` becomes one of type `to` (already encoded for the new
 * column), or `undefined` when it cannot: e.g. text "42" → integer 42, text "x" → lost.
 */
export function retypeConverter(from: string, to: string): (v: unknown) => unknown {
  const source = fieldType(from);
  const target = fieldType(to);
  return (v) => {
    const api = source.decode(v);
    if (api === null || api === undefined) return undefined;
    const text =
      typeof api === "string"
        ? api
        : Array.isArray(api)
          ? api.join(",")
          : typeof api === "object"
            ? JSON.stringify(api)
            : String(api);
    return target.fromOther ? target.fromOther(api, text, source) : undefined;
  };
}

/**
 * Takes the companions a write gives (url's `<name>_title`) out of `input`: each is checked on
 * its own, its value put in `values` under its column, its problem keyed by its name. A
 * companion left out keeps its stored value (empty on a create). Answers the rest of the input.
 */
export function takeCompanions(
  companions: Shape["companions"],
  input: ApiRecord,
  values: Record<string, unknown>,
  errors: ErrorCollector,
): ApiRecord {
  let out = input;
  for (const { c, key } of companions) {
    if (!Object.hasOwn(input, key)) continue;
    if (out === input) out = { ...input };
    const checked = c.encode(input[key]);
    if ("error" in checked) errors.add(key, checked.error);
    else values[key] = checked.value;
    delete out[key];
  }
  return out;
}
