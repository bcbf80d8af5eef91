/**
 * A host object that other host objects still reference through a restricting foreign key
 * (a device's `site`) cannot be deleted: this delete hook answers 409 naming the dependants —
 * model, field and ids — before the database refuses with a bare FOREIGN KEY failure, the same
 * way custom object fields with `on_delete_behavior: protect` are reported.
 */
import { count, eq, getTableName } from "drizzle-orm";
import { getTableConfig, type SQLiteColumn, type SQLiteTable } from "drizzle-orm/sqlite-core";
import { ApiError } from "../errors";
import type { DefinedModel } from "../models/define";
import type { DeleteHook } from "./resource";

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

export function protectHostDependants(models: DefinedModel[]): DeleteHook {
  let map: Map<string, Dependency[]> | null = null;
  return async (ctx, target) => {
    map ??= dependencyMap(models);
    const deps = map.get(`${target.appLabel}.${target.model}`);
    if (!deps) return;
    const found: Array<{ dep: Dependency; total: number; ids: number[] }> = [];
    for (const dep of deps) {
      const idColumn = (dep.table as unknown as { id: SQLiteColumn }).id;
      const [{ n }] = (await ctx.db
        .select({ n: count() })
        .from(dep.table)
        .where(eq(dep.column, target.id))) as [{ n: number }];
      if (!n) continue;
      const rows = (await ctx.db
        .select({ id: idColumn })
        .from(dep.table)
        .where(eq(dep.column, target.id))
        .orderBy(idColumn)
        .limit(LISTED)) as Array<{ id: number }>;
      found.push({ dep, total: n, ids: rows.map((r) => r.id) });
    }
    if (!found.length) return;
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
  };
}
