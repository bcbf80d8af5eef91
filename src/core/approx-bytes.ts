/**
 * About how much memory a plain value holds (its texts' lengths, 8 for anything else): for caches
 * that must stay bounded in bytes whatever their entries hold (a record's long texts).
 */

/**
 * The approximate bytes of `value`, counted only until they pass `limit`: weighing a huge value
 * costs no more than weighing one of the limit's size.
 */
export function approxBytes(value: unknown, limit: number): number {
  let bytes = 0;
  const stack: unknown[] = [value];
  while (stack.length && bytes <= limit) {
    const v = stack.pop();
    if (typeof v === "string") bytes += v.length;
    else if (v && typeof v === "object") {
      bytes += 8;
      for (const [k, inner] of Object.entries(v)) {
        bytes += k.length;
        stack.push(inner);
      }
    } else bytes += 8;
  }
  return bytes;
}
