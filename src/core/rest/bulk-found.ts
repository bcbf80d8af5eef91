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

/** What object a 404 is about (`label:id`), set where it is thrown (`aboutObject`). */
const ABOUT = Symbol("the object a 404 is about");
const aboutKey = (r: { appLabel: string; model: string }, id: number) =>
  `${r.appLabel}.${r.model}:${id}`;

/** Marks `e` (a 404) as about object `id` of `r`: a list's write tells its own from a hook's. */
export function aboutObject(
  e: ApiError,
  r: { appLabel: string; model: string },
  id: number,
): ApiError {
  return Object.assign(e, { [ABOUT]: aboutKey(r, id) });
}

/**
 * For a list's write of object `id` of `r` (one by one): a 404 about that object is NetBox's 400
 * naming it as missing; one about another object (a delete hook's, a cascade's) is the same 400
 * naming the listed id as the item that failed, in the 404's own words.
 */
export const notFoundInList =
  (r: { appLabel: string; model: string }, ids: number[], id: number, verb: string) =>
  (e: unknown): never => {
    if (!(e instanceof ApiError) || e.statusCode !== 404) throw e;
    if ((e as ApiError & { [ABOUT]?: string })[ABOUT] === aboutKey(r, id))
      requireBulkFound(ids, (x) => x !== id);
    throw refusal(`1 of ${ids.length} objects could not be ${verb}.`, [
      { id, errors: { id: [e.message] } },
    ]);
  };
