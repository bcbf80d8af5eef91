/** Names and patterns of the custom objects plugin (§5); field types live in `field-types/`. */
import { PROTOTYPE_NAMES } from "../../core/limits";

export const NAME_RE = /^[a-z0-9]+(_[a-z0-9]+)*$/;
export const SLUG_RE = /^[-a-zA-Z0-9_]+$/;

/** The table of a custom object type (`ddl.ts` builds it; the search index names it too). */
export const tableName = (cotId: number) => `co_${Math.trunc(cotId)}`;

/** Fixed route names under the plugin base; a COT cannot take one as its slug. */
export const RESERVED_SLUGS = new Set([
  "custom-object-types",
  "custom-object-type-fields",
  "linked-objects",
  "schema",
  "api",
  "docs",
]);

/**
 * Keys an instance record always has, and JavaScript prototype names (`constructor`, …);
 * a field cannot be called like one. Compare with `isReservedFieldName`.
 */
const RESERVED_FIELD_NAMES = new Set([
  ...PROTOTYPE_NAMES,
  "id",
  "pk",
  "url",
  "display",
  "display_url",
  "created",
  "last_updated",
  "tags",
  "custom_object_type",
  "custom_object_type_id",
  "object_type",
  "fields",
  "brief",
  "limit",
  "offset",
  "ordering",
  "q",
  "omit",
  "format",
  "local_context_data",
]);

/** Reserved names are compared in lower case (`toString` is refused as well as `tostring`). */
export const isReservedFieldName = (name: string) => RESERVED_FIELD_NAMES.has(name.toLowerCase());

export const ON_DELETE = ["set_null", "cascade", "protect"] as const;
export const FILTER_LOGIC = ["disabled", "loose", "exact"] as const;
export const UI_VISIBLE = ["always", "if-set", "hidden"] as const;
export const UI_EDITABLE = ["yes", "no", "hidden"] as const;

/** Host apps whose objects a field can point at (users, tokens and the like cannot be linked). */
export const LINKABLE_APPS: readonly string[] = ["dcim", "ipam", "tenancy", "extras"];

export const APP_LABEL = "custom_objects";
/** Upstream's app label for custom objects, as its clients send it. */
export const upstreamAppLabel = (appLabel: unknown) =>
  appLabel === "netbox_custom_objects" ? APP_LABEL : appLabel;
export const COT_MODEL = "customobjecttype";
export const FIELD_MODEL = "customobjecttypefield";
export const API_BASE = "plugins/custom-objects";
