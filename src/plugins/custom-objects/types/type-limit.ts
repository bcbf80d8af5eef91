/**
 * How many custom object types there may be in all (`MAX_CUSTOM_OBJECT_TYPES`, decision 0205):
 * counted in a write's read phase, refused with a 400 before anything is staged, and proven by a
 * guard in the batch (a race lost to another creation fails the batch; run again, or counted
 * again for a restore, it answers the 400). A preview reports the same 400 as a refusal.
 */
import { sql } from "drizzle-orm";
import type { Orm, Executor } from "../../../db/client";
import { customObjectTypes } from "../../../db/schema";
import { ApiError } from "../../../core/errors";
import type { WriteBatch } from "../../../core/rest/write-batch";

/** The count of every custom object type, as one row `{ n }`. */
const TYPE_COUNT = sql`SELECT count(*) AS n FROM ${customObjectTypes}`;

/** `TYPE_COUNT` as a query of a read phase. */
export const typeCountQuery = (orm: Orm) => orm.all<{ n: number }>(TYPE_COUNT);

/** Past the limit: 400 naming it (§4), nothing written. */
function tooManyTypes(limit: number): ApiError {
  return ApiError.detail(
    400,
    `There may be at most ${limit} custom object types; delete some first (MAX_CUSTOM_OBJECT_TYPES).`,
    "too_many_custom_object_types",
    { limit },
  );
}

/** Throws when `count` types, with `added` more and `removed` fewer, pass `limit`. */
export function refuseTypesPast(count: number, added: number, removed: number, limit: number) {
  if (pastLimit(count, added, removed, limit)) throw tooManyTypes(limit);
}

const pastLimit = (count: number, added: number, removed: number, limit: number) =>
  added > 0 && count + added - removed > limit;

/**
 * The batch's proof that the types it leaves are within `limit` (or within what there already
 * were, should the limit have been lowered); added last, after the batch's own creations.
 */
export function guardTypeCount(batch: WriteBatch, orm: Orm, limit: number, count: number) {
  const most = Math.max(limit, count);
  batch.add(
    orm.run(sql`INSERT INTO write_guard (ok) SELECT (SELECT "n" FROM (${TYPE_COUNT})) <= ${most}`),
  );
}

/** What an apply would answer (the §4 body and its status), as a preview reports refusals. */
export interface Refusal {
  status: number;
  error: string;
  detail: string;
  [key: string]: unknown;
}

/**
 * A preview's word on the cap: the apply's 400 when `added` more types and `removed` fewer than
 * the `count` there are would pass `limit`, else nothing.
 */
export function typeLimitRefusals(
  count: number,
  added: number,
  removed: number,
  limit: number,
): Refusal[] {
  if (!pastLimit(count, added, removed, limit)) return [];
  const refusal = tooManyTypes(limit);
  const body = refusal.body as { error: string; detail: string };
  return [{ ...body, status: refusal.statusCode }];
}

/** In a write's own transaction, after its creations: past the limit the transaction rolls back. */
export async function withinTypeLimit(db: Executor, limit: number): Promise<void> {
  if ((await countTypes(db)) > limit) throw tooManyTypes(limit);
}

/** The custom object types there are, read on `db` (a transaction's, or a request's reader). */
export async function countTypes(db: Executor): Promise<number> {
  const [row] = (await db.all(TYPE_COUNT)) as Array<{ n: number }>;
  return Number(row?.n ?? 0);
}
