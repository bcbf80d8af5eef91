/**
 * About how much memory a plain value holds (its texts' lengths, 8 for anything else): for caches
 * that must stay bounded in bytes whatever their entries hold (a record's long texts).
 */

/**
 * The approximate bytes of `value`, counted only until they pass `limit`: weighing a huge value
 * costs no more than weighing one of the limit's size. Arrays and objects are walked item by item
 * (never copied whole into entries): a JSON value of 200,000 items is read no further than the
 * limit (decision 0190).
 */
export function approxBytes(value: unknown, limit: number): number {
  let bytes = 0;
  const stack: object[] = [];
  const weigh = (v: unknown) => {
    if (typeof v === "string") bytes += v.length;
    else {
      bytes += 8;
      if (v && typeof v === "object") stack.push(v);
    }
  };
  weigh(value);
  while (stack.length && bytes <= limit) {
    const v = stack.pop()!;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length && bytes <= limit; i++) weigh(v[i]);
      continue;
    }
    for (const key in v) {
      if (bytes > limit) break;
      if (!Object.hasOwn(v, key)) continue;
      bytes += key.length;
      weigh((v as Record<string, unknown>)[key]);
    }
  }
  return bytes;
}
