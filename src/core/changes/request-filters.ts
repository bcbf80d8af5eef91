/**
 * NetBox's `ChangeLoggedModelFilterSet` request filters over Host's change log (decision 0215):
 * `created_by_request`, `updated_by_request` and `modified_by_request` match the objects of one
 * type that a request created, updated, or either. SQL over `object_changes` (its request index),
 * ANDed with the list's own conditions: it narrows the rows the caller may view, never adds any.
 */
import { sql, type SQLWrapper } from "drizzle-orm";
import { inJsonList } from "../../db/d1-limits";
import { ValidationError } from "../errors";
import { type FilterSpec, oneValue } from "../rest/query";

const ACTIONS = {
  created_by_request: ["create"],
  updated_by_request: ["update"],
  modified_by_request: ["create", "update"],
} as const;

type RequestFilterName = keyof typeof ACTIONS;

/** The filters' names, for lists that take them only when NetBox's filterset has them. */
export const REQUEST_FILTER_NAMES = Object.keys(ACTIONS) as RequestFilterName[];

/** An object type given by id (custom objects) or by app label and model (host models). */
export type ChangedType = { objectTypeId: number | null } | { appLabel: string; model: string };

/**
 * The UUID `raw` names, lower case with hyphens, as Django's `forms.UUIDField` reads a filter
 * value (`uuid.UUID(hex)`: surrounding blanks, `urn:` / `uuid:`, braces and hyphens dropped, then
 * 32 hex digits), or null.
 */
function parseUuid(raw: string): string | null {
  const hex = raw
    .trim()
    .replaceAll("urn:", "")
    .replaceAll("uuid:", "")
    .replace(/^[{}]+|[{}]+$/g, "")
    .replaceAll("-", "")
    .toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(hex)) return null;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The spellings of one request id a change record may hold: Host's own ids are lower case with
 * hyphens (as NetBox's); an `X-Request-Id` a client sent is kept as sent (upper case, or the 32
 * digits alone).
 */
const spellingsOf = (uuid: string) => {
  const bare = uuid.replaceAll("-", "");
  return [uuid, uuid.toUpperCase(), bare, bare.toUpperCase()];
};

/** `created_by_request`, `updated_by_request`, `modified_by_request` over objects `id` of `type`. */
export function requestFilters(
  id: SQLWrapper,
  type: ChangedType,
): Record<RequestFilterName, FilterSpec> {
  // `+`: the type is no index's key here, so the request's index is the one SQLite searches (the
  // type's would read every change of every object of the type)
  const ofType =
    "objectTypeId" in type
      ? sql`+oc.changed_object_type_id = ${type.objectTypeId}`
      : sql`+oc.changed_object_type_id = (SELECT ot.id FROM object_types ot WHERE ot.app_label = ${type.appLabel} AND ot.model = ${type.model})`;
  const filter = (name: RequestFilterName): FilterSpec => ({
    kind: "string",
    expr: id,
    lookups: ["exact"],
    oneValue: ["exact"],
    description: `objects a request (its UUID, as \`X-Request-Id\` answers it) ${ACTIONS[name].map((a) => `${a}d`).join(" or ")}`,
    build: (_lookup, values) => {
      const uuid = parseUuid(oneValue(name, values));
      if (!uuid) throw new ValidationError({ [name]: ["Enter a valid UUID."] });
      const actions = sql.join(
        ACTIONS[name].map((a) => sql`${a}`),
        sql`, `,
      );
      // an id list, not a correlated EXISTS: read once through the request's index (a request
      // changes few objects), then the list's rows found by id, whatever the list's size
      return sql`${id} IN (SELECT oc.changed_object_id FROM object_changes oc WHERE ${inJsonList(sql`oc.request_id`, spellingsOf(uuid))} AND oc.action IN (${actions}) AND ${ofType})`;
    },
  });
  return {
    created_by_request: filter("created_by_request"),
    updated_by_request: filter("updated_by_request"),
    modified_by_request: filter("modified_by_request"),
  };
}
