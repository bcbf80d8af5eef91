/**
 * The id a create must take: a revert of a delete puts the object back under its old id. The
 * revert sets it on the write's scratch; the create path that inserts the row takes it (once).
 */
import { slotKey } from "../slots";
import type { WriteContext } from "../rest/resource";

const RESTORE_ID = slotKey<number>("restore id");

export const setRestoreId = (ctx: WriteContext, id: number) => ctx.scratch.set(RESTORE_ID, id);

/** The id the next insert must take, or undefined; cleared as it is read. */
export function takeRestoreId(ctx: WriteContext): number | undefined {
  const id = ctx.scratch?.get(RESTORE_ID);
  if (id !== undefined) ctx.scratch.delete(RESTORE_ID);
  return id;
}
