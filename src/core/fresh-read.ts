/**
 * A request's reads in one round trip, with the proof that what it took from a cache is current
 * (decision 0085). A cache that saves a round trip (the caller's token and grants, a custom object
 * type's shape) registers a guard on the request: statements whose answers show whether the
 * cached copy still matches the database. `freshRead` sends the guards' statements in the same
 * `db.read` as the request's own, so one snapshot holds both; a guard that finds its copy stale
 * refreshes it and the request's statements are built and read again (the rare case: 2–3 round
 * trips). A guard nothing folded in is settled on its own (`settleGuards`) before the answer
 * leaves.
 */
import type { Ctx, Guard } from "./context";
import { isWriteConflict, type Queries, type Results } from "../db/client";
import { DatabaseLinkError } from "../db/remote-link";
import { ApiError } from "./errors";

export type { Guard };

// Keyed by the request's context: a body limit may put another Request in `c.req.raw` meanwhile.
const pending = new WeakMap<Ctx, Guard[]>();
const staleHooks = new WeakMap<Ctx, () => void>();

/**
 * Calls `hook` when a guard of this request finds its cache stale: for a request that built more
 * than the read on the cached state (GraphQL builds its schema from it) and must run again.
 */
export function onStale(c: Ctx, hook: () => void) {
  staleHooks.set(c, hook);
}

/** Guards that ride in the request's next write batch only (`Guard.batchOnly`), by name. */
const batchOnly = new WeakMap<Ctx, Map<string, Guard>>();

/**
 * Registers `guard` on the request: its statements go with the request's next read, or its batch
 * statements with the next write batch when it is `batchOnly` (one per name: a route running
 * again replaces its first run's).
 */
export function addGuard(c: Ctx, guard: Guard) {
  if (guard.batchOnly) {
    const byName = batchOnly.get(c) ?? new Map<string, Guard>();
    batchOnly.set(c, byName.set(guard.name, guard));
    return;
  }
  const list = pending.get(c);
  if (list) list.push(guard);
  else pending.set(c, [guard]);
}

/** Whether guards wait to be settled on this request. */
export function hasGuards(c: Ctx): boolean {
  return (pending.get(c)?.length ?? 0) > 0;
}

function takeGuards(c: Ctx): Guard[] {
  const list = pending.get(c) ?? [];
  pending.delete(c);
  return list;
}

/**
 * Settles `guards` with the answers that lead `answers` (to the statements `sent` of each: its
 * `statements`, or `alone` where settled by a read of their own); true when every cached copy was
 * current.
 */
async function settleAll(
  c: Ctx,
  guards: Guard[],
  answers: readonly unknown[],
  sent: (g: Guard) => readonly unknown[] = (g) => g.statements,
): Promise<boolean> {
  let at = 0;
  let current = true;
  let failure: unknown = null;
  for (const g of guards) {
    const count = sent(g).length;
    const mine = answers.slice(at, at + count);
    at += count;
    try {
      if (!(await g.settle(mine))) current = false;
    } catch (e) {
      // what the refreshed cache says of the request (a token now unknown: 403)
      current = false;
      failure ??= e;
    }
  }
  if (failure !== null) failures.set(c, failure);
  if (!current) staleHooks.get(c)?.();
  if (failure !== null) throw failure;
  return current;
}

const failures = new WeakMap<Ctx, unknown>();

/**
 * What a guard of this request threw while settling (a token now unknown), for a route whose
 * reads ran inside something that turns errors into answers of its own (GraphQL's resolvers).
 */
export function guardFailure(c: Ctx): unknown {
  return failures.get(c) ?? null;
}

/** Settles the request's pending guards in one read of their own; true when all were current. */
export async function settleGuards(c: Ctx): Promise<boolean> {
  return (await settleReading(c, [])).current;
}

/**
 * `settleGuards`, with `extra` statements read in the same read (a failed batch's explanation,
 * `writeFolded`): whether every guard was current, and the answers to `extra`.
 */
