/**
 * The tags a caller may name on a custom object type (decision 0064): those they may view, and
 * those the type holds already (a record sent back unchanged). Any other is answered as unknown.
 */
import { sql, type SQL } from "drizzle-orm";
import { restrictWhere } from "../../../core/auth/restrict";
import { tagModel } from "../../../core/models/extras";
import type { WriteContext } from "../../../core/rest/resource";
import { taggedItems, tags } from "../../../db/schema";

/** Over `id` (a tag id in the caller's query); undefined when the caller may name every tag. */
export async function nameableTags(
  ctx: WriteContext,
  id: SQL,
  objectTypeId: number,
  heldBy: number | null,
): Promise<SQL | undefined> {
  const view = await restrictWhere(ctx, ctx.auth, "view", tagModel.resource);
  if (view === undefined) return undefined;
  const visible = sql`${id} IN (SELECT ${tags.id} FROM ${tags} WHERE ${view})`;
  if (heldBy === null) return visible;
  const held = sql`SELECT ${taggedItems.tagId} FROM ${taggedItems} WHERE ${taggedItems.objectTypeId} = ${objectTypeId} AND ${taggedItems.objectId} = ${heldBy}`;
  return sql`(${visible} OR ${id} IN (${held}))`;
}
