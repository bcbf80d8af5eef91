/**
 * How many event rules and webhooks there may be (decision 0196): each user owns at most so many
 * (`user`, whoever last wrote the row), and the enabled rules in all are bounded, as every write
 * of a watched type matches each of them. Counted in a staged write's read phase, proven by its
 * batch.
 */
import { type SQL, sql } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { ApiError } from "../errors";
import type { WriteContext } from "../rest/resource";

type Row = Record<string, unknown>;
import type { ReadPhase, WriteBatch } from "../rest/write-batch";

/** The rows a limit counts: a user's own, and (for rules) the enabled ones of everybody. */
export interface OwnedTable {
  table: SQLiteTable;
  user: SQLiteColumn;
  enabled?: SQLiteColumn;
  /** Plural name in messages: "event rules", "webhooks". */
  noun: string;
  perUser: number;
  enabledInAll?: number;
}

interface Counts {
  mine: number;
  enabled: number;
}

/** The rows `ownedBy` counts: a user's (none for a write no user makes), and the enabled ones. */
function countsSql(o: OwnedTable, userId: number | null): { mine: SQL; enabled: SQL } {
  const mine =
    userId === null ? sql`0` : sql`(SELECT count(*) FROM ${o.table} WHERE ${o.user} = ${userId})`;
  const enabled = o.enabled ? sql`(SELECT count(*) FROM ${o.table} WHERE ${o.enabled})` : sql`0`;
  return { mine, enabled };
}

/** Over a limit: 400 naming it (§4), nothing written. */
function tooMany(noun: string, limit: number, whose: "own" | "enabled"): ApiError {
  const detail =
    whose === "own"
      ? `A user may own at most ${limit} ${noun}; delete some first.`
      : `At most ${limit} ${noun} may be enabled; disable or delete some first.`;
  const code = noun === "webhooks" ? "too_many_webhooks" : "too_many_event_rules";
  return ApiError.detail(400, detail, code, { limit });
}

/**
 * The limit of a staged write of `o` (creates, or updates of `storedIds`): read its counts in
 * `phase`; `admit` each row as validated (it throws past a limit); the batch's guard proves the
 * counts did not grow meanwhile, and `explain` names the limit a lost race passed.
 */
export function ownedLimit(ctx: WriteContext, phase: ReadPhase, o: OwnedTable) {
  const userId = ctx.auth.user?.id ?? null;
  const counts = countsSql(o, userId);
  const orm = ctx.services.db.orm;
  const read = phase.add(
    orm.select({ mine: counts.mine, enabled: counts.enabled }).from(sql`(SELECT 1)`),
  );
  const added: Counts = { mine: 0, enabled: 0 };
  const before = (): Counts => {
    const [row] = read() as Array<{ mine: number; enabled: number }>;
    return { mine: Number(row?.mine ?? 0), enabled: Number(row?.enabled ?? 0) };
  };
  /** Throws when `now` plus what this write adds passes a limit it was within (or at). */
  const check = (now: Counts) => {
    if (added.mine > 0 && now.mine + added.mine > o.perUser)
      throw tooMany(o.noun, o.perUser, "own");
    const all = o.enabledInAll;
    if (all !== undefined && added.enabled > 0 && now.enabled + added.enabled > all)
      throw tooMany(o.noun, all, "enabled");
  };
  return {
    /** Counts the row `values` leaves (over `existing`, when an update) and checks the limits. */
    admit(values: Record<string, unknown>, existing: Row | null) {
      if (userId !== null && (!existing || existing.userId !== userId)) added.mine++;
      if (o.enabled) {
        const on = (values.enabled ?? existing?.enabled ?? true) !== false;
        if (on && !existing?.enabled) added.enabled++;
      }
      check(before());
    },
    write(batch: WriteBatch) {
      if (!added.mine && !added.enabled) return;
      const was = before();
      const mine = Math.max(o.perUser, was.mine);
      const enabled = Math.max(o.enabledInAll ?? 0, was.enabled);
      batch.add(
        orm.run(
          sql`INSERT INTO write_guard (ok) SELECT ${counts.mine} <= ${mine} AND ${counts.enabled} <= ${o.enabled ? enabled : 0}`,
        ),
      );
    },
    async explain(): Promise<undefined> {
      const [now] = (await orm
        .select({ mine: counts.mine, enabled: counts.enabled })
        .from(sql`(SELECT 1)`)) as Array<{ mine: number; enabled: number }>;
      check({ mine: Number(now?.mine ?? 0), enabled: Number(now?.enabled ?? 0) });
      return undefined;
    },
  };
}

/**
 * The limits in a write's own transaction (a write that is not staged): the counts as the write
 * leaves them, the row `id` written (`created` or now owned by the writer). Past a limit the
 * transaction rolls back.
 */
export async function withinOwnedLimit(ctx: WriteContext, o: OwnedTable): Promise<void> {
  const counts = countsSql(o, ctx.auth.user?.id ?? null);
  const [now] = (await ctx.db
    .select({ mine: counts.mine, enabled: counts.enabled })
    .from(sql`(SELECT 1)`)) as Array<{ mine: number; enabled: number }>;
  if (Number(now?.mine ?? 0) > o.perUser) throw tooMany(o.noun, o.perUser, "own");
  const all = o.enabledInAll;
  if (all !== undefined && Number(now?.enabled ?? 0) > all) throw tooMany(o.noun, all, "enabled");
}
