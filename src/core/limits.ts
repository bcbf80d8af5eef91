/**
 * Input limits of the API, in one place (docs/decisions/0009-input-limits.md). Each one turns
 * input that would otherwise reach SQLite or the JSON parser's stack as a 500 into a 400 that
 * names the limit.
 */

/** Values one filter parameter may carry (`?id=1&id=2…`); SQLite refuses very deep expressions. */
export const MAX_FILTER_VALUES = 100;

/** Distinct filter parameters in one list request. */
export const MAX_FILTER_PARAMS = 50;

/**
 * Names in `?fields=` or in `?omit=` (decision 0190), however many times the parameter repeats:
 * each is looked for in every row of a page, and a real server takes queries of 16 KB.
 */
export const MAX_PROJECTION_NAMES = 1_000;

/**
 * References one multiobject value may hold in a write (decision 0190): each is resolved, looked
 * up and linked in the request, and every read of the object carries their nested forms.
 */
export const MAX_LINKS_PER_VALUE = 1_000;

/**
 * Tags one `tags`, `add_tags` or `remove_tags` list may name in a write (decision 0196): each is
 * looked up (in a transaction, two statements each); 150,000 ids in a 1 MiB body held the loop
 * ~190 ms. Far above the tags any object holds.
 */
export const MAX_TAGS_PER_VALUE = 1_000;

/** The error of a tag list past `MAX_TAGS_PER_VALUE`, as a multiobject value's past its own. */
export const TOO_MANY_TAGS_MESSAGE = `Ensure this field has no more than ${MAX_TAGS_PER_VALUE} elements.`;

/**
 * Characters of a custom object's `display` (decision 0196), its display expression rendered or
 * its primary field's value, cut with "…": every nested form of the object carries it, and a
 * link is weighed at 100 bytes in the response budget. An expression repeating a 64 KiB field
 * made one object's display 6.6 MB, and an object of 1,000 links a 65 MB answer.
 */
export const MAX_DISPLAY_CHARS = 256;

/** Terms in `?ordering=`. */
export const MAX_ORDERING_TERMS = 10;

/**
 * Characters of one text filter value or `?q=` (decision 0179). SQLite refuses a LIKE pattern
 * over 50,000 bytes; at most 4 bytes a character (2 for an escaped `%`, `_` or `\\`) this stays
 * under it.
 */
export const MAX_FILTER_TEXT_CHARS = 10_000;

/** Characters of one numeric filter value (`?id=`, `?count__gt=`); longer is not a number we store. */
export const MAX_NUMBER_LENGTH = 32;

/**
 * `offset` and `limit` above this answer 400 (a `limit` between 1000 and this is still capped
 * to the maximum page, as NetBox does). Far beyond any table here, and small enough that page
 * link arithmetic stays exact.
 */
export const MAX_PAGING_VALUE = 1_000_000_000_000;

/**
 * Values in a GraphQL request's variables (commas between items and members, the whole JSON body
 * counted; decision 0196): graphql-js coerces every variable before a resolver can refuse it, and
 * a list of 100,000 ids held the loop ~50–100 ms. Filters take at most `MAX_FILTER_VALUES` anyway.
 */
export const MAX_GRAPHQL_VALUES = 1_000;

/** Nesting of arrays and objects in a JSON request body. */
export const MAX_JSON_DEPTH = 64;

/**
 * Columns of one custom object type's table, not counting `id`, `created` and `last_updated`:
 * a field takes one, a polymorphic object field two, a multiobject field one (its link table).
 * SQLite refuses tables above 2,000 columns, and wide rows get slow long before that.
 */
export const MAX_COLUMNS_PER_TYPE = 500;

/**
 * Multiobject fields of one custom object type: each adds a column to its read statement (a
 * subquery over its link table, some 200 bytes of SQL), which D1 takes at most 100,000 bytes of;
 * kept on every backend, as D1's statement limits are (decisions 0184, 0192).
 */
export const MAX_LINK_FIELDS_PER_TYPE = 300;

/**
 * Characters of one short text value: custom object `text` and `url` fields (decision 0068).
 * Far above a name or a note; a page of 1,000 such rows stays within the response budget's reach.
 */
export const MAX_TEXT_CHARS = 65_536;

/** Characters of one long text value: custom object `longtext`, host models' `comments`. */
export const MAX_LONGTEXT_CHARS = 1_048_576;

/** Characters of one JSON value, measured on its JSON text as stored. */
export const MAX_JSON_CHARS = 1_048_576;

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

/**
 * True when `s` holds a C0 control character (NUL, tab, newline, …) or DEL. Filter and search
 * values carrying one answer 400 (decision 0068): SQLite's full-text syntax ends a phrase at NUL,
 * and no name, slug or search term holds such characters.
 */
export function hasControlCharacter(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    if (ch < 0x20 || ch === 0x7f) return true;
  }
  return false;
}

/** The message filters and searches answer for a value with a control character. */
export const CONTROL_CHARACTER_MESSAGE =
  "Control characters (such as NUL or newline) are not allowed in filters and searches.";

/**
 * Bytes of the later change records' snapshots a revert reviews (decision 0193): within it, a
 * field changed again since names the records that touched it; past it, none of them is read
 * (their size is summed in SQL from the rows' headers) and the conflict names none.
 */
export const MAX_REVERT_REVIEW_BYTES = 4_194_304;

/**
 * Characters of one event rule's `conditions`, as JSON text: the conditions are matched on every
 * write of the types the rule watches (`in` lists included), so their size bounds that work.
 */
export const MAX_CONDITIONS_CHARS = 16_384;
