/**
 * NetBox's natural ordering: names sort with their numbers compared as numbers ("Site 2" before
 * "Site 10"), through a stored key in which every run of digits is padded to a fixed width.
 */

/** Digits a number may have and still sort as a number (NetBox's `integer_places`). */
const INTEGER_PLACES = 8;
/** Length of the stored key (NetBox's `max_length`). */
const MAX_LENGTH = 100;

/**
 * The sort key of `value`: lower-cased (NetBox's database collation orders names without regard
 * to case), each run of digits left-padded with zeros to eight places.
 * @example naturalize("Site 2") < naturalize("Site 10") // "site 00000002" < "site 00000010"
 */
export function naturalize(value: string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  return value
    .toLowerCase()
    .replace(/\d+/g, (digits) => digits.padStart(INTEGER_PLACES, "0"))
    .slice(0, MAX_LENGTH);
}
