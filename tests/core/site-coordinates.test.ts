/**
 * A site's latitude and longitude take what NetBox 4.7's serializer takes (DRF's `DecimalField`
 * over `Decimal()`: exponents, blanks around, `_`) and refuse what it refuses, in its words, its
 * checks in its order, the model's range validators worded as DRF words them (decision 0215).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { userWith } from "../helpers/grants";

let t: TestApp;
let site = 0;
beforeAll(async () => {
  t = await makeTestApp();
  const made = await t.json("POST", "/api/dcim/sites/", { body: { name: "geo", slug: "geo" } });
  site = made.body.id;
});
afterAll(() => t.close());

const patch = (body: Record<string, unknown>, token?: string) =>
  t.json("PATCH", `/api/dcim/sites/${site}/`, { body, token });

describe("site coordinates, as DRF's DecimalField takes them", () => {
  test("any spelling Python's Decimal() reads is taken, as its number", async () => {
    for (const [sent, stored] of [
      ["1e1", 10],
      ["1E+1", 10],
      [" 12.5 ", 12.5],
      ["\t-33.8688\n", -33.8688],
      ["+.5e1", 5],
      ["5.", 5],
      ["1.e1", 10],
      ["125e-1", 12.5],
      ["0.000001", 0.000001],
      ["1_2.5", 12.5],
      ["-0", 0],
      ["90", 90],
      ["-90.000000", -90],
      ["00.10", 0.1],
      [1e-6, 0.000001],
      [-90, -90],
    ] as const) {
      const r = await patch({ latitude: sent });
      expect({ sent, status: r.status, latitude: r.body.latitude }).toEqual({
        sent,
        status: 200,
        latitude: stored,
      });
    }
    const r = await patch({ longitude: "1.8e2" });
    expect([r.status, r.body.longitude]).toEqual([200, 180]);
    const blank = await patch({ latitude: "   ", longitude: null });
    expect([blank.status, blank.body.latitude, blank.body.longitude]).toEqual([200, null, null]);
  });

  test("what DRF refuses, with its message, its checks in its order", async () => {
    for (const [body, message] of [
      [{ latitude: "NaN" }, "A valid number is required."],
      [{ latitude: "sNaN" }, "A valid number is required."],
      [{ latitude: "Infinity" }, "A valid number is required."],
      [{ longitude: "-inf" }, "A valid number is required."],
      [{ latitude: "1e" }, "A valid number is required."],
      [{ latitude: "1 2" }, "A valid number is required."],
      [{ latitude: "0x10" }, "A valid number is required."],
      [{ latitude: "1e1.5" }, "A valid number is required."],
      [{ latitude: [1] }, "A valid number is required."],
      [{ latitude: "1e9999999999999999999" }, "A valid number is required."],
      [{ latitude: "1".repeat(1001) }, "String value too large."],
      // digits in all before places before whole digits, as `validate_precision` checks them
      [{ latitude: "1e999999999" }, "Ensure that there are no more than 8 digits in total."],
      [{ latitude: "0e8" }, "Ensure that there are no more than 8 digits in total."],
      [{ latitude: "123.123456" }, "Ensure that there are no more than 8 digits in total."],
      [{ latitude: "1.1234567" }, "Ensure that there are no more than 6 decimal places."],
      [{ latitude: "0.0000000" }, "Ensure that there are no more than 6 decimal places."],
      [{ latitude: "1e-7" }, "Ensure that there are no more than 6 decimal places."],
      [
        { latitude: "123.5" },
        "Ensure that there are no more than 2 digits before the decimal point.",
      ],
      [
        { latitude: "1e2" },
        "Ensure that there are no more than 2 digits before the decimal point.",
      ],
      [
        { longitude: "1000" },
        "Ensure that there are no more than 3 digits before the decimal point.",
      ],
      // then the model's validators, their bounds as Python prints a Decimal
      [{ latitude: "9.1e1" }, "Ensure this value is less than or equal to 90.0."],
      [{ latitude: "-90.000001" }, "Ensure this value is greater than or equal to -90.0."],
      [{ longitude: "180.000001" }, "Ensure this value is less than or equal to 180.0."],
      [{ longitude: -181 }, "Ensure this value is greater than or equal to -180.0."],
    ] as const) {
      const r = await patch(body);
      const key = Object.keys(body)[0]!;
      expect({ body, status: r.status, errors: r.body }).toEqual({
        body,
        status: 400,
        errors: { [key]: [message] },
      });
    }
  });

  test("bulk and create paths read the same spellings", async () => {
    const made = await t.json("POST", "/api/dcim/sites/", {
      body: [
        { name: "geo e", slug: "geo-e", latitude: "4.15e1", longitude: " -7525e-2 " },
        { name: "geo f", slug: "geo-f", latitude: "1e-3" },
      ],
    });
    expect(made.status).toBe(201);
    expect(made.body.map((s: any) => [s.latitude, s.longitude])).toEqual([
      [41.5, -75.25],
      [0.001, null],
    ]);
    const bulk = await t.json("PATCH", "/api/dcim/sites/", {
      body: [{ id: made.body[1].id, latitude: "NaN" }],
    });
    expect(bulk.status).toBe(400);
    expect(JSON.stringify(bulk.body)).toContain("A valid number is required.");
  });

  test("a spelling cannot carry a value past a caller's constraints", async () => {
    const { token } = await userWith(t, "geo-editor", [
      [["view", "change"], "dcim.site", { latitude__lt: 50 }],
    ]);
    expect((await patch({ latitude: "4e1" })).status).toBe(200);
    const inside = await patch({ latitude: "4.5e1" }, token);
    expect([inside.status, inside.body.latitude]).toEqual([200, 45]);
    const outside = await patch({ latitude: "6e1" }, token);
    expect(outside.status).toBe(403);
    const read = await t.json("GET", `/api/dcim/sites/${site}/`);
    expect(read.body.latitude).toBe(45);
  });
});
