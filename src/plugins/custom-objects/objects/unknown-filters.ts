/**
 * Which parameters of a custom object list are refused rather than ignored (decision 0206): one
 * shaped like a filter (`<name>`, `<name>__<lookup>`) that names none of the type's filters.
 */
import { REQUEST_FILTER_NAMES } from "../../../core/changes/request-filters";
import type { ListSpec } from "../../../core/rest/query";
import type { Shape } from "./shape";

/** A field's name, with or without a lookup; `_` (a browser's cache-buster) and others are not. */
const FILTER_LIKE = /^[a-z][a-z0-9_]*$/i;

/**
 * Parameters that are no filters beyond those every list skips (`limit`, `offset`, `ordering`, `q`,
 * `brief`, `fields`, `omit`, `exclude`, `format`, `start`, `background`): NetBox's UI and export
 * parameters, which a link copied from the UI carries.
 */
const NOT_FILTERS = new Set(["return_url", "per_page", "page", "export", "sort"]);

/** The filters every type has, whatever its fields (`listSpec`). */
const BUILT_IN = new Set([
  ...["id", "created", "last_updated", "tag", "tag_id", "owner", "owner_id"],
  ...REQUEST_FILTER_NAMES,
]);

/**
 * The list's `refuses`: the message a filter-like parameter naming no filter of the type is
 * refused with, or false for a parameter that is no filter. Stricter than upstream, whose
 * django-filter filtersets ignore it and answer every row.
 */
export function refusesUnknownFilters(shape: Shape): NonNullable<ListSpec["refuses"]> {
  return (param) => {
    if (!FILTER_LIKE.test(param) || NOT_FILTERS.has(param)) return false;
    const sep = param.indexOf("__");
    const name = sep < 0 ? param : param.slice(0, sep);
    const field = shape.byName.get(name);
    if (field?.filterLogic === "disabled")
      return `Filtering by ${name} is disabled for this type (filter_logic); the request is refused rather than answered with every row.`;
    if (field || BUILT_IN.has(name))
      return sep < 0
        ? `${name} is not filtered this way; the request is refused rather than answered with every row.`
        : `Lookup "${param.slice(sep + 2)}" is not supported for ${name}.`;
    return `Unknown filter: ${shape.slug} has no field "${name}"; the request is refused rather than answered with every row.`;
  };
}
