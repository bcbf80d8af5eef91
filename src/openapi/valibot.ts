/**
 * Valibot schemas → component schemas, through `@valibot/to-json-schema`: the same schema that
 * validates a request body describes it. Named sub-schemas become their own components.
 */
import { toJsonSchema } from "@valibot/to-json-schema";
import type { GenericSchema } from "valibot";
import { COMPONENTS, type JsonSchema } from "../core/json-schema";

/** Rewrites `#/$defs/X` to component references, recursively. */
function relink(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(relink);
  if (!value || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value))
    out[k] =
      k === "$ref" && typeof v === "string" ? v.replace(/^#\/\$defs\//, COMPONENTS) : relink(v);
  return out;
}

/**
 * `{[name]: schema, ...definitions}` as JSON Schema 2020-12. Checks that JSON Schema cannot
 * express (`v.check`) are left out; the server still runs them and answers 400.
 */
export function valibotComponents(
  name: string,
  schema: GenericSchema,
  definitions: Record<string, GenericSchema> = {},
): Record<string, JsonSchema> {
  const converted = toJsonSchema(schema, {
    target: "draft-2020-12",
    errorMode: "ignore",
    definitions,
  }) as JsonSchema & { $defs?: Record<string, JsonSchema> };
  const { $schema: _s, $defs = {}, ...root } = converted;
  const out: Record<string, JsonSchema> = { [name]: relink(root) as JsonSchema };
  for (const [defName, def] of Object.entries($defs)) out[defName] = relink(def) as JsonSchema;
  return out;
}

/** One valibot schema as an inline JSON Schema 2020-12 (checks it cannot express are left out). */
export function valibotSchema(schema: GenericSchema): JsonSchema {
  const { $schema: _s, ...root } = toJsonSchema(schema, {
    target: "draft-2020-12",
    errorMode: "ignore",
  }) as JsonSchema;
  return root;
}
