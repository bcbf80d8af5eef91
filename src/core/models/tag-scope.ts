/**
 * The tags a caller may name in a write (decision 0153): those they may view, and those the object
 * holds already (a record sent back unchanged). Any other answers as an unknown tag.
 */
import { sql, type SQL } from "drizzle-orm";
import { restrictWhere } from "../auth/restrict";
import type { WriteContext } from "../rest/resource";
import { taggedItems, tags } from "../../db/schema";

/** Over `id` (a tag id in the caller's query): the tags they may view; undefined when all. */
export async function viewableTags(ctx: WriteContext, id: SQL): Promise<SQL | undefined> {
  // the registry's tag model, not an import of `extras.ts`: that module imports `define.ts`
  const resource = (await ctx.services.models.get("extras", "tag", ctx))?.resource;
  if (!resource) return undefined;
  const view = await restrictWhere(ctx, ctx.auth, "view", resource);
  if (view === undefined) return undefined;
  return sql`${id} IN (SELECT ${tags.id} FROM ${tags} WHERE ${view})`;
}

/** Over `id`: the tags the caller may name on the object `heldBy` (null: a new object). */
export async function nameableTags(
  ctx: WriteContext,
  id: SQL,
  objectTypeId: number,
  heldBy: number | null,
): Promise<SQL | undefined> {
  const visible = await viewableTags(ctx, id);
  if (visible === undefined || heldBy === null) return visible;
  return orHeld(visible, id, objectTypeId, heldBy);
}

function orHeld(visible: SQL, id: SQL, objectTypeId: number, heldBy: number) {
  const held = sql`SELECT ${taggedItems.tagId} FROM ${taggedItems} WHERE ${taggedItems.objectTypeId} = ${objectTypeId} AND ${taggedItems.objectId} = ${heldBy}`;
  return sql`(${visible} OR ${id} IN (${held}))`;
}

/** `nameableTags` over the tags table's id, for a model by label (its type read only if needed). */
export async function nameableTagsOf(
  ctx: WriteContext,
  appLabel: string,
  model: string,
  heldBy: number | null,
): Promise<SQL | undefined> {
  const id = sql`${tags.id}`;
  const visible = await viewableTags(ctx, id);
  if (visible === undefined || heldBy === null) return visible;
  const type = await ctx.services.objectTypes.byLabel(appLabel, model, ctx.db);
  return type ? orHeld(visible, id, type.id, heldBy) : visible;
}

/**
 * The 400 text for a tag reference nothing the caller may name matches. An object names only the
 * key looked up (`{"id":2}`), never the rest it carried: a revert sends the record's tag objects,
 * whose name and slug the caller may not view (decision 0153).
 */
export function tagNotFound(item: unknown): string {
  if (!item || typeof item !== "object" || Array.isArray(item))
    return `Tag not found: ${JSON.stringify(item)}`;
  const o = item as Record<string, unknown>;
  const key = typeof o.id === "number" ? "id" : typeof o.slug === "string" ? "slug" : "name";
  return `Tag not found: ${JSON.stringify({ [key]: o[key] })}`;
}
