/**
 * A host object that other host objects still reference through a restricting foreign key
 * (a device's `site`) cannot be deleted: this delete hook answers 409 naming the dependants —
 * model, field and ids of those the caller may view — before the database refuses with a bare
 * FOREIGN KEY failure, the same way custom object fields with `on_delete_behavior: protect` are.
 */
import { and, count, eq, getTableName, type SQL, sql } from "drizzle-orm";
import { getTableConfig, type SQLiteColumn, type SQLiteTable } from "drizzle-orm/sqlite-core";
import { ApiError } from "../errors";
import type { DefinedModel } from "../models/define";
import type { Executor } from "../../db/client";
import { restrictWhere } from "../auth/restrict";
import { inIds } from "../../db/d1-limits";
import type { DeleteHook, Resource, WriteContext } from "./resource";

type DeleteTarget = Parameters<DeleteHook>[1];

/** How many dependant ids the answer lists (the count is always exact). */
const LISTED = 10;

interface Dependency {
  label: string;
  verbose: string;
  table: SQLiteTable;
  column: SQLiteColumn;
  field: string;
  /** The dependant model's resource: what the caller's view of it is judged on. */
  resource: Resource;
}

/** For each model label, the restricting references to it from the given models. */
function dependencyMap(models: DefinedModel[]): Map<string, Dependency[]> {
  const byTable = new Map(models.map((m) => [getTableName(m.resource.table), m]));
  const map = new Map<string, Dependency[]>();
  for (const m of models) {
    for (const fk of getTableConfig(m.resource.table).foreignKeys) {
      if (fk.onDelete && fk.onDelete !== "restrict" && fk.onDelete !== "no action") continue;
      const ref = fk.reference();
      const target = byTable.get(getTableName(ref.foreignTable));
      if (!target || ref.columns.length !== 1) continue;
      const column = ref.columns[0]!;
      const key = `${target.spec.appLabel}.${target.spec.model}`;
      const deps = map.get(key) ?? [];
      deps.push({
        label: `${m.spec.appLabel}.${m.spec.model}`,
        verbose: m.resource.verboseName,
        table: m.resource.table,
        column,
        field: m.resource.fieldForColumn?.(column.name) ?? column.name.replace(/_id$/, ""),
        resource: m.resource,
      });
      map.set(key, deps);
    }
  }
  return map;
}

type Found = Array<{ dep: Dependency; total: number; shown: number; ids: number[] }>;
type Counted = { n: number; shown: number; ids: string };

/**
 * The 409 naming what still links to `target`. Only dependants the caller may view (their
 * model's view permission and its constraints) are named or counted; that others exist is said
 * without a number (§4, decision 0180).
 */
function refuse(target: DeleteTarget, found: Found): never {
  const shown = found.filter((f) => f.shown > 0);
  const parts = shown.map(
    ({ dep, shown: n, ids }) =>
      `${n} ${dep.label} (field "${dep.field}": ${ids.join(", ")}${n > ids.length ? ", …" : ""})`,
  );
  const hidden = found.some((f) => f.total > f.shown);
  if (hidden) parts.push("other objects you may not view");
  const one = !hidden && shown.length === 1 && shown[0]!.shown === 1;
  const joined =
    hidden && parts.length > 1
      ? `${parts.slice(0, -1).join("; ")} and ${parts.at(-1)}`
      : parts.join("; ");
  throw ApiError.detail(
    409,
    `Cannot delete ${target.appLabel}.${target.model} ${target.id}: ${joined} still ${one ? "links" : "link"} to it. Delete or change them first.`,
    "protected",
    {
      protected_objects: shown.flatMap(({ dep, ids }) =>
        ids.map((id) => ({ object_type: dep.label, field_name: dep.field, object_id: id })),
      ),
    },
  );
}

/**
 * How many rows of `dep` link to `id`, how many of them the caller may view (`visible`: their
 * view condition, undefined when it admits all), and the first `LISTED` of those ids, in one
 * statement: the judgement rides in the same read as the count.
 */
function dependantsQuery(db: Executor, dep: Dependency, id: number, visible: SQL | undefined) {
  const idColumn = (dep.table as unknown as { id: SQLiteColumn }).id;
  const seen = visible ?? sql`1`;
  const first = db
    .select({ id: idColumn })
    .from(dep.table)
    .where(and(eq(dep.column, id), seen))
    .orderBy(idColumn)
    .limit(LISTED);
  return db
    .select({
      n: count(),
      shown: sql<number>`coalesce(sum(CASE WHEN ${seen} THEN 1 ELSE 0 END), 0)`,
      ids: sql<string>`(SELECT json_group_array(id) FROM (${first}))`,
    })
    .from(dep.table)
    .where(eq(dep.column, id));
}