async function settleReading(
  c: Ctx,
  extra: BatchItems,
): Promise<{ current: boolean; extra: unknown[] }> {
  const all = takeGuards(c);
  // a guard with a read of its own (shared by concurrent requests) settles apart from the rest
  const own = all.filter((g) => g.settleAlone);
  const guards = all.filter((g) => !g.settleAlone);
  const ownRead = (g: Guard) => g.alone ?? g.statements;
  const statements = guards.flatMap(ownRead);
  let extraAnswers: unknown[] = [];
  const [rest, ...owned] = await Promise.allSettled([
    statements.length || extra.length
      ? c
          .get("services")
          .db.read([...statements, ...extra] as unknown as Queries)
          .then((answers) => {
            const got = answers as readonly unknown[];
            extraAnswers = got.slice(statements.length);
            return settleAll(c, guards, got.slice(0, statements.length), ownRead);
          })
      : Promise.resolve(true),
    ...own.map((g) => g.settleAlone!()),
  ]);
  // settleAll has called the stale hook and kept its failure; the own guards' are told here
  const ownStale = owned.some((r) => r.status === "rejected" || !r.value);
  if (ownStale && rest!.status === "fulfilled" && rest!.value) staleHooks.get(c)?.();
  for (const r of [rest!, ...owned]) {
    if (r.status === "rejected") {
      if (!failures.has(c)) failures.set(c, r.reason);
      throw r.reason;
    }
  }
  const current = rest!.status === "fulfilled" && rest!.value === true && !ownStale;
  return { current, extra: extraAnswers };
}

/**
 * Runs the statements `build` makes in one `db.read` together with the request's guards. When a
 * guard finds its cache stale, `build` runs again on the refreshed caches (so permission checks
 * and shapes in it see them) and its statements are read once more; guards registered meanwhile
 * are settled already by that refresh, which read the database after this request began.
 */
export async function freshRead<T extends Queries>(
  c: Ctx,
  build: () => T | Promise<T>,
): Promise<Results<T>> {
  const db = c.get("services").db;
  const queries = await build();
  const guards = takeGuards(c);
  if (!guards.length) return db.read(queries);
  const answers = await readGuarded(c, guards, queries);
  return answers ? (answers as Results<T>) : rebuilt(c, build);
}

/**
 * `queries` read in one `db.read` led by `guards`' statements: their answers, or null when a
 * guard found its cache stale (the refreshed copy is in place). A statement built on a stale
 * shape can fail outright (a column gone): the guards are then settled alone, and the failure
 * is thrown only when every one of them was current.
 */
async function readGuarded(
  c: Ctx,
  guards: Guard[],
  queries: readonly unknown[],
): Promise<unknown[] | null> {
  const statements = guards.flatMap((g) => g.statements);
  let answers: readonly unknown[];
  try {
    answers = (await c
      .get("services")
      .db.read([...statements, ...queries] as unknown as Queries)) as readonly unknown[];
  } catch (e) {
    // the link failed: settling the guards would be one more round trip over it (0202)
    if (e instanceof DatabaseLinkError) throw e;
    pending.set(c, guards);
    if (await settleGuards(c)) throw e;
    return null;
  }
  return (await settleAll(c, guards, answers)) ? answers.slice(statements.length) : null;
}

async function rebuilt<T extends Queries>(c: Ctx, build: () => T | Promise<T>) {
  const queries = await build();
  takeGuards(c); // registered by `build` on caches the refresh just read: current
  return c.get("services").db.read(queries);
}

/**
 * A guard folded into a write's read phase found its cache stale (the caller's grants changed):
 * the refreshed copy is in place and nothing was written. A route made by `foldsCredentials` runs
 * again on it, its checks seeing the fresh grants; anywhere else the caller hears a clean
 * retryable answer.
 */
class StaleCredentials extends ApiError {
  constructor() {
    super(
      503,
      { detail: "Credentials changed while this request ran; retry it.", error: "retry" },
      { "Retry-After": "0" },
    );
  }
}

/** Whether `e` is the retry a stale guard of a write's read phase asks for (`StaleCredentials`). */
export const isStaleCredentials = (e: unknown): boolean => e instanceof StaleCredentials;

/**
 * A write's read phase (`core/rest/write-batch.ts`) in one `db.read` together with the request's
 * guards. Throws what a guard threw (a token now unknown: 403) or `StaleCredentials` when one was
 * stale: before anything is written, either way.
 */
export async function readFolded(c: Ctx, queries: BatchItems): Promise<unknown[]> {
  const db = c.get("services").db;
  if (!queries.length && leaveToBatch(c)) return [];
  const guards = takeGuards(c);
  if (!guards.length)
    return queries.length ? [...((await db.read(queries as Queries)) as readonly unknown[])] : [];
  const answers = await readGuarded(c, guards, queries);
  if (!answers) throw new StaleCredentials();
  return answers;
}

type BatchItems = readonly Queries[number][];

