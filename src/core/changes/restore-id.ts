/**
 * The id a create must take: a revert of a delete puts the object back under its old id. The
 * revert sets it on the write's scratch for one model; that model's create path takes it (once),
 * so a create of another model on the way never does.
 */
import { slotKey } from "../slots";
import type { WriteContext } from "../rest/resource";

const RESTORE_ID = slotKey<{ label: string; id: number }>("restore id");

export const setRestoreId = (
  ctx: WriteContext,
  target: { appLabel: string; model: string },
  id: number,
) => ctx.scratch.set(RESTORE_ID, { label: `${target.appLabel}.${target.model}`, id });

/** The id the next insert into `appLabel.model` must take, or undefined; cleared as it is read. */
export function takeRestoreId(
  ctx: WriteContext,
  appLabel: string,
  model: string,
): number | undefined {
  const held = ctx.scratch?.get(RESTORE_ID);
  if (!held || held.label !== `${appLabel}.${model}`) return undefined;
  ctx.scratch.delete(RESTORE_ID);
  return held.id;
}
