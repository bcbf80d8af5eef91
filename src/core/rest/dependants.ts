/**
 * A host object that other host objects still reference through a restricting foreign key
 * (a device's `site`) cannot be deleted: this delete hook answers 409 naming the dependants —
 * model, field and ids — before the database refuses with a bare FOREIGN KEY failure, the same
 * way custom object fields with `on_delete_behavior: protect` are reported.
 */
import { count, eq, getTableName, sql } from "drizzle-orm";
import { getTableConfig, type SQLiteColumn, type SQLiteTable } from "drizzle-orm/sqlite-core";
import { ApiError } from "../errors";
import type { DefinedModel } from "../models/define";
import type { Executor } from "../../db/client";
import type { DeleteHook, WriteContext } from "./resource";

type DeleteTarget = Parameters<DeleteHook>[1];

/** How many dependant ids the answer lists (the count is always exact). */
const LISTED = 10;

interface Dependency {
  label: string;
  verbose: string;
  table: SQLiteTable;
  column: SQLiteColumn;
  field: string;
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
      });
      map.set(key, deps);
    }
  }
  return map;
}

type Found = Array<{ dep: Dependency; total: number; ids: number[] }>;

/** The 409 naming what still links to `target` (dependants of models the caller may not view are counted only). */
function refuse(ctx: WriteContext, target: DeleteTarget, found: Found): never {
  // Dependants of a model the caller may not view are counted, never named (§4).
  const user = ctx.auth.user;
  const viewable = (label: string) =>
    !!user && (user.isSuperuser || user.permissions.has(label.replace(".", ".view_")));
  const parts = found.map(({ dep, total, ids }) =>
    viewable(dep.label)
      ? `${total} ${dep.label} (field "${dep.field}": ${ids.join(", ")}${total > ids.length ? ", …" : ""})`
      : `${total} other object${total === 1 ? "" : "s"}`,
  );
  throw ApiError.detail(
    409,
    `Cannot delete ${target.appLabel}.${target.model} ${target.id}: ${parts.join("; ")} still ${found.reduce((a, f) => a + f.total, 0) === 1 ? "links" : "link"} to it. Delete or change them first.`,
    "protected",
    {
      protected_objects: found
        .filter(({ dep }) => viewable(dep.label))
        .flatMap(({ dep, ids }) =>
          ids.map((id) => ({ object_type: dep.label, field_name: dep.field, object_id: id })),
        ),
    },
  );
}

/** How many rows of `dep` link to `id`, and the first `LISTED` of their ids, in one statement. */
function dependantsQuery(db: Executor, dep: Dependency, id: number) {
  const idColumn = (dep.table as unknown as { id: SQLiteColumn }).id;
  const first = db
    .select({ id: idColumn })
    .from(dep.table)
    .where(eq(dep.column, id))
    .orderBy(idColumn)
    .limit(LISTED);
  return db
    .select({
      n: count(),
      ids: sql<string>`(SELECT json_group_array(id) FROM (${first}))`,
    })
    .from(dep.table)
    .where(eq(dep.column, id));
}

export function protectHostDependants(models: DefinedModel[]): DeleteHook {
  let map: Map<string, Dependency[]> | null = null;
  const depsOf = (target: DeleteTarget) =>
    (map ??= dependencyMap(models)).get(`${target.appLabel}.${target.model}`) ?? [];
  const hook: DeleteHook = async (ctx, target) => {
    const found: Found = [];
    for (const dep of depsOf(target)) {
      const [row] = await dependantsQuery(ctx.db, dep, target.id);
      if (row?.n) found.push({ dep, total: row.n, ids: JSON.parse(row.ids) as number[] });
    }
    if (found.length) refuse(ctx, target, found);
  };
  // Staged (decision 0071): counted in the read phase; a dependant made since is refused by its
  // foreign key inside the batch (409 dependency_conflict).
  hook.stage = (ctx, phase, target) => {
    const reads = depsOf(target).map(
      (dep) => [dep, phase.add(dependantsQuery(ctx.services.db.orm, dep, target.id))] as const,
    );
    return async () => {
      const found: Found = [];
      for (const [dep, rows] of reads) {
        const [row] = rows();
        if (row?.n) found.push({ dep, total: row.n, ids: JSON.parse(row.ids) as number[] });
      }
      if (found.length) refuse(ctx, target, found);
      return { write() {} };
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