/** Requests whose guards ride in their write batch instead of a read (decision 0107). */
const inBatch = new WeakSet<Ctx>();
/** Requests running again after such a batch failed: their guards are read, never batched. */
const ordinary = new WeakSet<Ctx>();

/**
 * A read phase with nothing to read: where every pending guard has batch statements, they stay
 * pending (a refusal before the batch still settles them) and lead the write batch instead. On
 * every database: a local file's read would cost no round trip, and the batch costs it nothing
 * measurable either (decision 0157).
 */
function leaveToBatch(c: Ctx): boolean {
  const guards = pending.get(c);
  if (!guards?.length || ordinary.has(c)) return false;
  if (!guards.every((g) => g.batch?.length)) return false;
  inBatch.add(c);
  return true;
}

/**
 * A staged write's batch (`WriteBatch.run`), led by the request's guards when its read phase
 * left them to it (one round trip), and by its batch-only guards (the event rules' print, decision
 * 0110). When the batch fails on a guard (`write_guard`, all rolled back), the guards are settled
 * by a read (a token now unknown: 403) and the route runs again the ordinary way, on the caches
 * as they now are (`StaleCredentials`, `foldsCredentials`); when only batch-only guards led it and
 * every one is current, the failure is the write's own and is thrown as such.
 */
export async function writeFolded(
  c: Ctx,
  items: BatchItems,
  explain: BatchItems = [],
): Promise<unknown[]> {
  const db = c.get("services").db;
  const folded = inBatch.has(c) ? takeGuards(c) : [];
  inBatch.delete(c);
  const proofs = [...(batchOnly.get(c)?.values() ?? [])];
  batchOnly.delete(c);
  const guards = [...folded, ...proofs];
  if (!guards.length) return [...((await db.write(items as Queries)) as readonly unknown[])];
  const lead = guards.flatMap((g) => g.batch ?? []);
  try {
    const results = (await db.write([
      ...lead,
      ...items,
    ] as unknown as Queries)) as readonly unknown[];
    return results.slice(lead.length);
  } catch (e) {
    if (!isWriteConflict(e)) throw e;
    pending.set(c, guards);
    const settled = await settleReading(c, explain);
    if (settled.current && !folded.length) {
      // the write's own guard failed: the reads that explain it were read with the settling
      if (explain.length && e && typeof e === "object") explained.set(e, settled.extra);
      throw e;
    }
    // a guard of the write's own (a row's stamp, the type's shape, the permission's constraints)
    // may have failed instead: the route runs again either way, its guards read before its batch,
    // so that a failure then is the write's own and answers as such
    if (folded.length) ordinary.add(c);
    throw new StaleCredentials();
  }
}

/** A failed batch's explaining reads, answered where its guards were settled (`writeFolded`). */
const explained = new WeakMap<object, unknown[]>();

/**
 * The answers to the reads a batch asked to explain its failure (`WriteBatch.explainWith`), when
 * they were read already with its guards' settling (one round trip for both); else undefined.
 */
export const explainedFailure = (e: unknown): unknown[] | undefined =>
  e && typeof e === "object" ? explained.get(e) : undefined;

/** Write routes that fold the caller's token guard into their read phase (`foldsCredentials`). */
const folding = new WeakSet<object>();

/** Whether `handler` folds the caller's token guard into its write's read phase. */
export function foldsGuards(handler: unknown): boolean {
  return typeof handler === "function" && folding.has(handler);
}

/**
 * A write route that takes the caller's cached credentials on trust until its read phase, whose
 * one read carries their guard (decision 0089). Every write of `handler` must read through
 * `readFolded` or settle the guards first (`settleBeforeWrite`). When the guard shows the grants
 * changed, `handler` runs again on the fresh ones (its permission checks with them); an answer
 * refused on the cached grants (403, 404) is checked the same way before it leaves.
 */
export function foldsCredentials<H extends (c: Ctx) => Promise<Response>>(handler: H): H {
  const wrapped = (async (c: Ctx) => {
    try {
      return await handler(c);
    } catch (e) {
      if (e instanceof StaleCredentials) return handler(c);
      if (e instanceof ApiError && hasGuards(c) && !(await settleGuards(c))) return handler(c);
      throw e;
    }
  }) as H;
  folding.add(wrapped);
  return wrapped;
}

/** Settles the request's pending guards before a write that does not fold them (a transaction). */
export async function settleBeforeWrite(c: Ctx): Promise<void> {
  if (hasGuards(c) && !(await settleGuards(c))) throw new StaleCredentials();
}