/**
 * `dependantsQuery` for many targets at once (decision 0184): per target linked to, its count, how
 * many of those the caller may view and the first `LISTED` of them, in one statement whatever the
 * number of targets (the ids bound as one JSON value when many).
 */
function dependantsOfMany(db: Executor, dep: Dependency, ids: number[], visible: SQL | undefined) {
  const idColumn = (dep.table as unknown as { id: SQLiteColumn }).id;
  const seen = sql`(CASE WHEN ${visible ?? sql`1`} THEN 1 ELSE 0 END)`;
  const rows = sql`SELECT ${dep.column} AS target, ${idColumn} AS id, ${seen} AS v, row_number() OVER (PARTITION BY ${dep.column}, ${seen} ORDER BY ${idColumn}) AS rn FROM ${dep.table} WHERE ${inIds(dep.column, ids)}`;
  return db.all<Counted & { target: number }>(
    sql`SELECT target, count(*) AS n, coalesce(sum(v), 0) AS shown, coalesce(json_group_array(id) FILTER (WHERE v = 1 AND rn <= ${LISTED}), '[]') AS ids FROM (${rows}) GROUP BY target`,
  );
}

/** `dependantsQuery` under the caller's view of `dep` (wrapped: a query is thenable). */
async function judgedQuery(ctx: WriteContext, db: Executor, dep: Dependency, id: number) {
  const visible = await restrictWhere(ctx, ctx.auth, "view", dep.resource);
  return { query: dependantsQuery(db, dep, id, visible) };
}

/** The dependencies with rows linking to the target, from their counted rows. */
function foundOf(rows: Array<readonly [Dependency, Counted | undefined]>): Found {
  const found: Found = [];
  for (const [dep, row] of rows)
    if (row?.n)
      found.push({
        dep,
        total: Number(row.n),
        shown: Number(row.shown),
        // in id order (a grouped read's `json_group_array` keeps no order)
        ids: (JSON.parse(row.ids) as number[]).sort((a, b) => a - b),
      });
  return found;
}

export function protectHostDependants(models: DefinedModel[]): DeleteHook {
  let map: Map<string, Dependency[]> | null = null;
  const depsOf = (target: { appLabel: string; model: string }) =>
    (map ??= dependencyMap(models)).get(`${target.appLabel}.${target.model}`) ?? [];
  const hook: DeleteHook = async (ctx, target) => {
    const rows: Array<readonly [Dependency, Counted | undefined]> = [];
    for (const dep of depsOf(target)) {
      const { query } = await judgedQuery(ctx, ctx.db, dep, target.id);
      rows.push([dep, (await query)[0]]);
    }
    const found = foundOf(rows);
    if (found.length) refuse(target, found);
  };
  // Staged (decision 0071): counted in the read phase; a dependant made since is refused by its
  // foreign key inside the batch (409 dependency_conflict).
  hook.stage = (ctx, phase, target) => {
    const reads = depsOf(target).map(
      (dep) =>
        [dep, phase.addBuilt(judgedQuery(ctx, ctx.services.db.orm, dep, target.id))] as const,
    );
    return async () => {
      const found = foundOf(reads.map(([dep, rows]) => [dep, rows()[0]] as const));
      if (found.length) refuse(target, found);
      return { write() {} };
    };
  };
  // Many targets (decision 0184): a read per dependency, counted per target; refused as above.
  hook.stageMany = (ctx, phase, targets) => {
    const reads = depsOf(targets).map((dep) => {
      const built = restrictWhere(ctx, ctx.auth, "view", dep.resource).then((visible) => ({
        query: dependantsOfMany(ctx.services.db.orm, dep, targets.ids, visible),
      }));
      return [dep, phase.addBuilt(built)] as const;
    });
    let byTarget: Array<readonly [Dependency, Map<number, Counted>]> | null = null;
    return {
      async admit(id) {
        byTarget ??= reads.map(
          ([dep, rows]) => [dep, new Map(rows().map((r) => [Number(r.target), r]))] as const,
        );
        const found = foundOf(byTarget.map(([dep, counted]) => [dep, counted.get(id)] as const));
        if (found.length) refuse({ ...targets, id }, found);
      },
      async part() {
        return { write() {} };
      },
    };
  };
  // With no read (a create's revert, decision 0139): a guard per dependency that nothing links
  // to the target; when one fails, the caller deletes the ordinary way, whose read names them.
  hook.stageAssumed = (ctx, target) => ({
    write(batch) {
      const orm = ctx.services.db.orm;
      for (const dep of depsOf(target)) {
        const linking = orm
          .select({ one: sql`1` })
          .from(dep.table)
          .where(eq(dep.column, target.id));
        batch.add(orm.run(sql`INSERT INTO write_guard (ok) SELECT NOT EXISTS ${linking}`));
      }
    },
  });
  return hook;
}
