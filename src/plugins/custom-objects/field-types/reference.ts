/** What `object` and `multiobject` share: reading a reference from a request, and its schemas. */
import * as v from "valibot";
import { closedObject, type JsonSchema } from "../../../openapi/json-schema";
import type { WriteContext } from "../../../core/rest/resource";
import type { FieldRow, SchemaEnv } from "./types";

export type Ref = { typeId: number; id: number };

const pk = v.pipe(v.number(), v.integer());
const PK_MESSAGE = "Incorrect type. Expected pk value.";

/** A reference in a write: plain id, `{id}`, or `{object_type, id}` for polymorphic fields. */
export async function resolveRef(ctx: WriteContext, f: FieldRow, raw: unknown): Promise<Ref | { error: string }> {
  if (f.isPolymorphic) {
    if (!raw || typeof raw !== "object" || Array.isArray(raw)) return { error: 'Expected {"object_type": "<app_label>.<model>", "id": <id>}.' };
    const r = raw as Record<string, unknown>;
    const ot = await ctx.services.objectTypes.resolve(r.object_type, ctx.db);
    if (!ot || !f.relatedObjectTypeIds.includes(ot.id)) return { error: `Object type ${JSON.stringify(r.object_type)} is not allowed for this field.` };
    if (!v.is(pk, r.id)) return { error: PK_MESSAGE };
    return { typeId: ot.id, id: r.id };
  }
  const id = refId(raw);
  if (!v.is(pk, id)) return { error: PK_MESSAGE };
  return { typeId: f.relatedObjectTypeId!, id };
}

/** The id a request names for a one-target reference (plain or `{id}`), unchecked. */
export const refId = (raw: unknown): unknown => (raw && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>).id : raw);

/** One reference in a request body. */
export function refWriteSchema(f: FieldRow, env: SchemaEnv): JsonSchema {
  if (!f.isPolymorphic) return { type: "integer", minimum: 1, description: `id of a ${env.label(f.relatedObjectTypeId!) ?? "related object"}` };
  const allowed = f.relatedObjectTypeIds.map((id) => env.label(id) ?? String(id));
  return closedObject({ object_type: { type: "string", enum: allowed }, id: { type: "integer", minimum: 1 } });
}

/** One nested object in a record. */
export function refReadSchema(f: FieldRow, env: SchemaEnv): JsonSchema {
  if (!f.isPolymorphic) return env.reference(f.relatedObjectTypeId!, false);
  return { oneOf: f.relatedObjectTypeIds.map((id) => env.reference(id, true)) };
}
