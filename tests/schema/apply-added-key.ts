/**
 * A schema apply adding a partial key or a check that reads a field the same apply adds
 * (decision 0142), as one scenario every backend runs: existing rows read the new field's
 * default, so the gate and the 400 count them as the built constraint would. Answers a summary.
 */
import { expect } from "bun:test";
import type { Json } from "../helpers/three-backends";

const CO = "/api/plugins/custom-objects";

export async function addedKeyScenario(json: Json, prefix: string) {
  const slug = `${prefix}_ak`;
  const code = { id: 1, name: "code", type: "text", primary: true };
  const apply = (extra: Record<string, unknown>, fields: unknown[], allow: boolean) =>
    json("POST", `${CO}/schema/apply/`, {
      schema: {
        schema_version: "1",
        types: [{ name: slug, slug, fields: [code, ...fields], ...extra }],
      },
      ...(allow ? { allow_destructive: true } : {}),
    });
  const first = await apply({}, [], false);
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  for (const c of ["a", "a", "b"]) {
    const made = await json("POST", `${CO}/${slug}/`, { code: c });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
  }
  const flag = (d: boolean) => ({ id: 2, name: "active", type: "boolean", default: d });
  const key = { unique_together: [{ fields: ["code"], condition: { active: true } }] };
  const level = { id: 3, name: "level", type: "integer", default: 5 };
  const check = { checks: [{ name: "low", condition: { level__lte: 3 } }] };
  // every row reads `active` true, so the two "a" rows break the key; all three break the check
  const gated = await apply(key, [flag(true)], false);
  const keyed = await apply(key, [flag(true)], true);
  const checkGated = await apply(check, [level], false);
  const checked = await apply(check, [level], true);
  const unchanged = (await json("GET", `${CO}/schema/export?slug=${slug}`)).body.types[0];
  // `active` false: no row in the condition; `level` 5 meets `level >= 3` (read as empty, no
  // row would): both are built and hold from then on
  const high = { checks: [{ name: "high", condition: { level__gte: 3 } }] };
  const built = await apply({ ...key, ...high }, [flag(false), level], false);
  const one = await json("POST", `${CO}/${slug}/`, { code: "a", active: true });
  const clash = await json("POST", `${CO}/${slug}/`, { code: "a", active: true });
  const low = await json("POST", `${CO}/${slug}/`, { code: "c", level: 1 });
  return {
    gated: [gated.status, gated.body.destructive_changes ?? gated.body],
    keyed: [keyed.status, keyed.body.schema_errors ?? keyed.body],
    checkGated: [checkGated.status, checkGated.body.destructive_changes ?? checkGated.body],
    checked: [checked.status, checked.body.schema_errors ?? checked.body],
    unchanged: unchanged.fields.map((f: { name: string }) => f.name),
    built: [built.status, built.status === 200 ? "ok" : built.body],
    one: one.status,
    clash: [clash.status, clash.body],
    low: [low.status, low.body],
  };
}
