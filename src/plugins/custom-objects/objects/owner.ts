/**
 * Every custom object's `owner` (NetBox 4.5, as upstream serves it): a nullable reference to an
 * owner kept in the `owner__id` column of each type's table, read in nested form, written as an
 * id, `{id}` or null, filtered by `owner_id`, `owner`, `owner_group_id` and `owner_group`, and a
 * relation, so permission constraints (`owner__name`) and GraphQL follow it. A type with a field
 * of its own named `owner` keeps that field instead (upstream does the same).
 */
import { ownerFilters } from "../../../core/auth/owners";
import type { ErrorCollector } from "../../../core/errors";
import type { FilterSpec } from "../../../core/rest/query";
import type { ApiRecord, ReadContext, Resource } from "../../../core/rest/resource";
import { OWNER_COLUMN, ownerAvailable } from "../ddl";
import type { Shape } from "./shape";

export const hasOwner = (shape: Pick<Shape, "fields">) => ownerAvailable(shape.fields);

/** The owner filters of a type's list spec (none when a field is named `owner`). */
export function ownerListFilters(shape: Shape): Record<string, FilterSpec> {
  if (!hasOwner(shape)) return {};
  const col = shape.column(OWNER_COLUMN);
  return { owner_id: { kind: "number", expr: col }, ...ownerFilters(col) };
}

/** Declares the owner on a type's resource: a relation (constraints, GraphQL) and its description. */
export function declareOwner(shape: Shape, resource: Resource) {
  if (!hasOwner(shape)) return;
  resource.relations = [
    ...(resource.relations ?? []),
    { name: "owner", target: "users.owner", expr: shape.column(OWNER_COLUMN) },
  ];
  resource.describe = [...(resource.describe ?? []), { name: "owner", kind: "relation" }];
}

/**
 * The owners of these rows in nested form, fetched once: a function giving each row's `owner`
 * (null when the type has none: `hasOwner` says whether the record shows the key).
 */
export async function ownerReader(
  ctx: ReadContext,
  shape: Shape,
  rows: Record<string, any>[],
): Promise<(row: Record<string, any>) => ApiRecord | null> {
  if (!hasOwner(shape)) return () => null;
  const ids = [
    ...new Set(rows.map((r) => r[OWNER_COLUMN]).filter((v): v is number => typeof v === "number")),
  ];
  const info = ids.length ? await ctx.services.models.get("users", "owner", ctx) : null;
  const nested = info ? await info.nested(ctx, ids) : new Map<number, ApiRecord>();
  return (row) => {
    const id = row[OWNER_COLUMN];
    return id == null ? null : (nested.get(id) ?? { id });
  };
}

/** Converts a written `owner` (id, `{id}` or null) into `values`; errors are keyed `owner`. */
export async function writeOwner(
  shape: Shape,
  input: ApiRecord,
  values: Record<string, unknown>,
  errors: ErrorCollector,
  /** Whether the owner exists and the writer may view it (decision 0064: else "not found"). */
  viewable: (id: number) => Promise<boolean>,
) {
  if (!hasOwner(shape)) return;
  if (!Object.hasOwn(input, "owner")) return;
  const raw = input.owner;
  if (raw === null) {
    values[OWNER_COLUMN] = null;
    return;
  }
  const id =
    raw && typeof raw === "object" && !Array.isArray(raw)
      ? (raw as Record<string, unknown>).id
      : raw;
  if (typeof id !== "number" || !Number.isInteger(id)) {
    errors.add("owner", "Incorrect type. Expected pk value.");
    return;
  }
  if (!(await viewable(id)))
    errors.add("owner", `Related object not found using the provided numeric ID: ${id}`);
  else values[OWNER_COLUMN] = id;
}
