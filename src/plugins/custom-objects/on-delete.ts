/**
 * `on_delete_behavior` of object and multiobject fields (§4, §5): when anything is deleted —
 * a host object or a custom object — links to it are set to null, their objects deleted
 * (cascade), or the delete is refused with 409 (protect).
 */
import { sql } from "drizzle-orm";
import { ApiError } from "../../core/errors";
import { deleteWithHooks } from "../../core/rest/handlers";
import type { DeleteHook } from "../../core/rest/resource";
import { slotKey } from "../../core/slots";
import { hasLinkTable, ident, linkTableName, tableName } from "./ddl";
import type { CotRegistry } from "./models";
import type { FieldRow } from "./values";

/** Where-clause matching rows of the field's storage that point at (typeId, id). */
export function linkCondition(f: FieldRow, typeId: number, id: number) {
  if (hasLinkTable(f)) {
    return f.isPolymorphic
      ? sql`target_id = ${id} AND target_type = ${typeId}`
      : sql`target_id = ${id}`;
  }
  const idCol = ident(`${f.name}_id`);
  return f.isPolymorphic
    ? sql`${idCol} = ${id} AND ${ident(`${f.name}_type`)} = ${typeId}`
    : sql`${idCol} = ${id}`;
}

/** `<object type id>:<id>` of the deletes under way in this transaction (its scratch). */
const DELETING = slotKey<Set<string>>("custom-objects.deleting");

export function onDeleteHook(registry: CotRegistry): DeleteHook {
  return async (ctx, target) => {
    const ot = await ctx.services.objectTypes.byLabel(target.appLabel, target.model, ctx.db);
    if (!ot) return;
    const busy = ctx.scratch.ensure(DELETING, () => new Set());
    busy.add(`${ot.id}:${target.id}`);
    for (const { field: f, model } of await registry.fieldsPointingAt(ctx.db, ot.id)) {
      const cotId = f.customObjectTypeId;
      const where = linkCondition(f, ot.id, target.id);
      if (hasLinkTable(f)) {
        const lt = ident(linkTableName(cotId, f.id));
        const [hit] = (await ctx.db.all(
          sql`SELECT source_id FROM ${lt} WHERE ${where} LIMIT 1`,
        )) as { source_id: number }[];
        if (!hit) continue;
        if (f.onDeleteBehavior === "protect") throw protectedError(target, f, hit.source_id);
        // multiobject links simply go away (cascade would delete whole objects for one link)
        await ctx.db.run(sql`DELETE FROM ${lt} WHERE ${where}`);
        continue;
      }
      const t = ident(tableName(cotId));
      const rows = (await ctx.db.all(sql`SELECT id FROM ${t} WHERE ${where}`)) as { id: number }[];
      if (!rows.length) continue;
      if (f.onDeleteBehavior === "protect") throw protectedError(target, f, rows[0]!.id);
      if (f.onDeleteBehavior === "cascade") {
        const ownType = model.cot.objectTypeId!;
        for (const r of rows) {
          if (busy.has(`${ownType}:${r.id}`)) continue; // a self-reference already being deleted
          await deleteWithHooks(ctx, model.resource, r.id);
        }
      } else {
        const nulls = f.isPolymorphic
          ? sql`${ident(`${f.name}_id`)} = NULL, ${ident(`${f.name}_type`)} = NULL`
          : sql`${ident(`${f.name}_id`)} = NULL`;
        await ctx.db.run(sql`UPDATE ${t} SET ${nulls} WHERE ${where}`);
      }
    }
  };
}

function protectedError(
  target: { appLabel: string; model: string; id: number },
  f: FieldRow,
  byId: number,
) {
  return ApiError.detail(
    409,
    `Cannot delete ${target.appLabel}.${target.model} ${target.id}: field "${f.name}" (on_delete_behavior "protect") of custom object type ${f.customObjectTypeId} still links to it from object ${byId}.`,
    "protected",
    {
      protected_objects: [
        { custom_object_type: f.customObjectTypeId, field_name: f.name, object_id: byId },
      ],
    },
  );
}
