/**
 * Change records this app has read lately, by id (decision 0118): a revert of one of them knows
 * its model before any read, so its write's one read can carry the record's own read as the proof.
 * A record never changes once written; the proof is still read, never assumed.
 */
import { eq } from "drizzle-orm";
import { objectChanges } from "../../db/schema";
import type { ReadContext, Services } from "../context";
import { slotKey } from "../slots";

export type ChangeRow = typeof objectChanges.$inferSelect;

const SEEN = slotKey<Map<number, ChangeRow>>("changes.seen");
/** Records kept at most (the oldest go first): a revert follows a look at its record. */
const SEEN_MAX = 500;
/** The table's columns by their row keys (`id`, `time`, `userId`, …). */
const COLUMNS = Object.keys(objectChanges);

const seen = (services: Services) => services.state.ensure(SEEN, () => new Map());

/** Remembers the rows (whole ones only: a list's own selection may leave columns out). */
export function rememberChanges(services: Services, rows: ReadonlyArray<Record<string, unknown>>) {
  const map = seen(services);
  for (const row of rows) {
    if (typeof row.id !== "number" || !wholeRow(row)) continue;
    map.delete(row.id);
    map.set(row.id, row as ChangeRow);
    if (map.size > SEEN_MAX) map.delete(map.keys().next().value!);
  }
}

const wholeRow = (row: Record<string, unknown>) => COLUMNS.every((k) => Object.hasOwn(row, k));

export const seenChange = (services: Services, id: number): ChangeRow | undefined =>
  seen(services).get(id);

export const forgetChange = (services: Services, id: number) => seen(services).delete(id);

/** A seen record's proof: its row read again in the revert's one read, and compared. */
export interface ChangeProof {
  query: ReturnType<typeof changeRead>;
  row: ChangeRow;
  /** Set once the read found the row as remembered. */
  proven: boolean;
}

export const changeRead = (ctx: ReadContext, id: number) =>
  ctx.db.select().from(objectChanges).where(eq(objectChanges.id, id));

/** Whether the row read now is the one remembered (every column the same). */
export function sameChange(now: ChangeRow | undefined, row: ChangeRow): boolean {
  return (
    !!now &&
    (Object.keys(now) as Array<keyof ChangeRow>).every(
      (k) => JSON.stringify(now[k] ?? null) === JSON.stringify(row[k] ?? null),
    )
  );
}
