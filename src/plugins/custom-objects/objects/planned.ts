/**
 * What a read's row statement carries about the objects a type's fields name in other custom
 * object types and in a polymorphic field's types (decision 0165): their nested forms as columns
 * of the rows, built from models the read plans under guards riding in it
 * (`ModelRegistry.plannedByObjectType`); then those forms by type and id, and the types' labels.
 */
import { sql, type SQL } from "drizzle-orm";
import type { Planned } from "../../../core/models/registry";
import type { ApiRecord, ReadContext } from "../../../core/rest/resource";
import { ident, linkTableName, tableName } from "../ddl";
import type { FieldRow } from "../field-types";
import type { Shape } from "./shape";

/** Nested forms of related objects, by type id and id. */
export type Nested = Map<number, Map<number, ApiRecord>>;

/** The models a read plans the forms of, by object type id (each with a SQL form of one object). */
export type PlannedTargets = Map<number, Planned>;

/** The object types a reference or multiobject field may point at. */
const typeIdsOf = (f: FieldRow): number[] =>
  f.isPolymorphic
    ? f.relatedObjectTypeIds
    : f.relatedObjectTypeId != null
      ? [f.relatedObjectTypeId]
      : [];

/**
 * Reference and multiobject fields whose targets' forms are planned per read: those pointing at
 * another custom object type or polymorphic. A host model's form is in the shape itself
 * (`Shape.embedded`): host models never change.
 */
export function plannableFields(shape: Shape): FieldRow[] {
  const { fields, storage, embedded } = shape;
  return fields.filter(
    (f) =>
      storage(f) !== "column" &&
      (f.isPolymorphic || !embedded.get(f.relatedObjectTypeId!)?.nestedSql?.selectOne),
  );
}

/** A planned model's form of the object `id` names (JSON text), or none. */
const formOne = (p: Planned | undefined, id: SQL): SQL | undefined => {
  const nested = p?.info.nestedSql;
  return (nested?.selectOneAliased ?? nested?.selectOne)?.(id);
};

/** The targets of `fields` that a read built on `ctx` may plan, by object type id. */
export function planTargets(ctx: ReadContext, fields: FieldRow[]): PlannedTargets {
  const planned: PlannedTargets = new Map();
  const seen = new Set<number>();
  for (const f of fields)
    for (const typeId of typeIdsOf(f)) {
      if (seen.has(typeId)) continue;
      seen.add(typeId);
      const found = ctx.services.models.plannedByObjectType(ctx, typeId);
      if (found && formOne(found, sql`0`)) planned.set(typeId, found);
    }
  return planned;
}

/** The labels of the planned types, by id (a polymorphic value's `object_type`). */
export const plannedLabels = (planned: PlannedTargets): Map<number, string> =>
  new Map([...planned].map(([typeId, p]) => [typeId, p.label]));

/**
 * The form (JSON text) of the object `id` names, for field `f`: its target's, or by the type
 * `type` names for a polymorphic field; null where no target of `f` is planned.
 */
function formOf(f: FieldRow, planned: PlannedTargets, id: SQL, type: SQL): SQL | null {
  const one = (typeId: number) => formOne(planned.get(typeId), id)!;
  if (!f.isPolymorphic)
    return planned.has(f.relatedObjectTypeId!) ? one(f.relatedObjectTypeId!) : null;
  const branches = f.relatedObjectTypeIds
    .filter((typeId) => planned.has(typeId))
    .map((typeId) => sql`WHEN ${typeId} THEN ${one(typeId)}`);
  return branches.length ? sql`CASE ${type} ${sql.join(branches, sql` `)} END` : null;
}

/**
 * A multiobject field's links as a column of its row: a JSON list of [target type, target id]
 * in the field's order, each with the target's nested form when `form` (over `l`) gives it.
 */
export function linksColumn(shape: Shape, f: FieldRow, form: SQL | null): SQL {
  const { cot } = shape;
  const withForm = form ? sql`, json(${form})` : sql``;
  return sql`(SELECT json_group_array(json_array(l.target_type, l.target_id${withForm})) FROM (SELECT target_type, target_id FROM ${ident(linkTableName(cot.id, f.id))} WHERE source_id = ${ident(tableName(cot.id))}.id ORDER BY position, target_id) l)`;
}

/**
 * The row statement's columns for the planned targets: a reference field's form (`__p_<name>`),
 * a multiobject field's links with their forms (`__l_<name>`, in place of the plain list).
 */
export function plannedColumns(
  shape: Shape,
  fields: FieldRow[],
  planned: PlannedTargets,
): Record<string, SQL> {
  const row = ident(tableName(shape.cot.id));
  const columns: Record<string, SQL> = {};
  for (const f of fields) {
    if (shape.storage(f) === "links") {
      const form = formOf(f, planned, sql`l.target_id`, sql`l.target_type`);
      if (form) columns[`__l_${f.name}`] = linksColumn(shape, f, form);
      continue;
    }
    const id = sql`${row}.${ident(`${f.name}_id`)}`;
    const type = f.isPolymorphic ? sql`${row}.${ident(`${f.name}_type`)}` : sql`NULL`;
    const form = formOf(f, planned, id, type);
    if (form) columns[`__p_${f.name}`] = form;
  }
  return columns;
}

/**
 * Adds to `into` the forms the planned columns of `rows` carried. A planned type's object with no
 * form is gone: `{id}`, as a read of it would have answered, so nothing is read for it after.
 */
export function plannedForms(
  ctx: ReadContext,
  shape: Shape,
  fields: FieldRow[],
  planned: PlannedTargets,
  rows: Record<string, any>[],
  into: Nested,
): void {
  const keep = (typeId: number | null, id: number | null, json: unknown) => {
    const target = typeId == null ? undefined : planned.get(typeId);
    if (!target || id == null) return;
    const forms = into.get(typeId!) ?? into.set(typeId!, new Map()).get(typeId!)!;
    if (forms.has(id)) return;
    const columns = typeof json === "string" ? JSON.parse(json) : json;
    forms.set(id, columns ? target.info.nestedSql!.build(ctx, id, columns) : { id });
  };
  for (const f of fields) {
    if (shape.storage(f) === "links") {
      const key = `__l_${f.name}`;
      for (const r of rows)
        for (const [type, id, columns] of JSON.parse(r[key] ?? "[]") as [
          number | null,
          number,
          Record<string, unknown> | null | undefined,
        ][])
          keep(type ?? f.relatedObjectTypeId, id, columns ?? null);
      continue;
    }
    const key = `__p_${f.name}`;
    for (const r of rows)
      if (key in r)
        keep(
          f.isPolymorphic ? r[`${f.name}_type`] : f.relatedObjectTypeId,
          r[`${f.name}_id`],
          r[key],
        );
  }
}
