/**
 * JSON Schema (2020-12, the dialect of OpenAPI 3.1) as plain objects, plus the few helpers every
 * generator here needs: component references and "or null".
 */

/** A JSON Schema object; kept loose on purpose (it is data that ends up in the document). */
export type JsonSchema = { [keyword: string]: unknown };

/** An OpenAPI 3.1 document. */
export type OpenApiDocument = Record<string, unknown> & {
  paths: Record<string, Record<string, Record<string, unknown>>>;
};

/** Where component schemas live in the document. */
export const COMPONENTS = "#/components/schemas/";

/** `{"$ref": "#/components/schemas/<name>"}` */
export const ref = (name: string): JsonSchema => ({ $ref: COMPONENTS + name });

/**
 * The labels of an enum's values, in its order (the extension openapi-generator reads): the
 * OPTIONS metadata answers them as each choice's `display_name`, as NetBox does.
 */
export const ENUM_LABELS = "x-enum-descriptions";

/** The schema, or JSON null. Typed schemas get `type: [t, "null"]`; anything else an `anyOf`. */
export function orNull(schema: JsonSchema): JsonSchema {
  if (typeof schema.type === "string" && !schema.enum && !schema.const)
    return { ...schema, type: [schema.type, "null"] };
  if (Array.isArray(schema.enum))
    return {
      ...schema,
      ...(typeof schema.type === "string" ? { type: [schema.type, "null"] } : {}),
      enum: [...schema.enum, null],
    };
  return { anyOf: [schema, { type: "null" }] };
}

/** A closed object: every listed property, `required` as given, nothing else. */
export function closedObject(
  properties: Record<string, JsonSchema>,
  required: string[] = Object.keys(properties),
): JsonSchema {
  return { type: "object", properties, required, additionalProperties: false };
}

/** PascalCase of words: `"IP address"` → `IPAddress`, `"custom field choice set"` → `CustomFieldChoiceSet`. */
export function pascal(words: string): string {
  return words
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join("");
}

/**
 * What the OpenAPI document cannot read from a model's field specs: keys its `decorate` (or a
 * wrapped `load`) adds, rewrites or drops, and request keys that accept more than the field type
 * says. A model with `decorate` but no `record` here is documented as an open object.
 */
export interface ModelOpenApi {
  /** Record keys added or rewritten after serialisation. */
  record?: Record<string, JsonSchema>;
  /** Record keys the model never returns (e.g. `created` on a table without timestamps). */
  omit?: string[];
  /** Request keys whose accepted values differ from their field spec. */
  request?: Record<string, JsonSchema>;
  /** Request keys required on create beyond the `required` field specs. */
  required?: string[];
}
