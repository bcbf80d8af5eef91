/** A custom object type's list spec: filters (each field type's lookups, tags), ordering, `q`. */
import type { SQLWrapper } from "drizzle-orm";
import { requestFilters } from "../../../core/changes/request-filters";
import { tagFilters } from "../../../core/models/define";
import type { FilterSpec, ListSpec, SearchTerm } from "../../../core/rest/query";
import { ident, linkTableName, valueColumn } from "../ddl";
import type { TypeKey } from "../field-types";
import type { Shape } from "./shape";
import { ownerListFilters } from "./owner";
import { refusesUnknownFilters } from "./unknown-filters";

/** @param typeKeys key and label by object type id, for polymorphic per-type filters. */
export function listSpec(
  shape: Shape,
  typeKeys: ReadonlyMap<number, TypeKey> = new Map(),
): ListSpec {
  const { cot, fields, table, column, moduleOf } = shape;
  const filters: Record<string, FilterSpec> = {
    id: { kind: "number", expr: table.id },
    created: { kind: "datetime", expr: table.created },
    last_updated: { kind: "datetime", expr: table.lastUpdated },
    ...requestFilters(table.id, { objectTypeId: cot.objectTypeId }),
    ...tagFilters(table.id, { objectTypeId: cot.objectTypeId }),
  };
  const orderings: Record<string, SQLWrapper> = {
    id: table.id,
    created: table.created,
    last_updated: table.lastUpdated,
  };
  const search: SearchTerm[] = [];
  for (const f of fields) {
    if (f.filterLogic === "disabled") continue;
    const m = moduleOf.get(f)!;
    const own = valueColumn(f);
    const col = own ? column(own) : table.id;
    Object.assign(
      filters,
      m.filters(f, {
        column: col,
        columnNamed: column,
        id: table.id,
        linkTable: ident(linkTableName(cot.id, f.id)),
        typeKey: (id) => typeKeys.get(id),
      }),
    );
    if (m.orderable) orderings[f.name] = col;
    if (f.searchWeight > 0 && m.searchable) search.push(m.search ? m.search(col) : col);
  }
  Object.assign(filters, ownerListFilters(shape));
  return {
    filters,
    orderings,
    defaultOrdering: ["id"],
    search,
    idExpr: table.id,
    refuses: refusesUnknownFilters(shape),
  };
}
