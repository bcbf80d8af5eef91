/**
 * A revert's dry run judged on the caller's change (or add) constraints as its write's batch would
 * judge the object it leaves (decision 0139): the same SQL condition, its own columns given the
 * values the change record puts back, riding in the plan's one read (no batch is sent).
 */
import { and, Column, getTableColumns, getTableName, is, SQL, sql, Table } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { restrictWhere } from "../auth/restrict";
import { outsideConstraints } from "../models/batch-failure";
import { defaultFieldForColumn } from "../rest/constraints";
import type { AuthState } from "../context";
import type { ApiRecord, Resource } from "../rest/resource";
import type { PlanReads } from "./plan-reads";

/** The verdict once the plan's read ran: true inside, false outside, null not decidable here. */
export type AfterScope = {
  action: "change" | "add";
  input: ApiRecord;
  verdict: () => boolean | null;
};

/** A column whose value the write leaves is not known here (a companion, a stamp, a list). */
const UNKNOWN = Symbol("unknown");
type Substitutes = Map<string, unknown>;

/** The stored value of `field`'s one column, as the write converts the record's value. */
function storedValue(resource: Resource, field: string, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  const rel = resource.relations?.find((r) => r.name === field);
  if (rel) {
    const id = (value as { id?: unknown }).id;
    return !rel.many && !rel.polymorphic && rel.expr && typeof id === "number" ? id : UNKNOWN;
  }
  const kind = resource.describe?.find((d) => d.name === field)?.kind;
  if (kind === "boolean" && typeof value === "boolean") return value ? 1 : 0;
  if (kind === "choice" && typeof value === "object" && "value" in (value as object))
    return (value as { value: unknown }).value;
  const plain = ["string", "integer", "decimal", "date", "datetime", "choice"];
  return kind && plain.includes(kind) && typeof value !== "object" ? value : UNKNOWN;
}

/** A column's value in an insert that does not give it (its static default, else null). */
function insertDefault(col: SQLiteColumn): unknown {
  const c = col as SQLiteColumn & { defaultFn?: unknown; default?: unknown };
  if (c.defaultFn) return UNKNOWN;
  if (!c.hasDefault) return null;
  return c.default !== undefined && typeof c.default !== "object" ? c.default : UNKNOWN;
}

/**
 * The table's columns the write sets, by SQL name, with the values it leaves there: an update's
 * the fields it puts back (the others are the row's own), a create's every column.
 */
function substitutes(resource: Resource, input: ApiRecord, id: number, create: boolean) {
  const fieldOf = resource.fieldForColumn ?? defaultFieldForColumn;
  const columns = Object.values(getTableColumns(resource.table)) as SQLiteColumn[];
  const perField = new Map<string, number>();
  for (const col of columns)
    perField.set(fieldOf(col.name), (perField.get(fieldOf(col.name)) ?? 0) + 1);
  const out: Substitutes = new Map();
  for (const col of columns) {
    const field = fieldOf(col.name);
    if (Object.hasOwn(input, field))
      out.set(
        col.name,
        perField.get(field) === 1 ? storedValue(resource, field, input[field]) : UNKNOWN,
      );
    else if (create) out.set(col.name, col.name === "id" ? id : insertDefault(col));
  }
  return out;
}

/** A column, table or query fragment the walk may meet inside a condition. */
type Chunk = unknown;

/**
 * `where` with the table's own columns replaced by the values the write leaves; null when it
 * names one whose value is not known here, or reads the table again (a relation to its own type).
 */
function substituted(where: SQL, table: string, values: Substitutes): SQL | null {
  const walk = (chunk: Chunk): Chunk | null => {
    if (is(chunk, Table)) return getTableName(chunk) === table ? null : chunk;
    if (is(chunk, Column)) {
      if (getTableName(chunk.table) !== table || !values.has(chunk.name)) return chunk;
      const value = values.get(chunk.name);
      return value === UNKNOWN ? null : sql`${value}`;
    }
    if (is(chunk, SQL)) {
      const parts: Chunk[] = [];
      for (const part of chunk.queryChunks) {
        const next = walk(part);
        if (next === null) return null;
        parts.push(next);
      }
      return new SQL(parts as SQL["queryChunks"]);
    }
    // a query builder inside (a subquery); a leaf (a text, a parameter) is its own SQL
    const built = (chunk as { getSQL?: () => SQL } | null)?.getSQL;
    const inner = typeof built === "function" ? built.call(chunk) : null;
    return inner && !inner.queryChunks.includes(chunk as never) ? walk(inner) : chunk;
  };
  return walk(where) as SQL | null;
}

/**
 * The check of the object as the revert's write leaves it (`input` over the stored row, or under
 * `id` for a create), its query added to `reads` before they run. Unconstrained: always inside.
 */
export async function afterScope(
  reads: PlanReads,
  auth: AuthState,
  resource: Resource,
  action: "change" | "add",
  id: number,
  input: ApiRecord,
): Promise<AfterScope> {
  const where = await restrictWhere(reads.ctx, auth, action, resource);
  if (!where) return { action, input, verdict: () => true };
  const table = getTableName(resource.table);
  const values = substitutes(resource, input, id, action === "add");
  const condition = substituted(where, table, values);
  if (!condition) return { action, input, verdict: () => null };
  const db = reads.ctx.db;
  const count = sql<number>`count(*)`;
  const query =
    action === "add"
      ? db.select({ n: count }).from(sql`(SELECT 1)`).where(condition)
      : db
          .select({ n: count })
          .from(resource.table)
          .where(and(sql`${resource.list.idExpr} = ${id}`, condition));
  const rows = reads.add(query as never) as () => Array<{ n: number }>;
  return { action, input, verdict: () => Number(rows()[0]?.n ?? 0) > 0 };
}

/**
 * Refuses as the write's batch would (403) when the object it leaves lies outside. `input` is what
 * the write sends; where it is not what was judged (a forced revert leaving fields out), it is
 * judged again in a read of its own.
 */
export async function requireInsideAfter(
  reads: () => PlanReads,
  auth: AuthState,
  resource: Resource,
  id: number,
  input: ApiRecord,
  after: AfterScope,
  sameInput: boolean,
): Promise<void> {
  let judged = after;
  if (!sameInput) {
    const again = reads();
    judged = await afterScope(again, auth, resource, after.action, id, input);
    await again.run();
  }
  if (judged.verdict() === false) throw outsideConstraints(after.action);
}
