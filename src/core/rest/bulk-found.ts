/**
 * NetBox 4.7's answer to a bulk update or delete naming objects it cannot act on (decision 0200):
 * before anything is written, an id listed twice, then every id the caller cannot find (missing,
 * or outside their view: the two read alike, as one object's path answers both 404), is a 400
 * naming each under `errors[].id`.
 */
import { ApiError } from "../../api-error";
import { notFound } from "../errors";

/** At most this many ids are named; `detail` counts them all (a 1 MiB body holds ~100k). */
const NAMED_AT_MOST = 1_000;

const refusal = (detail: string, errors: Array<{ id: number; errors: { id: string[] } }>) =>
  new ApiError(400, { detail, errors: errors.slice(0, NAMED_AT_MOST) });

/** Throws NetBox's 400 when a bulk request lists an id twice or names one `found` does not hold. */
export function requireBulkFound(ids: number[], found: (id: number) => boolean): void {
  const counts = new Map<number, number>();
  for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
  const repeated = [...counts].filter(([, n]) => n > 1);
  if (repeated.length)
    throw refusal(
      `${repeated.length} of ${ids.length} objects are listed more than once.`,
      repeated.map(([id, n]) => ({
        id,
        errors: { id: [`Each object may be specified only once; ID ${id} is listed ${n} times`] },
      })),
    );
  const missing = ids.filter((id) => !found(id));
  if (missing.length)
    throw refusal(
      `${missing.length} of ${ids.length} objects could not be found.`,
      missing.map((id) => ({ id, errors: { id: [`Object with ID ${id} does not exist`] } })),
    );
}

/** The listed object a write's 404 is about, where the write that threw it knows. */
const LISTED_ID = Symbol("listed object id");

/**
 * A 404 for object `id` of a write: one object's path answers it as it is, a list's write as
 * NetBox's 400 naming the id (`listRefusal`), for writers that meet the ids one by one.
 */
export function objectNotFound(verboseName: string, id: number): ApiError {
  return Object.assign(notFound(`No ${verboseName} with id ${id}.`), { [LISTED_ID]: id });
}

/** For a list's write: rethrows an `objectNotFound` 404 as NetBox's 400 naming its id. */
export const listRefusal =
  (ids: number[]) =>
  (e: unknown): never => {
    const id = e instanceof ApiError ? (e as ApiError & { [LISTED_ID]?: number })[LISTED_ID] : null;
    if (typeof id === "number") requireBulkFound(ids, (x) => x !== id);
    throw e;
  };
