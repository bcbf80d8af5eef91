/**
 * Date and datetime values as written: the calendar check agrees with JavaScript's own calendar
 * on every spelling of two centuries, and datetimes are normalised to UTC with one error message.
 */
import { describe, expect, test } from "bun:test";
import { fieldType } from "../../src/plugins/custom-objects/field-types";
import { isValidDate } from "../../src/plugins/custom-objects/field-types/date";

/** What `Date` itself accepts: the day must come back unchanged. */
const byDate = (s: string) => {
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s;
};
const pad = (n: number, w: number) => String(n).padStart(w, "0");

describe("date", () => {
  test("a day is valid exactly when JavaScript's calendar keeps it (years 1599–1601, 1899–2101, 0000 and 9999)", () => {
    const years = [
      0,
      4,
      100,
      1599,
      1600,
      1601,
      ...Array.from({ length: 203 }, (_, i) => 1899 + i),
      9996,
      9999,
    ];
    let valid = 0;
    for (const y of years)
      for (let m = 0; m <= 13; m++)
        for (let d = 0; d <= 32; d++) {
          const s = `${pad(y, 4)}-${pad(m, 2)}-${pad(d, 2)}`;
          expect([s, isValidDate(s)]).toEqual([s, byDate(s)]);
          if (byDate(s)) valid++;
        }
    expect(valid).toBeGreaterThan(70_000); // the loop saw real days, not only refusals
    for (const s of ["2024-2-29", "2024-02-29T00:00:00Z", " 2024-02-29", "20240229", "2024-02-29 "])
      expect(isValidDate(s)).toBe(false);
  });

  test("the encoder answers the field's message", () => {
    expect(
      fieldType("date").encode({ name: "d", type: "date" } as never, "2023-02-29", null),
    ).toEqual({ error: "Date has wrong format. Use one of these formats instead: YYYY-MM-DD." });
    expect(
      fieldType("date").encode({ name: "d", type: "date" } as never, "2024-02-29", null),
    ).toEqual({ value: "2024-02-29" });
  });
});

describe("datetime", () => {
  const encode = (raw: unknown) =>
    fieldType("datetime").encode({ name: "t", type: "datetime" } as never, raw, null);
  test("stored as the UTC instant, whatever offset or precision it was written with", () => {
    expect(encode("2025-06-01T12:30:00+02:00")).toEqual({ value: "2025-06-01T10:30:00.000Z" });
    expect(encode("2025-06-01 12:30+0530")).toEqual({ value: "2025-06-01T07:00:00.000Z" });
    expect(encode("2025-06-01T10:30:00.123456789Z")).toEqual({ value: "2025-06-01T10:30:00.123Z" });
    expect(encode("2025-06-01T10:30")).toEqual({ value: "2025-06-01T10:30:00.000Z" });
  });
  test("anything else is refused with one message", () => {
    for (const raw of [
      "2025-06-01",
      "2025-13-01T00:00Z",
      "2025-06-01T25:00Z",
      "yesterday",
      12,
      null,
    ]) {
      expect(encode(raw)).toEqual({
        error:
          "Datetime has wrong format. Use ISO 8601 (YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z]).",
      });
    }
  });
});
