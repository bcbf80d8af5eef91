/**
 * Input limits of the API, in one place (docs/decisions/0009-input-limits.md). Each one turns
 * input that would otherwise reach SQLite or the JSON parser's stack as a 500 into a 400 that
 * names the limit.
 */

/** Values one filter parameter may carry (`?id=1&id=2…`); SQLite refuses very deep expressions. */
export const MAX_FILTER_VALUES = 100;

/** Distinct filter parameters in one list request. */
export const MAX_FILTER_PARAMS = 50;

/** Terms in `?ordering=`. */
export const MAX_ORDERING_TERMS = 10;

/** Characters of one numeric filter value (`?id=`, `?count__gt=`); longer is not a number we store. */
export const MAX_NUMBER_LENGTH = 32;

/**
 * `offset` and `limit` above this answer 400 (a `limit` between 1000 and this is still capped
 * to the maximum page, as NetBox does). Far beyond any table here, and small enough that page
 * link arithmetic stays exact.
 */
export const MAX_PAGING_VALUE = 1_000_000_000_000;

/** Nesting of arrays and objects in a JSON request body. */
export const MAX_JSON_DEPTH = 64;

/**
 * Columns of one custom object type's table, not counting `id`, `created` and `last_updated`:
 * a field takes one, a polymorphic object field two, a multiobject field one (its link table).
 * SQLite refuses tables above 2,000 columns, and wide rows get slow long before that.
 */
export const MAX_COLUMNS_PER_TYPE = 500;

/**
 * Names a custom object field may not take: the keys of `Object.prototype` and `Function`
 * that match the field name pattern, and the rest of the JavaScript prototype names so the
 * list reads as a whole (compared in lower case).
 */
export const PROTOTYPE_NAMES: readonly string[] = [
  "__proto__",
  "constructor",
  "prototype",
  "tostring",
  "tolocalestring",
  "valueof",
  "hasownproperty",
  "isprototypeof",
  "propertyisenumerable",
  "__definegetter__",
  "__definesetter__",
  "__lookupgetter__",
  "__lookupsetter__",
];
