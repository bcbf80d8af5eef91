/**
 * A dry run's preview (decision 0162): the record a staged write would answer for an object is
 * the post-change state it stages for the object's change record, taken where its batch would be
 * sent. A dry run watches its write's scratch; `stageChanges` notes there what it stages.
 */
import type { ApiRecord, WriteContext } from "../context";
import { putNewId } from "../rest/write-batch";
import { type Slots, slotKey } from "../slots";
import type { StagedChange } from "./record";

interface Noted {
  objectTypeId: number;
  change: StagedChange;
}
const STAGED = slotKey<Noted[]>("dry run: changes staged");

/** Makes the write owning `scratch` note the change records it stages (a dry run's write). */
export const watchStaged = (scratch: Slots) => {
  scratch.ensure(STAGED, () => []);
};

/** Notes `changes` where a dry run watches the write (`stageChanges` calls it). */
export function noteStaged(ctx: WriteContext, objectTypeId: number, changes: StagedChange[]) {
  ctx.scratch?.get(STAGED)?.push(...changes.map((change) => ({ objectTypeId, change })));
}

/**
 * The record the watched write would answer for object `id` of type `objectTypeId` (`action`:
 * the write's, "update" or "create"): the post-change state it staged, a new row's id marker
 * replaced by `id` as the change record's statement does. Null when none was staged.
 */
export function stagedRecord(
  scratch: Slots,
  objectTypeId: number,
  id: number,
  action: "update" | "create",
): ApiRecord | null {
  const noted = (scratch.get(STAGED) ?? []).findLast(
    ({ objectTypeId: type, change }) =>
      type === objectTypeId &&
      change.action === action &&
      change.postchange !== null &&
      // a restore's INSERT names its id in SQL (`createdRowId`): the only create of its type
      (typeof change.id === "number" ? change.id === id : action === "create"),
  );
  const post = noted?.change.postchange;
  return post ? (JSON.parse(putNewId(JSON.stringify(post), id)) as ApiRecord) : null;
}
