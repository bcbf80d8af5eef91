/**
 * `approxBytes` weighs a value only until it passes the limit (decision 0190): a change record
 * whose JSON field held 200,000 items was weighed whole for the change log's cache of what it
 * answered, 0.2 s of held loop a record. Reads of the value are counted through a proxy.
 */
import { describe, expect, test } from "bun:test";
import { approxBytes } from "../../src/core/approx-bytes";

/** `value` behind a proxy that counts the properties read from it. */
function counted<T extends object>(value: T) {
  const reads = { n: 0 };
  const proxy = new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key === "string" && key !== "length") reads.n++;
      return Reflect.get(target, key, receiver);
    },
  });
  return { proxy, reads };
}

describe("approxBytes stops at its limit", () => {
  test("a long array is read only as far as the limit", () => {
    const { proxy, reads } = counted(Array.from({ length: 200_000 }, () => 0));
    expect(approxBytes({ data: proxy }, 1_000)).toBeGreaterThan(1_000);
    expect(reads.n).toBeLessThan(1_000);
  });

  test("an object of many keys is read only as far as the limit", () => {
    const { proxy, reads } = counted(
      Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, i])),
    );
    expect(approxBytes([proxy], 1_000)).toBeGreaterThan(1_000);
    expect(reads.n).toBeLessThan(1_000);
  });

  test("below the limit: texts and object keys by length, 8 for anything else", () => {
    expect(approxBytes("abc", 100)).toBe(3);
    expect(approxBytes({ ab: "xyz", n: 1, list: [1, "q", null] }, 100)).toBe(
      8 + 2 + 3 + 1 + 8 + 4 + 8 + 8 + 1 + 8,
    );
  });
});
