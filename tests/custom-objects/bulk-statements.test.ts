/**
 * What a bulk create builds once per type instead of per row (issue 28): the multi-row INSERT
 * repeated from Drizzle's one-row statement must be the statement Drizzle writes for those rows,
 * and each field's encoder must answer exactly what `encodeScalar` answers, valid or not.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { makeTestApp, type TestApp } from "../helpers/app";
import { customObjectTypeFields, customObjectTypes } from "../../src/db/schema/custom-objects";
import { shapeOf } from "../../src/plugins/custom-objects/objects/shape";
import { reader } from "../../src/plugins/custom-objects/objects/read";
import { ObjectWriter, repeatRows } from "../../src/plugins/custom-objects/objects/write";
import { encodeScalar, scalarEncoder } from "../../src/plugins/custom-objects/objects/values";
import type { FieldLike } from "../../src/plugins/custom-objects/field-types";
import { textLike } from "../../src/plugins/custom-objects/field-types/text";
import * as v from "valibot";
import { addField, choiceSet, makeCot } from "./fixtures";

let t: TestApp;

beforeAll(async () => {
  t = await makeTestApp();
});
afterAll(() => t.close());

async function writerOf(cotId: number) {
  const orm = t.app.services.db.orm;
  const [cot] = await orm.select().from(customObjectTypes).where(eq(customObjectTypes.id, cotId));
  const fields = await orm
    .select()
    .from(customObjectTypeFields)
    .where(eq(customObjectTypeFields.customObjectTypeId, cotId));
  const shape = shapeOf(cot!, fields);
  return new ObjectWriter(shape, reader(shape));
}

describe("the multi-row INSERT of a bulk chunk", () => {
  test("repeating the one-row statement gives Drizzle's own, RETURNING's bound value last", async () => {
    const plain = await makeCot(t, "stmt_plain", "stmt_plain");
    await addField(t, plain.id, { name: "name", type: "text", primary: true, required: true });
    await addField(t, plain.id, { name: "n", type: "integer" });
    await addField(t, plain.id, { name: "home", type: "url" });
    await addField(t, plain.id, { name: "site", type: "object", related_object_type: "dcim.site" });
    const cs = await choiceSet(t, "stmt-colours", ["red", "green"]);
    // a select primary: RETURNING carries its label's subquery, which binds the choice set's id
    const labelled = await makeCot(t, "stmt_labelled", "stmt_labelled");
    await addField(t, labelled.id, {
      name: "colour",
      type: "select",
      choice_set: cs.id,
      primary: true,
    });
    await addField(t, labelled.id, { name: "note", type: "text" });
    for (const id of [plain.id, labelled.id]) {
      const w = await writerOf(id);
      const orm = t.app.services.db.orm;
      const one = w.compileInsert(orm, 1);
      for (const n of [2, 3, 100]) {
        const drizzle = w.compileInsert(orm, n);
        const repeated = repeatRows(one, n, w.insertColumns.length);
        expect(repeated.sql).toBe(drizzle.sql);
        expect([...repeated.slots]).toEqual([...drizzle.slots]);
        expect(repeated.constants).toEqual(drizzle.constants);
        expect(repeated.encoders).toEqual(drizzle.encoders);
        expect(w.insertManyStatement(orm, n)).toEqual(repeated);
      }
      expect(one.constants.some((c) => c !== undefined)).toBe(id === labelled.id);
    }
  });

  test("a statement that is not one row of placeholders is refused, not mangled", () => {
    const odd = {
      sql: "insert into t (a) select 1",
      slots: new Int32Array(0),
      constants: [],
      encoders: [],
    };
    expect(() => repeatRows(odd, 2, 1)).toThrow("not a one-row INSERT");
  });
});

describe("a field's encoder built once", () => {
  const field = (type: string, extra: Partial<FieldLike> = {}): FieldLike => ({
    name: "f",
    type,
    isPolymorphic: false,
    validationRegex: "",
    validationMinimum: null,
    validationMaximum: null,
    ...extra,
  });
  const choices = new Set(["slow", "fast"]);
  const long = "x".repeat(70_000);
  const fields: FieldLike[] = [
    field("text"),
    field("text", { validationRegex: "^[A-Z]{2}-\\d+$" }),
    // stored before RE2: never run, every value refused saying why
    field("text", { validationRegex: "^(?=a)b" }),
    field("longtext"),
    field("url"),
    field("integer"),
    field("integer", { validationMinimum: 0, validationMaximum: 10 }),
    field("decimal"),
    field("decimal", { validationMinimum: -1.5, validationMaximum: 2.5 }),
    field("boolean"),
    field("date"),
    field("datetime"),
    field("select", { choiceSetId: 1 }),
    field("multiselect", { choiceSetId: 1 }),
    field("json"),
  ];
  const raws: unknown[] = [
    null,
    undefined,
    "",
    " ",
    "AB-12",
    "ab-12",
    "slow",
    "fast",
    "SLOW",
    "https://example.com/a",
    "ftp://host/x",
    "mailto:x@example.com",
    `https://example.com/${"a".repeat(2000)}`,
    long,
    "12",
    " 12 ",
    "1.5",
    "1e3",
    "-0",
    0,
    -0,
    1,
    7,
    11,
    -2,
    2.5,
    2.6,
    1.25,
    Number.MAX_SAFE_INTEGER + 2,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    true,
    false,
    "yes",
    "off",
    "T",
    "2024-02-29",
    "2023-02-29",
    "2024-13-01",
    "2025-06-01T12:30:00Z",
    "2025-06-01 12:30:00.123456+02:00",
    "2025-06-01T25:00:00Z",
    [],
    ["slow"],
    ["slow", "slow", "fast"],
    ["slow", "medium"],
    ["slow", 1],
    // a hole reads as undefined, as `encode` reads it
    // biome-ignore lint/suspicious/noSparseArray: the hole is the case
    ["slow", , "fast"],
    { a: 1 },
    [1, 2],
  ];

  test("answers what encodeScalar answers for every value, valid or not", () => {
    for (const f of fields)
      for (const chosen of [choices, null]) {
        const encode = scalarEncoder(f);
        for (const raw of raws) {
          const expected = encodeScalar(f, raw, chosen);
          const got = encode(raw, chosen);
          if (!Bun.deepEquals(got, expected, true))
            throw new Error(
              `${f.type} ${f.validationRegex} ${String(raw)}: ${JSON.stringify([got, expected])}`,
            );
          expect(
            Object.is((got as { value?: unknown }).value, (expected as { value?: unknown }).value),
          ).toBe(true);
        }
      }
  });

  test("a text-like type with checks of its own but no `accepts` always asks its schema", () => {
    const hex = textLike({
      name: "hex",
      indexed: false,
      canBeUnique: false,
      lossless: [],
      maxChars: 6,
      actions: () => [v.regex(/^[0-9a-f]+$/, "Enter hex digits.")],
    });
    const f = field("hex");
    const encode = hex.encoder!(f);
    for (const raw of ["c0ffee", "zz", "", "c0ffee0", 7])
      expect(encode(raw, null)).toEqual(hex.encode(f, raw, null));
    expect(encode("zz", null)).toEqual({ error: "Enter hex digits." });
  });
});
