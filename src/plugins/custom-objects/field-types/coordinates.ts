/**
 * `coordinates`: a latitude/longitude pair (decimal degrees, at most 6 decimal places), as
 * NetBox keeps a site's position. Read and written flat as upstream 0.7 does: `<name>_latitude`
 * and `<name>_longitude` (both set, or both null), errors keyed by the half that is wrong
 * (decision 0077); a write may still give the pair as `<name>: {latitude, longitude}`. Stored as
 * that JSON object in one TEXT column. Filters: `<name>_latitude` and `<name>_longitude`
 * (numeric lookups). Not unique, primary, defaulted, sorted or searched (decision 0052).
 */
import { sql } from "drizzle-orm";
import * as v from "valibot";
import type { JsonSchema } from "../../../core/json-schema";
import { parseWith } from "./base";
import type { FieldTypeModule } from "./types";

const PAIR_MESSAGE = "Latitude and longitude must both be set or both be empty.";
const NUMERAL_RE = /^-?(\d+(\.\d*)?|\.\d+)$/;

/** One half of the pair: a number (or numeral), within ±limit, at most 6 decimal places. */
const degrees = (name: string, limit: number) =>
  v.pipe(
    v.union(
      [v.number(), v.pipe(v.string(), v.trim(), v.regex(NUMERAL_RE), v.transform(Number))],
      `${name}: A valid number is required.`,
    ),
    v.finite(`${name}: A valid number is required.`),
    v.minValue(-limit, `${name}: Ensure this value is greater than or equal to -${limit}.`),
    v.maxValue(limit, `${name}: Ensure this value is less than or equal to ${limit}.`),
    v.check(
      (n) => Number(n.toFixed(6)) === n,
      `${name}: Ensure that there are no more than 6 decimal places.`,
    ),
  );

const pair = v.pipe(
  v.strictObject(
    {
      latitude: v.optional(v.nullable(degrees("latitude", 90))),
      longitude: v.optional(v.nullable(degrees("longitude", 180))),
    },
    'Expected an object {"latitude": <number>, "longitude": <number>}.',
  ),
  v.check((p) => (p.latitude == null) === (p.longitude == null), PAIR_MESSAGE),
);

const HALF_LIMITS: Record<string, number> = { latitude: 90, longitude: 180 };

/** Each half checked on its own, then the pair: the missing half carries the pair message. */
function partErrors(value: Record<string, unknown>): Record<string, string> | null {
  const errors: Record<string, string> = {};
  for (const [part, limit] of Object.entries(HALF_LIMITS)) {
    const raw = value[part];
    if (raw === null || raw === undefined) continue;
    const r = v.safeParse(degrees(part, limit), raw);
    if (!r.success) errors[part] = r.issues[0]!.message.replace(`${part}: `, "");
  }
  if (Object.keys(errors).length) return errors;
  const [lat, lon] = [value.latitude ?? null, value.longitude ?? null];
  if ((lat === null) !== (lon === null))
    return { [lat === null ? "latitude" : "longitude"]: PAIR_MESSAGE };
  return null;
}

const valueSchema: JsonSchema = {
  type: "object",
  properties: {
    latitude: { type: "number", minimum: -90, maximum: 90 },
    longitude: { type: "number", minimum: -180, maximum: 180 },
  },
  required: ["latitude", "longitude"],
  additionalProperties: false,
};

export const coordinates: FieldTypeModule = {
  name: "coordinates",
  storage: "column",
  sqlType: "TEXT",
  indexed: false,
  canBeUnique: false,
  canBePrimary: false,
  orderable: false,
  searchable: false,
  takesDefault: false,
  takes: {},
  describeKind: "json",
  parts: ["latitude", "longitude"],
  flat: true,
  partErrors,
  fixedType: true,
  lossless: [],
  schema: () => pair as v.GenericSchema<unknown, unknown>,
  encode: (_f, raw) => {
    const r = parseWith(pair as v.GenericSchema<unknown, unknown>, raw);
    if ("error" in r) return r;
    const p = r.value as { latitude?: number | null; longitude?: number | null };
    return {
      value:
        p.latitude == null
          ? null
          : JSON.stringify({ latitude: p.latitude, longitude: p.longitude }),
    };
  },
  decode: (stored) => {
    if (stored === null || stored === undefined) return null;
    try {
      const p = JSON.parse(String(stored)) as { latitude: number; longitude: number };
      return { latitude: p.latitude, longitude: p.longitude };
    } catch {
      return null;
    }
  },
  filters: (f, ctx) => ({
    [`${f.name}_latitude`]: {
      kind: "number",
      expr: sql`json_extract(${ctx.column}, '$.latitude')`,
    },
    [`${f.name}_longitude`]: {
      kind: "number",
      expr: sql`json_extract(${ctx.column}, '$.longitude')`,
    },
  }),
  readSchema: (f) => ({
    ...valueSchema,
    type: ["object", "null"],
    ...(f.description ? { description: f.description } : {}),
  }),
  writeSchema: (f) => ({
    ...valueSchema,
    type: f.required ? "object" : ["object", "null"],
    ...(f.description ? { description: f.description } : {}),
  }),
};
