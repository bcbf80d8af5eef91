/**
 * D1's refusals of a write over one batch's bounds (409 `cascade_too_large`, `retype_too_large`)
 * as a constrained caller meets them: the objects that make the write too large may be ones the
 * caller may not view, so the answer neither counts nor names them (§4; decision 0173). The
 * refusal itself stays (it is D1's limit); nothing is written.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { createUser, issueToken } from "../../src/core/auth/provisioning";
import { d1Orm } from "../../tools/d1-local";
import { type D1App, startD1App } from "../helpers/d1-app";

// wrangler's migration run takes 10–30 s on a busy machine
setDefaultTimeout(120_000);

const CO = "/api/plugins/custom-objects";
let d1: D1App;

beforeAll(async () => {
  d1 = await startD1App("hidden-refusals");
});
afterAll(() => d1?.stop());

/** A user holding `grants` (`[actions, label, constraints]`), and their token. */
async function constrained(username: string, grants: Array<[string[], string, unknown]>) {
  const orm = d1Orm(d1.binding);
  const user = await createUser(orm, { username });
  for (const [i, [actions, label, constraints]] of grants.entries()) {
    const r = await d1.json("POST", "/api/users/permissions/", {
      name: `${username}-${i}`,
      actions,
      object_types: [label],
      users: [user.id],
      constraints,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
  return (await issueToken(orm, { username })).key;
}

/** A type with a primary text `name`, and its id. */
async function typeNamed(slug: string): Promise<number> {
  const cot = await d1.made(`${CO}/custom-object-types/`, { name: slug, slug });
  await d1.made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: cot.id,
    name: "name",
    type: "text",
    primary: true,
  });
  return cot.id;
}

/** Every number and every word of the answer (`detail` and any other member), as text. */
const told = (body: unknown) => JSON.stringify(body);
/** The answer's text less the bound it states (a constant, 0198): what may count the objects. */
const beyondTheBound = (body: unknown, bound: string) => told(body).replaceAll(bound, "");
const DEPENDANTS = 10_000;

test("a cascade over D1's bound through dependants the caller may not view: 409 cascade_too_large, not counted nor named", async () => {
  await typeNamed("crate");
  const secret = await typeNamed("secretpart");
  await d1.made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: secret,
    name: "crate",
    type: "object",
    related_object_type: "custom_objects.crate",
    on_delete_behavior: "cascade",
  });
  const crate = (await d1.made(`${CO}/crate/`, { name: "full" })).id as number;
  // one more dependant than a cascade on D1 takes with its crate (10,000 objects in all, 0198)
  await d1.binding
    .prepare(
      `INSERT INTO co_${secret} (created, last_updated, name, crate_id) WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${DEPENDANTS}) SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'p' || i, ? FROM s`,
    )
    .bind(crate)
    .all();
  // may view and delete crates; secret parts not at all (NetBox: the cascade takes them anyway)
  const token = await constrained("crate-keeper", [
    [["view", "delete"], "custom_objects.crate", null],
  ]);
  // holding nothing on secret parts, their endpoint is unknown to the caller (decision 0178)
  expect((await d1.json("GET", `${CO}/secretpart/`, undefined, token)).status).toBe(404);
  const refused = await d1.json("DELETE", `${CO}/crate/${crate}/`, undefined, token);
  expect(refused.status, told(refused.body)).toBe(409);
  expect(refused.body.error).toBe("cascade_too_large");
  // no count of the dependants (the bound they pass is stated), no name of their type or field
  expect(told(refused.body)).toContain("10,000");
  expect(beyondTheBound(refused.body, "10,000")).not.toMatch(/\d/);
  expect(told(refused.body).toLowerCase()).not.toContain("secretpart");
  // nothing deleted
  expect((await d1.json("GET", `${CO}/crate/${crate}/`, undefined, token)).status).toBe(200);
  expect((await d1.json("GET", `${CO}/secretpart/?limit=1`)).body.count).toBe(DEPENDANTS);
});

test("a retype over D1's bound through values of objects the caller may not view: 409 retype_too_large, their number and size not told", async () => {
  const ledger = await typeNamed("ledger");
  const blob = await d1.made(`${CO}/custom-object-type-fields/`, {
    custom_object_type: ledger,
    name: "blob",
    type: "longtext",
  });
  // 5,000 values of 2,000 characters, more than one batch carries: objects of a type the
  // caller may change the fields of but not view
  const series = "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 5000)";
  await d1.binding
    .prepare(
      `INSERT INTO co_${ledger} (created, last_updated, name, blob) ${series} SELECT '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'n' || i, hex(zeroblob(1000)) FROM s`,
    )
    .bind()
    .all();
  const token = await constrained("field-keeper", [
    [["view", "change"], "custom_objects.customobjecttypefield", null],
    [["view"], "custom_objects.customobjecttype", null],
  ]);
  // holding nothing on the ledger's objects, their endpoint is unknown to the caller (0178)
  expect((await d1.json("GET", `${CO}/ledger/`, undefined, token)).status).toBe(404);
  const refused = await d1.json(
    "PATCH",
    `${CO}/custom-object-type-fields/${blob.id}/?allow_destructive=true`,
    // to decimal: converted outside the database, so bound (0199)
    { type: "decimal" },
    token,
  );
  expect(refused.status, told(refused.body)).toBe(409);
  expect(refused.body.error).toBe("retype_too_large");
  expect(told(refused.body)).toContain("8 MB");
  expect(beyondTheBound(refused.body, "8 MB")).not.toMatch(/\d/);
  expect((await d1.json("GET", `${CO}/custom-object-type-fields/${blob.id}/`)).body.type).toBe(
    "longtext",
  );
});
