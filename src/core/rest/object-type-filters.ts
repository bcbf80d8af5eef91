/**
 * List filters for a generic reference's object type column: `<name>_id=<id>` and
 * `<name>=<app_label>.<model>` (the `custom-objects` alias included), as NetBox filtersets have.
 */
import { sql, type SQL, type SQLWrapper } from "drizzle-orm";
import { inJsonList } from "../../db/d1-limits";
import { ValidationError } from "../errors";
import { parseLabel } from "../object-types";
import type { FilterSpec } from "./query";

export function objectTypeFilters(name: string, column: SQLWrapper): Record<string, FilterSpec> {
  return { [`${name}_id`]: { kind: "number", expr: column }, [name]: labelFilter(name, column) };
}

/** `<name>=<app_label>.<model>`: among the types `seen` admits, when given (decision 0187). */
function labelFilter(
  name: string,
  column: SQLWrapper,
  seen?: (appLabel: SQLWrapper, model: SQLWrapper) => SQL | undefined,
): FilterSpec {
  const shown = seen?.(sql.raw("app_label"), sql.raw("model"));
  return {
    kind: "string",
    expr: column,
    lookups: ["exact", "n"],
    build: (lookup, values) => {
      const labels = values.map((v) => {
        const parts = parseLabel(v.trim());
        if (!parts)
          throw new ValidationError({
            [lookup === "n" ? `${name}__n` : name]: [`Expected "<app_label>.<model>", got "${v}".`],
          });
        return `${parts.appLabel}.${parts.model}`;
      });
      // the labels are one JSON list: one bound value, one text for any number (decision 0188);
      // neither part holds a dot (`parseLabel`), so the joined label names one type
      const listed = inJsonList(sql`app_label || '.' || model`, labels);
      const named = shown ? sql`${listed} AND (${shown})` : listed;
      const match: SQL = sql`${column} IN (SELECT id FROM object_types WHERE ${named})`;
      return lookup === "n" ? sql`NOT (${match})` : match;
    },
    seenTypes: seen ? undefined : (sight) => labelFilter(name, column, sight),
  };
}
