/**
 * Several values of a pattern lookup (`__ic`, `__isw`, `__iew`, `__ie` and their negations) are
 * matched as one JSON list (decision 0188): a field whose name is also the list's column name
 * (`value`) still filters on the field, and `%` / `_` in a value are text, not wildcards.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { makeTestApp, type TestApp } from "../helpers/app";
import { CO, addField, create, makeCot } from "./fixtures";

let t: TestApp;
const made: Record<string, number> = {};

beforeAll(async () => {
  t = await makeTestApp();
  const cot = await makeCot(t, "pattern_lists");
  await addField(t, cot.id, { name: "name", type: "text", primary: true, required: true });
  await addField(t, cot.id, { name: "value", type: "text" });
  for (const [name, value] of [
    ["one", "Alpha"],
    ["two", "beta_1"],
    ["three", "100%"],
    ["four", null],
  ] as const)
    made[name] = (await create(t, "pattern_lists", { name, value })).id;
});
afterAll(() => t.close());

async function names(query: string): Promise<string[]> {
  const r = await t.json("GET", `${CO}/pattern_lists/?${query}&ordering=id`);
  if (r.status !== 200) throw new Error(`${query}: ${r.status} ${JSON.stringify(r.body)}`);
  return (r.body.results as { name: string }[]).map((x) => x.name);
}

test("a field named `value` filters on its own values, each lookup and its negation", async () => {
  expect(await names("value__ic=LPH&value__ic=zzz")).toEqual(["one"]);
  expect(await names("value__nic=LPH&value__nic=zzz")).toEqual(["two", "three", "four"]);
  expect(await names("value__isw=BETA&value__isw=al")).toEqual(["one", "two"]);
  expect(await names("value__nisw=BETA&value__nisw=al")).toEqual(["three", "four"]);
  expect(await names("value__iew=HA&value__iew=_1")).toEqual(["one", "two"]);
  expect(await names("value__niew=HA&value__niew=_1")).toEqual(["three", "four"]);
  expect(await names("value__ie=ALPHA&value__ie=100%25")).toEqual(["one", "three"]);
  expect(await names("value__nie=ALPHA&value__nie=100%25")).toEqual(["two", "four"]);
});

test("`%` and `_` in several values are matched as text", async () => {
  expect(await names("value__ic=%25&value__ic=x_1")).toEqual(["three"]);
  expect(await names("value__ic=_&value__ic=nothing")).toEqual(["two"]);
  expect(await names("value__isw=%25&value__isw=_")).toEqual([]);
});
