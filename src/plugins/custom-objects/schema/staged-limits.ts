/**
 * A constrained caller's schema apply and trash restore, staged (decision 0128): the types as read
 * admitted in a read the write takes anyway, the types as written guarded in the batch (0121's
 * `guardAdmitted`), a failed guard explained by one read (the one that settles the request's
 * guards after the failure): a stamp moved is the race, else the transaction's 403 naming the
 * submitted slugs the constraints refuse.
 */
import { and, eq, getTableColumns, inArray, sql, type SQL } from "drizzle-orm";
import type { Column } from "drizzle-orm";
import { isWriteConflict, type Orm, type Queries } from "../../../db/client";
import { unionAll } from "../../../db/d1-limits";
import { customObjectTrash, customObjectTypes } from "../../../db/schema";
import { restrictWhere } from "../../../core/auth/restrict";
import { explainedFailure } from "../../../core/fresh-read";
import { forbidden } from "../../../core/errors";
import type { WriteContext } from "../../../core/context";
import type { ReadPhase, WriteBatch } from "../../../core/rest/write-batch";
import type { CotRow } from "../objects/models";
import { cotModel } from "../types/api";
import { guardAdmitted } from "../types/staged";
import { addsRefused, cotsRefused } from "./access";
import type { SchemaDocument } from "./document";

/** The caller's constraints on types, per action (undefined: unconstrained); null when none. */
export interface TypeLimits {
  change?: SQL;
  add?: SQL;
  delete?: SQL;
}

export async function typeLimits(ctx: WriteContext): Promise<TypeLimits | null> {
  const of = (action: "add" | "change" | "delete") =>
    restrictWhere(ctx, ctx.auth, action, cotModel.resource);
  const limits = { change: await of("change"), add: await of("add"), delete: await of("delete") };
  return limits.change || limits.add || limits.delete ? limits : null;
}

/** The caller's constraint on viewing types (undefined: unconstrained). */
export const viewLimit = (ctx: WriteContext) =>
  restrictWhere(ctx, ctx.auth, "view", cotModel.resource);

const idExpr = () => sql`${cotModel.resource.list.idExpr}`;

/** The ids among the types named `slugs`, as they are, the caller may act on (`where`). */
export function admittedBySlug(orm: Orm, phase: ReadPhase, slugs: string[], where?: SQL) {
  if (!where || !slugs.length) return () => null;
  const read = phase.add(
    orm
      .select({ id: sql<number>`${idExpr()}` })
      .from(customObjectTypes)
      .where(and(inArray(customObjectTypes.slug, slugs), where)),
  );
  return () => new Set(read().map((r) => Number(r.id)));
}

/**
 * In a read phase, whether the caller may act (`where`) on type `id` as it is; the getter answers
 * the route's 403 when not (the caller may view the trash entry naming it).
 */
export function admittedById(orm: Orm, phase: ReadPhase, id: number, where?: SQL) {
  if (!where) return () => {};
  const read = phase.add(
    orm
      .select({ id: sql<number>`${idExpr()}` })
      .from(customObjectTypes)
      .where(and(eq(customObjectTypes.id, id), where)),
  );
  return () => {
    if (!read().length) throw forbidden();
  };
}

/**
 * `requireCots` before the apply, from the first read: the kept types the caller may not change,
 * then the removed ones they may not delete (403, in id order, as the transaction's snapshot).
 */
export function refuseAsRead(
  cots: CotRow[],
  removing: Set<string>,
  admitted: { change: Set<number> | null; delete: Set<number> | null },
) {
  const sorted = [...cots].sort((a, b) => a.id - b.id);
  for (const action of ["change", "delete"] as const) {
    const ok = admitted[action];
    const refused = sorted.filter(
      (c) => ok && removing.has(c.slug) === (action === "delete") && !ok.has(c.id),
    );
    if (refused.length)
      throw cotsRefused(
        action,
        refused.map((c) => c.slug),
      );
  }
}

/** The types an apply writes: changed (as read, as written) and added (as written). */
export interface Written {
  changed: Array<{ before: CotRow; after: CotRow }>;
  added: CotRow[];
}

/** Guards that each type as the batch leaves it is one the caller may change or add. */
export function guardWritten(batch: WriteBatch, orm: Orm, limits: TypeLimits, written: Written) {
  const resource = cotModel.resource;
  if (limits.change)
    for (const c of written.changed) guardAdmitted(batch, orm, resource, c.after.id, limits.change);
  if (limits.add)
    for (const r of written.added) guardAdmitted(batch, orm, resource, r.id, limits.add);
}

/**
 * The ids among `rows` the caller may act on (`where`) as the rows will be: the constraint read
 * over the table with these rows in place of their stored ones (a CTE of the table's name shadows
 * it in the statement; `main.` names the stored table).
 */
