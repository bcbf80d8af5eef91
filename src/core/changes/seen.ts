/**
 * Change records this app has read lately, by id (decision 0118): a revert of one of them knows
 * its model before any read, so its write's one read can carry the record's own read as the proof.
 * A record never changes once written; the proof is still read, never assumed.
 */
import { eq } from "drizzle-orm";
import { objectChanges } from "../../db/schema";
import { approxBytes } from "../approx-bytes";
import type { ReadContext, Services } from "../context";
import { slotKey } from "../slots";

export type ChangeRow = typeof objectChanges.$inferSelect;

/**
 * Models whose snapshots cannot rebuild them: a token's key is never in its record, and a custom
 * object type's or field's record is not its table (schema changes go back by applying an
 * earlier schema document).
 */
export const NOT_REVERTABLE: ReadonlySet<string> = new Set([
  "users.token",
  "custom_objects.customobjecttype",
  "custom_objects.customobjecttypefield",
]);

interface Seen {
  rows: Map<number, { row: ChangeRow; bytes: number }>;
  /** What the rows held take, about (their texts' lengths): bounded by SEEN_BYTES. */
  bytes: number;
}
const SEEN = slotKey<Seen>("changes.seen");
/** Records kept at most (the oldest go first): a revert follows a look at its record. */
const SEEN_MAX = 500;
/**
 * A record's two snapshots may be megabytes (an object with long texts, changed often): one
 * larger than this is not remembered (its revert reads it, one round trip more), and all of them
 * together stay within SEEN_BYTES, so an account that writes such objects cannot fill the memory.
 */
const SEEN_ROW_BYTES = 64 * 1024;
const SEEN_BYTES = 4 * 1024 * 1024;
/**
 * Whether a record whose texts (repr and snapshots, as JSON) are `chars` long may be small enough
 * to remember: one twice the limit never is, and is not parsed to find out (`record.ts`).
 */
export const mayRemember = (chars: number) => chars <= 2 * SEEN_ROW_BYTES;
/** The table's columns by their row keys (`id`, `time`, `userId`, …). */
const COLUMNS = Object.keys(objectChanges);

const seen = (services: Services) =>
  services.state.ensure(SEEN, () => ({ rows: new Map(), bytes: 0 }));

/** Remembers the rows (whole ones only: a list's own selection may leave columns out). */
export function rememberChanges(services: Services, rows: ReadonlyArray<Record<string, unknown>>) {
  const held = seen(services);
  for (const row of rows) {
    if (typeof row.id !== "number" || !wholeRow(row)) continue;
    forget(held, row.id);
    const bytes = approxBytes(row, SEEN_ROW_BYTES);
    if (bytes > SEEN_ROW_BYTES) continue;
    held.rows.set(row.id, { row: row as ChangeRow, bytes });
    held.bytes += bytes;
    while (held.rows.size > SEEN_MAX || held.bytes > SEEN_BYTES)
      forget(held, held.rows.keys().next().value!);
  }
}

function forget(held: Seen, id: number) {
  const had = held.rows.get(id);
  if (!had) return;
  held.bytes -= had.bytes;
  held.rows.delete(id);
}

const wholeRow = (row: Record<string, unknown>) => COLUMNS.every((k) => Object.hasOwn(row, k));

export const seenChange = (services: Services, id: number): ChangeRow | undefined =>
  seen(services).rows.get(id)?.row;

export const forgetChange = (services: Services, id: number) => forget(seen(services), id);

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
