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
import type { Ctx } from "./context";
import type { Queries, Results } from "../db/client";

type Statement = Queries[number];

export interface Guard {
  /** What it proves, for messages. */
  name: string;
  /** Statements whose answers show whether the cached copy is current. */
  statements: Statement[];
  /**
   * Takes their answers (in order): true when the cached copy was current; otherwise brings the
   * cache up to date (from these answers, or by reading again) and answers false.
   */
  settle(answers: unknown[]): Promise<boolean>;
}

const pending = new WeakMap<Request, Guard[]>();

/** Registers `guard` on the request: its statements go with the request's next read. */
export function addGuard(c: Ctx, guard: Guard) {
  const list = pending.get(c.req.raw);
  if (list) list.push(guard);
  else pending.set(c.req.raw, [guard]);
}

/** Whether guards wait to be settled on this request. */
export function hasGuards(c: Ctx): boolean {
  return (pending.get(c.req.raw)?.length ?? 0) > 0;
}

function takeGuards(c: Ctx): Guard[] {
  const list = pending.get(c.req.raw) ?? [];
  pending.delete(c.req.raw);
  return list;
}

/** Settles `guards` with the answers that lead `answers`; true when every cached copy was current. */
async function settleAll(guards: Guard[], answers: readonly unknown[]): Promise<boolean> {
  let at = 0;
  let current = true;
  for (const g of guards) {
    const mine = answers.slice(at, at + g.statements.length);
    at += g.statements.length;
    if (!(await g.settle(mine))) current = false;
  }
  return current;
}

/** Settles the request's pending guards in one read of their own; true when all were current. */
export async function settleGuards(c: Ctx): Promise<boolean> {
  const guards = takeGuards(c);
  const statements = guards.flatMap((g) => g.statements);
  if (!statements.length) return true;
  const answers = await c.var.services.db.read(statements as unknown as Queries);
  return settleAll(guards, answers as readonly unknown[]);
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
  const db = c.var.services.db;
  const queries = await build();
  const guards = takeGuards(c);
  if (!guards.length) return db.read(queries);
  const statements = guards.flatMap((g) => g.statements);
  let answers: readonly unknown[];
  try {
    answers = (await db.read([
      ...statements,
      ...queries,
    ] as unknown as Queries)) as readonly unknown[];
  } catch (e) {
    // A statement built on a stale shape can fail outright (a column gone): settle the guards
    // alone; if one was stale, build again on the refreshed caches.
    pending.set(c.req.raw, guards);
    if (await settleGuards(c)) throw e;
    return rebuilt(c, build);
  }
  if (await settleAll(guards, answers)) return answers.slice(statements.length) as Results<T>;
  return rebuilt(c, build);
}

async function rebuilt<T extends Queries>(c: Ctx, build: () => T | Promise<T>) {
  const queries = await build();
  takeGuards(c); // registered by `build` on caches the refresh just read: current
  return c.var.services.db.read(queries);
}
