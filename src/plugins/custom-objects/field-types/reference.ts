/** What `object` and `multiobject` share: reading a reference from a request, and its schemas. */
import * as v from "valibot";
import { closedObject, type JsonSchema } from "../../../core/json-schema";
import type { WriteContext } from "../../../core/rest/resource";
import type { FieldRow, SchemaEnv } from "./types";
import { upstreamAppLabel } from "../constants";
import { writerSight } from "../../../core/auth/type-sight";

export type Ref = { typeId: number; id: number };

const pk = v.pipe(v.number(), v.integer());
const PK_MESSAGE = "Incorrect type. Expected pk value.";

/**
 * A reference in a write: plain id, `{id}`, or for polymorphic fields the object's type and id,
 * spelled `{object_type, id}` (ours) or as upstream clients send it: `{content_type_id,
 * object_id}` or `{app_label, model, object_id}` (`object_id` wins over `id`).
 */
export async function resolveRef(
  ctx: WriteContext,
  f: FieldRow,
  raw: unknown,
): Promise<Ref | { error: string }> {
  if (f.isPolymorphic) {
    if (!raw || typeof raw !== "object" || Array.isArray(raw)) return { error: POLY_MESSAGE };
    const r = raw as Record<string, unknown>;
    const named =
      r.object_type ??
      r.content_type_id ??
      r.object_type_id ??
      (r.app_label !== undefined || r.model !== undefined
        ? { app_label: upstreamAppLabel(r.app_label), model: r.model }
        : undefined);
    if (named === undefined || named === null)
      return { error: `Name the object's type: ${POLY_MESSAGE}` };
    const found = await ctx.services.objectTypes.resolve(named, ctx.db);
    // a type the writer may not see does not exist to them, as in every read (0187, 0195)
    const ot = found && writerSight(ctx.services, ctx.auth).sees(found) ? found : null;
    const shown = ot
      ? `${ot.appLabel}.${ot.model}`
      : typeof named === "object"
        ? `${String((named as Record<string, unknown>).app_label)}.${String((named as Record<string, unknown>).model)}`
        : String(named);
    if (!ot || !f.relatedObjectTypeIds.includes(ot.id))
      return { error: `Object type ${JSON.stringify(shown)} is not allowed for this field.` };
    const id = r.object_id !== undefined ? r.object_id : r.id;
    if (!v.is(pk, id)) return { error: PK_MESSAGE };
    return { typeId: ot.id, id };
  }
  return plainRef(f, raw);
}

/** `resolveRef` for a one-target field, which needs no look-up: plain id or `{id}`. */
export function plainRef(f: FieldRow, raw: unknown): Ref | { error: string } {
  const id = refId(raw);
  if (!v.is(pk, id)) return { error: PK_MESSAGE };
  return { typeId: f.relatedObjectTypeId!, id };
}

const POLY_MESSAGE =
  'Expected {"object_type": "<app_label>.<model>", "id": <id>} (or {"content_type_id": <id>, "object_id": <id>}).';

/** The id a request names for a one-target reference (plain or `{id}`), unchecked. */
const refId = (raw: unknown): unknown =>
  raw && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>).id : raw;

/** One reference in a request body. */
export function refWriteSchema(f: FieldRow, env: SchemaEnv): JsonSchema {
  if (!f.isPolymorphic)
    return {
      type: "integer",
      minimum: 1,
      description: `id of a ${env.label(f.relatedObjectTypeId!) ?? "related object"}`,
    };
  const allowed = f.relatedObjectTypeIds.map((id) => env.label(id) ?? String(id));
  return closedObject({
    object_type: { type: "string", enum: allowed },
    id: { type: "integer", minimum: 1 },
  });
}

/** One nested object in a record. */
export function refReadSchema(f: FieldRow, env: SchemaEnv): JsonSchema {
  if (!f.isPolymorphic) return env.reference(f.relatedObjectTypeId!, false);
  return { oneOf: f.relatedObjectTypeIds.map((id) => env.reference(id, true)) };
}
