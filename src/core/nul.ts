/**
 * NUL characters in written text (decision 0124): the database driver keeps a text only up to
 * its first NUL, so a value that would be stored with one is refused, never silently cut.
 */

/** What a refused value answers (Django's ProhibitNullCharactersValidator). */
export const NUL_MESSAGE = "Null characters are not allowed.";

const holdsNul = (s: string) => s.includes("\0");

/**
 * The paths (`$.a[0].b`) of the strings and object keys in `value` that hold a NUL, at most
 * `limit`. `skip(path)` leaves out a subtree whose value is stored as JSON text, which escapes
 * the NUL (`\u0000`) and keeps it. Walked with a stack: no nesting depth overflows it.
 */
export function nulPaths(
  value: unknown,
  skip?: (path: string) => boolean,
  limit = 20,
  root = "$",
): string[] {
  const found: string[] = [];
  const stack: [unknown, string][] = [[value, root]];
  while (stack.length && found.length < limit) {
    const [node, path] = stack.pop()!;
    if (skip?.(path)) continue;
    if (typeof node === "string") {
      if (holdsNul(node)) found.push(path);
    } else if (node && typeof node === "object") {
      const entries = Object.entries(node);
      // pushed last first, so paths come out in document order
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, item] = entries[i]!;
        const at = Array.isArray(node) ? `${path}[${key}]` : pathOf(path, key);
        if (!Array.isArray(node) && holdsNul(key)) found.push(at);
        else stack.push([item, at]);
      }
    }
  }
  return found;
}

/**
 * `nulPaths` in steps: each item of a top-level list (a schema document's 1,000 types) is walked
 * on its own, a `yield` before it where the caller may give the event loop a turn (decision 0210).
 * The same paths in the same order: an object's keys holding a NUL first (last key first), as
 * `nulPaths` finds them when it opens the object, then its members in order.
 */
export function* nulPathsInSteps(
  value: unknown,
  skip?: (path: string) => boolean,
  limit = 20,
): Generator<void, string[]> {
  if (!value || typeof value !== "object" || Array.isArray(value) || skip?.("$"))
    return nulPaths(value, skip, limit);
  const found: string[] = [];
  const entries = Object.entries(value);
  for (let i = entries.length - 1; i >= 0; i--)
    if (holdsNul(entries[i]![0])) found.push(pathOf("$", entries[i]![0]));
  for (const [key, item] of entries) {
    if (found.length >= limit) break;
    if (holdsNul(key)) continue;
    const at = pathOf("$", key);
    if (!Array.isArray(item) || skip?.(at)) {
      found.push(...nulPaths(item, skip, limit - found.length, at));
      continue;
    }
    for (const [k, element] of item.entries()) {
      if (found.length >= limit) break;
      yield;
      found.push(...nulPaths(element, skip, limit - found.length, `${at}[${k}]`));
    }
  }
  return found;
}

/** JSON-path spelling of `key` under `path`: `.name`, or `["odd key"]`. */
function pathOf(path: string, key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key)
    ? `${path}.${key}`
    : `${path}[${JSON.stringify(key)}]`;
}

/**
 * The §4 field errors of one written object: each top-level key whose value holds a NUL,
 * except the keys in `jsonFields` (stored as JSON text, where a NUL survives).
 */
export function nulFieldErrors(
  input: unknown,
  jsonFields: ReadonlySet<string> = new Set(),
): Record<string, string[]> {
  const errors: Record<string, string[]> = Object.create(null);
  if (!input || typeof input !== "object" || Array.isArray(input)) return errors;
  for (const [key, value] of Object.entries(input)) {
    if (jsonFields.has(key) && !holdsNul(key)) continue;
    if (holdsNul(key) || nulPaths(value, undefined, 1).length) errors[key] = [NUL_MESSAGE];
  }
  return errors;
}