function admittedAsWritten(orm: Orm, rows: CotRow[], where: SQL) {
  const columns = Object.entries(getTableColumns(customObjectTypes)) as Array<[string, Column]>;
  const names = sql.join(
    columns.map(([, c]) => sql.identifier(c.name)),
    sql`, `,
  );
  const value = (row: CotRow, key: string, c: Column) => {
    const v = (row as unknown as Record<string, unknown>)[key];
    return v === null || v === undefined ? sql`NULL` : sql`${c.mapToDriverValue(v)}`;
  };
  const selects = rows.map(
    (r) =>
      sql`SELECT ${sql.join(
        columns.map(([key, c]) => value(r, key, c)),
        sql`, `,
      )}`,
  );
  const ids = sql.join(
    rows.map((r) => sql`${r.id}`),
    sql`, `,
  );
  // a term per row, grouped within D1's five terms of a compound SELECT (decision 0161)
  const table = unionAll([
    sql`SELECT ${names} FROM main.${customObjectTypes} WHERE "id" NOT IN (${ids})`,
    ...selects,
  ]);
  return orm.all<{ id: number }>(
    sql`WITH ${customObjectTypes}(${names}) AS (${table}) SELECT ${idExpr()} AS id FROM ${customObjectTypes} WHERE ${idExpr()} IN (${ids}) AND ${where}`,
  );
}

/** How a failed batch is explained: the reads it takes, and the answer from their rows. */
export interface Explainer {
  reads: Queries[number][];
  /** Rethrows `e` (the race) or throws the refusal; reads only where the batch's failure did not. */
  explain(ctx: WriteContext, e: unknown): Promise<never>;
}

/** The explaining reads' rows: read with the guards' settling (`explainedFailure`), or now. */
async function explainingRows(ctx: WriteContext, e: unknown, reads: Queries[number][]) {
  const rows = explainedFailure(e) ?? (await ctx.services.db.read(reads as unknown as Queries));
  return rows as unknown as Array<Array<Record<string, unknown>>>;
}

/**
 * An apply's failed batch, explained by one read (the one that settles the request's guards
 * after the failure, where there is one: `WriteBatch.explainWith`): a changed type's stamp moved
 * (or no written type falls outside the constraints) is the race, rethrown for the apply to run
 * again; else the transaction's 403 (changes first, then additions) naming the slugs refused.
 */
export function applyExplainer(
  orm: Orm,
  limits: TypeLimits,
  written: Written,
  document: SchemaDocument,
): Explainer {
  const stamps = written.changed.map((c) =>
    orm
      .select({ stamp: customObjectTypes.lastUpdated })
      .from(customObjectTypes)
      .where(eq(customObjectTypes.id, c.before.id)),
  );
  const checks: Array<["change" | "add", CotRow[], SQL]> = [];
  const afters = written.changed.map((c) => c.after);
  if (limits.change && afters.length) checks.push(["change", afters, limits.change]);
  if (limits.add && written.added.length) checks.push(["add", written.added, limits.add]);
  const reads = [
    ...stamps,
    ...checks.map(([, rows, where]) => admittedAsWritten(orm, rows, where)),
  ] as unknown as Queries[number][];
  return {
    reads,
    async explain(ctx, e) {
      if (!isWriteConflict(e) || !reads.length) throw e;
      const results = await explainingRows(ctx, e, reads);
      if (written.changed.some((c, i) => results[i]?.[0]?.stamp !== c.before.lastUpdated)) throw e;
      checks.forEach(([action, rows], i) => {
        const ok = new Set(results[stamps.length + i]!.map((r) => Number(r.id)));
        const refused = rows.filter((r) => !ok.has(r.id)).map((r) => r.slug);
        if (!refused.length) return;
        if (action === "change") throw cotsRefused(action, refused);
        const added = new Set(rows.map((r) => r.slug));
        throw addsRefused(document, (slug) => !added.has(slug));
      });
      throw e;
    },
  };
}

/**
 * A restore's failed batch, explained by one read (as an apply's): the entry taken meanwhile, or
 * the type's stamp moved (a field's restore), is the race, rethrown; else the transaction's 403
 * on the type.
 */
export function restoreExplainer(
  orm: Orm,
  entry: { id: number; slug: string; customObjectTypeId: number },
  stamp: string | undefined,
): Explainer {
  const reads = [
    orm
      .select({ id: customObjectTrash.id })
      .from(customObjectTrash)
      .where(eq(customObjectTrash.id, entry.id)),
    orm
      .select({ stamp: customObjectTypes.lastUpdated })
      .from(customObjectTypes)
      .where(eq(customObjectTypes.id, entry.customObjectTypeId)),
  ] as unknown as Queries[number][];
  return {
    reads,
    async explain(ctx, e) {
      if (!isWriteConflict(e)) throw e;
      const [kept, now] = await explainingRows(ctx, e, reads);
      if (!kept!.length || (stamp !== undefined && now![0]?.stamp !== stamp)) throw e;
      throw cotsRefused("change", [entry.slug]);
    },
  };
}
